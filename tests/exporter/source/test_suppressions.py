"""Inline suppressions: ``# onnxlens: ignore[ONNX201]`` on a line, on a target's pragma or
def/class line; ONNX006 for one that silenced nothing (off unless selected)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exporter.source.suppressions import find_suppressions, with_rule_added
from onnxlens.cli import main
from tests.conftest import FIXTURES

MODEL = (FIXTURES / "no_translation" / "model.py").read_text().splitlines()
# line 4: the pragma, 5: class Special, 7: torch.special.i0 (ONNX201), 8: torch.digamma (ONNX201)


def _write(tmp_path: Path, comments: dict[int, str]) -> Path:
    lines = list(MODEL)
    for number, comment in comments.items():
        lines[number - 1] += f"  {comment}"
    path = tmp_path / "model.py"
    path.write_text("\n".join(lines) + "\n")
    return path


def _check(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict]:
    status = main(["check", str(path), "--root", str(path.parent), "--format", "json", *extra])
    return status, json.loads(capsys.readouterr().out)


def _found(report: dict) -> list[tuple[str, int]]:
    return [(d["rule"], d["range"]["start"]["line"]) for d in report["diagnostics"]]


def test_a_line_suppression_silences_exactly_that_rule_on_that_line(tmp_path, capsys):
    path = _write(tmp_path, {7: "# onnxlens: ignore[ONNX201]", 8: "# onnxlens: ignore[ONNX5]"})
    status, report = _check(path, capsys)
    assert status == 1
    assert _found(report) == [("ONNX201", 8)]  # ONNX5 does not cover ONNX201
    assert report["targets"][0]["ok"] is False


def test_a_suppression_on_the_pragma_or_class_line_covers_the_whole_target(tmp_path, capsys):
    for line in (4, 5):
        path = _write(tmp_path, {line: "# onnxlens: ignore[ONNX2]"})
        status, report = _check(path, capsys)
        assert (status, _found(report)) == (0, []), line
        assert report["targets"][0]["ok"] is True  # nothing left: the target is ok


def test_a_bare_ignore_silences_every_rule_on_its_line(tmp_path, capsys):
    path = _write(tmp_path, {7: "# onnxlens: ignore", 8: "# noqa: E501  # onnxlens: IGNORE"})
    status, report = _check(path, capsys)
    assert (status, _found(report)) == (0, [])


def test_an_unused_suppression_is_onnx006_only_when_selected(tmp_path, capsys):
    path = _write(tmp_path, {7: "# onnxlens: ignore[ONNX201]", 9: "# onnxlens: ignore[ONNX5]"})
    _, default = _check(path, capsys)
    assert _found(default) == [("ONNX201", 8)]
    status, selected = _check(path, capsys, "--select", "ONNX006,ONNX2")
    assert status == 1
    unused = [d for d in selected["diagnostics"] if d["rule"] == "ONNX006"]
    assert [(d["range"], d["severity"]) for d in unused] == [
        ({"start": {"line": 9, "column": 25}, "end": {"line": 9, "column": 48}}, "warning")]
    assert unused[0]["message"] == ("This suppression silenced nothing: no finding of ONNX5 is "
                                    "reported here.")


def test_only_comments_count_not_strings():
    lines = ['text = "# onnxlens: ignore[ONNX201]"', "x = 1  # onnxlens: ignore[onnx201, ONNX4]"]
    (found,) = find_suppressions(Path("m.py"), lines)
    assert (found.line, found.column, found.rules) == (2, 10, ("ONNX201", "ONNX4"))
    # a file that does not tokenize to the end keeps what came before the error
    broken = find_suppressions(Path("m.py"), ["x = 1  # onnxlens: ignore", "def broken(:"])
    assert [(s.line, s.rules) for s in broken] == [(1, None)]


def test_the_quick_fix_adds_a_rule_to_an_existing_comment():
    assert with_rule_added("x = f()  # onnxlens: ignore[ONNX201]", "ONNX106") == \
        "x = f()  # onnxlens: ignore[ONNX201, ONNX106]"
    assert with_rule_added("x = f()  # onnxlens: ignore", "ONNX106") == \
        "x = f()  # onnxlens: ignore"  # already silences everything
    assert with_rule_added("x = f()  # noqa", "ONNX106") is None
