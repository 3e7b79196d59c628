"""The deploy stage (issue 43): the model on the runtimes named in ``runtimes`` besides ONNX
Runtime's CPU provider, each verdict in the summary, each finding's message; the setting and
the pragma key. Real OpenVINO (scripts/setup.sh), real ONNX Runtime Web under Node.js
(tools/ort-web/install.sh, which scripts/test.sh runs) and ONNX Runtime's own mobile tables.
Where each finding sits is in test_fixture_diagnostics' table; that OpenVINO by itself, on
the plain exporter's model, says the same is the differential corpus's judgement
(tests/corpus, the fixture ``runtimes/model.py``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from exporter.config.options import ExportOptions
from exporter.pipeline.session import ExportSession
from tests.conftest import FIXTURES, REPO

RUNTIMES = "runtimes/model.py"
PRECISION = "precision/model.py"


@pytest.fixture(scope="module")
def fixture_results(session):
    """The two fixture files this module reads, checked once (the session-wide
    ``fixture_results`` of tests/conftest.py checks every fixture, which this module's
    process would otherwise do again for two of them)."""
    results = {}
    for name in (RUNTIMES, PRECISION):
        workspace = FIXTURES / name.partition("/")[0]
        results[name] = (workspace.resolve(), session.check_file(FIXTURES / name, workspace))
    return results


def _targets(fixture_results):
    return {target.name: target for target in fixture_results[RUNTIMES][1].targets}


def test_each_target_says_what_openvino_made_of_it(fixture_results):
    verdicts = {name: [(run.runtime, run.state) for run in target.summary.runtimes]
                for name, target in _targets(fixture_results).items()}
    assert verdicts == {
        "Volumes": [("openvino-cpu", "fails")], "LogVolume": [("openvino-cpu", "fails")],
        "corners": [("openvino-cpu", "fails")], "Noisy": [("openvino-cpu", "fails")],
        "Clipped": [("openvino-cpu", "differs")], "Ranked": [("openvino-cpu", "differs")],
        "Halved": [("openvino-cpu", "differs")], "Fine": [("openvino-cpu", "matches")],
        "OnGpu": [("cuda", "not run here")], "Misnamed": [],
        "OnPhones": [("nnapi", "falls back"), ("coreml", "falls back")],
        "AnyBatch": [("nnapi", "falls back")], "CoreMlReady": [("coreml", "supported")],
        "InTheBrowser": [("ort-web", "matches"), ("openvino-cpu", "matches")],
        "DoubleErf": [("ort-web", "fails")], "Positions": [("coreml", "supported")],
        "Tokens": [("coreml", "falls back"), ("nnapi", "supported")],
        "Picked": [("nnapi", "supported")], "Shuffled": [("nnapi", "falls back")]}
    states = {name: target.stage("deploy").state.value
              for name, target in _targets(fixture_results).items()}
    assert states == {"Volumes": "failed", "LogVolume": "failed", "corners": "failed",
                      "Noisy": "failed", "Clipped": "failed", "Ranked": "failed",
                      "Halved": "failed", "Fine": "passed", "OnGpu": "skipped",
                      "Misnamed": "skipped", "OnPhones": "passed", "AnyBatch": "passed",
                      "CoreMlReady": "passed", "InTheBrowser": "passed", "DoubleErf": "failed",
                      "Positions": "passed", "Tokens": "passed", "Picked": "passed",
                      "Shuffled": "passed"}
    fine = _targets(fixture_results)["Fine"]
    assert fine.diagnostics == [] and fine.summary.runtimes[0].nodes


def test_the_messages_name_the_node_the_operator_and_the_values(fixture_results):
    by_target = {name: [d.message for d in target.diagnostics]
                 for name, target in _targets(fixture_results).items()}
    assert by_target["Volumes"] == [
        "OpenVINO (CPU) cannot convert ONNX node `n0` (Det): it has no conversion rule for "
        "this operator, so the model does not load there."]
    assert _targets(fixture_results)["Volumes"].summary.runtimes[0].unsupported == ("n0",)
    found = {d.rule: d.message for d in _targets(fixture_results)["Noisy"].diagnostics}
    assert found.keys() == {"ONNX504", "ONNX702"}  # `rand_like(x) * 0` is a draw: noted
    noisy = found["ONNX702"]
    assert noisy.startswith("OpenVINO (CPU) failed to compile the model at ONNX node "
                            "`node_mul` (Mul): [RandomUniformFusion]")
    assert "Exception from src/" not in noisy  # the C++ positions of each re-throw
    assert by_target["Clipped"] == [
        "Output `clamp` differs from PyTorch on OpenVINO (CPU) at 1 of 4 values (first at "
        "index [1]: PyTorch nan, OpenVINO (CPU) -1.0); where both are finite they match."]
    assert by_target["Halved"] == [
        "Output `bitwise_right_shift` differs from PyTorch on OpenVINO (CPU) at 2 of 4 values "
        "(first at index [0]: PyTorch -150, OpenVINO (CPU) -1); max abs error 149, max rel "
        "error 0.993 (atol 0, rtol 0)."]
    (gpu,) = by_target["OnGpu"]
    assert gpu.startswith("Not checked on ONNX Runtime's CUDA provider: this machine's "
                          "onnxruntime has no CUDAExecutionProvider")
    phones = _targets(fixture_results)["OnPhones"]
    assert [(d.message, d.location.range.start.line) for d in phones.diagnostics] == [
        ("Runs on the CPU: not on NNAPI, `node_sum_1` (ReduceSum: operator not in its table) "
         "(NNAPI takes 3 of 5 nodes, in 1 partition(s), by ONNX Runtime's operator table: it "
         "does not run here).", 102),
        ("Runs on the CPU: not on NNAPI, `n0` (Det: operator not in its table) (NNAPI takes 3 "
         "of 5 nodes, in 1 partition(s), by ONNX Runtime's operator table: it does not run "
         "here); not on CoreML, `n0` (Det: operator not in its table) (CoreML takes 4 of 5 "
         "nodes, in 1 partition(s), by ONNX Runtime's operator table: it does not run here).",
         103)]
    assert [(r.runtime, r.unsupported, r.partitions) for r in phones.summary.runtimes] == [
        ("nnapi", ("n0", "node_sum_1"), 1), ("coreml", ("n0",), 1)]  # ONNX Runtime's order
    assert by_target["DoubleErf"][1].startswith(
        "ONNX Runtime Web (WebAssembly) has no kernel for ONNX node `n0` (Erf) with its input "
        "types, so the model does not load there: ")
    (batch,) = by_target["AnyBatch"]
    assert "`node_linear` (Gemm: an input of dynamic shape" in batch
    assert by_target["Misnamed"] == [
        "`runtimes` names no runtime: 'openvino' (known: ort-cpu, openvino-cpu, ort-web, "
        "nnapi, coreml, cuda, tensorrt)."]


DETERMINANT = textwrap.dedent("""\
    import torch


    # onnx-export: args=(torch.randn(2, 3, 3),)
    class Det(torch.nn.Module):
        def forward(self, x):
            return torch.linalg.det(x)


    # onnx-export: args=(torch.randn(2, 3, 3),), runtimes=["ort-cpu"]
    class OnlyOnnxRuntime(torch.nn.Module):
        def forward(self, x):
            return torch.linalg.det(x)
    """)


def test_the_setting_names_runtimes_for_every_target_and_the_pragma_overrides_it(tmp_path):
    (tmp_path / "model.py").write_text(DETERMINANT)
    default = ExportSession().check_file(tmp_path / "model.py", tmp_path)
    assert [d.rule for d in default.diagnostics] == []  # ort-cpu alone: today's check
    assert default.targets[0].stage("deploy").reason.startswith("no runtime named")
    session = ExportSession(ExportOptions(runtimes=("ort-cpu", "openvino-cpu")))
    result = session.check_file(tmp_path / "model.py", tmp_path)
    rules = {t.name: [(d.rule, d.location.range.start.line) for d in t.diagnostics]
             for t in result.targets}
    assert rules == {"Det": [("ONNX701", 7)], "OnlyOnnxRuntime": []}


@pytest.mark.primary_torch
def test_a_broken_openvino_is_named_not_a_crash(tmp_path):
    """An ``openvino`` that does not import (a broken install) leaves the runtime not run
    here, with the reason; the reference check is unchanged."""
    shadow = tmp_path / "shadow" / "openvino"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("libopenvino.so: cannot open")\n')
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "model.py").write_text(DETERMINANT)
    done = subprocess.run(
        [sys.executable, "-m", "onnxlens", "check", "model.py", "--runtimes", "openvino-cpu",
        ],
        cwd=workspace, capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": f"{shadow.parent}:{REPO}", "PATH": "/usr/bin:/bin",
             "HOME": str(tmp_path)})
    lines = [line for line in done.stdout.splitlines() if line.startswith("model.py:")]
    assert lines == [
        "model.py:5:7: warning[ONNX704]: Not checked on OpenVINO (CPU): the `openvino` "
        "package does not import (libopenvino.so: cannot open; pip install "
        "'onnxlens[runtimes]'). Nothing was proven for it."], done.stdout + done.stderr
    assert done.returncode == 0


@pytest.mark.primary_torch
@pytest.mark.parametrize("flag, problem", [
    ("openvino", "names no runtime: 'openvino'"),
    ("openvino-cpu,gpu", "names no runtime: 'gpu'"),
])
def test_a_bad_runtimes_flag_is_a_usage_error(flag, problem):
    done = subprocess.run([sys.executable, "-m", "onnxlens", "check",
                           str(FIXTURES / "clean"), "--runtimes", flag],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 2
    assert problem in done.stderr


def test_where_onnx_runtime_placed_each_node_is_read_from_a_real_session(tmp_path):
    """The ``cuda``/``tensorrt`` path where the provider exists: the nodes ONNX Runtime left to
    the CPU. This onnxruntime has no GPU provider; its Azure provider takes no node, so every
    node of a session preferring it is on the CPU, as an unsupported node would be."""
    import torch

    from exporter.pipeline import ort_runner

    class Volumes(torch.nn.Module):
        def forward(self, x):
            return torch.linalg.det(x) * 2

    model = torch.onnx.export(Volumes(), (torch.randn(3, 4, 4),), dynamo=True).model_proto
    session = ort_runner.create_session(
        model, providers=("AzureExecutionProvider", ort_runner.CPU))
    placed = ort_runner.node_providers(session)
    assert placed and set(placed.values()) == {ort_runner.CPU}
    assert set(placed) <= {node.name for node in model.graph.node}
    assert {node.op_type for node in model.graph.node if node.name in placed} >= {"Det"}


def test_a_node_onnx_runtime_fused_is_placed_under_a_name_of_its_own(tmp_path):
    """Why a node ONNX Runtime places is traced back to the exported node (``exported_origin``)
    and never looked up by its name alone: with its optimizations ONNX Runtime places fused
    nodes (``node_MatMul_1/MatMulAddFusion``) and nodes of its own, no exported node's name."""
    import torch

    from exporter.pipeline import ort_runner
    from exporter.pipeline.onnx_nodes import exported_origin

    model = torch.onnx.export(torch.nn.Linear(8, 8), (torch.randn(2, 4, 8),),
                              dynamo=True).model_proto
    session = ort_runner.create_session(
        model, providers=("AzureExecutionProvider", ort_runner.CPU))
    placed = ort_runner.node_providers(session)
    exported = {node.name: node for node in model.graph.node}
    assert not set(placed) <= set(exported)
    assert any(exported_origin(name, exported) is not None and name not in exported
               for name in placed)



def _precision_targets(fixture_results):
    return {target.name: target for target in fixture_results[PRECISION][1].targets}


def test_each_precision_variant_is_run_on_onnx_runtime_and_each_runtime_named(fixture_results):
    verdicts = {name: [(run.shown, run.state) for run in target.summary.runtimes]
                for name, target in _precision_targets(fixture_results).items()}
    assert verdicts == {
        "Scaled": [("ort-cpu fp16", "differs")],
        "boosted": [("openvino-cpu", "matches"), ("ort-cpu fp16", "differs"),
                    ("openvino-cpu fp16", "differs")],
        "Tiny": [("ort-cpu fp16", "differs"), ("ort-cpu int8", "matches")],
        "Outlier": [("openvino-cpu", "matches"), ("ort-cpu int8", "differs"),
                    ("openvino-cpu int8", "differs")],
        "Mixed": [("ort-cpu int8", "differs")],
        "SmallNet": [(f"{runtime}{precision}", "matches") for precision in ("", " fp16", " int8")
                     for runtime in (("openvino-cpu", "ort-web") if not precision
                                     else ("ort-cpu", "openvino-cpu", "ort-web"))],
        "Misnamed": []}
    small = _precision_targets(fixture_results)["SmallNet"]
    assert small.diagnostics == [] and small.stage("deploy").state.value == "passed"


def _messages(fixture_results, name, rule):
    return [d.message for d in _precision_targets(fixture_results)[name].diagnostics
            if d.rule == rule]


def test_a_precision_loss_names_the_first_value_lost_and_the_fix_onnxlens_proved(
        fixture_results):
    (scaled,) = _messages(fixture_results, "Scaled", "ONNX707")
    assert scaled.startswith("At fp16 the values first go wrong at `aten.mul.Tensor` (FX node "
                             "`mul`): its value holds infinity or NaN at ")
    assert "beyond float16's largest value 65504" in scaled
    assert scaled.endswith('Tried: keeping ONNX node "node_mul" at float32 makes the model '
                           'match on ONNX Runtime (CPU) (convert with `node_block_list='
                           '["node_mul"]`, onnxruntime.transformers.float16.'
                           'convert_float_to_float16).')
    (output,) = _messages(fixture_results, "Scaled", "ONNX706")
    assert output.startswith("Output `add` is off by up to ")
    assert output.endswith("(the fp16 budget is 1%) on ONNX Runtime (CPU) at fp16.")
    (boosted,) = _messages(fixture_results, "boosted", "ONNX707")
    assert "match on ONNX Runtime (CPU) and OpenVINO (CPU)" in boosted
    (outlier,) = _messages(fixture_results, "Outlier", "ONNX707")
    assert outlier.startswith("At int8 the values first go wrong at `aten.relu.default`")
    assert outlier.endswith('(convert with `nodes_to_exclude=["node_slice_1", "node_relu", '
                            '"node_linear"]`, onnxruntime.quantization.quantize_static).')
    (tiny,) = _messages(fixture_results, "Tiny", "ONNX707")
    assert "Tried" not in tiny  # keeping the multiplication at float32 is not enough
    assert _messages(fixture_results, "Misnamed", "ONNX001") == [
        "`precision` names no precision: 'bf16' (known: fp32, fp16, int8)."]


def test_the_fix_a_message_names_makes_the_model_match_when_converted_by_hand(
        fixture_results, tmp_path):
    """The nodes an ONNX707 names, given to ONNX Runtime's own quantizer by hand, on a new
    export of the model with new weights: the model then keeps its accuracy at int8."""
    import re

    import numpy as np
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    (message,) = _messages(fixture_results, "Mixed", "ONNX707")
    kept = re.findall(r'"(node_\w+)"', message.split("nodes_to_exclude=")[1])
    sys.path.insert(0, str(FIXTURES / "precision"))
    try:
        from model import Mixed  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    features = torch.randn(4, 6) * 3
    proto = torch.onnx.export(Mixed(), (features,), dynamo=True).model_proto
    expected = Mixed()(features).numpy()

    class Once(CalibrationDataReader):
        def __init__(self):
            self.left = [{"features": features.numpy()}]

        def get_next(self):
            return self.left.pop() if self.left else None

    def quantized_error(exclude):
        path = str(tmp_path / f"int8-{len(exclude)}.onnx")
        quantize_static(proto, path, Once(), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        nodes_to_exclude=exclude)
        (actual,) = ort.InferenceSession(path).run(None, {"features": features.numpy()})
        return float(np.abs(actual - expected).max() / np.abs(expected).max())

    assert quantized_error([]) > 0.05
    assert quantized_error(kept) <= 0.05


@pytest.mark.primary_torch
def test_the_precision_flag_checks_every_target_at_it(tmp_path):
    (tmp_path / "model.py").write_text(textwrap.dedent("""\
        import torch


        # onnx-export: args=(torch.randn(2, 4),)
        class Loud(torch.nn.Module):
            def forward(self, x):
                return x * 100000.0
        """))
    done = subprocess.run([sys.executable, "-m", "onnxlens", "check", "model.py",
                           "--precision", "fp16"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    rules = [line.split(": ")[1].split("[")[1].rstrip("]")
             for line in done.stdout.splitlines() if line.startswith("model.py:")]
    assert sorted(rules) == ["ONNX706", "ONNX707"], done.stdout + done.stderr
    assert "  Loud  ort-cpu fp16  differs" in done.stdout
    assert done.returncode == 1


@pytest.mark.primary_torch
def test_a_bad_precision_flag_is_a_usage_error():
    done = subprocess.run([sys.executable, "-m", "onnxlens", "check",
                           str(FIXTURES / "clean"), "--precision", "fp16,bf16"],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 2
    assert "names no precision: 'bf16' (known: fp32, fp16, int8)" in done.stderr


@pytest.mark.primary_torch
def test_a_check_on_openvino_writes_nothing_in_the_users_home(tmp_path):
    """Importing openvino runs its telemetry: a usage count and a client id in ~/intel, and an
    event sent to Google Analytics. The check imports it without (nor does the worker's warm
    import probe import it), and finds what it finds."""
    home, workspace = tmp_path / "home", tmp_path / "ws"
    home.mkdir()
    workspace.mkdir()
    (workspace / "model.py").write_text(DETERMINANT)
    done = subprocess.run(
        [sys.executable, "-m", "onnxlens", "check", "model.py", "--runtimes", "openvino-cpu"],
        cwd=workspace, capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(home)})
    assert "model.py:7:16: error[ONNX701]: OpenVINO (CPU) cannot convert ONNX node `n0` " \
        "(Det)" in done.stdout, done.stdout + done.stderr
    assert not (home / "intel").exists()


def test_one_finding_per_output_names_every_runtime_that_loses_it(fixture_results):
    """Two runtimes losing the same output are one ONNX706 naming both (two findings at one
    place would be merged into the first runtime's message, `(x2)`)."""
    at = {(d.location.range.start.line, d.rule): d
          for target in _precision_targets(fixture_results).values()
          for d in target.diagnostics}
    for line, precision in ((25, "fp16"), (54, "int8")):
        finding = at[(line, "ONNX706")]
        assert finding.count == 1
        assert finding.message.endswith(f"on ONNX Runtime (CPU) at {precision}, and on "
                                        f"OpenVINO (CPU) at {precision}.")


@pytest.mark.parametrize(("first", "then", "joined"), [
    ("Output `y` is off by 3 on A.", "Output `y` is off by 3 on B at fp16.",
     "Output `y` is off by 3 on A, and on B at fp16."),
    ("Output `y` differs from PyTorch on A at 1 of 4 values.",
     "Output `y` differs from PyTorch on B at 2 of 4 values.",
     "Output `y` differs from PyTorch on A at 1 of 4 values, and on B at 2 of 4 values."),
    ("Output `y` is off by 3 on A.", "Output `y` is off by 5 on B.",
     "Output `y` is off by 3 on A. Output `y` is off by 5 on B."),
])
def test_what_two_runtimes_say_of_one_output_is_one_sentence(first, then, joined):
    from exporter.pipeline.stages.deploy import _and_on

    assert _and_on(first, then) == joined
