"""A function marked with a pragma that calls torch.onnx.export (itself or through a helper of
its file): each call is a target, checked with that call's own arguments as the installed
torch interprets them; the other calls export as the plain exporter does, and nothing is
written (exporter/pipeline/intercepted_calls.py).
export_calls/legacy_script.py: the call at line 32 (through the helper ``save``, with
``dynamic_axes``) exports; the one at line 33 declares a batch dynamic that ``view(2, 12)``
fixes, and raises when run, so the one at line 36 is never reached.
Issue 38 (export_calls/earlier_programs.py, exported_files_read_back.py,
swallowed_failures.py, module_level_exports.py; each module's docstring says what it does):
the code after an earlier call uses what it returned and the files it wrote, the target's own
failure is its verdict wherever the script swallows it, and a check writes nothing."""

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
    assert verdicts == {"export_all@32": True, "export_all@33": False, "export_all@36": False}
    # the batch that `dynamic_axes` declared dynamic is fixed by `view(2, 12)`
    assert ("ONNX102", "export_all@33", 19) in found
    # the call at line 33 raises when run (as the plain exporter runs it), so the function
    # never gets to line 36: said at line 33
    assert ("ONNX003", "export_all@36", 33) in found
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


# -- issue 38: the calls that are not the target export as the plain exporter does, the
# target's own call is its verdict wherever the script swallows it, and nothing is written --

WORKSPACE_FILES = ("earlier_programs.py", "program_helpers.py", "exported_files_read_back.py",
                   "swallowed_failures.py", "module_level_exports.py", "export_on_import.py")
CHECKED_FILES = ("earlier_programs.py", "exported_files_read_back.py", "swallowed_failures.py",
                 "module_level_exports.py")
#: files the workspace holds before the check, with the names its scripts write: stale, so a
#: read that missed the check's copy would fail, and old, so a write would show in the mtime
STALE = ("enc.onnx", "module_level.onnx", "a.onnx.data")


def snapshot(root: Path) -> dict[str, tuple[int, int, bytes]]:
    """``root`` and every file and directory under it: size, mtime (ns) and content (a
    directory's mtime changes when an entry is made or removed in it)."""
    return {path.relative_to(root).as_posix():
            (path.stat().st_size, path.stat().st_mtime_ns,
             path.read_bytes() if path.is_file() else b"")
            for path in [root, *sorted(root.rglob("*"))]}


@pytest.fixture(scope="module")
def issue_38(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, dict, Path]:
    """One check of the issue's scripts: the report, the workspace before and after, and the
    temporary directory the check ran with (where its scratch directories were)."""
    import contextlib
    import io
    import os

    workspace = tmp_path_factory.mktemp("issue_38")
    for name in WORKSPACE_FILES:
        shutil.copy(SCRIPT.parent / name, workspace / name)
    (workspace / "pyproject.toml").write_text("")
    (workspace / "out").mkdir()
    for name in (*STALE, "out/kept.txt"):
        (workspace / name).write_bytes(b"stale, not a model")
    for path in [workspace, *workspace.rglob("*")]:
        os.utime(path, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    before = snapshot(workspace)
    temporary = tmp_path_factory.mktemp("issue_38_tmp")
    out, cwd, saved_tmpdir = io.StringIO(), os.getcwd(), os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(temporary)  # the check's processes make their scratch there
    os.chdir(workspace)
    try:
        with contextlib.redirect_stdout(out):
            main(["check", *CHECKED_FILES, "--format", "json"])
    finally:
        os.chdir(cwd)
        if saved_tmpdir is None:
            os.environ.pop("TMPDIR")
        else:
            os.environ["TMPDIR"] = saved_tmpdir
    return json.loads(out.getvalue()), before, snapshot(workspace), temporary


def findings(report: dict, target: str) -> list[tuple]:
    return [(d["rule"], d["severity"], d["path"], d["range"]["start"]["line"],
             d["range"]["start"]["column"], d["range"]["end"]["line"],
             d["range"]["end"]["column"]) for d in report["diagnostics"]
            if d["target"] == target]


def verdict(report: dict, target: str) -> bool:
    [found] = [t for t in report["targets"] if t["name"] == target]
    return found["ok"]


@pytest.mark.parametrize("target", [
    "optimize_then_save@36",  # p = export(...); p.optimize(); p.save(...), then the target
    "through_a_helper@43",  # a helper of the file returns the program; its model_proto read
    "from_another_file@50",  # a helper of another file exports, saves and returns it
    "in_a_thread@60",  # the earlier program made in a thread, saved after the join
    "earlier_raises_and_is_caught@75",  # the earlier export raises, `except Exception` goes on
    "export_again@43",  # the program a module-level call made: optimize(), names read
])
def test_an_earlier_call_exports_as_the_plain_exporter_and_the_target_is_reached(issue_38,
                                                                                target):
    report = issue_38[0]
    assert verdict(report, target) is True
    assert findings(report, target) == []


def test_the_program_an_earlier_call_returns_decides_a_branch(issue_38):
    """``if program is None:`` is not taken: the earlier call returned its program, so the
    call in the branch is not reached (not checked, not failed)."""
    report = issue_38[0]
    assert verdict(report, "branch_not_taken@82") is True
    assert findings(report, "branch_not_taken@82") == [
        ("ONNX005", "info", "earlier_programs.py", 82, 9, 82, 26)]
    [message] = [d["message"] for d in report["diagnostics"]
                 if d["target"] == "branch_not_taken@82"]
    assert message == ("The export call at line 82 is not checked: `branch_not_taken()` "
                       "returned without reaching it.")


@pytest.mark.parametrize("target", [
    "optimize_then_save@33", "through_a_helper@41", "in_a_thread@56", "branch_not_taken@80",
    "Tripling"])
def test_the_earlier_calls_are_targets_of_their_own(issue_38, target):
    report = issue_38[0]
    assert verdict(report, target) is True
    assert findings(report, target) == []


def test_an_earlier_call_that_raises_stops_the_function_there(issue_38):
    """As when run: the first export raises, the second call is never reached; said at the
    call that raised, not as a later line's NoneType error."""
    report = issue_38[0]
    assert verdict(report, "earlier_raises@66") is False
    assert findings(report, "earlier_raises@66") == [
        ("ONNX003", "error", "earlier_programs.py", 65, 5, 65, 62)]
    [message] = [d["message"] for d in report["diagnostics"]
                 if d["target"] == "earlier_raises@66"]
    assert message == ("An earlier torch.onnx.export call raised TorchExportError: Failed to "
                       "export the model with torch.export. `earlier_raises()` stops there, as "
                       "it does when run, and never reaches the export call at line 66.")
    # the call that raised is a target too, with its own failure
    assert [f[0] for f in findings(report, "earlier_raises@65")] == ["ONNX101"]


@pytest.mark.parametrize("target", [
    "load_it@39",  # onnx.load of the exported file (a stale one sits in the workspace)
    "run_it@49",  # an ONNX Runtime session of it, run and compared
    "look_at_it@59",  # os.path.getsize/isfile, Path.exists/read_bytes, onnx.checker by path
    "with_external_data@69",  # ONNXProgram.save with external data, onnx.load reads both
    "absolute_and_saved_copy@79",  # an absolute path, open(); onnx.save's copy read back
])
def test_the_script_reads_the_file_it_just_exported(issue_38, target):
    report = issue_38[0]
    assert verdict(report, target) is True
    assert findings(report, target) == []


@pytest.mark.parametrize("target", [
    "bare_except@33", "base_exception@41", "plain_exception@49", "suppressed@57",
    "in_a_thread@62",  # a lambda run by a thread
    "in_a_pool@70",  # a lambda run by a pool, its future's exception read
    "through_a_helper@76",  # a helper of the file with a bare except
    "local_worker@84",  # a local function run by a thread, `except BaseException` in it
])
def test_the_targets_failure_is_its_verdict_wherever_the_script_swallows_it(issue_38, target):
    report = issue_38[0]
    assert verdict(report, target) is False
    assert findings(report, target) == [
        ("ONNX101", "error", "swallowed_failures.py", 15, 12, 15, 23)]
    [message] = [d["message"] for d in report["diagnostics"] if d["target"] == target]
    assert message.startswith("`if x.sum() > 0:  # decided by the values: torch.export cannot "
                              "trace it` depends on the values inside a tensor")


@pytest.mark.parametrize("written, by", [
    ("module_level.onnx", "a module-level call (a stale file of that name stays as it was)"),
    ("module_level_saved.onnx", "ONNXProgram.save at module level"),
    ("module_level_onnx_save.onnx", "onnx.save at module level"),
    ("module_level_thread.onnx", "a module-level thread running torch.onnx.export"),
    ("helper_module.onnx", "the import of another file whose top level exports"),
    ("onnx_export_*.md", "report=True's report, in artifacts_dir (the working directory)"),
    ("a.onnx", "p.save() after an earlier call (a stale a.onnx.data stays as it was)"),
    ("elsewhere.onnx", "a helper of another file called by a function"),
    ("enc.onnx", "an earlier call of a function (a stale file of that name stays)"),
    ("wide.onnx.data", "external data written beside a saved model"),
    ("absolute.onnx", "an absolute path"),
    ("branching.onnx", "an earlier call that raised"),
])
def test_no_export_writes_into_the_workspace(issue_38, written, by):
    _, before, after, _ = issue_38
    assert sorted(Path(name).name for name in after if Path(name).match(written)) == sorted(
        Path(name).name for name in before if Path(name).match(written)), by
    assert {name: state for name, state in after.items() if Path(name).match(written)} == {
        name: state for name, state in before.items() if Path(name).match(written)}, by


def test_a_check_writes_nothing_into_the_workspace(issue_38):
    """Module-level exports (direct, ONNXProgram.save, onnx.save, report=True, a thread,
    another file's import), the earlier calls of every function: no file appears, and the
    stale files with the names the scripts write are left as they were."""
    report, before, after, _ = issue_38
    assert len(report["targets"]) == 33  # every target was checked
    assert after == before


def test_the_scratch_directories_are_removed(issue_38):
    temporary = issue_38[3]
    assert [p.name for p in temporary.iterdir() if p.name.startswith("onnxlens-exports-")] == []
