"""The ``onnxlens`` command line: compiler-style text, JSON, SARIF, rule filters, exit codes."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from onnxlens.cli import main
from tests.conftest import FIXTURES, REPO, lsp_bodies, lsp_session_bytes
from tests.sarif_tools import validate_with_schema


@pytest.fixture
def in_fixtures(monkeypatch):
    monkeypatch.chdir(FIXTURES)


def test_text_output_is_compiler_style_with_caret_and_hint(in_fixtures, capsys):
    status = main(["check", "no_translation/model.py"])
    out = capsys.readouterr().out
    assert status == 1
    assert ("no_translation/model.py:7:13: error[ONNX201]: `aten::i0` has no ONNX translation"
            in out)
    assert " 7 |         a = torch.special.i0(x)\n   |             ^^^^^^^^^^^^^^^^^^^\n" in out
    assert "   help: Rewrite with supported operators" in out
    assert "   docs: onnxlens rule ONNX201\n" in out
    assert out.rstrip().endswith("Checked 1 target(s) in 1 file(s): 2 errors, 0 warnings "
                                 "(1 target(s) failing).")


def test_json_output_shape(in_fixtures, capsys):
    status = main(["check", "helper_module", "clean/factory.py", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert status == 1
    assert report["version"] == 2
    assert set(report["toolchain"]) == {"packages", "torch_tested", "tested_torch",
                                        "capabilities", "speedups", "message"}
    assert report["toolchain"]["packages"]["torch"] == importlib.metadata.version("torch")
    assert {t["name"]: t["ok"] for t in report["targets"]} == {"UsesHelper": False,
                                                               "scaled": True}
    (diagnostic,) = report["diagnostics"]
    assert diagnostic["rule"] == "ONNX201"
    assert diagnostic["severity"] == "error"
    assert diagnostic["path"] == "helper_module/layers/special.py"
    assert diagnostic["range"] == {"start": {"line": 6, "column": 16},
                                   "end": {"line": 6, "column": 35}}
    assert diagnostic["target"] == "UsesHelper"
    assert diagnostic["stage"] == "translate"
    assert diagnostic["related"][:2] == [
        {"path": "helper_module/layers/special.py",
         "range": {"start": {"line": 10, "column": 12}, "end": {"line": 10, "column": 23}},
         "message": "called from `smooth`"},
        {"path": "helper_module/model.py",
         "range": {"start": {"line": 10, "column": 16}, "end": {"line": 10, "column": 25}},
         "message": "called from `forward`"}]
    assert diagnostic["hint"]
    stages = report["targets"][0]["stages"]
    assert [s["name"] for s in stages] == ["load", "capture", "translate", "validate",
                                           "runtime", "numerics", "dynamic", "deploy"]
    assert stages[3] == {"name": "validate", "state": "skipped", "seconds": 0.0,
                         "reason": "translation failed"}


def test_select_and_ignore(in_fixtures, capsys):
    assert main(["check", "mixed", "--format", "json", "--select", "ONNX1",
                 "--ignore", "ONNX106"]) == 1
    rules = [d["rule"] for d in json.loads(capsys.readouterr().out)["diagnostics"]]
    assert rules == ["ONNX101"]
    assert main(["check", "data_dependent_branch", "--ignore", "ONNX101"]) == 0
    assert "[ONNX106]" not in capsys.readouterr().out  # off unless selected
    assert main(["check", "data_dependent_branch", "--select", "ONNX106"]) == 0
    assert "warning[ONNX106]" in capsys.readouterr().out


def test_sarif_written_to_a_file(in_fixtures, tmp_path, capsys):
    output = tmp_path / "report.sarif"
    assert main(["check", "mixed", "--format", "sarif", "--output", str(output)]) == 1
    log = json.loads(output.read_text())
    assert validate_with_schema(log) == []
    results = log["runs"][0]["results"]
    assert sorted(r["ruleId"] for r in results) == ["ONNX101", "ONNX201", "ONNX201"]
    # the draft-capture fact rides on the capture error (it was a second finding, ONNX106)
    (capture,) = [r for r in results if r["ruleId"] == "ONNX101"]
    assert capture["properties"]["draftCapture"] is True
    assert capture["relatedLocations"][-1]["message"]["text"].startswith(
        "the later stages checked the graph a draft export captured")
    assert "error[ONNX201]" in capsys.readouterr().err  # the text report still reaches stderr


def test_clean_examples_exit_zero(in_fixtures, capsys):
    assert main(["check", "clean"]) == 0
    assert "Checked 3 target(s) in 3 file(s): 0 errors, 0 warnings." in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["check", "does-not-exist"], "does-not-exist: no such file or directory"),
    (["save", "clean/tokens.py", "-o", "x.onnx"], "expected FILE::TARGET"),
    (["save", "clean/tokens.py::Nope", "-o", "x.onnx"], "has no export target 'Nope'"),
])
def test_usage_errors_exit_two(in_fixtures, capsys, argv, message):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_unknown_rule_is_a_usage_error(in_fixtures, capsys):
    with pytest.raises(SystemExit) as raised:
        main(["check", "clean", "--select", "ONNX777"])
    assert raised.value.code == 2
    assert "unknown rule id or prefix: ONNX777" in capsys.readouterr().err


def test_console_script_runs_in_a_fresh_process():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "onnxlens", "check", "eager_failure"],
                          cwd=FIXTURES, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert "eager_failure/model.py:11:16: error[ONNX004]" in done.stdout
    assert done.stderr == ""  # torch's own logging and warnings stay out of the way


def test_project_defaults_from_pyproject(tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.onnxlens]\nignore = ["ONNX106"]\natol = "tight"\ncolour = "blue"\n')
    source = (FIXTURES / "data_dependent_branch" / "model.py").read_text()
    (tmp_path / "model.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "model.py", "--format", "json"]) == 1
    captured = capsys.readouterr()
    assert [d["rule"] for d in json.loads(captured.out)["diagnostics"]] == ["ONNX101"]
    assert "unknown key `colour` in [tool.onnxlens]" in captured.err
    assert "`atol` in [tool.onnxlens] must be a number, not 'tight'; ignored" in captured.err


_LIMITS = "[tool.onnxlens]\n"


@pytest.mark.parametrize("content, problem", [
    (b"# caf\xe9\n" + _LIMITS.encode() + b"timeout = 5\n",
     "cannot read [tool.onnxlens]: 'utf-8' codec"),
    (b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n",
     "cannot read [tool.onnxlens]: nested too deeply"),
    (_LIMITS.encode() + b"timeout = nan\n",
     "`timeout` in [tool.onnxlens] must be a finite number, not nan; ignored"),
    (_LIMITS.encode() + b"timeout = 1e12\n",
     "`timeout` in [tool.onnxlens] must be between 0 and 86400, not 1e+12; ignored"),
    (_LIMITS.encode() + b"memory-limit-mb = 100000000\n",
     "`memory-limit-mb` in [tool.onnxlens] must be between 256 and 1048576, "
     "not 100000000; ignored"),
])
def test_a_bad_pyproject_is_a_warning_and_the_check_goes_on(tmp_path, monkeypatch, capsys,
                                                           content, problem):
    """Issue "nothing lost": these gave a traceback, or a deadline that never fires."""
    (tmp_path / "pyproject.toml").write_bytes(content)
    (tmp_path / "model.py").write_text((FIXTURES / "eager_failure" / "model.py").read_text())
    monkeypatch.chdir(tmp_path)
    assert main(["check", "model.py"]) == 1
    captured = capsys.readouterr()
    assert problem in captured.err
    assert "error[ONNX004]" in captured.out


@pytest.mark.parametrize("value", ["nan", "-5", "inf", "soon"])
def test_a_bad_timeout_is_a_usage_error(value, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["check", ".", "--timeout", value])
    assert exit_.value.code == 2
    assert "argument --timeout:" in capsys.readouterr().err


def test_a_form_feed_or_u2028_shifts_no_line(tmp_path, monkeypatch, capsys):
    """The squiggle and the quoted line stay on the line Python reports (issue "nothing
    lost")."""
    source = (FIXTURES / "eager_failure" / "model.py").read_text()
    (tmp_path / "model.py").write_text('\f\nNOTE = "a\u2028b"\n' + source)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "model.py"]) == 1
    out = capsys.readouterr().out
    assert "model.py:13:16: error[ONNX004]" in out
    assert " 13 |         return self.linear(x)\n" in out


def test_file_that_is_not_utf8_is_a_diagnostic(tmp_path, monkeypatch, capsys):
    (tmp_path / "latin.py").write_bytes(b"# onnx-export: args=()\nclass A:\n    name = '\xe9'\n")
    monkeypatch.chdir(tmp_path)
    assert main(["check", "latin.py"]) == 1
    out = capsys.readouterr().out
    assert ("latin.py:3:13: error[ONNX002]: The file cannot be read: 'utf-8' codec can't "
            "decode byte 0xe9") in out


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """An interpreter with none of onnxlens's dependencies: `pip install onnxlens` without
    extras, as far as the export toolchain and the server are concerned."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return str(venv / "bin" / "python")


def _bare(python: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([python, "-m", "onnxlens", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120,
                          stdin=subprocess.DEVNULL)


def test_missing_toolchain_is_reported_not_a_traceback(bare_python):
    done = _bare(bare_python, "check", str(FIXTURES / "clean"))
    assert done.returncode == 2
    assert "ONNX904: a dependency of the export toolchain is missing" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("command", "words"), [
    (["save", "examples/mlp.py::MLPModel", "-o", "{tmp}/mlp.onnx"],
     "ONNX904: a dependency of the export toolchain is missing"),
    (["run", "examples/mlp.py::MLPModel"],
     "ONNX904: a dependency of the export toolchain is missing"),
    (["lsp"], "the language server needs"),
])
def test_every_command_names_what_is_missing(bare_python, tmp_path, command, words):
    """They ended in a ModuleNotFoundError traceback and exit 1 (issue "nothing lost")."""
    args = [str(REPO / a) if a.startswith("examples/") else a.format(tmp=tmp_path)
            for a in command]
    done = _bare(bare_python, *args)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"onnxlens: error: {words}")
    assert "pip install" in line
    assert list(tmp_path.iterdir()) == []


def test_missing_toolchain_still_writes_a_json_report_holding_onnx904(bare_python, tmp_path):
    """CI reads the report: without torch it used to be empty (issue "nothing lost")."""
    report = tmp_path / "report.json"
    done = _bare(bare_python, "check", str(FIXTURES / "clean"), "--format", "json",
                 "-o", str(report))
    assert done.returncode == 2, done.stderr
    (diagnostic,) = json.loads(report.read_text())["diagnostics"]
    assert diagnostic["rule"] == "ONNX904" and diagnostic["severity"] == "error"
    assert diagnostic["message"].startswith("A dependency of the export toolchain is missing")
    assert "pip install torch==" in diagnostic["message"]
    assert diagnostic["path"].endswith("clean/convnet.py")


def test_endless_loop_is_stopped_by_the_timeout(capsys):
    forever = REPO / "tests" / "lsp" / "fixtures" / "forever" / "model.py"
    assert main(["check", str(forever), "--timeout", "2", "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    (diagnostic,) = report["diagnostics"]
    assert diagnostic["rule"] == "ONNX901"
    assert diagnostic["range"]["start"]["line"] in (7, 8)  # the loop
    assert "did not finish within 2 s" in diagnostic["message"]
    stages = {s["name"]: s["state"] for s in report["targets"][0]["stages"]}
    assert stages["load"] == "failed" and stages["dynamic"] == "skipped"


@pytest.mark.parametrize("command", [["rule", "--all"], ["check", "examples"]])
def test_a_reader_that_stops_reading_ends_the_command_quietly(command):
    """``onnxlens rule --all | head -0``: no traceback (a regression: BrokenPipeError, and
    for `check` every cancelled target's exception at shutdown)."""
    process = subprocess.Popen([sys.executable, "-m", "onnxlens", *command], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # before anything is written: every write fails
    errors = process.stderr.read()
    assert process.wait(timeout=300) == 1
    assert "Traceback" not in errors and "Exception ignored" not in errors, errors


# -- outputs that must not destroy anything (issue "nothing lost, round 3", item 1) ---------

MODEL = ("import torch\n\n\n# onnx-export: args=(torch.randn(2, 4),)\n"
         "class Twice(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n")


@pytest.mark.parametrize("argv", [
    ["check", "m.py", "--format", "json", "--output", "m.py"],
    ["check", ".", "--format", "sarif", "--sarif-file", "m.py"],
    ["save", "m.py::Twice", "-o", "m.py"],
])
def test_an_output_that_is_an_input_of_the_run_is_refused(tmp_path, monkeypatch, capsys, argv):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text(MODEL)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "an input of this run; refusing to overwrite it" in err
    assert (tmp_path / "m.py").read_text() == MODEL


def test_a_device_is_never_replaced_but_written_to_as_a_stream(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text(MODEL)
    device = tmp_path / "null"
    os.mknod(device, 0o666 | __import__("stat").S_IFCHR, os.makedev(1, 3))  # a /dev/null
    assert main(["save", "m.py::Twice", "-o", "null"]) == 2
    assert "is a character device, not a regular file; refusing to replace it" in \
        capsys.readouterr().err
    (tmp_path / "empty.py").write_text("x = 1\n")  # no targets: the report is written at once
    assert main(["check", "empty.py", "--format", "json", "--output", "null"]) == 0
    assert device.is_char_device()


def test_a_fifo_gets_the_report_as_a_stream(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty.py").write_text("x = 1\n")
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    assert main(["check", "empty.py", "--format", "json", "--output", str(fifo)]) == 0
    report = json.loads(reader.communicate(timeout=30)[0])
    assert report["targets"] == [] and fifo.is_fifo()


def test_a_replaced_report_keeps_its_mode(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty.py").write_text("x = 1\n")
    report = tmp_path / "report.json"
    report.write_text("old")
    report.chmod(0o600)
    assert main(["check", "empty.py", "--format", "json", "--output", "report.json"]) == 0
    assert json.loads(report.read_text())["targets"] == []
    assert report.stat().st_mode & 0o777 == 0o600


def test_onnxlens_lsp_exits_0_after_shutdown_and_exit():
    """Issue "nothing lost, round 3", item 10: `onnxlens lsp` ended with a traceback and exit
    1 after `shutdown` + `exit` (the server closes stdout; `python -m lsp_server` exited 0)."""
    done = subprocess.run([sys.executable, "-m", "onnxlens", "lsp"], input=lsp_session_bytes(),
                          capture_output=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr.decode()
    assert b"Traceback" not in done.stderr
    assert {"id": 2, "jsonrpc": "2.0", "result": None} in lsp_bodies(done.stdout)  # shutdown


def test_escape_sequences_in_a_models_message_reach_no_terminal(tmp_path):
    """Issue "nothing lost, round 3", item 10: an ANSI colour and an OSC title sequence in a
    model's exception reached the terminal raw; they are shown escaped."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "m.py").write_text(
        "import torch\n\n\n"
        "# onnx-export: args=(torch.randn(2, 4),)\n"
        "class Loud(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        raise ValueError('\\x1b[31mred\\x1b]0;pwned\\x07 and \\x9b')\n")
    done = subprocess.run([sys.executable, "-m", "onnxlens", "check", "m.py",
                           "--format", "github"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    text = subprocess.run([sys.executable, "-m", "onnxlens", "check", "m.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    for run in (done, text):
        assert run.returncode == 1, run.stderr
        assert "\x1b" not in run.stdout and "\x07" not in run.stdout and "\x9b" not in run.stdout
        assert r"\x1b[31mred\x1b]0;pwned\x07 and \x9b" in run.stdout
    assert "m.py:7:9: error[ONNX004]" in text.stdout


def _no_target_project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "m.py").write_text("import torch\n\n\n"
                                   "# onnx-export: args=(torch.randn(2, 4),)\n"
                                   "class Twice(torch.nn.Module):\n"
                                   "    def forward(self, x):\n"
                                   "        return x * 2\n")
    return tmp_path / "m.py"


def test_a_report_on_a_read_only_file_system_is_one_line_before_the_check(tmp_path, tmpfs,
                                                                          capsys):
    """Issue "nothing lost, round 3", item 8, on a real read-only file system (as root, a
    directory's mode bits stop nothing)."""
    model = _no_target_project(tmp_path)
    read_only = tmpfs("ro", "ro,size=1m")
    for option in ("--output", "--sarif-file"):
        assert main(["check", str(model), "--format", "json", option,
                     str(read_only / "report.json")]) == 2
        err = capsys.readouterr().err
        assert err == f"onnxlens: error: {read_only / 'report.json'}: Read-only file system\n"
    output = tmp_path / "kept.onnx"
    output.write_bytes(b"previous")
    assert main(["save", f"{model}::Twice", "-o", str(read_only / "m.onnx")]) == 2
    assert capsys.readouterr().err == \
        f"onnxlens: error: {read_only / 'm.onnx'}: Read-only file system\n"


def test_a_report_on_a_full_file_system_is_one_line(tmp_path, tmpfs, capsys):
    """Issue "nothing lost, round 3", item 8: a full file system gave a traceback and exit 1
    ("errors found") after the whole check; now exit 2, one line, nothing half-written."""
    model = _no_target_project(tmp_path)
    full = tmpfs("full", "size=64k")
    with open(full / "filler", "wb", buffering=0) as filler, contextlib.suppress(OSError):
        while True:
            filler.write(b"\0" * 4096)
    assert main(["check", str(model), "--format", "json", "--output",
                 str(full / "report.json")]) == 2
    err = capsys.readouterr().err
    assert err.endswith(f"onnxlens: error: {full / 'report.json'}: No space left on device\n")
    assert "Traceback" not in err
    assert sorted(p.name for p in full.iterdir()) == ["filler"]
