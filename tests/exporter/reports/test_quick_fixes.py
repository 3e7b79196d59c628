"""A finding's quick fixes (exporter/findings/fixes.py, ``QuickFix``) reach every output: the
worker's JSON and back (exporter/reports/serialize.py), the JSON report
(exporter/reports/render.py, docs/cli.md); SARIF's are tested in test_sarif.py, the
language server's in tests/lsp/test_convert.py."""

from __future__ import annotations

import json
from pathlib import Path

from exporter.findings.result import CheckResult
from exporter.reports.render import diagnostic_json
from exporter.reports.serialize import result_from_data, result_to_data
from exporter.source.targets import discover

SCRIPT = ("import torch\n\n\ndef export():\n    torch.onnx.export(model, (x,), 'm.onnx',"
          " dynamo=False)\n")


def _finding(tmp_path: Path):
    path = tmp_path / "script.py"
    path.write_text(SCRIPT)
    (finding,) = discover(path, SCRIPT).diagnostics
    assert finding.rule == "ONNX601"
    return finding


def test_the_workers_json_keeps_every_quick_fix(tmp_path):
    finding = _finding(tmp_path)
    result = CheckResult(files=[finding.location.path], file_diagnostics=[finding])
    (back,) = result_from_data(json.loads(json.dumps(result_to_data(result)))).diagnostics
    assert back.quick_fixes == finding.quick_fixes
    assert [fix.title for fix in back.quick_fixes] == [
        "Remove `dynamo=False` (use the torch.export-based exporter)",
        "Check this call: mark `export` with `# onnx-export:`"]


def test_the_json_report_lists_each_quick_fix_with_located_edits(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    report = diagnostic_json(_finding(tmp_path))
    assert "fix" not in report["data"] and "check_fix" not in report["data"]
    removal, marking = report["quick_fixes"]
    assert removal == {
        "title": "Remove `dynamo=False` (use the torch.export-based exporter)",
        "edits": [{"path": "script.py", "range": {"start": {"line": 5, "column": 44},
                                                  "end": {"line": 5, "column": 58}},
                   "text": ""}]}
    assert SCRIPT.splitlines()[4][43:57] == ", dynamo=False"
    assert marking["edits"] == [{"path": "script.py", "range": {
        "start": {"line": 4, "column": 1}, "end": {"line": 4, "column": 1}},
        "text": "# onnx-export:\n"}]



def test_the_text_report_shows_each_quick_fix_and_its_edits(tmp_path, monkeypatch):
    from exporter.reports.render import format_diagnostic

    monkeypatch.chdir(tmp_path)
    lines = format_diagnostic(_finding(tmp_path)).splitlines()
    assert lines[lines.index("   fix: Remove `dynamo=False` (use the torch.export-based "
                             "exporter)") + 1] == "        script.py:5:44: remove"
    assert lines[lines.index("   fix: Check this call: mark `export` with `# onnx-export:`")
                 + 1] == "        script.py:4:1: insert `# onnx-export:`"


def test_a_github_annotation_names_each_quick_fix(tmp_path, monkeypatch):
    from exporter.reports.github import annotation

    monkeypatch.chdir(tmp_path)
    command = annotation(_finding(tmp_path))
    assert command.startswith("::warning file=script.py,line=5,col=46,")  # `dynamo=False`
    assert "%0AFix: Remove `dynamo=False` (use the torch.export-based exporter)%0AFix: Check " \
           "this call: mark `export` with `# onnx-export:`" in command
