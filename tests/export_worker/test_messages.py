"""The worker protocol (export_worker/messages.py): each message survives its line, typed
fields and all, and a line that is no message is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from export_worker.messages import (
    CheckAnswer,
    DecodeError,
    GraphAnswer,
    JobDone,
    JobError,
    JobInputs,
    JobProcess,
    JobProgress,
    JobRequest,
    Ready,
    RunAnswer,
    SaveAnswer,
    WorkerStatus,
    answer_to_bytes,
    decode,
    done_to_bytes,
    encode,
    if_stopped_to_bytes,
    progress_frame,
    progress_to_bytes,
    read_job_lines,
    stopped_answer,
)
from exporter.config.options import ExportOptions
from exporter.findings.diagnostics import Diagnostic, FindingData, Location
from exporter.findings.fixes import FixEdit, QuickFix
from exporter.findings.positions import Range
from exporter.findings.result import CheckResult, StageState, StageStatus, TargetResult
from exporter.source.targets import PragmaOption, Target, discover
from exporter.toolchain.report import ToolchainReport
from tests.conftest import FIXTURES
from tests.exporter.reports.test_run import REPORT

TOOLCHAIN = ToolchainReport({"torch": "2.13.0", "onnx": None}, True, ["2.13.0", "2.14.1"],
                            {"staged-translation": ""}, {"shared-provenance": "off: why"},
                            None)


PATH = Path("/w/m.py")
FINDING = Diagnostic("ONNX601", "`dynamo=False` ...", Location(PATH, Range.of(5, 46, 5, 58)),
                     target="", data=FindingData(sizes={"batch": 5}, operator="aten::i0",
                                                 arguments=["self"]),
                     quick_fixes=(QuickFix("Remove", (FixEdit(PATH, Range.of(5, 44, 5, 58),
                                                              ""),)),))
TARGET = Target("Model", PATH, "function", "build", Range.of(6, 1, 9, 20),
                pragma=Range.of(5, 3, 5, 60),
                options={"args": PragmaOption("args", "(torch.randn(2),)", Range.of(5, 22, 5, 39))},
                first_line=6, rebound_at=12, export_call_line=8)
RESULT = CheckResult(targets=[TargetResult("T", PATH, Range.of(4, 7, 4, 8), [
    StageStatus("load", StageState.PASSED, 0.5), StageStatus("capture", StageState.FAILED)],
    [FINDING])], files=[PATH])


@pytest.mark.parametrize("message", [
    Ready(12, 3.5, TOOLCHAIN, ["ONNXLENS_X is not a setting"]),
    JobDone("1", CheckAnswer(RESULT, JobInputs({"/w/m.py": "abc"})), 2.5, 13,
            library_imports=["timm"]),
    JobDone("2", RunAnswer(error="cannot run T", diagnostics=[FINDING]), 0.1, 14),
    JobProgress("1", RESULT),
    JobDone("3", RunAnswer(REPORT, "# Model"), 1.0, 15),
    JobDone("4", SaveAnswer(True, ["/w/m.onnx", "/w/m.onnx.data"], [FINDING]), 1.0, 16),
    JobDone("5", SaveAnswer(False, error="the export failed"), 1.0, 16),
    JobDone("6", GraphAnswer(RESULT, error="no ONNX graph"), 1.0, 17),
    JobDone("7", JobError("no export target 'T' in m.py"), 0.1, 18),
    JobDone("8", JobError("KeyError: 'x'", internal=True), 0.1, 18),
    WorkerStatus("s1", 12, [JobProcess("j1", 13)], None, TOOLCHAIN, ["transformers"]),
    JobRequest("check", TARGET, "/w", text="x = 1\n",
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
    answer = CheckAnswer(RESULT)
    written = progress_to_bytes(RESULT) + answer_to_bytes(answer, ["transformers", "timm"])
    buffer = bytearray(written[:40])
    assert read_job_lines(buffer).progress == []  # a line still being written waits
    buffer.extend(written[40:])
    output = read_job_lines(buffer)
    assert not output.malformed and output.library_imports == ["transformers", "timm"]
    (progress,) = output.progress
    assert decode(progress_frame("7", progress)) == JobProgress("7", RESULT)
    assert output.answer is not None
    done = decode(done_to_bytes("7", output.answer, 2.5, 13, 300, output.library_imports))
    assert done == JobDone("7", answer, 2.5, 13, 300, ["transformers", "timm"])
    assert decode(encode(done)) == done  # the same message as the worker's own encoding
    assert isinstance(done, JobDone) and isinstance(done.answer, CheckAnswer)
    (finding,) = done.answer.result.diagnostics
    assert finding.quick_fixes == FINDING.quick_fixes and finding.data == FINDING.data


@pytest.mark.parametrize("line", [b"A{not json\n", b"A[1, 2]\n", b"P\"text\"\n", b"I{}\n",
                                  b"Xnothing\n", b"I[1]\n"])
def test_a_pipe_line_that_is_not_what_a_job_writes_is_malformed(line):
    output = read_job_lines(bytearray(line))
    assert output.malformed
    assert output.answer is None and output.progress == [] and output.library_imports == []


def test_the_verdict_a_killed_job_left_arrives_as_its_check_answer():
    """A job killed at its time limit after its export was known to fail: the worker answers
    with the result the job wrote to its pipe (``K``), a check's answer like any other."""
    output = read_job_lines(bytearray(if_stopped_to_bytes(RESULT)))
    assert output.if_stopped is not None
    done = decode(done_to_bytes("9", stopped_answer(output.if_stopped), 300.0, 13, 80))
    assert done == JobDone("9", CheckAnswer(RESULT), 300.0, 13, 80)


def test_an_answer_of_an_unknown_kind_is_refused():
    line = encode(JobDone("1", JobError("x"), 0.1, 2)).replace(b'"error"}', b'"nope"}')
    with pytest.raises(DecodeError, match="not a worker message"):
        decode(line)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*/*.py")),
                         ids=lambda path: f"{path.parent.name}/{path.name}")
def test_every_fixtures_targets_reach_the_worker_as_found(path: Path):
    """The worker checks the target the front end found (it does not look for it again): what
    it decodes is that target, spans, pragma options and all."""
    for target in discover(path, path.read_text(encoding="utf-8")).targets:
        request = JobRequest("check", target, str(path.parent))
        assert decode(encode(request)).target == target
