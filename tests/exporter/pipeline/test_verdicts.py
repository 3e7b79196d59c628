"""The ten verdict defects of issue "truth", each on its reproduction: onnxlens says what the
plain ``torch.onnx.export(..., dynamo=True)`` + ONNX Runtime say (fixtures/verdicts/).

The files without transformers are also in test_fixture_diagnostics' table; here each
reproduction's point is asserted on its own (which target, which rule, where, what it says).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from exporter.config.options import ExportOptions
from exporter.pipeline.session import ExportSession
from exporter.pipeline.weights_apart import split_weights
from tests.conftest import FIXTURES

VERDICTS = FIXTURES / "verdicts"


def _check(session: ExportSession, name: str, workspace: Path = VERDICTS):
    return session.check_file(workspace / name, workspace)


def _by_target(result):
    return {target.name: target for target in result.targets}


def _rules(target):
    return [(d.rule, d.location.range.start.line) for d in target.diagnostics]


def test_tied_weights_are_clean(session):
    (target,) = _check(session, "tied_weights.py").targets
    assert _rules(target) == []
    assert [s.state.value for s in target.stages] == ["passed"] * 6 + ["skipped"] * 2


def test_tied_weights_are_clean_without_the_optimizer():
    """The translated model keeps the tied weight's second name as an unused initializer:
    it must not be handed to ONNX Runtime apart (it drops unused initializers first)."""
    unoptimized = ExportSession(ExportOptions(optimize=False))
    (target,) = _check(unoptimized, "tied_weights.py").targets
    assert _rules(target) == []


def test_unused_initializers_stay_in_the_proto():
    import onnx_ir as ir

    used = ir.Value(name="used", const_value=ir.tensor(torch.ones(64, 8).numpy()))
    unused = ir.Value(name="unused", const_value=ir.tensor(torch.ones(64, 8).numpy()))
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([64, 8]))
    node = ir.Node("", "Add", [x, used])
    graph = ir.Graph([x], node.outputs, nodes=[node], initializers=[used, unused],
                     opset_imports={"": 18})
    split = split_weights(ir.Model(graph, ir_version=10))
    assert list(split.weights) == ["used"]
    locations = {t.name: t.data_location for t in split.proto.graph.initializer}
    assert locations == {"used": 1, "unused": 0}  # 1: external (apart), 0: in the proto


def test_strict_capture_is_tried_after_non_strict(session):
    (target,) = _check(session, "strict_capture.py").targets
    assert _rules(target) == []
    assert target.summary.capture_strategy == "strict"


def test_inputs_mutated_by_the_model_are_fresh_for_every_run(session):
    (target,) = _check(session, "input_mutation.py").targets
    assert _rules(target) == []
    assert all(entry.matched for entry in target.summary.numerics)


def test_a_graph_with_no_operator_is_valid(session):
    (target,) = _check(session, "no_operator.py").targets
    assert _rules(target) == []
    assert target.summary.opset == torch.onnx._constants.ONNX_DEFAULT_OPSET


def test_inputs_at_another_size_keep_the_example_values(session):
    (target,) = _check(session, "dynamic_values.py").targets
    assert _rules(target) == []
    dynamic = target.stage("dynamic")
    assert dynamic is not None and dynamic.state.value == "passed"
    other_size = target.summary.numerics[-1]
    assert other_size.matched and "repeated" in other_size.situation


def test_resized_inputs_repeat_the_example():
    from exporter.pipeline.example_inputs import resized

    ids = torch.tensor([[3, 1, 4]])
    assert resized(ids, [2, 5]).tolist() == [[3, 1, 4, 3, 1], [3, 1, 4, 3, 1]]
    assert resized(torch.ones(1, 3, dtype=torch.long), [4, 7]).eq(1).all()
    assert resized(ids, [1, 2]).tolist() == [[3, 1]]


def test_sparse_buffers_and_inputs(session):
    targets = _by_target(_check(session, "sparse_tensors.py"))
    assert _rules(targets["SparseBuffer"]) == []
    assert _rules(targets["SparseInput"]) == []


def test_requested_opsets(session):
    targets = _by_target(_check(session, "opsets.py"))
    assert {name: t.summary.opset for name, t in targets.items()} == {
        "opset17": 17, "opset23": 23, "opset_unknown": 18,
        "default_opset": torch.onnx._constants.ONNX_DEFAULT_OPSET}
    for name in ("opset17", "opset23", "default_opset"):
        assert _rules(targets[name]) == [], name
    (warning,) = targets["opset_unknown"].diagnostics
    assert (warning.rule, warning.severity.value) == ("ONNX203", "warning")
    assert warning.location.range.start.line == 25  # the pragma's `opset=99999`
    assert "opset 18, not the requested opset 99999" in warning.message


def test_duplicate_names_check_each_definition(session):
    targets = _by_target(_check(session, "duplicate_names.py"))
    assert _rules(targets["A"]) == []
    assert _rules(targets["second"]) == [("ONNX201", 15)]
    # the first `build` is checked as def made it (the module's `build`, the second one,
    # builds the failing class A)
    assert _rules(targets["build"]) == []


DECORATED = """\
import torch


def identity(function):
    return function


# onnx-export: args=(torch.randn(3, 4),)
@identity
def decorated():
    return torch.nn.ReLU()


decorated = None
"""


def test_a_rebound_decorated_function_is_an_annotation_problem(session, tmp_path):
    """A decorator's result cannot be rebuilt from the code: say so, at the definition
    (not in fixtures/: the corpus's truth keeps the annotated definition by rewriting the
    module, which onnxlens does not do)."""
    (tmp_path / "model.py").write_text(DECORATED)
    (target,) = _check(session, "model.py", tmp_path).targets
    (rebound,) = target.diagnostics
    assert (rebound.rule, rebound.location.range.start.line) == ("ONNX001", 10)
    assert "bound again at line 14" in rebound.message


@pytest.fixture(scope="module")
def transformers_results(session):
    pytest.importorskip("transformers")
    workspace = VERDICTS / "transformers"
    return {path.name: session.check_file(path, workspace)
            for path in sorted(workspace.glob("*.py"))}


def test_failure_in_a_preparation_pass_is_reported(transformers_results):
    (target,) = transformers_results["swin.py"].targets
    (diagnostic,) = target.diagnostics
    assert (diagnostic.rule, diagnostic.location.range.start.line) == ("ONNX202", 8)
    assert "Cannot view a tensor" in diagnostic.message
    assert "at `aten::view`" in diagnostic.message


def test_failure_in_library_code_names_the_library_line(transformers_results):
    (diagnostic,) = transformers_results["swin.py"].diagnostics
    assert "(in transformers/models/swin/modeling_swin.py:" in diagnostic.message
    library = [r for r in diagnostic.related if "modeling_swin.py" in r.location.path.name]
    assert library, diagnostic.related
    innermost = library[0]
    assert innermost.message.startswith("in `")
    line = innermost.location.path.read_text().splitlines()[innermost.location.range.start.line - 1]
    assert ".reshape(" in line  # aten::view, as transformers' code spells it


def test_llama_with_dynamic_batch_and_sequence_is_clean(transformers_results):
    (target,) = transformers_results["llama_dynamic.py"].targets
    assert _rules(target) == []
    assert target.stage("dynamic").state.value == "passed"
