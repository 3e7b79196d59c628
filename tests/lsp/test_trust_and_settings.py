"""Untrusted workspaces run no model code and write nothing; bad settings are named and the
defaults used."""

from __future__ import annotations

import asyncio

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.conftest import FIXTURES
from tests.lsp.conftest import (
    SERVER,
    child_processes,
    close_file,
    diagnostics_for,
    open_file,
    record_publishes,
    server_status,
    session,
    spans,
    wait_for,
)


def _copy_workspace(root, names=("no_translation",)):
    for name in names:
        (root / name).mkdir(parents=True)
        (root / name / "model.py").write_text((FIXTURES / name / "model.py").read_text())
    return root


@pytest_lsp.fixture(config=SERVER)
async def untrusted(lsp_client: LanguageClient, tmp_path):
    lsp_client.states = []

    @lsp_client.feature("onnxlens/state")
    def state(params) -> None:
        lsp_client.states.append(params._asdict())

    workspace = _copy_workspace(tmp_path / "ws")
    async with session(lsp_client, workspace, trusted=False,
                       settings={"sarif": {"outputDirectory": "reports"}}):
        yield


async def test_untrusted_runs_nothing_until_trusted(untrusted: LanguageClient):
    workspace = untrusted.workspace_root
    before = sorted(p.relative_to(workspace) for p in workspace.rglob("*"))
    uri = open_file(untrusted, workspace / "no_translation" / "model.py")
    # answered after the didOpen: nothing scheduled then is nothing that will run
    status = await server_status(untrusted)
    assert status["pending"] == {"delayed": 0, "started": 0}
    assert status["trusted"] is False and status["worker"]["ready"] is False
    assert child_processes(untrusted._server.pid) == []  # no worker process exists
    assert uri not in untrusted.diagnostics
    assert sorted(p.relative_to(workspace) for p in workspace.rglob("*")) == before
    (message,) = await wait_for(lambda: [m for m in untrusted.messages
                                         if "trusted" in m.message], what="the trust message")
    assert message.type == types.MessageType.Info
    lenses = await untrusted.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    assert lenses[0].command.title == "ONNX · not checked (workspace not trusted)"

    untrusted.protocol.notify("onnxlens/trustChanged", {"trusted": True})
    found = await diagnostics_for(untrusted, uri)
    assert [(d.code, d.range.start.line + 1) for d in found] == [("ONNX201", 7), ("ONNX201", 8)]
    assert (await server_status(untrusted))["worker"]["ready"] is True
    assert (workspace / "reports" / "onnxlens.sarif").is_file()  # asked for by the setting

    # Trust revoked: the squiggles go and the worker stops (they stayed, issue "nothing lost")
    untrusted.protocol.notify("onnxlens/trustChanged", {"trusted": False})
    assert await diagnostics_for(untrusted, uri, expect=lambda found: found == []) == []
    status = await server_status(untrusted)
    assert status["trusted"] is False and status["workerState"] == "stopped"
    assert status["worker"]["ready"] is False
    assert child_processes(untrusted._server.pid) == []
    close_file(untrusted, uri)

    # What the VS Code status bar shows, in the order the server announced it.
    states = untrusted.states
    assert states[0] == {"trusted": False, "workerState": "stopped", "checking": []}
    worker_states = [s["workerState"] for s in states if s["trusted"]]
    assert worker_states[0] == "starting" and "ready" in worker_states
    assert any(s["checking"] == [uri] for s in states)
    trusted_states = [s for s in states if s["trusted"]]
    assert trusted_states[-1]["checking"] == [] and trusted_states[-1]["workerState"] == "ready"
    assert states[-1] == {"trusted": False, "workerState": "stopped", "checking": []}


BAD_SETTINGS = {"trigger": "sometimes", "timeoutSeconds": -3, "memoryLimitMB": "lots",
                "colour": "blue"}


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER.server_command,
                                              server_env=SERVER.server_env))
async def misconfigured(lsp_client: LanguageClient, tmp_path):
    workspace = _copy_workspace(tmp_path / "ws")
    (workspace / "pyproject.toml").write_text('[tool.onnxlens]\nignore = ["ONNX201"]\n'
                                              'timeout = "soon"\n')
    async with session(lsp_client, workspace, "neovim", settings=BAD_SETTINGS):
        yield


async def test_bad_settings_are_named_and_defaults_used(misconfigured: LanguageClient):
    await asyncio.sleep(0.5)
    texts = [m.message for m in misconfigured.messages]
    assert any("`onnxlens.trigger` must be one of onSave, onType, manual, not 'sometimes'; "
               "using 'onSave'" in t for t in texts)
    assert any("`onnxlens.timeoutSeconds` must be between 0 and 86400, not -3" in t
               and "using the default" in t for t in texts)
    assert any("`onnxlens.memoryLimitMB` must be a number, not 'lots'; using 4096" in t
               for t in texts)
    assert any("unknown setting `onnxlens.colour`" in t for t in texts)
    assert any("`timeout` in [tool.onnxlens] must be a number, not 'soon'" in t
               for t in texts)
    settings = (await server_status(misconfigured))["settings"]
    assert settings["trigger"] == "onSave" and settings["timeoutSeconds"] is None
    assert settings["ignore"] == ["ONNX201"]  # the valid project default still applies
    uri = open_file(misconfigured, misconfigured.workspace_root / "no_translation" / "model.py")
    assert spans(await diagnostics_for(misconfigured, uri)) == []  # ONNX201 ignored
    close_file(misconfigured, uri)


@pytest.mark.parametrize("name, value, problem", [
    ("timeoutSeconds", float("nan"), "`onnxlens.timeoutSeconds` must be a finite number"),
    ("timeoutSeconds", 1e12, "`onnxlens.timeoutSeconds` must be between 0 and 86400"),
    ("memoryLimitMB", 1e8,
     "`onnxlens.memoryLimitMB` must be between 256 and 1048576, not 100000000"),
    ("atol", float("inf"), "`onnxlens.atol` must be a finite number"),
])
def test_numbers_must_be_finite_and_bounded(name, value, problem):
    """A NaN deadline never fires; 1e12 s or 1e8 MB is no limit at all (issue "nothing
    lost"). JSON from a client may carry NaN (Python's parser takes it)."""
    from exporter.config.options import Options, apply

    settings, problems = apply(Options(), {name: value}, "workspace/configuration")
    assert settings == Options()
    (message,) = problems
    assert problem in message and "using" in message


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER.server_command,
                                              server_env=SERVER.server_env))
async def hostile(lsp_client: LanguageClient, tmp_path):
    workspace = _copy_workspace(tmp_path / "ws")
    (workspace / "pyproject.toml").write_text(
        '[tool.onnxlens]\nsarif-output = "../outside/reports"\ntimeout = 5\n')
    async with session(lsp_client, workspace, trusted=False):
        yield


async def test_an_untrusted_workspace_sets_nothing_and_gets_nothing_written(
        hostile: LanguageClient):
    """Untrusted, the workspace's own pyproject.toml pointed SARIF outside it and set the
    limits, and writeSarif created directories outside it (issue "nothing lost")."""
    outside = hostile.workspace_root.parent / "outside"
    settings = (await server_status(hostile))["settings"]
    assert settings["sarifOutputDirectory"] is None and settings["timeoutSeconds"] is None
    with pytest.raises(Exception, match="the workspace is not trusted"):
        await hostile.workspace_execute_command_async(types.ExecuteCommandParams(
            command="onnxlens.writeSarif", arguments=[str(outside / "x.sarif")]))
    assert not outside.exists()

    hostile.protocol.notify("onnxlens/trustChanged", {"trusted": True})
    for _ in range(100):  # trusted: the project's settings apply
        settings = (await server_status(hostile))["settings"]
        if settings["timeoutSeconds"] == 5.0:
            break
        await asyncio.sleep(0.1)
    assert settings["timeoutSeconds"] == 5.0
    assert settings["sarifOutputDirectory"] == "../outside/reports"


@pytest_lsp.fixture(config=SERVER)
async def tuned(lsp_client: LanguageClient, tmp_path):
    workspace = _copy_workspace(tmp_path / "ws")
    (workspace / "scratch").mkdir()
    (workspace / "scratch" / "model.py").write_text(
        (FIXTURES / "no_translation" / "model.py").read_text())
    async with session(lsp_client, workspace, settings={"severity": {"ONNX2": "warning"},
                                                         "extendExclude": ["scratch"]}):
        yield


async def test_severity_overrides_and_excludes_apply_in_the_editor(tuned: LanguageClient):
    checked = open_file(tuned, tuned.workspace_root / "no_translation" / "model.py")
    excluded = open_file(tuned, tuned.workspace_root / "scratch" / "model.py")
    try:
        found = await diagnostics_for(tuned, checked, lambda d: len(d) == 2)
        assert {(d.code, d.severity) for d in found} == {
            ("ONNX201", types.DiagnosticSeverity.Warning)}
        # the CodeLens counts what the Problems panel shows: two warnings, no problem
        lenses = await tuned.text_document_code_lens_async(types.CodeLensParams(
            text_document=types.TextDocumentIdentifier(uri=checked)))
        (title,) = [lens.command.title for lens in lenses
                    if lens.command and lens.command.command == "onnxlens.showReport"]
        assert title.startswith("✓ ONNX") and title.endswith("2 warnings"), title
        assert await diagnostics_for(tuned, excluded) == []  # never checked
        assert (await server_status(tuned))["results"]["checked"] == 1
    finally:
        close_file(tuned, checked)
        close_file(tuned, excluded)


@pytest_lsp.fixture(config=SERVER)
async def typing_untrusted(lsp_client: LanguageClient, tmp_path):
    workspace = _copy_workspace(tmp_path / "ws")
    async with session(lsp_client, workspace, trusted=False,
                       settings={"trigger": "onType", "debounceMs": 2000}):
        yield


async def test_a_check_waiting_out_its_typing_delay_does_not_outlive_the_trust(
        typing_untrusted: LanguageClient):
    """An edit's check waits ``debounceMs`` before it starts; trust withdrawn in that time
    cancelled only the checks that had started, so the waiting one started afterwards and
    brought a worker back: model code ran in a workspace no longer trusted."""
    client = typing_untrusted
    path = client.workspace_root / "no_translation" / "model.py"
    uri = open_file(client, path)
    client.protocol.notify("onnxlens/trustChanged", {"trusted": True})
    await diagnostics_for(client, uri)
    text = path.read_text() + "\n# an edit\n"
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
    client.protocol.notify("onnxlens/trustChanged", {"trusted": False})
    assert await diagnostics_for(client, uri, expect=lambda found: found == []) == []
    published = record_publishes(client)
    status = await server_status(client)
    # no check waits out its typing delay or runs: none will start or publish
    assert status["pending"] == {"delayed": 0, "started": 0}
    assert status["trusted"] is False and status["workerState"] == "stopped"
    assert status["worker"]["ready"] is False
    assert child_processes(client._server.pid) == []
    assert [p.diagnostics for p in published if p.uri == uri] == []
    assert status["results"]["checked"] == 1  # the check before the edit only
