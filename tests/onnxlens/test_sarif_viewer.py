"""What a person sees of onnxlens's SARIF in a real viewer (issue 41): the logs that
``onnxlens check --format sarif`` writes for ``examples/`` and for a notebook
(tests/onnxlens/notebooks/export.ipynb), rendered by Microsoft's SARIF viewer component
(``@microsoft/sarif-web-component``) in headless Chromium: each rule's id linking to its page,
the target above the file, the message, and the snippet's line numbers with the failing
expression highlighted.

tools/sarif-viewer/view.mjs bundles the component's page, renders each log and reads the DOM
(tools/sarif-viewer/install.sh installs it; scripts/test.sh runs that).
``ONNXLENS_SCREENSHOTS=DIR`` also saves DIR/sarif-viewer.png, the examples' log as the viewer
opens it (docs/screenshots/sarif-viewer.png comes from such a run).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from exporter.findings.rules import PUBLISHED_RULE_DOCS
from tests.sarif_tools import REPO_ROOT

VIEWER = REPO_ROOT / "tools" / "sarif-viewer"
NOTEBOOK = Path(__file__).parent / "notebooks" / "export.ipynb"
CHROMIUM = Path(os.environ.get("ONNXLENS_CHROMIUM", "/usr/bin/chromium"))
NODE = shutil.which("node")

pytestmark = [
    pytest.mark.skipif(NODE is None, reason="node is not installed (Node.js drives the browser)"),
    pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                       reason=f"no Chromium at {CHROMIUM} (apt-get install chromium, or set "
                       "ONNXLENS_CHROMIUM)"),
]


def _check(cwd: Path, path: str, report: Path) -> subprocess.Popen[str]:
    """``onnxlens check PATH --format sarif -o REPORT``, started (the released rule pages:
    no ``ONNXLENS_RULE_DOCS_URL``)."""
    env = {k: v for k, v in os.environ.items() if k != "ONNXLENS_RULE_DOCS_URL"}
    return subprocess.Popen(
        [sys.executable, "-m", "onnxlens", "check", path, "--format", "sarif", "-o", str(report)],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The SARIF of ``examples/`` and of a notebook's workspace, both checks at once."""
    out = tmp_path_factory.mktemp("sarif-viewer")
    workspace = out / "notebook"
    workspace.mkdir()
    shutil.copy(NOTEBOOK, workspace / NOTEBOOK.name)
    (workspace / "pyproject.toml").write_text("")
    reports = {"examples": out / "examples.sarif", "notebook": out / "notebook.sarif"}
    checks = {"examples": _check(REPO_ROOT, "examples", reports["examples"]),
              "notebook": _check(workspace, NOTEBOOK.name, reports["notebook"])}
    outputs = {name: check.communicate(timeout=600)[0] for name, check in checks.items()}
    for name, check in checks.items():  # examples/failing and the notebook fail on purpose
        assert check.returncode == 1, f"{name}: exit {check.returncode}\n{outputs[name]}"
    return reports


@pytest.fixture(scope="module")
def views(logs: dict[str, Path]) -> dict[str, Any]:
    """Both logs rendered in one browser: what the viewer shows of each (view.mjs)."""
    if not (VIEWER / "node_modules" / ".onnxlens-install-stamp").is_file():
        pytest.fail("the SARIF viewer is not installed: run tools/sarif-viewer/install.sh")
    command = [NODE or "node", str(VIEWER / "view.mjs"), str(logs["examples"]),
               str(logs["notebook"])]
    screenshots = os.environ.get("ONNXLENS_SCREENSHOTS")
    if screenshots:
        command[2:2] = ["--screenshot", str(Path(screenshots) / "sarif-viewer.png")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    examples, notebook = shown["views"]
    return {"refused": shown["refused"], "examples": examples, "notebook": notebook,
            "logs": {name: json.loads(path.read_text()) for name, path in logs.items()}}


def _result(view: dict[str, Any], rule: str, highlighted: str) -> dict[str, Any]:
    """The viewer's row of a result of the rule with that text highlighted."""
    rows = [r for r in view["results"] if r["rule"] == rule and r["highlighted"] == [highlighted]]
    assert rows, (f"no {rule} result shows `{highlighted}` highlighted; shown: "
                  f"{[(r['rule'], r['highlighted'], r['code']) for r in view['results']]}")
    return rows[0]


def _numbered(result: dict[str, Any]) -> dict[int, str]:
    """The snippet's lines as shown, by the line number beside each."""
    assert result["code"] is not None, f"no snippet shown: {result}"
    return {int(n): line for n, line in zip(result["lineNumbers"], result["code"].split("\n"),
                                            strict=True)}


def test_the_viewer_shows_each_log_offline_and_without_errors(views):
    assert views["refused"] == []  # the page asked for nothing but its own files
    for name in ("examples", "notebook"):
        assert views[name]["errors"] == []
        results = views["logs"][name]["runs"][0]["results"]
        assert views[name]["opened"]["title"] == f"onnxlens {len(results)}"
        assert len(views[name]["expanded"]["results"]) == len(results)


def test_each_rule_id_links_to_its_page(views):
    run = views["logs"]["examples"]["runs"][0]
    log_rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    shown = views["examples"]["expanded"]["rules"]
    found = {r["ruleId"] for r in run["results"]}
    assert {r["id"] for r in shown} == found >= {"ONNX101", "ONNX102", "ONNX201"}
    for rule in shown:  # the log's helpUri: the released page
        assert rule["href"] == f"{PUBLISHED_RULE_DOCS}/{rule['id']}.md", rule
        assert rule["href"].endswith(f"docs/rules/{rule['id']}.md")
        assert rule["href"] == log_rules[rule["id"]].get("helpUri")
    onnx201 = next(r for r in views["examples"]["opened"]["rules"] if r["id"] == "ONNX201")
    assert onnx201["text"].split() == ["ONNX201", ":", "no-onnx-translation", "2"]
    assert onnx201["expanded"]  # the first group the viewer opens: its results are in view
    notebook_rules = views["notebook"]["opened"]["rules"]
    assert [(r["id"], r["href"]) for r in notebook_rules] == [
        ("ONNX101", f"{PUBLISHED_RULE_DOCS}/ONNX101.md")]


def test_the_failing_line_is_numbered_and_its_expression_highlighted(views):
    """As the viewer opens the log: the ONNX201 group's results, each with its lines numbered
    as in the file and the failing call highlighted on its own line."""
    opened = views["examples"]["opened"]["results"]
    i0 = _result(views["examples"]["opened"], "ONNX201", "torch.special.i0(self.proj(x))")
    assert i0 in opened and i0["codeVisible"] and i0["highlightVisible"]
    assert i0["highlightBackground"] not in (None, "rgba(0, 0, 0, 0)")  # marked in colour
    lines = _numbered(i0)
    assert sorted(lines) == [12, 13, 14, 15, 16]  # the finding's line and 2 around it
    assert lines[14].strip() == "features = torch.special.i0(self.proj(x))"
    assert lines[13].strip() == "def forward(self, x):"
    digamma = _result(views["examples"]["opened"], "ONNX201", "torch.digamma(x)")
    assert _numbered(digamma)[17].strip() == "return features + torch.digamma(x)"
    assert i0["message"].startswith("aten::i0 has no ONNX translation (it decomposes to "
                                    "prims::bessel_i0); the export fails here.")


def _row_of(result: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The viewer's row of a log's result: the one whose message, as shown, starts with the
    result's first paragraph (its Markdown rendered: no backticks, no bold)."""
    first = re.sub(r"`|\*\*", "", result["message"]["markdown"].split("\n\n")[0])
    found = [r for r in rows if r["message"].startswith(first)]
    assert len(found) == 1, f"{len(found)} rows show {first!r}: {[r['message'] for r in rows]}"
    return found[0]


def test_every_highlight_is_the_findings_text_on_its_numbered_line(views):
    """Each result of both logs, its group opened: the highlighted text is the region's text
    in the file, on the line numbered as the region's line."""
    for name, root in (("examples", REPO_ROOT), ("notebook", NOTEBOOK.parent)):
        for result in views["logs"][name]["runs"][0]["results"]:
            row = _row_of(result, views[name]["expanded"]["results"])
            physical = result["locations"][0]["physicalLocation"]
            region = physical["region"]
            source = (root / physical["artifactLocation"]["uri"]).read_text(
                encoding="utf-8").splitlines()
            assert region["startLine"] == region.get("endLine", region["startLine"])  # here
            expected = source[region["startLine"] - 1][region["startColumn"] - 1:
                                                       region["endColumn"] - 1]
            if name == "notebook":
                expected = json.loads(f'"{expected}"')  # the JSON string's text
            assert row["highlighted"] == [expected], (name, result["ruleId"], row)
            assert expected in _numbered(row)[region["startLine"]], (name, row)
            assert row["highlightVisible"] and not row["snippetClipped"], (name, row)


def test_the_target_is_shown_above_the_file(views):
    i0 = _result(views["examples"]["opened"], "ONNX201", "torch.special.i0(self.proj(x))")
    assert i0["logicalLocation"] == "examples/failing/special_functions.py::BesselFeatures"
    assert i0["logicalLocationVisible"] and not i0["logicalLocationClipped"]
    assert i0["path"] == "examples/failing/special_functions.py"
    assert i0["level"] == "error"
    for name in ("examples", "notebook"):  # every row names its target, as the log does
        for result in views["logs"][name]["runs"][0]["results"]:
            row = _row_of(result, views[name]["expanded"]["results"])
            (logical,) = result["locations"][0]["logicalLocations"]
            assert row["logicalLocation"] == logical["fullyQualifiedName"]
            assert row["logicalLocationVisible"] and not row["logicalLocationClipped"], row


def test_a_fix_tried_and_working_is_in_the_message(views):
    fixed_batch = _result(views["examples"]["expanded"], "ONNX102", "x.reshape(2, 2, 16)")
    assert fixed_batch["logicalLocation"] == "examples/failing/fixed_batch.py::PairPooling"
    assert "Tried and works: Make x.shape[0] static" in fixed_batch["message"]


def test_the_notebook_result_names_its_cell(views):
    (result,) = views["notebook"]["opened"]["results"]
    assert result["message"].startswith("cell 6, line 4: if x.sum() > 0: depends on the values "
                                        "inside a tensor")
    assert result["logicalLocation"] == "export.ipynb::Branching"
    assert result["path"] == "export.ipynb"
    # the cell's own lines (not the .ipynb file's JSON), numbered as the file's lines that
    # hold them, the condition highlighted
    lines = _numbered(result)
    assert [line.strip() for line in lines.values()] == [
        "class Branching(nn.Module):", "def forward(self, x):", "if x.sum() > 0:",
        "return x + 1", "return x - 1"]
    raw = NOTEBOOK.read_text(encoding="utf-8").splitlines()
    assert all(lines[n].strip() in raw[n - 1] for n in lines)
    assert result["highlighted"] == ["x.sum() > 0"]
