"""``onnxlens check`` tries the fixes that apply to a failure and shows only those that
worked (docs/fixes.md): under the finding in text, in JSON, as SARIF ``fixes``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exporter.findings.diagnostics import Range
from exporter.findings.fixes import FixEdit
from exporter.source.edits import apply_edits
from exporter.toolchain import torch_compat
from onnxlens.cli import main
from tests.conftest import FIXTURES
from tests.sarif_tools import validate_with_schema

SPECIALIZED = FIXTURES / "dynamic_specialized"
LIBRARY = Path(__file__).parent / "fixes"


def _check(capsys: pytest.CaptureFixture[str], path: Path, *flags: str) -> tuple[int, str]:
    status = main(["check", str(path), "--root", str(path.parent), *flags])
    return status, capsys.readouterr().out


def _edited(path: Path, fix: dict) -> str:
    edits = [FixEdit(path, Range.of(e["range"]["start"]["line"], e["range"]["start"]["column"],
                                    e["range"]["end"]["line"], e["range"]["end"]["column"]),
                     e["text"]) for e in fix["edits"]]
    return apply_edits(path.read_text(), edits)


def test_the_fix_that_works_is_shown_and_the_one_that_fails_is_not(capsys, tmp_path):
    """torch suggests Dim.AUTO for the specialized dimension; tried, it still fails at
    another size, so only the static dimension is shown: in text, JSON and SARIF (one run
    writes all three)."""
    model = SPECIALIZED / "model.py"
    json_path, sarif_path = tmp_path / "report.json", tmp_path / "report.sarif"
    status = main(["check", str(model), "--root", str(SPECIALIZED), "--format", "json",
                   "-o", str(json_path), "--sarif-file", str(sarif_path)])
    assert status == 1
    text = capsys.readouterr().err  # the text report, beside a report written to a file
    assert ("   fix: Make `x.shape[0]` static (the code needs one size); tried: the model then "
            "exports and ONNX Runtime matches PyTorch") in text
    assert "model.py:4:58: replace with `None`" in text
    assert "Dim.AUTO" not in text

    report = json.loads(json_path.read_text())
    (target,) = report["targets"]
    trials = {t["key"]: t for t in target["fix_trials"]}
    assert trials["torch:suggested-dynamic-shapes"]["verdict"] == "fails"
    # with Dim.AUTO the loop fixes the size silently: the run at another size shows it
    assert trials["torch:suggested-dynamic-shapes"]["detail"].startswith(
        "ONNX102: The exported graph depends on the example size")
    assert trials["onnxlens:static-dimension"]["verdict"] == "works"
    (specialized,) = [d for d in report["diagnostics"] if d["rule"] == "ONNX102"]
    (fix,) = specialized["fixes"]
    assert fix["key"] == "onnxlens:static-dimension" and fix["source"] == "onnxlens"
    fixed = tmp_path / "model.py"
    fixed.write_text(_edited(model, fix))
    assert "dynamic_shapes=None" in fixed.read_text()
    assert _check(capsys, fixed, "--fix-budget", "0")[0] == 0  # and the re-check is clean

    log = json.loads(sarif_path.read_text())
    assert validate_with_schema(log) == []
    (result,) = [r for r in log["runs"][0]["results"] if r["ruleId"] == "ONNX102"]
    (sarif_fix,) = result["fixes"]
    assert sarif_fix["description"]["text"].startswith("Make `x.shape[0]` static")
    (change,) = sarif_fix["artifactChanges"]
    (replacement,) = change["replacements"]
    assert replacement["deletedRegion"] == {"startLine": 4, "startColumn": 58, "endLine": 4,
                                            "endColumn": 73}
    assert replacement["insertedContent"]["text"] == "None"


def test_no_fix_is_tried_with_a_budget_of_zero(capsys):
    status, report = _check(capsys, SPECIALIZED / "model.py", "--format", "json",
                            "--fix-budget", "0")
    assert status == 1
    (target,) = json.loads(report)["targets"]
    assert target["fix_trials"] == []
    assert all(d["fixes"] == [] for d in json.loads(report)["diagnostics"])


@pytest.mark.every_torch  # which fix works depends on the installed torch
def test_a_failure_inside_transformers_gets_the_setting_that_fixes_it(capsys, tmp_path):
    """Swin fails to translate in transformers' modeling code; built with eager attention
    it exports and matches, and the edit goes into the user's config call."""
    model = LIBRARY / "swin_attention.py"
    status, report = _check(capsys, model, "--format", "json")
    assert status == 1
    (failure,) = [d for d in json.loads(report)["diagnostics"] if d["severity"] == "error"]
    assert failure["rule"] == "ONNX202"
    (fix,) = failure["fixes"]
    assert fix["key"] == "transformers:attn_implementation"
    assert fix["source"] == "transformers"
    (edit,) = fix["edits"]
    assert edit["range"]["start"] == {"line": 17, "column": 23}
    fixed = tmp_path / "swin_attention.py"
    fixed.write_text(_edited(model, fix))
    assert '        window_size=2,\n        attn_implementation="eager",\n    )' \
        in fixed.read_text()
    assert _check(capsys, fixed, "--fix-budget", "0")[0] == 0


RUNTIME_OPSET = LIBRARY / "runtime_opset"


@pytest.mark.every_torch  # which operators opset 23 writes depends on the installed torch
def test_a_runtime_that_does_not_take_an_opsets_operators_gets_the_default_opset(capsys,
                                                                                 tmp_path):
    """At opset 23 attention and RMS normalization are single operators NNAPI and CoreML do
    not take (ONNX705, a warning). The default opset is tried for each; it is shown only where
    the runtimes named then take every node of the line (not where NNAPI lacks the
    `Reciprocal` RMS normalization is made of, CoreML the `Expand` of grouped attention, NNAPI
    the `Where` of a mask, or a dimension is dynamic, nor where the default opset's attention
    differs from PyTorch's on a row that sees no key), and the edit goes where the opset came
    from: the pragma, the project (then the pragma gets one) or the export call."""
    default = str(torch_compat.default_opset())
    status = main(["check", str(RUNTIME_OPSET), "--root", str(RUNTIME_OPSET), "--format", "json"])
    out = capsys.readouterr().out
    assert status == 0  # fallbacks are warnings
    report = json.loads(out)
    verdicts = {t["name"]: [(trial["key"], trial["verdict"]) for trial in t["fix_trials"]]
                for t in report["targets"]}
    works, fails = [("onnxlens:default-opset", "works")], [("onnxlens:default-opset", "fails")]
    assert verdicts == {
        "Attention": works, "grouped_attention": fails, "MaskedAttention": fails,
        "BlindRow": fails, "NormOnNnapi": fails, "NormOnCoreml": works, "DynamicAttention": fails,
        "ProjectAttention": works, "export_pooled@21": works}
    for target in report["targets"]:
        for trial in target["fix_trials"]:
            if target["name"] == "BlindRow":  # the fix would make the model wrong
                assert trial["detail"].startswith(("ONNX501: Output `add` differs from PyTorch",
                                                   "ONNX502: The values first diverge at"))
            elif trial["verdict"] == "fails":  # the fallback is still there, at the same line
                assert trial["detail"].startswith("ONNX705: Runs on the CPU: not on ")

    fixed = {(Path(d["path"]).name, d["range"]["start"]["line"], d["target"]): d
             for d in report["diagnostics"] if d.get("fixes")}
    assert sorted(fixed) == [("model.py", 15, "Attention"), ("model.py", 59, "NormOnCoreml"),
                             ("project_opset.py", 11, "ProjectAttention"),
                             ("project_opset.py", 16, "export_pooled@21")]
    for finding in fixed.values():
        assert finding["rule"] == "ONNX705" and finding["severity"] == "warning"
        (fix,) = finding["fixes"]
        assert fix["title"] == (f"Export at opset {default}, torch.onnx's default, instead of "
                                "opset 23: the runtimes named then take these nodes")
    edited = {key[2]: _edited(RUNTIME_OPSET / key[0], finding["fixes"][0])
              for key, finding in fixed.items()}
    assert f"# onnx-export: args=(torch.randn(3, 8),), opset={default}, runtimes=[\"coreml\"]" \
        in edited["NormOnCoreml"]
    assert f"dynamo=True, opset_version={default})" in edited["export_pooled@21"]
    # the project's opset=23: the pragma gets its own, and the edited file checks clean
    pragma = "# onnx-export: args=tuple(torch.randn(1, 1, 3, 4) for _ in range(3))"
    assert f"{pragma}, opset={default}\n" in edited["ProjectAttention"]
    project = tmp_path / "runtime_opset"
    project.mkdir()
    (project / "pyproject.toml").write_text((RUNTIME_OPSET / "pyproject.toml").read_text())
    (project / "project_opset.py").write_text(edited["ProjectAttention"])
    status = main(["check", str(project / "project_opset.py"), "--root", str(project),
                   "--fix-budget", "0", "--format", "json"])
    rechecked = json.loads(capsys.readouterr().out)
    assert status == 0
    assert [d["rule"] for d in rechecked["diagnostics"]] == ["ONNX705"]  # export_pooled's
    assert rechecked["diagnostics"][0]["target"] == "export_pooled@21"
