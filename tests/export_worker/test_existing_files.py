"""A job replaces or truncates no file that existed before it started, whatever code reaches it
(export_worker/existing_files.py; issue "nothing lost, round 4", item 3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import REPO

PROBE = """\
import os, sys, time
from pathlib import Path
from export_worker.existing_files import Protection, protect_existing_files

root, outside = Path(sys.argv[1]), Path(sys.argv[2])
old, kept, cache = root / "old.bin", root / "asked.onnx", root / "cache" / "c.bin"
for path in (old, kept, cache, outside):
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(b"before")
time.sleep(0.01)
protect_existing_files(Protection(time.time_ns(), (str(root),), (str(root / "cache"),),
                                  (str(kept),)))
attempts = {
    "open w": lambda: open(old, "w").close(),
    "write_bytes": lambda: old.write_bytes(b"after"),
    "os.open O_TRUNC": lambda: os.close(os.open(old, os.O_WRONLY | os.O_TRUNC)),
    "os.replace onto": lambda: [(root / "new.tmp").write_bytes(b"x"),
                                os.replace(root / "new.tmp", old)],
    "os.truncate": lambda: os.truncate(old, 0),
    "append": lambda: open(old, "a").close(),
    "the file asked for": lambda: kept.write_bytes(b"after"),
    "a cache": lambda: cache.write_bytes(b"after"),
    "outside the roots": lambda: outside.write_bytes(b"after"),
    "a new file, twice": lambda: [(root / "made.txt").write_text(t) for t in "ab"],
}
for name, attempt in attempts.items():
    try:
        attempt()
        print(name, "done")
    except PermissionError as error:
        print(name, "refused", "onnxlens" in str(error))
print("old", old.read_bytes().decode())
"""


def test_what_a_job_may_not_replace(tmp_path):
    """In a process of its own: an audit hook stays for the process's life."""
    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "root"),
                           str(tmp_path / "elsewhere.bin")], cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout.splitlines() == [
        "open w refused True", "write_bytes refused True", "os.open O_TRUNC refused True",
        "os.replace onto refused True", "os.truncate refused True", "append done",
        "the file asked for done", "a cache done", "outside the roots done",
        "a new file, twice done", "old before"]


INSTALLED = """\
from pathlib import Path

import torch
from torch.onnx import export as onnx_export  # bound at import: before any interception


def overwrite(path):
    Path(path).write_bytes(b"overwritten by an installed helper")


def export_over(model, path):
    onnx_export(model, (torch.randn(2, 3),), str(path), dynamo=True)
"""

TARGETS = """\
import shutil
import threading
from pathlib import Path

import torch
import installed_writer

HERE = Path(__file__).parent


class Small(torch.nn.Module):
    def forward(self, x):
        return x * 2


# onnx-export: args=(torch.randn(2, 3),)
def at_import_helper():
    installed_writer.overwrite(HERE / "precious.onnx")
    return Small()


# onnx-export: args=(torch.randn(2, 3),)
def in_a_thread():
    worker = threading.Thread(target=lambda: (HERE / "precious.onnx").write_bytes(b"thread"))
    worker.start()
    worker.join()
    return Small()


# onnx-export: args=(torch.randn(2, 3),)
def copied_over():
    shutil.copyfile(HERE / "other.bin", HERE / "precious.onnx")
    return Small()


# onnx-export: args=(torch.randn(2, 3),)
def exported_by_a_helper_imported_ahead():
    installed_writer.export_over(Small(), HERE / "precious.onnx")
    return Small()


# onnx-export: args=(torch.randn(2, 3),)
def program_saved():
    program = torch.onnx.export(Small(), (torch.randn(2, 3),), dynamo=True)
    program.save(str(HERE / "precious.onnx"))
    return Small()
"""


def test_a_check_replaces_no_file_of_the_users_whatever_writes_it(tmp_path):
    """A model's code that overwrites a file of the workspace (through an installed helper,
    one the worker imported ahead after the first job whose `torch.onnx.export` was bound
    before any interception, in a thread, by shutil, by ONNXProgram.save) leaves it as it
    was; the target's finding says why its code failed."""
    project, site = tmp_path / "project", tmp_path / "site"
    project.mkdir()
    site.mkdir()
    (site / "installed_writer.py").write_text(INSTALLED)
    (project / "pyproject.toml").write_text("")
    (project / "models.py").write_text(textwrap.dedent(TARGETS))
    (project / "other.bin").write_bytes(b"other")
    precious = project / "precious.onnx"
    precious.write_bytes(b"the user's model")
    before = precious.stat()
    done = subprocess.run(
        [str(Path(sys.executable).parent / "onnxlens"), "check", "--format", "json",
         "models.py", "--jobs", "1"], cwd=project, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(site)})
    assert precious.read_bytes() == b"the user's model"
    assert precious.stat().st_mtime_ns == before.st_mtime_ns
    report = json.loads(done.stdout)
    failed = {d["target"]: d["message"] for d in report["diagnostics"]
              if d["severity"] == "error"}
    # (a thread's exception ends the thread, as in Python, not the target)
    assert set(failed) == {"at_import_helper", "copied_over"}, failed
    assert all("a check replaces no file that existed before it" in message
               for message in failed.values()), failed
