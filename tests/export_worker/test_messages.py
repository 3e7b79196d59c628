"""The worker protocol (export_worker/messages.py): each message survives its line, typed
fields and all, and a line that is no message is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from export_worker.messages import (
    DecodeError,
    JobAnswer,
    JobDone,
    JobInputs,
    JobProcess,
    JobProgress,
    JobRequest,
    Ready,
    WorkerStatus,
    answer_to_bytes,
    decode,
    encode,
    progress_to_bytes,
    read_job_lines,
)
from exporter.config.options import ExportOptions
from exporter.findings.diagnostics import Diagnostic, Location
from exporter.findings.fixes import FixEdit, QuickFix
from exporter.findings.positions import Range
from exporter.findings.result import CheckResult, StageState, StageStatus, TargetResult
from exporter.toolchain.report import ToolchainReport
from tests.exporter.reports.test_run import REPORT

TOOLCHAIN = ToolchainReport({"torch": "2.13.0", "onnx": None}, True, ["2.13.0", "2.14.1"],
                            {"staged-translation": ""}, {"shared-provenance": "off: why"},
                            None)


PATH = Path("/w/m.py")
FINDING = Diagnostic("ONNX601", "`dynamo=False` ...", Location(PATH, Range.of(5, 46, 5, 58)),
                     target="", data={"sizes": {"batch": 5}},
                     quick_fixes=(QuickFix("Remove", (FixEdit(PATH, Range.of(5, 44, 5, 58),
                                                              ""),)),))
RESULT = CheckResult(targets=[TargetResult("T", PATH, Range.of(4, 7, 4, 8), [
    StageStatus("load", StageState.PASSED, 0.5), StageStatus("capture", StageState.FAILED)],
    [FINDING])], files=[PATH])


@pytest.mark.parametrize("message", [
    Ready(12, 3.5, TOOLCHAIN, ["ONNXLENS_X is not a setting"]),
    JobDone("1", JobAnswer(result=RESULT, inputs=JobInputs({"/w/m.py": "abc"})), 2.5, 13),
    JobDone("2", JobAnswer(error="cannot run T", diagnostics=[FINDING]), 0.1, 14),
    JobProgress("1", RESULT),
    JobDone("3", JobAnswer(report=REPORT, markdown="# Model"), 1.0, 15),
    WorkerStatus("s1", 12, [JobProcess("j1", 13)], None, TOOLCHAIN, ["transformers"]),
    JobRequest("check", "/w/m.py", "/w", "Model", text="x = 1\n",
               settings=ExportOptions(opset=20, atol=1e-4), timeout=60.0),
])
def test_a_message_is_itself_after_its_line(message):
    line = encode(message)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert decode(line) == message


def test_the_toolchain_arrives_typed():
    ready = decode(encode(Ready(12, 3.5, TOOLCHAIN)))
    assert isinstance(ready, Ready) and isinstance(ready.toolchain, ToolchainReport)
    assert ready.toolchain.packages["onnx"] is None
    assert ready.toolchain.message is None


@pytest.mark.parametrize("line", [b"hello\n", b'{"type": "Nope"}\n',
                                  b'{"type": "Ready", "pid": 1, "extra": 2}\n'])
def test_a_line_that_is_no_message_is_refused(line):
    with pytest.raises(DecodeError, match="not a worker message"):
        decode(line)


def test_a_jobs_pipe_carries_its_results_typed():
    """What a job process writes (progress, then its answer), read back by the worker, in
    pieces as a pipe hands them over."""
    written = progress_to_bytes(RESULT) + answer_to_bytes(JobAnswer(result=RESULT))
    buffer = bytearray(written[:40])
    assert read_job_lines(buffer).progress == []  # a line still being written waits
    buffer.extend(written[40:])
    output = read_job_lines(buffer)
    assert output.progress == [RESULT] and not output.malformed
    assert output.answer is not None and output.answer.result == RESULT
    (finding,) = output.answer.result.diagnostics
    assert finding.quick_fixes == FINDING.quick_fixes and finding.data == FINDING.data
