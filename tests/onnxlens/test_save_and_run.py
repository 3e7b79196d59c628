"""``onnxlens save`` writes atomically and safely; ``onnxlens run`` reports outputs,
the comparison with PyTorch and latency percentiles."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from check_service.files import find_target
from exporter.pipeline.artifacts import UnsafePathError, load_model, save_model
from onnxlens.cli import main
from tests.conftest import FIXTURES, REPO


@pytest.fixture
def in_fixtures(monkeypatch):
    monkeypatch.chdir(FIXTURES)


@pytest.mark.every_torch  # what the export writes and ONNX Runtime runs
def test_save_writes_a_model_that_runs(in_fixtures, tmp_path, capsys):
    output = tmp_path / "convnet.onnx"
    assert main(["save", "clean/convnet.py::ConvNet", "-o", str(output)]) == 0
    assert f"wrote {output}" in capsys.readouterr().out
    session = ort.InferenceSession(str(output), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["images"]
    (result,) = session.run(None, {"images": np.zeros((3, 3, 16, 16), np.float32)})
    assert result.shape == (3, 5)  # the dynamic batch survived the save
    assert sorted(os.listdir(tmp_path)) == ["convnet.onnx"]  # no temporary files left


def test_failed_export_leaves_the_previous_file_intact(in_fixtures, tmp_path, capsys):
    output = tmp_path / "model.onnx"
    output.write_bytes(b"previous model")
    assert main(["save", "no_translation/model.py::Special", "-o", str(output)]) == 1
    assert output.read_bytes() == b"previous model"
    err = capsys.readouterr().err
    assert "error[ONNX201]" in err and "is unchanged" in err
    assert sorted(os.listdir(tmp_path)) == ["model.onnx"]


@pytest.mark.every_torch  # what the export writes and ONNX Runtime runs
def test_a_model_that_could_not_be_finished_is_not_saved(session, tmp_path, monkeypatch):
    """Translated, but the opset conversion (or the optimizer) failed: torch.onnx.export
    would raise, so nothing is saved (the half-finished model used to be). The save job
    itself, in this process, as a worker's job process runs it for ``onnxlens save``."""
    from export_worker.jobs import run_job
    from export_worker.messages import JobRequest
    from exporter.toolchain import torch_compat

    def fails(*args, **kwargs):
        raise RuntimeError("cannot convert to opset 20")

    monkeypatch.setattr(torch_compat, "finish_model", fails)
    output = tmp_path / "convnet.onnx"
    answer = run_job(session, JobRequest("save", find_target(FIXTURES / "clean" / "convnet.py",
                                                     "ConvNet"),
                                         str(FIXTURES / "clean"), output=str(output)))
    assert not answer.saved and answer.error == "the export failed; the file was not written"
    assert any(d.rule == "ONNX202" and "cannot convert to opset 20" in d.message
               for d in answer.diagnostics), answer.diagnostics
    assert not output.exists()


def test_save_removes_only_its_own_previous_data_file(in_fixtures, tmp_path):
    """Issue "nothing lost": files named like data files but not written by a save (a
    backup, another version) stay; the data file the replaced model used is removed."""
    output = tmp_path / "m.onnx"
    backup, other = tmp_path / "m.onnx.mybackup.data", tmp_path / "m.onnx.v1.data"
    backup.write_bytes(b"the user's backup")
    other.write_bytes(b"another version")
    assert main(["save", "clean/convnet.py::ConvNet", "-o", str(output),
                 "--external-data-threshold", "1"]) == 0
    (first,) = [p for p in tmp_path.glob("m.onnx.*.data") if p not in (backup, other)]
    assert main(["save", "clean/tokens.py::TokenPooler", "-o", str(output),
                 "--external-data-threshold", "1"]) == 0
    (second,) = [p for p in tmp_path.glob("m.onnx.*.data") if p not in (backup, other)]
    assert second != first and not first.exists()
    assert backup.read_bytes() == b"the user's backup" and other.read_bytes() == b"another version"


def test_the_data_file_gets_the_models_mode(in_fixtures, tmp_path):
    output = tmp_path / "m.onnx"
    assert main(["save", "clean/convnet.py::ConvNet", "-o", str(output),
                 "--external-data-threshold", "1"]) == 0
    (data,) = tmp_path.glob("m.onnx.*.data")
    umask = os.umask(0)
    os.umask(umask)
    assert oct(data.stat().st_mode & 0o777) == oct(output.stat().st_mode & 0o777) \
        == oct(0o666 & ~umask)


@pytest.mark.parametrize("command", [["save", "clean/convnet.py::ConvNet"],
                                     ["check", "clean/convnet.py", "--format", "sarif"]])
def test_an_output_that_is_a_directory_is_a_usage_error(in_fixtures, tmp_path, capsys,
                                                        command):
    before = sorted(os.listdir(tmp_path))
    assert main([*command, "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"onnxlens: error: {tmp_path}: {tmp_path} is a directory; give a file name" in err
    assert sorted(os.listdir(tmp_path)) == before  # no temporary file left


@pytest.mark.parametrize("output, message", [("", "the output path is empty"),
                                             ("missing/m.onnx", "does not exist")])
def test_an_empty_or_parentless_output_is_a_usage_error(in_fixtures, tmp_path, capsys,
                                                        output, message):
    assert main(["save", "clean/convnet.py::ConvNet", "-o", output]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.every_torch  # what the export writes and ONNX Runtime runs
def test_external_data_past_the_threshold(in_fixtures, tmp_path):
    output = tmp_path / "tokens.onnx"
    assert main(["save", "clean/tokens.py::TokenPooler", "-o", str(output),
                 "--external-data-threshold", "1KB"]) == 0
    data_files = sorted(p.name for p in tmp_path.glob("tokens.onnx.*.data"))
    assert len(data_files) == 1
    model = load_model(output)
    assert onnx.checker.check_model(model) is None
    first = data_files[0]
    # Saving again with other weights swaps the data file in and removes the stale one.
    model.graph.initializer[0].raw_data = bytes(len(model.graph.initializer[0].raw_data))
    save_model(model, output, external_data_threshold=1024)
    after = sorted(p.name for p in tmp_path.glob("tokens.onnx.*.data"))
    assert len(after) == 1 and after != [first]
    assert not np.any(onnx.numpy_helper.to_array(load_model(output).graph.initializer[0]))


def test_refuses_external_data_outside_the_model_directory(tmp_path):
    weights = onnx.numpy_helper.from_array(np.ones(4, np.float32), "w")
    graph = onnx.helper.make_graph([onnx.helper.make_node("Identity", ["w"], ["y"])], "g", [],
                                   [onnx.helper.make_tensor_value_info("y", 1, [4])], [weights])
    model = onnx.helper.make_model(graph)
    (tmp_path / "inner").mkdir()
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.ones(4, np.float32).tobytes())
    onnx.external_data_helper.set_external_data(model.graph.initializer[0], "../secret.bin")
    model.graph.initializer[0].ClearField("raw_data")
    model.graph.initializer[0].data_location = onnx.TensorProto.EXTERNAL
    onnx.save_model(model, tmp_path / "inner" / "evil.onnx")
    with pytest.raises(UnsafePathError, match="outside"):
        load_model(tmp_path / "inner" / "evil.onnx")


def test_refuses_to_write_through_a_symlink(tmp_path):
    target = tmp_path / "elsewhere.onnx"
    target.write_bytes(b"keep")
    link = tmp_path / "link.onnx"
    link.symlink_to(target)
    model = onnx.helper.make_model(onnx.helper.make_graph([], "g", [], []))
    with pytest.raises(UnsafePathError, match="symbolic link"):
        save_model(model, link)
    assert target.read_bytes() == b"keep"


_SLOW_WRITER = textwrap.dedent("""
    import sys
    import numpy as np, onnx
    from exporter.pipeline.artifacts import save_model
    weights = onnx.numpy_helper.from_array(np.ones(200_000_000, np.float32), "w")
    graph = onnx.helper.make_graph([onnx.helper.make_node("Identity", ["w"], ["y"])], "g", [],
                                   [onnx.helper.make_tensor_value_info("y", 1, [None])],
                                   [weights])
    print("writing", flush=True)
    save_model(onnx.helper.make_model(graph), sys.argv[1], external_data_threshold=1)
""")


def test_killed_mid_write_leaves_the_previous_file_intact(tmp_path):
    output = tmp_path / "big.onnx"
    output.write_bytes(b"previous model")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    writer = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, str(output)], env=env,
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "writing"
    deadline = time.monotonic() + 60
    while not any(p.name.startswith(".big.onnx.") for p in tmp_path.iterdir()):
        assert time.monotonic() < deadline, "the writer never started writing"
        time.sleep(0.005)
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=30)
    assert output.read_bytes() == b"previous model"
    assert not list(tmp_path.glob("big.onnx.*.data"))
    # Issue "nothing lost, round 3", item 10: the killed save's hidden scratch directory
    # stayed for ever; the next save to the destination removes it (it is ours), and nothing
    # else: a look-alike directory of a live process stays.
    assert [p.name for p in tmp_path.glob(".big.onnx.*")]
    alive = tmp_path / f".big.onnx.{os.getpid()}.abcdef"
    alive.mkdir()
    save_model(onnx.helper.make_model(onnx.helper.make_graph([], "g", [], [])), output)
    assert sorted(p.name for p in tmp_path.iterdir()) == [alive.name, "big.onnx"]


_CONCURRENT_WRITER = textwrap.dedent("""
    import sys
    import numpy as np, onnx
    from exporter.pipeline.artifacts import save_model
    weights = onnx.numpy_helper.from_array(np.full(2_000_000, float(sys.argv[2]), np.float32),
                                           "w")
    graph = onnx.helper.make_graph([onnx.helper.make_node("Identity", ["w"], ["y"])], "g", [],
                                   [onnx.helper.make_tensor_value_info("y", 1, [None])],
                                   [weights])
    save_model(onnx.helper.make_model(graph), sys.argv[1], external_data_threshold=1)
""")


def test_concurrent_saves_leave_no_orphan_data_file(tmp_path):
    """Issue "nothing lost, round 3", item 10: two saves at once to one destination left the
    data file of the one replaced first behind, referred to by nothing."""
    output = tmp_path / "m.onnx"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    writers = [subprocess.Popen([sys.executable, "-c", _CONCURRENT_WRITER, str(output),
                                 str(value)], env=env) for value in range(6)]
    assert [writer.wait(timeout=300) for writer in writers] == [0] * 6
    model = onnx.load_model(output, load_external_data=False)
    (location,) = {entry.value for entry in model.graph.initializer[0].external_data
                   if entry.key == "location"}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["m.onnx", location])


@pytest.mark.every_torch  # what the export writes and ONNX Runtime runs
def test_run_prints_outputs_comparison_and_latency(in_fixtures, capsys):
    assert main(["run", "clean/convnet.py::ConvNet", "--repeat", "5"]) == 0
    out = capsys.readouterr().out
    assert "| probabilities | [2, 5] | float32 |" in out
    assert "| probabilities | yes |" in out
    assert "p50 " in out and " ms · p90 " in out and "over 5 runs" in out


@pytest.mark.every_torch  # what the export writes and ONNX Runtime runs
def test_run_a_saved_model_and_json(in_fixtures, tmp_path, capsys):
    output = tmp_path / "f.onnx"
    assert main(["save", "clean/factory.py::scaled", "-o", str(output)]) == 0
    capsys.readouterr()
    assert main(["run", "clean/factory.py::scaled", "--model", str(output), "--format", "json",
                 "--repeat", "3"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"] == str(output)
    assert report["matched"] is True
    assert report["latency"]["runs"] == 3 and report["latency"]["p90_ms"] > 0
    assert [i["shape"] for i in report["inputs"]] == [[3, 4], [4]]


def test_run_compares_an_output_drawn_from_random_numbers_by_shape(in_fixtures, capsys):
    """ONNX Runtime draws its own random numbers: the output matches PyTorch's by shape, and
    the report says its values were not compared; the outputs beside it are compared."""
    assert main(["run", "random_draws/model.py::DropoutAndGate", "--format", "json",
                 "--repeat", "1"]) == 1  # the gate's custom translation is wrong
    report = json.loads(capsys.readouterr().out)
    dropped, gate = report["comparison"]
    assert dropped == {"output": "getitem", "matched": True,
                       "reason": "drawn from random numbers (ONNX Runtime draws its own): "
                                 "only the shape is compared"}
    assert gate["output"] == "sigmoid" and gate["matched"] is False and gate["max_abs"] > 0.1


def test_what_the_model_prints_stays_out_of_the_json_report(tmp_path):
    """Issue 24: ``run`` and ``save`` run the user's code in the CLI's process; what it
    writes to stdout (``print``, or fd 1 itself, as a subprocess or native code does) goes
    to stderr, and stdout carries the report alone."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-m", "onnxlens", "run", "stdio/noisy.py::Noisy", "--format",
         "json", "--repeat", "2"],
        cwd=FIXTURES, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["target"] == "Noisy" and report["matched"] is True
    assert "noise\n" in run.stderr and "noise at fd 1\n" in run.stderr

    output = tmp_path / "noisy.onnx"
    save = subprocess.run(
        [sys.executable, "-m", "onnxlens", "save", "stdio/noisy.py::Noisy", "-o",
         str(output)], cwd=FIXTURES, env=env, capture_output=True, text=True, timeout=300)
    assert save.returncode == 0, save.stderr
    assert save.stdout == f"onnxlens: wrote {output}\n"
    assert "noise at fd 1\n" in save.stderr


@pytest.mark.every_torch  # what the export writes and ONNX Runtime runs
def test_run_of_a_failing_target_explains(in_fixtures, capsys):
    assert main(["run", "ort_kernel_missing/model.py::DoubleErf"]) == 1
    err = capsys.readouterr().err
    assert "error[ONNX401]" in err and "cannot run" in err


# Issue "nothing lost, round 3", item 2: save and run are worker jobs; the model's code never
# runs in the CLI's process.
MISBEHAVING = '''import os
import threading
import time

import torch


# onnx-export: args=(torch.randn(2, 4),)
class ExitsInForward(torch.nn.Module):
    def forward(self, x):
        os._exit(0)


# onnx-export: args=(torch.randn(2, 4),)
class LeavesAThread(torch.nn.Module):
    def forward(self, x):
        threading.Thread(target=time.sleep, args=(3600,)).start()
        return x * 2


# onnx-export: args=(torch.randn(2, 4),)
class Sleeps(torch.nn.Module):
    def forward(self, x):
        time.sleep(3600)
        return x


# onnx-export: args=(torch.randn(2, 4),)
class WritesToDescriptorOne(torch.nn.Module):
    def forward(self, x):
        os.write(1, b"raw bytes at fd 1\\n")
        return x + 1
'''


def _cli(tmp_path, *arguments: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "onnxlens", *arguments], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


@pytest.fixture
def misbehaving(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "m.py").write_text(MISBEHAVING)
    return tmp_path


def test_a_model_that_exits_is_not_saved_and_says_so(misbehaving):
    """Before: ``save`` exited 0, printed nothing, and the old model stayed."""
    output = misbehaving / "model.onnx"
    output.write_bytes(b"previous model")
    save = _cli(misbehaving, "save", "m.py::ExitsInForward", "-o", "model.onnx")
    assert save.returncode == 1, save.stderr
    assert "m.py:9:7: error[ONNX902]: The process checking `ExitsInForward` died: exited " \
        "with status 0" in save.stderr
    assert "not saved: the process exporting it died (ONNX902); model.onnx is unchanged." \
        in save.stderr
    assert output.read_bytes() == b"previous model"


def test_a_thread_the_model_leaves_does_not_keep_the_cli(misbehaving):
    """Before: a non-daemon thread kept the CLI from ever exiting."""
    save = _cli(misbehaving, "save", "m.py::LeavesAThread", "-o", "model.onnx", timeout=240)
    assert save.returncode == 0, save.stderr
    assert save.stdout == "onnxlens: wrote model.onnx\n"
    run = _cli(misbehaving, "run", "m.py::LeavesAThread", "--repeat", "2", "--format", "json",
               timeout=240)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["matched"] is True


def test_save_and_run_stop_at_their_timeout(misbehaving):
    """Before: neither had a timeout."""
    save = _cli(misbehaving, "save", "m.py::Sleeps", "-o", "model.onnx", "--timeout", "5")
    assert save.returncode == 1, save.stderr
    # stopped where it sleeps, by the job's own alarm
    assert "m.py:24:9: error[ONNX901]: The check of `Sleeps` did not finish within 5 s" \
        in save.stderr
    assert "not saved: the export failed; model.onnx is unchanged." in save.stderr
    assert not (misbehaving / "model.onnx").exists()
    run = _cli(misbehaving, "run", "m.py::Sleeps", "--timeout", "5")
    assert run.returncode == 1 and run.stdout == "", run.stderr
    assert "error[ONNX901]" in run.stderr and "cannot run m.py::Sleeps" in run.stderr


def test_what_the_model_writes_to_descriptor_one_stays_out_of_the_json(misbehaving):
    run = _cli(misbehaving, "run", "m.py::WritesToDescriptorOne", "--repeat", "2", "--format",
               "json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["target"] == "WritesToDescriptorOne"
    assert "raw bytes at fd 1" in run.stderr


def test_save_of_a_file_that_is_not_utf8_is_one_line(tmp_path):
    """Item 10: before, a traceback."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "latin.py").write_bytes(b"# onnx-export: args=()\ndef f():\n    return '\xe9'\n")
    for arguments in (("save", "latin.py::f", "-o", "f.onnx"), ("run", "latin.py::f")):
        done = _cli(tmp_path, *arguments)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("onnxlens: error: latin.py: the file cannot be read: "
                                      "'utf-8' codec can't decode byte 0xe9"), done.stderr
        assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1
