"""``onnxlens check`` on the shared export worker: each target in its own process, so a
crash, an exit, a native loop or a memory hog costs that target only, and ``--jobs``
changes how fast a report comes, never what it says."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from onnxlens.cli import main
from tests.conftest import FIXTURES, REPO, process_exists
from tests.warm_side_effects import python_path_with
from tests.warm_side_effects import workspace as side_effect_workspace

FAULTS = Path(__file__).parent / "faults"
TIMEOUT = 5


def test_faults_cost_only_their_own_target(tmp_path):
    """The acceptance test of issue "nothing lost": before, the segfault ended the whole
    run with exit 139 and no report."""
    report_path = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "onnxlens", "check", str(FAULTS), "--root", str(FAULTS),
         "--format", "json", "-o", str(report_path), "--timeout", str(TIMEOUT),
         "--memory-limit-mb", "1024", "--jobs", "2"],
        capture_output=True, text=True, timeout=300, cwd=FAULTS)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    report = json.loads(report_path.read_text())
    by_target = {t["name"]: t for t in report["targets"]}
    assert set(by_target) == {"Good", "Segfault", "ExitsAtImport", "NativeLoop", "MemoryHog"}
    assert by_target["Good"]["ok"] is True

    found = {d["target"]: d for d in report["diagnostics"]}
    assert set(found) == {"Segfault", "ExitsAtImport", "NativeLoop", "MemoryHog"}
    expected = {  # rule, file, line of the class name, what the message says
        "Segfault": ("ONNX902", "segfault.py", 9, "killed by signal SIGSEGV"),
        "ExitsAtImport": ("ONNX902", "exit_at_import.py", 11, "exited with status 3"),
        "NativeLoop": ("ONNX901", "native_loop.py", 7, f"did not finish within {TIMEOUT} s"),
        "MemoryHog": ("ONNX903", "memory_hog.py", 7, "memory limit of 1024 MB"),
    }
    for name, (rule, path, line, words) in expected.items():
        diagnostic = found[name]
        assert (diagnostic["rule"], diagnostic["path"], diagnostic["range"]["start"]["line"]) \
            == (rule, path, line), diagnostic
        assert words in diagnostic["message"]
        assert diagnostic["severity"] == "error"
    # the native loop was stopped at its deadline, not when the run ended
    (stage,) = by_target["NativeLoop"]["stages"]
    assert stage["state"] == "failed" and stage["seconds"] < TIMEOUT + 5


AFTER_VERDICT = Path(__file__).parent / "after_verdict"


def test_a_check_the_worker_kills_after_the_export_is_known_to_fail_keeps_that_verdict():
    """Issue 42: a timeout never stands where the exporter answers. Each model fails at
    capture (as the plain exporter does, in seconds), then blocks in the draft export where
    the job's own timer cannot stop it (a native loop, a wait with the timer's signal
    blocked); the worker kills it at the time limit. The verdict known before the kill is
    the answer, at the failing line (through decorators too), not ONNX901."""
    timeout = 10  # room for the capture to fail on a busy machine first
    done = subprocess.run(
        [sys.executable, "-m", "onnxlens", "check", str(AFTER_VERDICT), "--root",
         str(AFTER_VERDICT), "--format", "json", "--timeout", str(timeout), "--jobs", "2"],
        capture_output=True, text=True, timeout=300, cwd=AFTER_VERDICT)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    found = {(d["target"], d["rule"], d["range"]["start"]["line"]) for d in report["diagnostics"]}
    assert found == {("BranchThenNativeLoop", "ONNX101", 22),
                     ("SizeFromValueThenBlocked", "ONNX101", 32), ("router", "ONNX101", 53)}
    for target in report["targets"]:
        capture = next(s for s in target["stages"] if s["name"] == "capture")
        assert capture["state"] == "failed"
        assert capture["reason"].startswith(f"stopped at the time limit ({timeout} s) after the "
                                            "export was known to fail at capture"), target


def _report(paths: list[Path], jobs: int, capsys: pytest.CaptureFixture[str]) -> dict:
    status = main(["check", *map(str, paths), "--root", str(REPO), "--format", "json",
                   "--jobs", str(jobs)])
    report = json.loads(capsys.readouterr().out)
    report["status"] = status
    return report


def _verdicts(report: dict) -> dict:
    """What a report says, without the figures that vary from run to run (times, and the
    error sizes of models with random weights)."""
    return {
        "status": report["status"],
        "targets": [(t["path"], t["name"], t["ok"], [s["state"] for s in t["stages"]])
                    for t in report["targets"]],
        "diagnostics": [(d["rule"], d["path"], d["range"], d["target"]) for d in
                        report["diagnostics"]],
    }


def test_jobs_in_parallel_give_the_same_report_as_one_at_a_time(capsys):
    paths = [REPO / "examples", FIXTURES / "clean", FIXTURES / "mixed",
             FIXTURES / "helper_module", FIXTURES / "no_translation"]
    one = _report(paths, 1, capsys)
    two = _report(paths, 2, capsys)
    assert len(one["targets"]) >= 10
    assert _verdicts(one) == _verdicts(two)


def test_text_report_streams_files_in_order(capsys):
    """Findings are printed per file as soon as it and the files before it are done, in
    the order of the paths, whichever job finishes first."""
    files = [FIXTURES / "no_translation" / "model.py", FIXTURES / "clean" / "factory.py",
             REPO / "examples" / "failing" / "special_functions.py"]
    assert main(["check", *map(str, files), "--jobs", "3"]) == 1
    out = capsys.readouterr().out
    first = out.index("no_translation/model.py:")
    last = out.index("special_functions.py:")
    assert first < last
    assert out.rstrip().splitlines()[-1].startswith("Checked 3 target(s) in 3 file(s)")


@pytest.mark.parametrize(("option", "value", "words"), [
    ("--jobs", "0", "must be between 1 and 256"),
    ("--jobs", "two", "not a whole number"),
    ("--memory-limit-mb", "12", "must be between 256 and 1048576"),
    ("--memory-limit-mb", "nan", "not a whole number of megabytes"),
])
def test_bad_limits_are_usage_errors(option, value, words, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["check", str(FIXTURES / "clean"), option, value])
    assert exit_info.value.code == 2
    assert words in capsys.readouterr().err


def test_an_interrupted_run_still_reports_what_it_checked(tmp_path):
    """SIGINT (Ctrl-C, or a CI job cancelled with SIGTERM) used to lose every result."""
    (tmp_path / "a_fails.py").write_text((FIXTURES / "no_translation" / "model.py").read_text())
    (tmp_path / "z_forever.py").write_text(
        (REPO / "tests" / "lsp" / "fixtures" / "forever" / "model.py").read_text())
    run = subprocess.Popen(
        [sys.executable, "-m", "onnxlens", "check", str(tmp_path), "--root", str(tmp_path),
         "--timeout", "0", "--jobs", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert run.stdout is not None
        streamed = ""
        while "error[ONNX201]" not in streamed:  # a_fails.py is done and printed
            line = run.stdout.readline()
            assert line, "the run ended before printing a_fails.py's findings"
            streamed += line
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 130, err
    assert "onnxlens: interrupted: 1 target(s) were not checked" in err
    assert "Traceback" not in err
    assert out.rstrip().endswith("Checked 1 target(s) in 2 file(s): 2 errors, 0 warnings "
                                 "(1 target(s) failing).")


def test_user_code_sees_real_stdio_and_the_json_report_stays_clean():
    """Issue 24: modules that run ``faulthandler.enable()`` or ``sys.stdout.reconfigure()``
    at import, or whose forward writes to ``sys.stdout.buffer`` or hands ``sys.stdout`` to a
    subprocess, got a false ONNX002/ONNX004 (a StringIO stood in for stdout). What they print
    goes to the worker's stderr: neither into the JSON report nor onto the terminal."""
    folder = FIXTURES / "stdio"
    done = subprocess.run(
        [sys.executable, "-m", "onnxlens", "check", str(folder), "--root", str(folder),
         "--format", "json"],
        capture_output=True, text=True, timeout=300, cwd=folder)
    report = json.loads(done.stdout)
    assert report["diagnostics"] == []
    # every stage passed, but deploy: skipped, no runtime named besides ONNX Runtime's CPU
    assert {t["name"]: {s["state"] for s in t["stages"] if s["name"] != "deploy"}
            for t in report["targets"]} == {
        name: {"passed"} for name in ("ConfiguresStdioAtImport", "WritesToStdout", "Noisy")}
    assert done.returncode == 0
    assert done.stderr == ""


def test_a_package_changing_global_state_changes_no_other_files_verdict(
        tmp_path, monkeypatch, capsys):
    """Issue 24 (defect 4): after uses.py's check imported a package that sets torch's
    default dtype to float64, the worker imported it ahead of plain.py's check, which then
    failed (a false ONNX004) with --jobs 1 only. Such a package is never imported ahead:
    one at a time, two at a time and without warm imports give the same report."""
    site, project = side_effect_workspace(tmp_path)
    monkeypatch.setenv("PYTHONPATH", python_path_with(site))
    files = [project / "uses.py", project / "plain.py"]  # uses.py's check runs first

    def report(jobs: int) -> dict:
        status = main(["check", *map(str, files), "--root", str(project), "--format", "json",
                       "--jobs", str(jobs)])
        found = json.loads(capsys.readouterr().out)
        found["status"] = status
        return _verdicts(found)

    one = report(1)
    two = report(2)
    monkeypatch.setenv("ONNXLENS_SHORTCUTS_OFF", "warm-imports")
    cold = report(1)
    assert [(Path(path).name, name, ok) for path, name, ok, _ in one["targets"]] == [
        ("uses.py", "UsesPackage", True), ("plain.py", "Mlp", True),
        ("plain.py", "Float32Input", True)]
    assert one["diagnostics"] == []
    assert one == two == cold


LSP_FIXTURES = REPO / "tests" / "lsp" / "fixtures"


def _check(paths: list[Path], out: Path, *options: str, root: Path = LSP_FIXTURES,
           guard: float = 300) -> tuple[subprocess.CompletedProcess[str], dict]:
    """``onnxlens check`` in a process of its own (in ``out``), its JSON report (``-o``)
    read back."""
    report_path = out / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "onnxlens", "check", *map(str, paths), "--root", str(root),
         "--format", "json", "-o", str(report_path), *options],
        capture_output=True, text=True, timeout=guard, cwd=out)
    assert report_path.exists(), done.stderr
    return done, json.loads(report_path.read_text())


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_model_that_takes_the_worker_down_twice_costs_only_its_own_target(tmp_path, jobs):
    """Issue "nothing lost, round 3", item 3: a model that ends its worker (here with
    ``os.kill(os.getppid(), SIGTERM)``), checked once and again in a new worker, aborted the
    whole run (exit 2, "the export worker could not start", no report); with --jobs 2 the
    target checked beside it got ONNX902 too. A job run again after its worker died runs
    alone, and the targets after it are checked in a new worker. ``breakpoint()`` and
    ``input()`` are a located ONNX004 that says why; ``sys.stdin.readline()`` reads
    end-of-file (the job's stdin is /dev/null, not the worker's request pipe)."""
    killer, terminal = LSP_FIXTURES / "kills_worker", LSP_FIXTURES / "terminal"
    done, report = _check([killer / "model.py", terminal / "model.py"], tmp_path,
                          "--jobs", jobs, "--timeout", "60")
    assert done.returncode == 1, done.stderr
    assert "could not start" not in done.stderr and "Traceback" not in done.stderr
    assert [(Path(t["path"]).parent.name, t["name"], t["ok"]) for t in report["targets"]] == [
        ("kills_worker", "KillsItsWorker", False), ("kills_worker", "Innocent", True),
        ("terminal", "Debugs", False), ("terminal", "Asks", False),
        ("terminal", "ReadsALine", True)]
    found = {d["target"]: d for d in report["diagnostics"]}
    assert set(found) == {"KillsItsWorker", "Debugs", "Asks"}
    lost = found["KillsItsWorker"]
    assert (lost["rule"], lost["range"]["start"]) == ("ONNX902", {"line": 8, "column": 7})
    assert "was killed by SIGTERM, twice" in lost["message"]
    debugs, asks = found["Debugs"], found["Asks"]
    assert (debugs["rule"], debugs["range"]["start"]) == ("ONNX004", {"line": 9, "column": 9})
    assert "breakpoint() stops in a debugger, which a checked model cannot do" \
        in debugs["message"]
    assert (asks["rule"], asks["range"]["start"]) == ("ONNX004", {"line": 16, "column": 23})
    assert "input() reads the terminal, which a checked model cannot do" in asks["message"]


def _pid_in(path: Path) -> int:
    return int(path.read_text())


def test_a_job_ends_with_its_process_and_takes_its_descendants_with_it(tmp_path):
    """Item 4: a module that leaves a child (and a grandchild in a session of its own)
    running kept the job's answer pipe open: a false ONNX901 at the timeout, and with
    ``--timeout 0`` the CLI never returned; both outlived the CLI. The job ends when its
    process ends, and everything it started ends with it."""
    model = tmp_path / "model.py"
    model.write_text((LSP_FIXTURES / "lingers" / "model.py").read_text())
    done, report = _check([model], tmp_path, "--timeout", "0", root=tmp_path, guard=120)
    assert done.returncode == 0, done.stderr
    assert report["diagnostics"] == []
    assert [(t["name"], t["ok"]) for t in report["targets"]] == [("LeavesChildren", True)]
    for name in ("child.pid", "grandchild.pid"):
        assert not process_exists(_pid_in(tmp_path / name)), name


def test_the_memory_limit_counts_what_a_job_started(tmp_path):
    """Item 4: a child of the model holding 1.5 GB passed ``--memory-limit-mb 1024``."""
    done, report = _check([LSP_FIXTURES / "child_memory" / "model.py"], tmp_path,
                          "--memory-limit-mb", "1024", "--timeout", "60")
    assert done.returncode == 1, done.stderr
    (diagnostic,) = report["diagnostics"]
    assert (diagnostic["rule"], diagnostic["target"], diagnostic["range"]["start"]) == \
        ("ONNX903", "ChildAllocates", {"line": 8, "column": 7})
    assert "went past the memory limit of 1024 MB" in diagnostic["message"]


def test_the_smallest_memory_limit_checks_a_tiny_model(tmp_path):
    """Item 10: at the documented minimum, 256 MB, a tiny MLP got ONNX903: the pages the
    job shares with the warm worker were counted. The limit counts what the job owns."""
    done, report = _check([LSP_FIXTURES / "tiny_mlp" / "model.py"], tmp_path,
                          "--memory-limit-mb", "256", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert report["diagnostics"] == []
    assert [(t["name"], t["ok"]) for t in report["targets"]] == [("TinyMlp", True)]


def _children(pid: int) -> list[str]:
    """The command lines of ``pid``'s children."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            if entry.name.isdigit() and int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append((entry / "cmdline").read_text().replace("\0", " "))
        except (OSError, ValueError, IndexError):
            continue
    return found


def test_sigterm_while_the_worker_warms_up_says_so(tmp_path):
    """Issue 39: a SIGTERM before the worker was ready ended the run with status 143, no
    message and no report."""
    (tmp_path / "model.py").write_text((FIXTURES / "no_translation" / "model.py").read_text())
    run = subprocess.Popen(
        [sys.executable, "-m", "onnxlens", "check", str(tmp_path), "--root", str(tmp_path),
         "--format", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        while not any("export_worker.process" in c for c in _children(run.pid)):
            assert run.poll() is None, run.communicate()
        run.send_signal(signal.SIGTERM)  # the worker is starting: it takes seconds
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 130, err
    assert "onnxlens: interrupted while the export worker started: none of the 1 target(s) " \
           "was checked" in err
    assert "Traceback" not in err
    report = json.loads(out)
    assert report["targets"] == [] and report["diagnostics"] == []
