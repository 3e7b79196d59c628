"""What the CLI reads: regular Python files of at most 10 MB. A FIFO named ``*.py`` hung
``onnxlens check .`` for ever, and ``zero.py -> /dev/zero`` was read until the kernel killed
the process (issue "nothing lost, round 3", item 5). The real CLI, in a subprocess."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import pytest

from exporter.source.text import MAX_SOURCE_BYTES
from tests.conftest import REPO

CLEAN_MODEL = """import torch


# onnx-export: args=(torch.randn(2, 3),)
class Doubler(torch.nn.Module):
    def forward(self, x):
        return x * 2
"""


def _limited_memory() -> None:
    """Should a device be read again, the subprocess fails instead of the machine."""
    resource.setrlimit(resource.RLIMIT_AS, (6 * 1024 ** 3, 6 * 1024 ** 3))


def _onnxlens(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    # a hang guard, not a timing assertion: before the fix the run never ended
    return subprocess.run([sys.executable, "-m", "onnxlens", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300,
                          preexec_fn=_limited_memory,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def test_a_fifo_a_device_and_a_huge_file_in_a_checked_directory_are_named_not_read(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    os.mkfifo(models / "a_fifo.py")  # sorted first: it blocked the walk before the rest
    with open(models / "huge.py", "wb") as huge:  # sparse: takes no disk space
        huge.truncate(MAX_SOURCE_BYTES + 1024 * 1024)
    (models / "zero.py").symlink_to("/dev/zero")
    (models / "model.py").write_text(CLEAN_MODEL)

    done = _onnxlens("check", "models", "--format", "json", cwd=tmp_path)

    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert [t["name"] for t in report["targets"]] == ["Doubler"]  # the rest is checked
    assert report["targets"][0]["ok"] is True
    found = {os.path.basename(d["path"]): (d["rule"], d["severity"], d["message"])
             for d in report["diagnostics"]}
    assert found["a_fifo.py"] == (
        "ONNX002", "error", "The file cannot be read: it is a FIFO, and onnxlens reads only "
        "regular files; it is not checked.")
    assert found["huge.py"] == (
        "ONNX002", "error", "The file cannot be read: it is 11.0 MB, and onnxlens reads "
        "Python files of at most 10.0 MB; it is not checked.")
    # the CLI reports a symlink at the file it points to
    assert found["zero"] == (
        "ONNX002", "error", "The file cannot be read: it is a character device, and "
        "onnxlens reads only regular files; it is not checked.")
    assert len(report["diagnostics"]) == 3


@pytest.mark.parametrize("make, kind", [
    (lambda path: os.mkfifo(path), "a FIFO"),
    (lambda path: path.symlink_to("/dev/zero"), "a character device"),
])
def test_a_fifo_or_a_device_named_on_the_command_line_is_refused(tmp_path, make, kind):
    make(tmp_path / "model.py")

    done = _onnxlens("check", "model.py", cwd=tmp_path)

    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (f"onnxlens: error: model.py is {kind}: onnxlens reads only "
                           "regular files\n")
