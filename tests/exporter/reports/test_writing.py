"""Reports are written beside their file and swapped in (exporter/reports/writing.py)."""

from __future__ import annotations

import subprocess
import sys

from exporter.reports.writing import write_text_atomically
from tests.conftest import REPO

KILLED_WRITE = """\
import os, signal, sys, tempfile
from pathlib import Path
from exporter.reports import writing

def killed(*args, **kwargs):
    made = original(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)  # between the temporary file and the rename
original = tempfile.mkstemp
writing.tempfile.mkstemp = killed
writing.write_text_atomically(Path(sys.argv[1]), "new report")
"""


def test_a_killed_writes_temporary_file_is_removed_by_the_next_write(tmp_path):
    """Issue 39: a SIGKILLed run left `.report.json.*.tmp` that no later run removed."""
    report = tmp_path / "report.json"
    report.write_text("old report")
    other = tmp_path / ".other.json.1.x.tmp"  # another file's: never touched
    other.write_text("")
    killed = subprocess.run([sys.executable, "-c", KILLED_WRITE, str(report)], cwd=REPO)
    assert killed.returncode == -9
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith(".report.json.")]
    assert len(left) == 1 and left[0].endswith(".tmp")
    assert report.read_text() == "old report"
    write_text_atomically(report, "newer report")
    assert report.read_text() == "newer report"
    assert sorted(p.name for p in tmp_path.iterdir()) == [other.name, "report.json"]
