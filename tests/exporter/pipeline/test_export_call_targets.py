"""A function marked with a pragma that calls torch.onnx.export (itself or through a helper of
its file): each call is a target, checked with that call's own arguments as the installed
torch interprets them, and nothing is written (exporter/pipeline/intercepted_calls.py).
export_calls/legacy_script.py: the call at line 32 (through the helper ``save``, with
``dynamic_axes``) exports; the one at line 33 declares a batch dynamic that ``view(2, 12)``
fixes; the one at line 36 is in a branch not taken."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from onnxlens.cli import main

pytestmark = pytest.mark.every_torch

SCRIPT = Path(__file__).parent / "export_calls" / "legacy_script.py"


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    import contextlib
    import io
    import os

    workspace = tmp_path_factory.mktemp("export_calls")
    shutil.copy(SCRIPT, workspace / SCRIPT.name)
    (workspace / "pyproject.toml").write_text("")
    out, cwd = io.StringIO(), os.getcwd()
    os.chdir(workspace)
    try:
        with contextlib.redirect_stdout(out):
            main(["check", SCRIPT.name, "--format", "json"])
    finally:
        os.chdir(cwd)
    return workspace, json.loads(out.getvalue())


def test_each_call_is_a_target_located_at_the_call(checked):
    _, report = checked
    assert [(t["name"], t["range"]["start"]["line"], t["range"]["start"]["column"])
            for t in report["targets"]] == [
        ("export_all@32", 32, 5), ("export_all@33", 33, 5), ("export_all@36", 36, 9)]


def test_the_calls_are_checked_as_torch_onnx_export_runs_them(checked):
    _, report = checked
    verdicts = {t["name"]: t["ok"] for t in report["targets"]}
    found = {(d["rule"], d["target"], d["range"]["start"]["line"])
             for d in report["diagnostics"] if d["target"]}
    assert verdicts == {"export_all@32": True, "export_all@33": False, "export_all@36": True}
    # the batch that `dynamic_axes` declared dynamic is fixed by `view(2, 12)`
    assert ("ONNX102", "export_all@33", 19) in found
    assert ("ONNX005", "export_all@36", 36) in found  # not reached: not checked, not failed
    stages = {t["name"]: {s["name"]: s["state"] for s in t["stages"]}
              for t in report["targets"]}
    assert stages["export_all@32"]["dynamic"] == "passed"  # the converted batch is dynamic


def test_nothing_is_written_where_the_calls_point(checked):
    workspace, _ = checked
    assert sorted(p.name for p in workspace.iterdir()) == ["legacy_script.py", "pyproject.toml"]


def test_the_verdicts_are_the_plain_exporters(tmp_path):
    """The same script run by plain Python: the call at line 32 writes its model, the one at
    line 33 raises."""
    shutil.copy(SCRIPT, tmp_path / SCRIPT.name)
    run = subprocess.run([sys.executable, SCRIPT.name], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode != 0
    assert (tmp_path / "encoder.onnx").is_file()
    assert not (tmp_path / "flat.onnx").exists()
    assert f'{SCRIPT.name}", line 33, in export_all' in run.stderr
