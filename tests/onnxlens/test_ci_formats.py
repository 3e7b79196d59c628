"""What CI reads: ``--format github`` (workflow annotations, the step summary) and the SARIF
run's category."""

from __future__ import annotations

import json

import pytest

from onnxlens.cli import main
from tests.conftest import FIXTURES
from tests.sarif_tools import (
    ERRORS_AND_WARNINGS,
    REPO_ROOT,
    validate_with_multitool,
    validate_with_schema,
)

NO_TRANSLATION = "no_translation/model.py"


def test_github_format_prints_one_workflow_command_per_finding(monkeypatch, tmp_path, capsys):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step output\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.chdir(FIXTURES)
    assert main(["check", NO_TRANSLATION, "--format", "github"]) == 1
    lines = capsys.readouterr().out.splitlines()
    commands = [line for line in lines if line.startswith("::")]
    assert len(commands) == 2
    assert commands[0].startswith(
        "::error file=no_translation/model.py,line=7,col=13,endLine=7,endColumn=32,"
        "title=ONNX201::`aten::i0` has no ONNX translation")
    assert "%0A" in commands[0] and "\n" not in commands[0]  # the hint, on a second line
    assert lines[-1] == ("Checked 1 target(s) in 1 file(s): 2 errors, 0 warnings "
                         "(1 target(s) failing).")

    table = summary.read_text()
    assert table.startswith("earlier step output\n## onnxlens\n")  # appended, not replaced
    rows = [line for line in table.splitlines() if line.startswith("| ONNX")]
    assert len(rows) == 2
    # no link: no documentation URL is configured (ONNXLENS_RULE_DOCS_URL)
    assert rows[0].startswith("| ONNX201 | error | `no_translation/model.py:7:13` |")


def test_github_format_escapes_what_would_end_a_command():
    from exporter.findings.diagnostics import Diagnostic, Location, Range
    from exporter.reports.github import annotation

    diagnostic = Diagnostic("ONNX201", "50% of it:\nsecond, line",
                            Location(FIXTURES / "a,b:c.py", Range.of(1, 2, 1, 3)), target="T")
    line = annotation(diagnostic)
    assert line.startswith("::error file=")
    assert "a%2Cb%3Ac.py,line=1,col=2,endLine=1,endColumn=3,title=ONNX201::" in line
    assert "::50%25 of it:%0Asecond, line%0ARewrite with" in line  # the message, the hint


def test_an_annotation_names_the_fixes_that_were_tried_and_work():
    from exporter.findings.diagnostics import Diagnostic, Location, Range
    from exporter.findings.fixes import FixCandidate, FixEdit, FixTrial
    from exporter.reports.github import annotation

    where = Location(FIXTURES / "m.py", Range.of(3, 1, 3, 4))
    works = FixCandidate("transformers:use_cache", "Build the model with `use_cache=False`",
                         "transformers", (FixEdit(where.path, where.range, "x"),))
    diagnostic = Diagnostic("ONNX201", "no translation", where, target="T",
                            fixes=(FixTrial(works, "works", 3.0),))
    line = annotation(diagnostic)
    assert "::no translation%0ATried and works: Build the model with `use_cache=False`%0A" in line


def test_no_step_summary_outside_github(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["check", str(FIXTURES / "clean" / "factory.py"), "--format", "github"]) == 0
    assert capsys.readouterr().out.startswith("Checked 1 target(s)")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("category", "expected"), [(None, "onnxlens/"),
                                                    ("shard-2", "shard-2/"),
                                                    ("models/cpu", "models/cpu/")])
def test_sarif_run_has_a_category(category, expected, tmp_path, capsys):
    report = tmp_path / "report.sarif"
    args = ["check", str(FIXTURES / NO_TRANSLATION), "--format", "sarif", "-o", str(report)]
    assert main(args + (["--category", category] if category else [])) == 1
    log = json.loads(report.read_text())
    assert log["runs"][0]["automationDetails"] == {"id": expected}
    assert validate_with_schema(log) == []
    assert validate_with_multitool(report) == []


def test_a_category_with_spaces_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["check", str(FIXTURES / "clean"), "--format", "sarif", "--category", "a b"])
    assert exit_info.value.code == 2
    assert "one word without spaces" in capsys.readouterr().err


def test_one_check_writes_annotations_and_a_sarif_log(monkeypatch, tmp_path, capsys):
    """The GitHub Action's single run: ``--format github`` on stdout, SARIF to a file."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.chdir(FIXTURES)
    sarif = tmp_path / "onnxlens.sarif"
    assert main(["check", NO_TRANSLATION, "--format", "github", "--sarif-file", str(sarif),
                 "--category", "models"]) == 1
    out = capsys.readouterr().out
    assert [line[:40] for line in out.splitlines() if line.startswith("::")] == [
        "::error file=no_translation/model.py,lin"] * 2
    log = json.loads(sarif.read_text())
    run = log["runs"][0]
    assert run["automationDetails"] == {"id": "models/"}
    assert [(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"])
            for r in run["results"]] == [("ONNX201", 7), ("ONNX201", 8)]
    assert validate_with_schema(log) == []


def test_sarif_file_and_output_must_differ(tmp_path, capsys):
    same = tmp_path / "report"
    assert main(["check", str(FIXTURES / "clean" / "factory.py"), "--format", "json",
                 "--output", str(same), "--sarif-file", str(same)]) == 2
    assert "--output and --sarif-file both name" in capsys.readouterr().err
    assert not same.exists()


def test_shards_split_the_targets_and_findings_of_a_whole_run(tmp_path, capsys):
    """``--shard I/N``: every target in exactly one shard, each shard's findings those of
    the whole run for its targets, and each SARIF run its own category."""
    paths = [str(FIXTURES / name) for name in ("clean", "no_translation", "mixed")]

    def run(*extra: str) -> dict:
        report = tmp_path / f"report{len(list(tmp_path.iterdir()))}.sarif"
        main(["check", *paths, "--root", str(FIXTURES), "--format", "sarif", "-o",
              str(report), *extra])
        return json.loads(report.read_text())["runs"][0]

    def findings(run_log: dict) -> list[tuple]:
        return sorted((r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]
                       ["uri"], r["locations"][0]["physicalLocation"]["region"]["startLine"])
                      for r in run_log["results"])

    whole = run()
    shards = [run("--shard", f"{index}/2") for index in (1, 2)]
    assert [s["automationDetails"]["id"] for s in shards] == [
        "onnxlens/shard-1-of-2/", "onnxlens/shard-2-of-2/"]
    assert sorted(findings(shards[0]) + findings(shards[1])) == findings(whole)
    assert findings(shards[0]) and findings(shards[1])  # both shards hold something here
    assert run("--shard", "2/2", "--category", "gpu")["automationDetails"]["id"] == "gpu/"
    with pytest.raises(SystemExit):
        main(["check", paths[0], "--shard", "3/2"])
    assert "I must be between 1 and N" in capsys.readouterr().err


def test_the_sarif_of_the_examples_is_what_a_viewer_needs(monkeypatch, tmp_path, capsys):
    """issue 41: the log of ``examples/`` passes the Multitool with no error and no warning,
    by the SARIF specification's rules and by GitHub code scanning's; each finding carries its
    line, the lines around it, the target and (ONNX102 here) the fixes tried and working."""
    monkeypatch.chdir(REPO_ROOT)
    report = tmp_path / "examples.sarif"
    assert main(["check", "examples", "--format", "sarif", "-o", str(report)]) == 1
    run = json.loads(report.read_text())["runs"][0]
    assert validate_with_multitool(report, levels=ERRORS_AND_WARNINGS) == []
    assert validate_with_multitool(report, levels=ERRORS_AND_WARNINGS, rule_kind="Ghas") == []
    checked = sorted(p.relative_to(REPO_ROOT).as_posix()
                     for p in (REPO_ROOT / "examples").rglob("*.py"))
    assert sorted(a["location"]["uri"] for a in run["artifacts"]) == checked
    assert run["invocations"] == [{"executionSuccessful": True}]
    by_line = {(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"]): r
               for r in run["results"]}
    i0 = by_line[("ONNX201", 14)]["locations"][0]
    assert i0["physicalLocation"]["region"]["snippet"]["text"] == (
        "        features = torch.special.i0(self.proj(x))")
    assert i0["physicalLocation"]["contextRegion"]["startLine"] == 12
    assert i0["logicalLocations"][0]["fullyQualifiedName"] == (
        "examples/failing/special_functions.py::BesselFeatures")
    specialized = by_line[("ONNX102", 9)]["message"]["markdown"]
    assert "**Tried and works:** Make `x.shape[0]` static" in specialized
