"""The text report's parts that are not a finding (exporter/reports/render.py)."""

from __future__ import annotations

from pathlib import Path

from exporter.findings.positions import Range
from exporter.findings.result import CheckResult, ModelSummary, RuntimeRun, TargetResult
from exporter.reports.render import format_runtimes, format_text

PATH = Path("/w/model.py")


def _target(name: str, *runs: RuntimeRun) -> TargetResult:
    return TargetResult(name, PATH, Range.of(3, 7, 3, 12),
                        summary=ModelSummary(runtimes=list(runs)))


def test_the_runtimes_table_has_a_line_per_target_and_runtime():
    """Issue 43: after the findings, what each runtime named made of each target (the
    deploy stage's values are tests/exporter/pipeline/test_deploy.py's)."""
    result = CheckResult(targets=[
        _target("Volumes", RuntimeRun("openvino-cpu", "fails", 0.25, 8, ("n0",), "")),
        _target("OnPhones",
                RuntimeRun("nnapi", "falls back", 0.01, 5, ("node_sum_1", "n0"), "", 1),
                RuntimeRun("coreml", "supported", 0.0, 5, (), "", 1)),
        _target("Many", RuntimeRun("nnapi", "falls back", 0.02, 9,
                                   tuple(f"n{i}" for i in range(7)), "", 3)),
        _target("OnGpu", RuntimeRun("cuda", "not run here", 0.0, detail="no CUDA here")),
        _target("Halved", RuntimeRun("ort-cpu", "differs", 0.05, precision="fp16"),
                RuntimeRun("openvino-cpu", "matches", 0.12, precision="int8")),
        _target("Plain")], files=[PATH])
    assert format_runtimes(result).splitlines() == [
        "Runtimes:",
        "  Volumes   openvino-cpu       fails (not taken: n0)  0.25 s",
        "  OnPhones  nnapi              falls back (not taken: node_sum_1, n0; 1 partition(s))"
        "  0.01 s",
        "  OnPhones  coreml             supported (1 partition(s))  0.00 s",
        "  Many      nnapi              falls back (not taken: n0, n1, n2, n3, n4, …; 3 "
        "partition(s))  0.02 s",
        "  OnGpu     cuda               not run here (no CUDA here)",
        "  Halved    ort-cpu fp16       differs  0.05 s",
        "  Halved    openvino-cpu int8  matches  0.12 s"]
    text = format_text(result, [])
    assert text.startswith("Runtimes:\n")
    assert text.index("Runtimes:") < text.index("Checked 6 target(s)")


def test_no_table_without_runtimes():
    result = CheckResult(targets=[_target("Plain")], files=[PATH])
    assert format_runtimes(result) == ""
    assert format_text(result, []) == "Checked 1 target(s) in 1 file(s): 0 errors, 0 warnings.\n"
