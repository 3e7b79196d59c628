"""Running an ONNX model in OpenVINO on the CPU (the deploy stage's ``openvino-cpu``).

OpenVINO reads the model with its ONNX frontend, ``convert_partially``: an ONNX node it has
no conversion rule for stays in the graph as a framework node instead of failing the whole
read, so every such node is named, not only the first operator type. The names OpenVINO
gives its operations are the ONNX nodes' (or, for a node it expands like a function,
``Func_<node>X_...``), which lead back to the stack traces the exporter stored.

openvino is imported on first use (it starts threads; the worker forks after importing the
pipeline), and without its telemetry (``_openvino``). The model is written to a scratch
directory with its weights as one external data file: OpenVINO reads ONNX external data from
files only, and a file has no 2 GB limit.
"""

from __future__ import annotations

import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import onnx

from exporter.pipeline.weights_apart import IN_MEMORY

#: OpenVINO's placeholders for ONNX nodes it could not convert
_UNCONVERTED_TYPES = ("ONNXFrameworkNode", "NotSupportedONNXNode", "FrameworkNode")
_WEIGHTS_FILE = "weights.bin"
#: OpenVINO's CPU plugin runs float32 models in bfloat16 on CPUs that have bfloat16 units
#: (its PERFORMANCE default): the comparison with PyTorch would then depend on the machine
#: and measure a precision the user did not choose. ACCURACY keeps the model's own types.
_AT_THE_MODELS_PRECISION = {"EXECUTION_MODE_HINT": "ACCURACY"}


@dataclass(frozen=True)
class OpenVinoRun:
    """What OpenVINO made of the model: the ONNX nodes it could not convert, or the step
    that failed (``read``, ``compile``, ``run``) and its message, or the outputs."""

    unconverted: tuple[str, ...] = ()
    failed_step: str | None = None
    message: str = ""
    nodes: int | None = None  # operations in OpenVINO's graph
    outputs: list[np.ndarray] = field(default_factory=list)


#: the C++ source positions OpenVINO's exceptions start with, once per re-throw
_THROWN_FROM = re.compile(r"Exception from \S+:\d+:\s*")


def message_of(error: Exception) -> str:
    """OpenVINO's message without the source positions of each re-throw."""
    return _THROWN_FROM.sub("", str(error)).strip()


def unavailable() -> str | None:
    """Why OpenVINO cannot run here (None: it can)."""
    try:
        _openvino()
    except ImportError as error:
        return f"the `openvino` package does not import ({error}; pip install 'onnxlens[runtimes]')"
    return None


def _openvino() -> ModuleType:
    """``import openvino`` without its telemetry. Importing openvino imports its model
    converter, whose telemetry (the ``openvino_telemetry`` package) counts each import in
    ``~/intel/stats``, writes a client id beside it and may send usage data to Google
    Analytics: a check would write into the user's home and reach the network. When
    ``openvino_telemetry`` does not import, openvino uses its own stub, which does nothing; it
    is kept from importing while openvino is first imported, and only then."""
    if "openvino" in sys.modules:
        return sys.modules["openvino"]
    blocked = "openvino_telemetry" not in sys.modules
    if blocked:
        sys.modules["openvino_telemetry"] = None  # type: ignore[assignment]  # import fails
    try:
        import openvino
    finally:
        if blocked and sys.modules.get("openvino_telemetry", ...) is None:
            del sys.modules["openvino_telemetry"]
    return openvino


def run(model: onnx.ModelProto, weights: dict[str, np.ndarray],
        feeds: dict[str, np.ndarray]) -> OpenVinoRun:
    """Convert, compile for the CPU and run ``model`` (``weights``: its in-memory external
    initializers, weights_apart) on ``feeds`` (graph input name -> array)."""
    _openvino()
    from openvino import Core
    from openvino.frontend import FrontEndManager

    node_names = [node.name for node in model.graph.node]
    producers = {output: node.name for node in model.graph.node for output in node.output}
    with tempfile.TemporaryDirectory(prefix="onnxlens-openvino-") as directory:
        try:
            path = _write(model, weights, Path(directory))
            frontend = FrontEndManager().load_by_framework("onnx")
            graph = frontend.convert_partially(frontend.load(str(path)))
        except Exception as error:
            return OpenVinoRun(failed_step="read", message=message_of(error))
        operations = list(graph.get_ordered_ops())
        unconverted = [operation for operation in operations
                       if operation.get_type_name() in _UNCONVERTED_TYPES]
        if unconverted:
            names = dict.fromkeys(_onnx_node_making(op, node_names, producers)
                                  for op in unconverted)
            return OpenVinoRun(unconverted=tuple(names), nodes=len(operations))
        try:
            compiled = Core().compile_model(graph, "CPU", _AT_THE_MODELS_PRECISION)
        except Exception as error:
            return OpenVinoRun(failed_step="compile", message=message_of(error),
                               nodes=len(operations))
    try:
        results = compiled(feeds)
        outputs = [np.asarray(results[output]) for output in compiled.outputs]
    except Exception as error:
        return OpenVinoRun(failed_step="run", message=message_of(error), nodes=len(operations))
    return OpenVinoRun(nodes=len(operations), outputs=outputs)


def onnx_node_of(operation: str, node_names: list[str]) -> str | None:
    """The ONNX node an OpenVINO operation name stands for: the node of that name, else the
    node whose function expansion it belongs to (``Func_<node>X_...``)."""
    if operation in node_names:
        return operation
    expanded = re.match(r"^Func_(.+?)X_", operation)
    if expanded and expanded.group(1) in node_names:
        return expanded.group(1)
    return None


def _onnx_node_making(operation: Any, node_names: list[str], producers: dict[str, str]) -> str:
    """The ONNX node an OpenVINO operation comes from: by its name, else by the ONNX values
    it computes (else its own name, which then names no node)."""
    name = operation.get_friendly_name()
    found = onnx_node_of(name, node_names)
    if found is not None:
        return found
    for output in operation.outputs():
        for value in output.get_names():
            if value in producers:
                return producers[value]
    return str(name)


#: where OpenVINO's messages name an operation
_NAMED = (re.compile(r"Operation name: (\S+)"), re.compile(r"opset\d+::\w+ (\S+) \("),
          re.compile(r"friendly_name '([^']+)'"))


def nodes_in_message(message: str, node_names: list[str]) -> list[str]:
    """The ONNX nodes an OpenVINO error message names, in the order it names them."""
    found = []
    for pattern in _NAMED:
        for match in pattern.finditer(message):
            node = onnx_node_of(match.group(1), node_names)
            if node is not None and node not in found:
                found.append(node)
    return found


def _write(model: onnx.ModelProto, weights: dict[str, np.ndarray], directory: Path) -> Path:
    """``model`` saved in ``directory``, its in-memory initializers in one external file."""
    saved = onnx.ModelProto()
    saved.CopyFrom(model)
    with open(directory / _WEIGHTS_FILE, "wb") as data:
        for tensor in saved.graph.initializer:
            if tensor.data_location != onnx.TensorProto.EXTERNAL:
                continue
            entries = {entry.key: entry.value for entry in tensor.external_data}
            if entries.get("location") != IN_MEMORY:
                continue
            array = np.ascontiguousarray(weights[tensor.name])
            offset = data.tell()
            data.write(array.tobytes())
            del tensor.external_data[:]
            for key, value in (("location", _WEIGHTS_FILE), ("offset", str(offset)),
                               ("length", str(array.nbytes))):
                tensor.external_data.add(key=key, value=value)
    path = directory / "model.onnx"
    with open(path, "wb") as file:
        file.write(saved.SerializeToString())
    return path
