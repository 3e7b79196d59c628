"""The model handed to the checker and ONNX Runtime keeps its large weights apart from the
protobuf, and ONNX Runtime computes exactly what it computes from the whole model."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch

from exporter.pipeline import ort_runner
from exporter.pipeline.weights_apart import IN_MEMORY, checkable, split_weights


class Small(torch.nn.Module):
    """A large weight (64×64 floats), a small one (4 floats) and a bfloat16 buffer."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.big = torch.nn.Linear(64, 64, bias=False)
        self.small = torch.nn.Parameter(torch.randn(4))
        self.register_buffer("brain", torch.randn(64, 64).to(torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.big(x) + self.brain.float().sum()
        return torch.cat([y[:, :60], y[:, 60:] * self.small], dim=1)


@pytest.fixture(scope="module")
def exported():
    model = Small().eval()
    example = torch.randn(3, 64)
    program = torch.onnx.export(model, (example,), dynamo=True, optimize=False, verbose=False)
    return model, example, program


def _initializers(proto: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    return {tensor.name: tensor for tensor in proto.graph.initializer}


def test_large_float_weights_are_apart_small_and_bfloat16_ones_stay(exported):
    model, _, program = exported
    split = split_weights(program.model)
    initializers = _initializers(split.proto)
    assert list(split.weights) == ["big.weight"]
    big = initializers["big.weight"]
    assert big.data_location == onnx.TensorProto.EXTERNAL and not big.raw_data
    assert {entry.key: entry.value for entry in big.external_data}["location"] == IN_MEMORY
    np.testing.assert_array_equal(split.weights["big.weight"], model.big.weight.detach().numpy())
    for name in ("small", "brain"):
        assert initializers[name].data_location == onnx.TensorProto.DEFAULT
        assert initializers[name].raw_data
    # the model itself keeps its weights
    assert program.model.graph.initializers["big.weight"].const_value.nbytes == 64 * 64 * 4


def test_onnx_runtime_computes_the_same_as_from_the_whole_model(exported):
    _, example, program = exported
    split = split_weights(program.model)
    whole = ort_runner.create_session(program.model_proto)
    apart = ort_runner.create_session(split.proto, split.proto.SerializeToString(),
                                      split.weights)
    inputs = ort_runner.flat_inputs((example,), {})
    for want, got in zip(ort_runner.run(whole, inputs), ort_runner.run(apart, inputs)):
        np.testing.assert_array_equal(got, want)


def test_the_session_keeps_the_weights_it_was_created_with(exported):
    """A later stage may run the model, which may update its buffers: the session's weights
    are a copy taken when the model was translated."""
    model, example, program = exported
    split = split_weights(program.model)
    session = ort_runner.create_session(split.proto, None, split.weights)
    inputs = ort_runner.flat_inputs((example,), {})
    before = ort_runner.run(session, inputs)
    original = model.big.weight.detach().clone()
    try:
        with torch.no_grad():
            model.big.weight.add_(1.0)
        after = ort_runner.run(session, inputs)
    finally:
        with torch.no_grad():
            model.big.weight.copy_(original)
    np.testing.assert_array_equal(after[0], before[0])


def test_checkable_turns_the_weights_apart_into_typed_inputs(exported):
    _, _, program = exported
    checked = checkable(split_weights(program.model).proto)
    inputs = {value.name: value for value in checked.graph.input}
    assert "big.weight" in inputs and "big.weight" not in _initializers(checked)
    shape = inputs["big.weight"].type.tensor_type.shape
    assert [dim.dim_value for dim in shape.dim] == [64, 64]
    assert inputs["big.weight"].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    onnx.checker.check_model(checked.SerializeToString())
    inferred = onnx.shape_inference.infer_shapes(checked, check_type=True, strict_mode=True)
    assert inferred.graph.output[0].type.tensor_type.shape.dim[1].dim_value == 64


def test_without_data_every_initializer_is_apart():
    with torch.device("meta"):
        model = Small().eval()
    program = torch.onnx.export(model, (torch.randn(3, 64, device="meta"),), dynamo=True,
                                optimize=False, verbose=False)
    split = split_weights(program.model, with_data=False)
    assert split.weights == {}
    assert all(tensor.data_location == onnx.TensorProto.EXTERNAL
               for tensor in split.proto.graph.initializer)
    checked = checkable(split.proto)
    assert not checked.graph.initializer
    onnx.checker.check_model(checked)


def test_checkable_returns_a_model_without_weights_apart_as_it_is(exported):
    _, _, program = exported
    whole = program.model_proto
    assert checkable(whole) is whole


def test_the_weights_apart_written_to_a_file_are_the_models_external_data(exported, tmp_path):
    """``with_weights_file``: each weight apart once, one after another, and a model that
    refers to them there, which onnx (and ONNX Runtime) reads as the whole model."""
    from exporter.pipeline.weights_apart import with_weights_file

    _, _, program = exported
    split = split_weights(program.model)
    referring = with_weights_file(split.proto, split.weights, tmp_path / "model.onnx.data")
    assert referring is not split.proto  # the check's own model is left as it was
    assert _initializers(split.proto)["big.weight"].external_data[0].value == IN_MEMORY
    assert (tmp_path / "model.onnx.data").stat().st_size == sum(
        array.nbytes for array in split.weights.values())
    onnx.save_model(referring, tmp_path / "model.onnx")
    loaded = onnx.load(tmp_path / "model.onnx")
    for name, array in split.weights.items():
        np.testing.assert_array_equal(onnx.numpy_helper.to_array(_initializers(loaded)[name]),
                                      array)
    assert with_weights_file(split.proto, {}, tmp_path / "none.data") is split.proto
