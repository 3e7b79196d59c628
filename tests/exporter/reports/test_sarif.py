"""The SARIF of every fixture validates against the SARIF 2.1.0 schema and passes the
Microsoft SARIF Multitool with no error or warning (also GitHub code scanning's rules), and
carries what a SARIF viewer shows: each finding's lines and context, the target, the rule's
page, the fixes that were tried and work (issue 41)."""

from __future__ import annotations

import json
import sys

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from exporter import HOMEPAGE
from exporter.findings.diagnostics import Diagnostic, Location, Range
from exporter.findings.fixes import FixCandidate, FixEdit, FixTrial
from exporter.findings.result import CheckResult
from exporter.findings.rules import DOCS_URL_VARIABLE
from exporter.reports.sarif import sarif_dict
from tests.conftest import FIXTURES
from tests.sarif_tools import (
    ERRORS_AND_WARNINGS,
    REPO_ROOT,
    validate_many_with_multitool,
    validate_with_multitool,
    validate_with_schema,
)


@pytest.fixture(scope="module")
def sarif_logs(fixture_results):
    return {name: sarif_dict(result, workspace)
            for name, (workspace, result) in fixture_results.items()}


def test_every_fixture_log_matches_the_schema(sarif_logs):
    problems = {name: validate_with_schema(log) for name, log in sarif_logs.items()}
    assert {name: errors for name, errors in problems.items() if errors} == {}


def test_every_fixture_log_passes_the_multitool(sarif_logs, tmp_path):
    paths = {}
    for name, log in sarif_logs.items():
        path = tmp_path / (name.replace("/", "__") + ".sarif")
        path.write_text(json.dumps(log), encoding="utf-8")
        paths[name] = path
    for rule_kind in (None, "Ghas"):  # the SARIF specification's rules, GitHub's
        by_file = validate_many_with_multitool(list(paths.values()), levels=ERRORS_AND_WARNINGS,
                                               rule_kind=rule_kind)
        errors = {name: by_file[path.resolve()] for name, path in paths.items()}
        assert {name: found for name, found in errors.items() if found} == {}, rule_kind


def test_the_multitool_check_can_fail(tmp_path):
    broken = tmp_path / "broken.sarif"
    broken.write_text(json.dumps({"version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "x"}},
        "results": [{"message": {"text": "m"}, "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": "a.py"}, "region": {"startLine": 0}}}]}]}]}))
    found = validate_with_multitool(broken)
    assert any(error.startswith("JSON1008") for error in found)
    assert any(error.startswith("SARIF1010") for error in found)


def test_results_carry_rule_region_fingerprint_and_relative_uri(sarif_logs):
    run = sarif_logs["helper_module/model.py"]["runs"][0]
    (result,) = run["results"]
    assert result["ruleId"] == "ONNX201"
    assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == "ONNX201"
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "layers/special.py", "uriBaseId": "%SRCROOT%",
                                            "index": 1}
    assert location["region"] == {"startLine": 6, "startColumn": 16, "endLine": 6,
                                  "endColumn": 35, "snippet": {
                                      "text": "        return torch.special.i0(x) + 1"}}
    assert result["partialFingerprints"]["primaryLocationLineHash"]
    assert [r["message"]["text"] for r in result["relatedLocations"]] == [
        "called from `smooth`", "called from `forward`",
        "while checking the export target `UsesHelper`"]
    frames = result["stacks"][0]["frames"]
    assert all(frame["location"]["message"]["text"] for frame in frames)
    flow = result["codeFlows"][0]["threadFlows"][0]["locations"]
    assert [step["location"]["physicalLocation"]["artifactLocation"]["uri"] for step in flow] == [
        "model.py", "layers/special.py", "layers/special.py"]


def test_no_absolute_paths_unless_asked(fixture_results):
    workspace, result = fixture_results["mixed/model.py"]
    text = json.dumps(sarif_dict(result, workspace))
    assert str(workspace) not in text
    asked = sarif_dict(result, workspace, absolute_root=True)
    assert asked["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"].startswith("file://")


def test_a_fix_that_was_not_tried_is_never_a_sarif_fix(sarif_logs, fixture_results):
    """These results come straight from the pipeline: ONNX102's candidates (torch's suggested
    dynamic_shapes, the dimension made static) were proposed but never tried."""
    _, result = fixture_results["dynamic_specialized/model.py"]
    (target,) = result.targets
    assert {c.key for c in target.fix_candidates} == {"torch:suggested-dynamic-shapes",
                                                      "onnxlens:static-dimension"}
    results = sarif_logs["dynamic_specialized/model.py"]["runs"][0]["results"]
    (specialized,) = [r for r in results if r["ruleId"] == "ONNX102"]
    assert "fixes" not in specialized
    assert "Suggested" not in specialized["message"]["text"]


def test_rules_have_help_and_levels(sarif_logs):
    rules = sarif_logs["clean/factory.py"]["runs"][0]["tool"]["driver"]["rules"]
    by_id = {rule["id"]: rule for rule in rules}
    assert by_id["ONNX106"]["defaultConfiguration"]["level"] == "warning"
    assert all(rule["shortDescription"]["text"] and rule["help"]["text"] for rule in rules)


def test_a_finding_shows_its_lines_and_the_lines_around_them(sarif_logs):
    (result,) = sarif_logs["helper_module/model.py"]["runs"][0]["results"]
    physical = result["locations"][0]["physicalLocation"]  # layers/special.py, line 6
    assert physical["region"]["snippet"] == {"text": "        return torch.special.i0(x) + 1"}
    assert physical["contextRegion"] == {"startLine": 4, "endLine": 8, "snippet": {"text": (
        "class Smooth(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.special.i0(x) + 1\n"
        "\n")}}
    # the related locations too: the call into the helper, the target (clipped to line 1)
    related = {r["message"]["text"]: r["physicalLocation"] for r in result["relatedLocations"]}
    assert related["called from `forward`"]["region"]["snippet"] == {
        "text": "        return smooth(y)"}
    target = related["while checking the export target `UsesHelper`"]["contextRegion"]
    assert (target["startLine"], target["endLine"]) == (5, 9)


def test_the_target_is_a_logical_location(sarif_logs):
    (result,) = sarif_logs["helper_module/model.py"]["runs"][0]["results"]
    # the finding is in the helper's file; the target is the one `onnxlens save` names
    assert result["locations"][0]["logicalLocations"] == [
        {"name": "UsesHelper", "fullyQualifiedName": "model.py::UsesHelper", "kind": "object"}]


def test_every_file_checked_is_an_artifact_and_every_location_names_its_index(sarif_logs):
    run = sarif_logs["helper_module/model.py"]["runs"][0]
    artifacts = run["artifacts"]
    model = FIXTURES / "helper_module" / "model.py"
    assert artifacts[0] == {"location": {"uri": "model.py", "uriBaseId": "%SRCROOT%"},
                            "roles": ["analysisTarget"], "length": model.stat().st_size}
    assert [a["location"]["uri"] for a in artifacts] == ["model.py", "layers/special.py"]
    named = [location for location in _values(run["results"], "artifactLocation")]
    assert len(named) > 5
    for location in named:
        assert artifacts[location["index"]]["location"]["uri"] == location["uri"]


def _values(value: object, key: str) -> list[dict]:
    if isinstance(value, dict):
        return ([value[key]] if key in value else []) + [
            found for item in value.values() for found in _values(item, key)]
    if isinstance(value, list):
        return [found for item in value for found in _values(item, key)]
    return []


def test_every_rule_links_its_page_and_carries_it_whole(monkeypatch, fixture_results):
    monkeypatch.delenv(DOCS_URL_VARIABLE, raising=False)
    workspace, result = fixture_results["clean/factory.py"]
    driver = sarif_dict(result, workspace)["runs"][0]["tool"]["driver"]
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert driver["informationUri"] == HOMEPAGE == project["project"]["urls"]["Homepage"]
    package = json.loads((REPO_ROOT / "vscode-extension" / "package.json").read_text())
    assert package["repository"]["url"] == HOMEPAGE
    by_id = {rule["id"]: rule for rule in driver["rules"]}
    # no ONNXLENS_RULE_DOCS_URL: the page of a released onnxlens, docs/rules/ on main
    assert by_id["ONNX201"]["helpUri"] == f"{HOMEPAGE}/blob/main/docs/rules/ONNX201.md"
    page = (REPO_ROOT / "docs" / "rules" / "ONNX201.md").read_text(encoding="utf-8")
    help_ = by_id["ONNX201"]["help"]
    assert help_["markdown"].startswith("# ONNX201: no-onnx-translation\n")
    assert help_["markdown"].count("\n") == page.strip().count("\n")  # the whole page
    # its links lead to the other pages from wherever the log is read
    assert f"[ONNX202]({HOMEPAGE}/blob/main/docs/rules/ONNX202.md)" in help_["markdown"]
    assert "](ONNX" not in help_["markdown"] and "](../" not in help_["text"]
    assert all(rule["helpUri"].endswith(f"/{rule['id']}.md") for rule in driver["rules"])

    monkeypatch.setenv(DOCS_URL_VARIABLE, "https://docs.example.org/onnxlens/rules/")
    rules = sarif_dict(result, workspace)["runs"][0]["tool"]["driver"]["rules"]
    assert rules[0]["helpUri"] == "https://docs.example.org/onnxlens/rules/ONNX001.md"


def test_the_message_names_every_fix_that_was_tried_and_works(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import torch\n\n\ndef build():\n    return make(use_cache=True)\n")
    where = Location(path, Range.of(5, 12, 5, 32))
    works = FixCandidate("transformers:use_cache", "Build the model with `use_cache=False`",
                         "transformers", (FixEdit(path, Range.of(5, 22, 5, 26), "False"),))
    diagnostic = Diagnostic("ONNX201", "`aten::x` has no ONNX translation.", where,
                            target="build", fixes=(FixTrial(works, "works", 3.0),))
    log = sarif_dict(CheckResult(files=[path], file_diagnostics=[diagnostic]), tmp_path)
    (result,) = log["runs"][0]["results"]
    hint = "Rewrite with supported operators"
    assert result["message"]["markdown"].startswith(
        "`aten::x` has no ONNX translation.\n\n"
        "**Tried and works:** Build the model with `use_cache=False`\n\n" + hint)
    assert result["message"]["text"].startswith(
        "`aten::x` has no ONNX translation.\n"
        "Tried and works: Build the model with `use_cache=False`\n" + hint)
    assert result["fixes"][0]["artifactChanges"][0]["artifactLocation"]["index"] == 0
    assert result["locations"][0]["logicalLocations"][0] == {
        "name": "build", "fullyQualifiedName": "m.py::build", "kind": "function"}
    assert result["locations"][0]["physicalLocation"]["contextRegion"]["startLine"] == 3
    assert log["runs"][0]["invocations"] == [{"executionSuccessful": True}]


@pytest.mark.parametrize("rule", ["ONNX901", "ONNX904", "ONNX999"])
def test_a_tool_failure_is_an_unsuccessful_invocation_with_a_notification(rule, tmp_path):
    path = tmp_path / "m.py"
    path.write_text("x = 1\n")
    failure = Diagnostic(rule, "The check of `Net` stopped.", Location(path, Range.of(1, 1, 1, 2)),
                         target="Net")
    finding = Diagnostic("ONNX201", "no translation.", Location(path, Range.of(1, 1, 1, 2)),
                         target="Other")
    log = sarif_dict(CheckResult(files=[path], file_diagnostics=[failure, finding]), tmp_path)
    (invocation,) = log["runs"][0]["invocations"]
    assert invocation["executionSuccessful"] is False
    (notification,) = invocation["toolExecutionNotifications"]
    assert notification["level"] == "error"
    assert notification["message"]["text"].startswith("The check of `Net` stopped.")
    assert notification["associatedRule"]["id"] == rule
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert rules[notification["associatedRule"]["index"]]["id"] == rule
    assert [r["ruleId"] for r in log["runs"][0]["results"]] == [rule, "ONNX201"]
    assert validate_with_schema(log) == []
    report = tmp_path / "failure.sarif"
    report.write_text(json.dumps(log), encoding="utf-8")
    assert validate_with_multitool(report, levels=ERRORS_AND_WARNINGS) == []


def test_every_quick_fix_of_a_finding_is_a_sarif_fix(tmp_path):
    """A legacy argument's rewrite and the edit that marks the call's function to be checked:
    SARIF dropped the second, which the editor offers."""
    from exporter.source.targets import discover

    path = tmp_path / "script.py"
    path.write_text("import torch\n\n\ndef export():\n    torch.onnx.export(model, (x,), 'm.onnx',"
                    " do_constant_folding=True)\n")
    (finding,) = discover(path, path.read_text()).diagnostics
    assert len(finding.quick_fixes) == 2
    log = sarif_dict(CheckResult(files=[path], file_diagnostics=[finding]), tmp_path)
    (result,) = log["runs"][0]["results"]
    assert [fix["description"]["text"] for fix in result["fixes"]] == [
        finding.quick_fixes[0].title, "Check this call: mark `export` with `# onnx-export:`"]
    marking = result["fixes"][1]["artifactChanges"][0]["replacements"][0]
    assert marking["deletedRegion"]["startLine"] == 4
    assert marking["insertedContent"]["text"] == "# onnx-export:\n"


def test_the_runtimes_table_is_in_the_runs_property_bag(sarif_logs):
    """Issue 43: each target's verdict on each runtime named besides ONNX Runtime's CPU
    provider; a run that names none has no such bag."""
    (run,) = sarif_logs["runtimes/model.py"]["runs"]
    table = {(row["target"], row["runtime"]): row for row in run["properties"]["runtimes"]}
    assert table[("Volumes", "openvino-cpu")]["state"] == "fails"
    assert table[("Volumes", "openvino-cpu")]["unsupported"] == ["n0"]
    assert table[("OnPhones", "nnapi")]["partitions"] == 1
    assert table[("OnGpu", "cuda")]["state"] == "not run here"
    assert {row["precision"] for row in run["properties"]["runtimes"]} == {"fp32"}
    assert len(table) == 21
    (run,) = sarif_logs["precision/model.py"]["runs"]
    rows = {(row["target"], row["runtime"], row["precision"]): row["state"]
            for row in run["properties"]["runtimes"]}
    assert rows[("boosted", "openvino-cpu", "fp32")] == "matches"
    assert rows[("boosted", "openvino-cpu", "fp16")] == "differs"
    assert rows[("Outlier", "ort-cpu", "int8")] == "differs"
    (clean,) = sarif_logs["clean/convnet.py"]["runs"]
    assert "properties" not in clean
