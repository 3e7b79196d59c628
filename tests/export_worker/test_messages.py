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
    done_to_bytes,
    encode,
    progress_frame,
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


def test_a_jobs_pipe_is_forwarded_as_the_messages_the_client_decodes_typed():
    """What a job process writes (progress, then its answer), read by the worker in pieces as
    a pipe hands them over and forwarded without decoding: the client gets the messages the
    worker would have encoded, typed fields and all."""
    answer = JobAnswer(result=RESULT, library_imports=["transformers", "timm"])
    written = progress_to_bytes(RESULT) + answer_to_bytes(answer)
    buffer = bytearray(written[:40])
    assert read_job_lines(buffer).progress == []  # a line still being written waits
    buffer.extend(written[40:])
    output = read_job_lines(buffer)
    assert not output.malformed and output.library_imports == ["transformers", "timm"]
    (progress,) = output.progress
    assert decode(progress_frame("7", progress)) == JobProgress("7", RESULT)
    assert output.answer is not None
    done = decode(done_to_bytes("7", output.answer, 2.5, 13, 300))
    assert done == JobDone("7", answer, 2.5, 13, 300)
    assert decode(encode(done)) == done  # the same message as the worker's own encoding
    assert isinstance(done, JobDone)
    (finding,) = done.answer.result.diagnostics
    assert finding.quick_fixes == FINDING.quick_fixes and finding.data == FINDING.data


@pytest.mark.parametrize("line", [b"A{not json\n", b"A[1, 2]\n", b"P\"text\"\n", b"I{}\n",
                                  b"Xnothing\n", b"I[1]\n"])
def test_a_pipe_line_that_is_not_what_a_job_writes_is_malformed(line):
    output = read_job_lines(bytearray(line))
    assert output.malformed
    assert output.answer is None and output.progress == [] and output.library_imports == []
