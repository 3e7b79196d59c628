"""CodeLens, hover, code actions (whose edits re-check clean), commands and progress."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

# torch.onnx.export's default opset (20 with torch 2.13), which a check without `opset` uses
from torch.onnx._constants import ONNX_DEFAULT_OPSET as DEFAULT_OPSET

from tests.conftest import FIXTURES
from tests.lsp.conftest import (
    SERVER,
    apply_edits,
    change_and_save,
    close_file,
    command,
    diagnostics_for,
    open_file,
    served,
    server_status,
    session,
)
from tests.sarif_tools import validate_with_schema


async def _lenses(client: LanguageClient, uri: str) -> list[tuple[int, str, str, list]]:
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    return [(lens.range.start.line + 1, lens.command.title, lens.command.command,
             list(lens.command.arguments)) for lens in lenses]


async def test_code_lens_shows_status_and_actions(client: LanguageClient):
    uri = open_file(client, FIXTURES / "clean" / "convnet.py")
    failing = open_file(client, FIXTURES / "no_translation" / "model.py")
    try:
        await diagnostics_for(client, uri)
        await diagnostics_for(client, failing)
        lenses = await _lenses(client, uri)
        (status, export, save, run, graph) = lenses
        assert status[0] == 5 and status[2] == "onnxlens.showReport"
        assert status[1].startswith("✓ ONNX · ")
        assert f" nodes · opset {DEFAULT_OPSET} · " in status[1]
        assert [(lens[1], lens[2], lens[3]) for lens in (export, save, run, graph)] == [
            ("Export", "onnxlens.export", [uri, "ConvNet"]),
            ("Save", "onnxlens.saveModel", [uri, "ConvNet"]),
            ("Run", "onnxlens.runModel", [uri, "ConvNet"]),
            ("Graph", "onnxlens.showGraph", [uri, "ConvNet"])]
        assert (await _lenses(client, failing))[0][1] == "✗ ONNX · 2 problems"
    finally:
        close_file(client, uri)
        close_file(client, failing)


async def test_hover_summarizes_the_target(client: LanguageClient):
    uri = open_file(client, FIXTURES / "clean" / "convnet.py")
    try:
        await diagnostics_for(client, uri)
        hover = await client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=4, character=8)))
        text = hover.contents.value
        assert text.startswith("**ONNX export: `ConvNet`** — ✓ exports")
        assert "| `images` | float32 | batch×3×16×16 |" in text
        assert "| `probabilities` | float32 | batch×5 |" in text
        assert f"opset {DEFAULT_OPSET}" in text and "parameters" in text and "Operators: " in text
        assert "Stages: ✓ load" in text and "✓ dynamic" in text
        assert (hover.range.start.line, hover.range.start.character) == (4, 6)
        nothing = await client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=13, character=8)))
        assert nothing is None
    finally:
        close_file(client, uri)


async def _actions(client: LanguageClient, uri: str, diagnostics: list[types.Diagnostic]):
    return await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=diagnostics[0].range,
        context=types.CodeActionContext(diagnostics=diagnostics)))


def _with_fixes(found: list[types.Diagnostic]) -> bool:
    return any(isinstance(d.data, dict) and d.data.get("fixes") for d in found)


async def test_only_the_fix_that_was_tried_and_works_is_a_quick_fix():
    """ONNX102: torch suggests Dim.AUTO, which still fails at another size; making the
    dimension static works. The verdict comes first, the tried fix after it (a server with
    the default fix budget)."""
    path = FIXTURES / "dynamic_specialized" / "model.py"
    async with served(FIXTURES) as client:
        await _the_tried_fix_is_a_quick_fix(client, path)


async def _the_tried_fix_is_a_quick_fix(client: LanguageClient, path: Path) -> None:
    uri = open_file(client, path)
    try:
        found = await diagnostics_for(client, uri, _with_fixes)
        (specialized,) = [d for d in found if d.code == "ONNX102"]
        assert "Tried and works: Make `x.shape[0]` static (the code needs one size)" \
            in specialized.message
        actions = await _actions(client, uri, [specialized])
        titles = [a.title for a in actions]
        assert titles == ["Make `x.shape[0]` static (the code needs one size) (tried: the "
                          "model then exports and matches)", "Ignore ONNX102 on this line"]
        # a diagnostic the client altered (issue 39) loses its own actions, not the others'
        malformed = types.Diagnostic(
            range=types.Range(types.Position(9999, 0), types.Position(9999, 5)), message="x",
            code="ONNX102", source="onnxlens", data={"fixes": [{"edits": "nonsense"}],
                                                     "target": 7})
        mixed = await _actions(client, uri, [malformed, specialized])
        assert [a.title for a in mixed] == titles
        static = actions[0]
        assert static.kind == types.CodeActionKind.QuickFix and static.is_preferred
        (edits,) = static.edit.changes.values()
        fixed = apply_edits(path.read_text(), edits, client.position_encoding)
        assert "dynamic_shapes=None" in fixed
        change_and_save(client, uri, fixed, 2)
        assert await diagnostics_for(client, uri) == []
    finally:
        close_file(client, uri)


async def test_translation_stub_quick_fix(client: LanguageClient):
    path = FIXTURES / "no_translation" / "model.py"
    uri = open_file(client, path)
    try:
        found = await diagnostics_for(client, uri)
        i0 = [d for d in found if d.range.start.line == 6]
        action, ignore = await _actions(client, uri, i0)
        assert action.title == "Add a custom ONNX translation stub for aten::i0"
        assert ignore.title == "Ignore ONNX201 on this line"
        (edits,) = action.edit.changes.values()
        fixed = apply_edits(path.read_text(), edits, client.position_encoding)
        assert "from onnxscript import opset18 as op\n" in fixed
        assert "def i0_translation(x):\n" in fixed
        assert ("#     custom_translation_table={torch.ops.aten.i0.default: i0_translation}\n"
                "class Special") in fixed
        change_and_save(client, uri, fixed, 2)
        after = await diagnostics_for(client, uri)
        # i0 now has a (placeholder) translation; digamma still has none.
        assert [(d.code, d.range.start.line) for d in after] == [("ONNX201", 14)]
    finally:
        close_file(client, uri)


async def test_ignore_on_this_line_quick_fix_silences_exactly_that_finding(
        client: LanguageClient):
    path = FIXTURES / "no_translation" / "model.py"
    uri = open_file(client, path, path.read_text() + "\n# ignore quick fix\n")
    try:
        # (an earlier test's close of this file publishes an empty list, maybe after this open)
        found = await diagnostics_for(client, uri, lambda d: len(d) == 2)
        i0 = [d for d in found if d.code == "ONNX201" and d.range.start.line == 6]
        ignore = (await _actions(client, uri, i0))[-1]
        assert ignore.title == "Ignore ONNX201 on this line"
        assert ignore.kind == types.CodeActionKind.QuickFix
        (edits,) = ignore.edit.changes.values()
        fixed = apply_edits(path.read_text() + "\n# ignore quick fix\n", edits,
                            client.position_encoding)
        assert fixed.splitlines()[6] == \
            "        a = torch.special.i0(x)  # onnxlens: ignore[ONNX201]"
        change_and_save(client, uri, fixed, 2)
        after = await diagnostics_for(client, uri, lambda d: len(d) < len(found))
        assert [(d.code, d.range.start.line) for d in after] == [("ONNX201", 7)]
        # the other finding's line gets its own comment
        again = await _actions(client, uri, [d for d in after if d.range.start.line == 7])
        (edits,) = again[-1].edit.changes.values()
        assert apply_edits(fixed, edits, client.position_encoding).splitlines()[7] == \
            "        b = torch.digamma(x)  # onnxlens: ignore[ONNX201]"
    finally:
        close_file(client, uri)


async def test_commands(client: LanguageClient, tmp_path):
    uri = open_file(client, FIXTURES / "clean" / "convnet.py")
    try:
        await diagnostics_for(client, uri)
        exported = await command(client, "onnxlens.export", uri)
        assert exported["targets"] == {"ConvNet": {"ok": True, "problems": 0}}

        ran = await command(client, "onnxlens.runModel", uri, "ConvNet", 3)
        assert ran["report"]["matched"] is True
        assert ran["report"]["latency"]["runs"] == 3
        assert "| probabilities | [2, 5] | float32 |" in ran["markdown"]

        output = tmp_path / "convnet.onnx"
        saved = await command(client, "onnxlens.saveModel", uri, "ConvNet", str(output))
        assert saved["saved"] is True and saved["written"] == [str(output)]
        assert output.stat().st_size > 1000

        report = await command(client, "onnxlens.showReport", uri, "ConvNet")
        assert report["markdown"].startswith("**ONNX export: `ConvNet`** — ✓ exports")

        sarif = tmp_path / "out" / "report.sarif"
        written = await command(client, "onnxlens.writeSarif", str(sarif))
        assert written == {"path": str(sarif)}
        assert validate_with_schema(json.loads(sarif.read_text())) == []
        # a relative path is the workspace's, as saveModel's (issue 39: it escaped with `..`)
        escaped = await command(client, "onnxlens.writeSarif", "../../escaped.sarif")
        assert "outside the workspace" in escaped["error"]

        before = await server_status(client)
        restarted = await command(client, "onnxlens.restartWorker")
        assert restarted["pid"] != before["worker"]["pid"]
        change_and_save(client, uri, (FIXTURES / "clean" / "convnet.py").read_text(), 2)
        assert await diagnostics_for(client, uri) == []
    finally:
        close_file(client, uri)


async def test_progress_begins_and_ends(client: LanguageClient):
    supported = bool(client.capabilities.window and client.capabilities.window.work_done_progress)
    known = set(client.progress_reports)
    uri = open_file(client, FIXTURES / "clean" / "factory.py")
    try:
        await diagnostics_for(client, uri)
        new = {token: reports for token, reports in client.progress_reports.items()
               if token not in known}
        if not supported:
            assert new == {}
            return
        kinds = [[report.kind for report in reports] for reports in new.values()]
        assert ["begin", "end"] in kinds
        (begin,) = [r[0] for r in new.values() if r[0].title == "Checking factory.py"]
        assert begin.cancellable is True
    finally:
        close_file(client, uri)


async def test_server_never_imports_torch(client: LanguageClient):
    """Once its worker is ready (torch imported there), the server still has not imported
    it. It asserted the worker ready at once, which held only after the module's earlier
    tests: run alone, or split by ``pytest -n 2 --dist load``, it failed."""
    deadline = time.monotonic() + 120
    status = await server_status(client)
    while not status["worker"]["ready"]:
        assert time.monotonic() < deadline, "the worker never became ready"
        await asyncio.sleep(0.1)
        status = await server_status(client)
    assert status["serverImportsTorch"] is False
    assert status["trusted"] is True


@pytest_lsp.fixture(config=SERVER)
async def workspace_client(lsp_client: LanguageClient, tmp_path):
    (tmp_path / "convnet.py").write_text((FIXTURES / "clean" / "convnet.py").read_text())
    (tmp_path / "models").mkdir()
    async with session(lsp_client, tmp_path):
        yield


async def test_a_relative_save_path_is_inside_the_workspace(workspace_client: LanguageClient):
    """It was written relative to the server's working directory (issue "nothing lost")."""
    root = workspace_client.workspace_root
    uri = open_file(workspace_client, root / "convnet.py")
    try:
        saved = await command(workspace_client, "onnxlens.saveModel", uri, "ConvNet",
                              "models/convnet.onnx")
        assert saved["saved"] is True
        assert saved["written"] == [str(root / "models" / "convnet.onnx")]
        assert (root / "models" / "convnet.onnx").stat().st_size > 1000
    finally:
        close_file(workspace_client, uri)


LEGACY_EXPORT = '''import torch


class Encoder(torch.nn.Module):
    def forward(self, tokens):
        return tokens * 2


def export():
    torch.onnx.export(
        Encoder(),
        (torch.randn(2, 5),),
        "encoder.onnx",
        input_names=["input_ids"],
        dynamic_axes={"input_ids": {0: "batch"}},
        opset_version=13,
        dynamo=False,
    )
'''


async def test_legacy_export_arguments_are_flagged_and_fixed_one_after_the_other(
        client: LanguageClient):
    """A script written for the TorchScript exporter: `dynamo=False` first (it decides what the
    rest means), then, once removed, `dynamic_axes` (rewritten as `dynamic_shapes`) and the
    opset; each quick fix's edit is what the next check sees."""
    path = FIXTURES / "clean" / "factory.py"  # the editor's text is checked, not the file's
    uri = open_file(client, path, LEGACY_EXPORT)
    try:
        found = await diagnostics_for(client, uri, lambda d: bool(d))
        assert [(d.code, d.range.start.line, d.severity) for d in found] == [
            ("ONNX601", 16, types.DiagnosticSeverity.Warning)]
        actions = await _actions(client, uri, found)
        assert [a.title for a in actions] == [
            "Remove `dynamo=False` (use the torch.export-based exporter)",
            "Check this call: mark `export` with `# onnx-export:`",
            "Ignore ONNX601 on this line"]
        (edits,) = actions[0].edit.changes.values()
        text = apply_edits(LEGACY_EXPORT, edits, client.position_encoding)
        assert text == LEGACY_EXPORT.replace("        dynamo=False,\n", "")
        change_and_save(client, uri, text, 2)
        found = await diagnostics_for(client, uri, lambda d: {x.code for x in d} != {"ONNX601"})
        assert [(d.code, d.range.start.line) for d in found] == [("ONNX602", 14),
                                                                 ("ONNX603", 15)]
        actions = await _actions(client, uri, found[:1])
        assert actions[0].title == "Replace `dynamic_axes` with the equivalent `dynamic_shapes`"
        (edits,) = actions[0].edit.changes.values()
        text = apply_edits(text, edits, client.position_encoding)
        assert '        dynamic_shapes={\'tokens\': {0: \'batch\'}},\n' in text
        change_and_save(client, uri, text, 3)
        found = await diagnostics_for(client, uri, lambda d: len(d) == 1)
        assert [d.code for d in found] == ["ONNX603"]
        # "check this call": the function is marked, and its call is checked (a target)
        check = next(a for a in await _actions(client, uri, found)
                     if a.title.startswith("Check this call"))
        (edits,) = check.edit.changes.values()
        text = apply_edits(text, edits, client.position_encoding)
        assert "\n# onnx-export:\ndef export():\n" in text
        change_and_save(client, uri, text, 4)
        found = await diagnostics_for(client, uri, lambda d: any(x.code != "ONNX603" for x in d))
        assert {(d.code, d.range.start.line) for d in found} >= {("ONNX203", 10)}  # the call
    finally:
        close_file(client, uri)


@pytest.mark.parametrize("table, added", [
    (None, "#     custom_translation_table={torch.ops.aten.i0.default: i0_translation}"),
    ("{}", "custom_translation_table={torch.ops.aten.i0.default: i0_translation}"),
    ("{torch.ops.aten.erf.default: erf_translation}",
     "custom_translation_table={torch.ops.aten.i0.default: i0_translation, "
     "torch.ops.aten.erf.default: erf_translation}"),
    ("OUR_TABLE", "custom_translation_table={**OUR_TABLE, torch.ops.aten.i0.default: "
                  "i0_translation}"),  # it replaced the user's table
])
def test_the_stub_is_added_to_the_pragmas_table_and_keeps_it(table, added):
    from exporter.source.targets import discover
    from lsp_server.convert import PositionConverter
    from lsp_server.features import translation_stub_action

    pragma = "# onnx-export: args=(torch.randn(2),)" + (
        f", custom_translation_table={table}" if table else "")
    source = f"import torch\n\n\n{pragma}\nclass Special(torch.nn.Module):\n    pass\n"
    (target,) = discover(Path("m.py"), source).targets
    shown = types.Diagnostic(range=types.Range(types.Position(4, 0), types.Position(4, 5)),
                             message="x", code="ONNX201", data={
                                 "overload": "torch.ops.aten.i0.default", "arguments": ["self"],
                                 "operator": "aten::i0"})
    lines = source.splitlines()
    action = translation_stub_action("file:///m.py", shown, target, lines,
                                     PositionConverter("utf-16", lambda _: tuple(lines)))
    (edits,) = action.edit.changes.values()
    fixed = apply_edits(source, edits, types.PositionEncodingKind.Utf16)
    assert added in fixed
    assert "def i0_translation(x):\n" in fixed and "from onnxscript import opset18 as op\n" in fixed


def test_the_hover_shows_each_runtimes_verdict_and_hides_a_deploy_stage_with_none():
    """Issue 43: the runtimes named besides ONNX Runtime's CPU provider, a row each; without
    any, the skipped deploy stage is not listed (it would say nothing)."""
    from exporter.findings.positions import Range
    from exporter.findings.result import (
        ModelSummary,
        RuntimeRun,
        StageState,
        StageStatus,
        TargetResult,
    )
    from lsp_server.features import report_markdown

    stages = [StageStatus("load", StageState.PASSED, 0.1),
              StageStatus("deploy", StageState.SKIPPED, 0.0, "no runtime named besides ort-cpu")]
    plain = TargetResult("Model", Path("/w/model.py"), Range.of(3, 7, 3, 12), stages)
    assert "deploy" not in report_markdown("Model", plain)
    runs = [RuntimeRun("openvino-cpu", "fails", 0.25, 8, ("n0",), "unconverted operators"),
            RuntimeRun("cuda", "not run here", detail="no CUDAExecutionProvider here"),
            RuntimeRun("ort-cpu", "differs", 0.04, precision="fp16")]
    named = TargetResult("Model", Path("/w/model.py"), Range.of(3, 7, 3, 12),
                         [stages[0], StageStatus("deploy", StageState.FAILED, 0.3)],
                         summary=ModelSummary(runtimes=runs))
    text = report_markdown("Model", named)
    assert "| openvino-cpu | fails | `n0` | 0.25 s |" in text
    assert "| cuda | not run here |  | no CUDAExecutionProvider here |" in text
    assert "| ort-cpu fp16 | differs |  | 0.04 s |" in text
    assert "✗ deploy 0.30 s" in text
