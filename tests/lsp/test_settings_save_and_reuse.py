"""Issue "nothing lost, round 3", item 10 (parts): a bad setting shown once, not twice; a
relative ``saveModel`` path that leads outside the workspace refused; no result reused after
a package was installed. A real server over stdio."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.conftest import REPO
from tests.lsp.conftest import (
    SERVER,
    change_and_save,
    command,
    diagnostics_for,
    open_file,
    server_status,
    session,
    wait_for,
)

CLEAN_MODEL = """import torch


# onnx-export: args=(torch.randn(2, 3),)
class Doubler(torch.nn.Module):
    def forward(self, x):
        return x * 2
"""

# -- each bad setting shown once ---------------------------------------------------------------

BAD_SETTINGS = {"trigger": "sometimes", "timeoutSeconds": -3}
TRIGGER_PROBLEM = ("onnxlens: settings: `onnxlens.trigger` must be one of onSave, onType, "
                   "manual, not 'sometimes'; using 'onSave'")
TIMEOUT_PROBLEM = ("onnxlens: settings: `onnxlens.timeoutSeconds` must be between 0 and "
                   "86400, not -3; using the default")


@pytest_lsp.fixture(config=SERVER)
async def vscode_like(lsp_client: LanguageClient, tmp_path):
    """As the VS Code extension does: the settings in initializationOptions, and the same
    settings as the answer to workspace/configuration."""
    lsp_client.set_configuration(BAD_SETTINGS, section="onnxlens")
    (tmp_path / "model.py").write_text(CLEAN_MODEL)
    async with session(lsp_client, tmp_path, settings=BAD_SETTINGS):
        yield


async def test_each_bad_setting_is_shown_once(vscode_like: LanguageClient):
    client = vscode_like

    def shown() -> list[str]:
        return [m.message for m in client.messages if "onnxlens.t" in m.message]

    await wait_for(shown, what="the settings' problems")
    await server_status(client)  # the problems of one reading are sent together
    assert sorted(shown()) == [TIMEOUT_PROBLEM, TRIGGER_PROBLEM]

    # read again (a setting changed, or the workspace trusted): still there, not shown again
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"onnxlens": BAD_SETTINGS}))
    await wait_for(lambda: any(m.message.endswith("using 'onSave' (shown before)")
                               for m in client.log_messages), what="the settings read again")
    assert sorted(shown()) == [TIMEOUT_PROBLEM, TRIGGER_PROBLEM]
    assert (await server_status(client))["settings"]["trigger"] == "onSave"


# -- saveModel: a relative path stays inside the workspace -----------------------------------

@pytest_lsp.fixture(config=SERVER)
async def workspace_client(lsp_client: LanguageClient, tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "model.py").write_text(CLEAN_MODEL)
    async with session(lsp_client, root):
        yield


async def test_a_relative_save_path_leading_out_of_the_workspace_is_refused(
        workspace_client: LanguageClient):
    root: Path = workspace_client.workspace_root  # type: ignore[attr-defined]
    uri = open_file(workspace_client, root / "model.py")
    saved = await command(workspace_client, "onnxlens.saveModel", uri, "Doubler",
                          "../outside.onnx")
    assert saved == {"error": f"../outside.onnx is outside the workspace ({root.resolve()}): "
                              "a relative path is written inside it; give an absolute path to "
                              "write elsewhere"}
    assert not (root.parent / "outside.onnx").exists()
    assert sorted(p.name for p in root.parent.iterdir()) == ["ws"]


# -- no result reused after a package was installed ------------------------------------------

# A site-packages directory of the server's (and so its worker's) interpreter path.
SITE = Path(tempfile.gettempdir()) / f"onnxlens-test-{os.getpid()}" / "site-packages"
PACKAGE_SERVER = ClientServerConfig(
    server_command=SERVER.server_command,
    server_env={**SERVER.server_env, "PYTHONPATH": f"{REPO}{os.pathsep}{SITE}"})

MODEL_USING_PACKAGE = """import torch

import mypkg


# onnx-export: args=(torch.rand(2, 3),)
class UsesPackage(torch.nn.Module):
    def forward(self, x):
        return mypkg.op(x)
"""


@pytest_lsp.fixture(config=PACKAGE_SERVER)
async def package_client(lsp_client: LanguageClient, tmp_path):
    SITE.mkdir(parents=True)
    (SITE / "mypkg.py").write_text("def op(x):\n    return x * 2\n")
    (SITE / "mypkg-1.0.dist-info").mkdir()
    (tmp_path / "model.py").write_text(MODEL_USING_PACKAGE)
    async with session(lsp_client, tmp_path):
        yield
    shutil.rmtree(SITE.parent)


async def test_no_result_is_reused_after_a_package_was_installed(
        package_client: LanguageClient):
    client = package_client
    path = client.workspace_root / "model.py"  # type: ignore[attr-defined]
    uri = open_file(client, path)
    assert await diagnostics_for(client, uri) == []

    # what `pip install mypkg==2.0` does: the module replaced, a new dist-info directory
    (SITE / "mypkg.py").write_text("import torch\n\n\ndef op(x):\n"
                                   "    return torch.special.i0(x)\n")
    shutil.rmtree(SITE / "mypkg-1.0.dist-info")
    (SITE / "mypkg-2.0.dist-info").mkdir()

    change_and_save(client, uri, path.read_text(), 2)  # the same request as before
    found = await diagnostics_for(client, uri)
    assert [str(d.code) for d in found] == ["ONNX201"]  # the result was reused: no finding
    assert "`aten::i0` has no ONNX translation" in found[0].message
