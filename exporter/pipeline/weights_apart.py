"""The ONNX model with its weights kept apart from the protobuf.

A check hands the model to ``onnx.checker``, shape inference and ONNX Runtime. Serializing the
weights into the protobuf copies them three times (into the proto, into its bytes, and out
again in ONNX Runtime's parser) and stops at protobuf's 2 GB limit. Here the large
initializers are *external* references (``location`` = ``IN_MEMORY``) whose data ONNX Runtime
receives straight from memory (``SessionOptions.add_external_initializers``), so it still sees
them as constant initializers and optimizes as it would the saved model. The checker and shape
inference get the same graph with those initializers as typed graph inputs (their data never
takes part in either: small tensors, such as shapes, stay in the proto).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir

IN_MEMORY = "onnxlens-in-memory"
# protobuf serializes at most 2 GB; weights that stay in the proto count towards it
PROTOBUF_LIMIT = 2**31 - 1
# Tensors below this size stay in the proto (onnx.save_model's default threshold): they are
# the ones shape inference reads (shapes, axes, scalars), and moving them saves nothing.
_INLINE_BELOW = 1024


@dataclass
class SplitModel:
    """``proto`` refers to ``weights`` (by initializer name) for its large initializers."""

    proto: onnx.ModelProto
    weights: dict[str, np.ndarray] = field(default_factory=dict)


def split_weights(model: ir.Model, *, with_data: bool = True) -> SplitModel:
    """Serialize ``model`` with its large initializers apart (``with_data=False``: all of
    them, and no data, for models built on the meta device)."""
    apart: dict[ir.Value, ir.TensorProtocol] = {}
    weights: dict[str, np.ndarray] = {}
    for value in model.graph.initializers.values():
        tensor = value.const_value
        # An initializer no node reads stays as it is: ONNX Runtime drops it before it
        # would take its data from memory, and then fails to find it (a model translated
        # without conversion or optimization keeps a tied weight's second name unused).
        if tensor is None or not (value.uses() or value.is_graph_output()):
            continue
        if with_data:
            if tensor.nbytes < _INLINE_BELOW:
                continue
            array = _plain_array(tensor)
            if array is None:
                continue
            weights[value.name] = array
        apart[value] = tensor
    try:
        for value, tensor in apart.items():
            value.const_value = ir.ExternalTensor(IN_MEMORY, 0, tensor.nbytes, tensor.dtype,
                                                  shape=tensor.shape, name=value.name)
        proto = ir.serde.serialize_model(model)
    finally:
        for value, tensor in apart.items():
            value.const_value = tensor
    return SplitModel(proto, weights)


def _plain_array(tensor: ir.TensorProtocol) -> np.ndarray | None:
    """A private, contiguous copy of the tensor's data in a dtype numpy and ONNX Runtime share
    (bfloat16 and the float8 types stay in the proto). A copy: the model may update its
    buffers when a later stage runs it, and ONNX Runtime reads the weights in place."""
    try:
        array = tensor.numpy()
    except Exception:  # a tensor that cannot become numpy stays in the proto
        return None
    if array.dtype.kind not in "biuf" or array.dtype.type.__module__ != "numpy":
        return None
    return np.array(array, copy=True, order="C")


def checkable(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` with every external initializer turned into a graph input of its type and
    shape: what ``onnx.checker`` and shape inference read (the checker would look for the
    external data as a file). Callers must not change the result: it may be ``proto``."""
    if not any(t.data_location == onnx.TensorProto.EXTERNAL for t in proto.graph.initializer):
        return proto  # nothing apart (e.g. bfloat16 weights): no copy of the weights
    checked = onnx.ModelProto()
    checked.CopyFrom(proto)
    graph = checked.graph
    apart = [t for t in graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    kept = [t for t in graph.initializer if t.data_location != onnx.TensorProto.EXTERNAL]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    graph.input.extend(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                       for t in apart)
    return checked


def with_weights(model: onnx.ModelProto, weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    """``model`` with its in-memory initializers' data in the proto (for what reads one
    buffer: ONNX Runtime Web, ONNX Runtime's converters); ``model`` itself when none is
    apart."""
    if not weights:
        return model
    complete = onnx.ModelProto()
    complete.CopyFrom(model)
    for tensor in complete.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL and tensor.name in weights:
            del tensor.external_data[:]
            tensor.data_location = onnx.TensorProto.DEFAULT
            tensor.raw_data = np.ascontiguousarray(weights[tensor.name]).tobytes()
    return complete


def with_weights_file(model: onnx.ModelProto, weights: dict[str, np.ndarray],
                      path: Path) -> onnx.ModelProto:
    """``model`` referring to its in-memory initializers' data written one after another to
    ``path`` (its ``location`` is the file's name), for what reads external data from a file
    (ONNX Runtime Web): the weights are written once, never copied into the proto or its
    bytes; ``model`` itself when none is apart."""
    if not weights:
        return model
    referring = onnx.ModelProto()
    referring.CopyFrom(model)  # small: the weights are apart
    offset = 0
    with path.open("wb") as file:
        for tensor in referring.graph.initializer:
            if tensor.data_location != onnx.TensorProto.EXTERNAL or tensor.name not in weights:
                continue
            data = np.ascontiguousarray(weights[tensor.name])
            file.write(memoryview(data).cast("B"))
            del tensor.external_data[:]
            for key, value in (("location", path.name), ("offset", str(offset)),
                               ("length", str(data.nbytes))):
                tensor.external_data.add(key=key, value=value)
            offset += data.nbytes
    return referring
