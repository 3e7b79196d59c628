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

from exporter.artifacts import UnsafePathError, load_model, save_model
from exporter.cli import main
from tests.conftest import FIXTURES, REPO


@pytest.fixture
def in_fixtures(monkeypatch):
    monkeypatch.chdir(FIXTURES)


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


def test_a_model_that_could_not_be_finished_is_not_saved(in_fixtures, tmp_path, capsys,
                                                         monkeypatch):
    """Translated, but the opset conversion (or the optimizer) failed: torch.onnx.export
    would raise, so nothing is saved (the half-finished model used to be)."""
    from exporter import torch_compat

    def fails(*args, **kwargs):
        raise RuntimeError("cannot convert to opset 20")

    monkeypatch.setattr(torch_compat, "finish_model", fails)
    output = tmp_path / "convnet.onnx"
    assert main(["save", "clean/convnet.py::ConvNet", "-o", str(output)]) == 1
    err = capsys.readouterr().err
    assert "ONNX202" in err and "cannot convert to opset 20" in err
    assert "not saved: the export failed" in err
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
    from exporter.artifacts import save_model
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


def test_run_prints_outputs_comparison_and_latency(in_fixtures, capsys):
    assert main(["run", "clean/convnet.py::ConvNet", "--repeat", "5"]) == 0
    out = capsys.readouterr().out
    assert "| probabilities | [2, 5] | float32 |" in out
    assert "| probabilities | yes |" in out
    assert "p50 " in out and " ms · p90 " in out and "over 5 runs" in out


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


def test_what_the_model_prints_stays_out_of_the_json_report(tmp_path):
    """Issue 24: ``run`` and ``save`` run the user's code in the CLI's process; what it
    writes to stdout (``print``, or fd 1 itself, as a subprocess or native code does) goes
    to stderr, and stdout carries the report alone."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-m", "exporter.cli", "run", "stdio/noisy.py::Noisy", "--format",
         "json", "--repeat", "2"],
        cwd=FIXTURES, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["target"] == "Noisy" and report["matched"] is True
    assert "noise\n" in run.stderr and "noise at fd 1\n" in run.stderr

    output = tmp_path / "noisy.onnx"
    save = subprocess.run(
        [sys.executable, "-m", "exporter.cli", "save", "stdio/noisy.py::Noisy", "-o",
         str(output)], cwd=FIXTURES, env=env, capture_output=True, text=True, timeout=300)
    assert save.returncode == 0, save.stderr
    assert save.stdout == f"onnxlens: wrote {output}\n"
    assert "noise at fd 1\n" in save.stderr


def test_run_of_a_failing_target_explains(in_fixtures, capsys):
    assert main(["run", "ort_kernel_missing/model.py::DoubleErf"]) == 1
    err = capsys.readouterr().err
    assert "error[ONNX401]" in err and "cannot run" in err
