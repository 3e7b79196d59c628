"""The text report's parts that are not a finding (exporter/reports/render.py)."""

from __future__ import annotations

from exporter.reports.render import format_runtimes, format_text


def test_the_runtimes_table_has_a_line_per_target_and_runtime(fixture_results):
    """Issue 43: after the findings, what each runtime named made of each target."""
    _, result = fixture_results["runtimes/model.py"]
    lines = format_runtimes(result).splitlines()
    assert lines[0] == "Runtimes:"
    rows = {tuple(line.split()[:2]): line for line in lines[1:]}
    assert len(rows) == 16
    assert " fails (not taken: n0)  " in rows[("Volumes", "openvino-cpu")]
    assert " falls back (not taken: node_sum_1, n0; 1 partition(s))  " in \
        rows[("OnPhones", "nnapi")]
    assert rows[("OnGpu", "cuda")].endswith(
        "not run here (this machine's onnxruntime has no CUDAExecutionProvider (it needs a "
        "GPU and onnxruntime-gpu))")
    assert rows[("Fine", "openvino-cpu")].split()[2] == "matches"
    text = format_text(result, result.diagnostics)
    assert text.index("Runtimes:") > text.index("error[ONNX701]")
    assert text.index("Runtimes:") < text.index("Checked 15 target(s)")


def test_no_table_without_runtimes(fixture_results):
    _, result = fixture_results["clean/convnet.py"]
    assert format_runtimes(result) == ""
    assert "Runtimes:" not in format_text(result, result.diagnostics)
