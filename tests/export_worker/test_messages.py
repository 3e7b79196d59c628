"""The worker protocol (export_worker/messages.py): each message survives its line, typed
fields and all, and a line that is no message is refused."""

from __future__ import annotations

import pytest

from export_worker.messages import (
    DecodeError,
    JobProcess,
    JobRequest,
    Ready,
    WorkerStatus,
    decode,
    encode,
)
from exporter.config.options import ExportOptions
from exporter.toolchain.report import ToolchainReport

TOOLCHAIN = ToolchainReport({"torch": "2.13.0", "onnx": None}, True, ["2.13.0", "2.14.1"],
                            {"staged-translation": ""}, {"shared-provenance": "off: why"},
                            None)


@pytest.mark.parametrize("message", [
    Ready(12, 3.5, TOOLCHAIN, ["ONNXLENS_X is not a setting"]),
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
