"""The SARIF of every fixture validates against the SARIF 2.1.0 schema and passes the
Microsoft SARIF Multitool with no error-level result."""

from __future__ import annotations

import json

import pytest

from exporter.reports.sarif import sarif_dict
from tests.sarif_tools import (
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
    by_file = validate_many_with_multitool(list(paths.values()))
    errors = {name: by_file[path.resolve()] for name, path in paths.items()}
    assert {name: found for name, found in errors.items() if found} == {}


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
    assert location["artifactLocation"] == {"uri": "layers/special.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 6, "startColumn": 16, "endLine": 6,
                                  "endColumn": 35}
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
    # no made-up address: a helpUri only where a documentation URL is configured
    assert "helpUri" not in by_id["ONNX201"]
    assert "onnxlens rule ONNX201" in by_id["ONNX201"]["help"]["markdown"]
    assert all(rule["shortDescription"]["text"] and rule["help"]["text"] for rule in rules)
