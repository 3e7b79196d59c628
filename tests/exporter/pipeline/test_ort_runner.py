"""PyTorch's values as the exported model holds them (exporter/pipeline/ort_runner.py), the
side of every comparison with ONNX Runtime. The checks of such models:
tests/exporter/fixtures/complex_outputs, judged against the plain exporter by the corpus."""

from __future__ import annotations

import numpy as np
import torch

from exporter.pipeline import ort_runner


def test_a_complex_tensor_is_its_real_and_imaginary_parts_in_a_last_axis() -> None:
    values = torch.complex(torch.tensor([[1.0, 2.0]]), torch.tensor([[3.0, -4.0]]))
    assert np.array_equal(ort_runner.to_numpy(values), [[[1.0, 3.0], [2.0, -4.0]]])
    # a lazily conjugated tensor is conjugated first
    assert np.array_equal(ort_runner.to_numpy(values.conj()), [[[1.0, -3.0], [2.0, 4.0]]])


def test_sparse_and_bfloat16_tensors_are_dense_float32() -> None:
    dense = torch.tensor([[0.0, 1.5], [2.5, 0.0]])
    assert np.array_equal(ort_runner.to_numpy(dense.to_sparse()), dense.numpy())
    half = ort_runner.to_numpy(dense.to(torch.bfloat16))
    assert half.dtype == np.float32 and np.array_equal(half, dense.numpy())


def test_numbers_among_the_outputs_are_outputs_of_their_own_in_place() -> None:
    # a size of a dynamic dimension is a 0-d ONNX output where the model returns it; None is
    # no output (tests/exporter/fixtures/number_outputs, judged by the corpus)
    hidden = torch.ones(2, 3)
    expected = ort_runner.expected_outputs({"length": 3, "hidden": hidden, "mask": None,
                                            "scale": (0.5, True)})
    assert [array.shape for array in expected] == [(), (2, 3), (), ()]
    assert [array.dtype.kind for array in expected] == ["i", "f", "f", "b"]
    assert expected[0] == 3 and np.array_equal(expected[1], hidden.numpy())


def test_the_inputs_are_those_the_exported_program_did_not_make_constants() -> None:
    # an int declared dynamic is a 0-d int64 input in its place; a static int and None are
    # part of the graph (tests/exporter/fixtures/number_inputs, judged by the corpus)
    class Window(torch.nn.Module):
        def forward(self, x, mask, start: int, length: int):
            return x.narrow(0, start, length)

    x = torch.ones(6, 2)
    args = (x, None, 1, 4)
    program = torch.export.export(Window(), args,
                                  dynamic_shapes=(None, None, None, torch.export.Dim.DYNAMIC))
    inputs = ort_runner.flat_inputs(args, {}, program)
    assert len(inputs) == 2 and inputs[0] is x and inputs[1] == 4
    number = ort_runner.input_array(inputs[1])
    assert number.shape == () and number.dtype == np.int64
    # without the program: the tensors
    assert ort_runner.flat_inputs(args, {}) == [x]
