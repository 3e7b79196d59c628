"""Running an ONNX model in ONNX Runtime with a model's example inputs.

onnxruntime is imported on first use, not with this module: its import starts a thread, and
the language server's export worker imports the pipeline before it forks (a process that
forks must run no threads that the children could need)."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
import torch

from exporter.pipeline.weights_apart import PROTOBUF_LIMIT
from exporter.reports.run import Latency
from exporter.toolchain import torch_compat

if TYPE_CHECKING:
    import onnxruntime as ort



CPU = "CPUExecutionProvider"


def create_session(model: onnx.ModelProto, serialized: bytes | None = None,
                   weights: dict[str, np.ndarray] | None = None,
                   providers: tuple[str, ...] = (CPU,)) -> ort.InferenceSession:
    """A session for ``model`` on ``providers`` in order of preference, CPU by default
    (``serialized``: the same model, already serialized; ``weights``: the data of its
    in-memory external initializers, see weights_apart). With another provider, which one runs
    each node is recorded (``node_providers``)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if tuple(providers) != (CPU,):
        options.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    return _session(model, serialized, weights, providers, options)


def basic_optimized(model: onnx.ModelProto, serialized: bytes | None = None,
                    weights: dict[str, np.ndarray] | None = None) -> onnx.ModelProto:
    """The graph ONNX Runtime hands to its execution providers: ``model`` after the basic
    optimizations (constant folding, redundant nodes removed), which run before the graph is
    partitioned among providers (ONNX Runtime's docs, "Graph optimizations"; its mobile
    usability checker reads the same). Only the graph is read back: no weights, no node
    metadata (ONNX Runtime keeps neither)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    with tempfile.TemporaryDirectory(prefix="onnxlens-") as directory:
        path = Path(directory) / "optimized.onnx"
        options.optimized_model_filepath = str(path)
        options.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", "optimized.onnx.data")
        _session(model, serialized, weights, (CPU,), options)
        return onnx.load(path, load_external_data=False)


def _session(model: onnx.ModelProto, serialized: bytes | None,
             weights: dict[str, np.ndarray] | None, providers: tuple[str, ...],
             options: ort.SessionOptions) -> ort.InferenceSession:
    import onnxruntime as ort

    options.log_severity_level = 4  # fatal only: failures are reported as diagnostics instead
    # ONNX Runtime reads these buffers in place: the session keeps them alive (below)
    weights = weights or {}
    values = [ort.OrtValue.ortvalue_from_numpy(array) for array in weights.values()]
    if values:
        options.add_external_initializers(list(weights), values)
    if serialized is None and model.ByteSize() < PROTOBUF_LIMIT:
        serialized = model.SerializeToString()
    if serialized is not None:
        session = ort.InferenceSession(serialized, options, providers=list(providers))
    else:
        with tempfile.TemporaryDirectory(prefix="onnxlens-") as directory:
            path = Path(directory) / "model.onnx"
            onnx.save_model(model, path, save_as_external_data=True, location="model.onnx.data")
            session = ort.InferenceSession(str(path), options, providers=list(providers))
    session.onnxlens_weights = values
    return session


def node_providers(session: ort.InferenceSession) -> dict[str, str]:
    """The execution provider ONNX Runtime placed each node of its optimized graph on (fused
    nodes carry names of their own)."""
    return {node.name: subgraph.ep_name for subgraph in session.get_provider_graph_assignment_info()
            for node in subgraph.get_nodes()}


def flat_inputs(args: tuple, kwargs: dict[str, Any],
                program: torch.export.ExportedProgram | None = None) -> list[Any]:
    """The example inputs the ONNX model takes, in the order of its graph inputs (as torch.onnx
    flattens them). With the exported program, each input its signature does not make a
    constant: every tensor, and a number export kept symbolic (an ``int`` input declared
    dynamic is a 0-d graph input); a static number or ``None`` is part of the graph. Without
    it, the tensors."""
    flat = []
    for leaf in _graph_input_leaves(torch_compat.tree_leaves((args, kwargs)), program):
        if isinstance(leaf, torch.Tensor) and leaf.is_complex():
            leaf = torch.view_as_real(leaf.resolve_conj())
        flat.append(leaf)
    return flat


def _graph_input_leaves(leaves: list[Any],
                        program: torch.export.ExportedProgram | None) -> list[Any]:
    from torch.export.graph_signature import ConstantArgument, InputKind

    if program is not None:
        specs = [spec.arg for spec in program.graph_signature.input_specs
                 if spec.kind == InputKind.USER_INPUT]
        if len(specs) == len(leaves):
            return [leaf for leaf, spec in zip(leaves, specs)
                    if not isinstance(spec, ConstantArgument)]
    return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]


def flat_outputs(outputs: Any) -> list[Any]:
    leaves = torch_compat.tree_leaves(outputs)
    return [leaf for leaf in leaves if leaf is not None]


def expected_outputs(outputs: Any) -> list[np.ndarray]:
    """PyTorch's outputs in the order and form of the ONNX model's: every tensor and every
    number. A size the model returns (``x.shape[0]`` of a dynamic dimension) is an ONNX output
    of its own, a 0-d tensor; a constant number makes the translation fail in every supported
    torch, so no number is left out of the ONNX model's outputs."""
    return [to_numpy(leaf) for leaf in flat_outputs(outputs)
            if isinstance(leaf, (torch.Tensor, bool, int, float))]


def to_numpy(value: Any) -> np.ndarray:
    """A tensor's values as ONNX holds them: dense, bfloat16 as float32, and a complex tensor
    as its real and imaginary parts in a last axis of 2 (``torch.view_as_real``, as the
    exporter translates complex values)."""
    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu()
        if tensor.layout != torch.strided:  # sparse: ONNX takes the dense values
            tensor = tensor.to_dense()
        if tensor.is_complex():
            tensor = torch.view_as_real(tensor.resolve_conj())
        if tensor.dtype == torch.bfloat16:
            tensor = tensor.float()
        return tensor.numpy()
    return np.asarray(value)


def feed(session: ort.InferenceSession, inputs: list[Any]) -> dict[str, np.ndarray]:
    """``inputs`` (from ``flat_inputs``) by graph input name."""
    names = [value.name for value in session.get_inputs()]
    if len(inputs) != len(names):
        raise ValueError(f"the ONNX model takes {len(names)} inputs but the example inputs "
                         f"flatten to {len(inputs)}")
    return {name: input_array(value) for name, value in zip(names, inputs)}


def input_array(value: Any) -> np.ndarray:
    """An input as ONNX Runtime takes it: a number as a 0-d array of the type torch.onnx
    gives it (``int`` int64, ``float`` float32, as ``ONNXProgram.__call__`` feeds it)."""
    if isinstance(value, bool):
        return np.asarray(value)
    if isinstance(value, int):
        return np.asarray(value, dtype=np.int64)
    if isinstance(value, float):
        return np.asarray(value, dtype=np.float32)
    return to_numpy(value)


def run(session: ort.InferenceSession, inputs: list[Any]) -> list[np.ndarray]:
    import onnxruntime as ort

    options = ort.RunOptions()
    options.log_severity_level = 4
    return session.run(None, feed(session, inputs), options)


def latency(session: ort.InferenceSession, inputs: list[Any], repeat: int) -> Latency:
    """Latency percentiles in milliseconds over ``repeat`` runs (after one warm-up run)."""
    feeds = feed(session, inputs)
    session.run(None, feeds)
    samples = []
    for _ in range(max(repeat, 1)):
        start = time.perf_counter()
        session.run(None, feeds)
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()

    def percentile(fraction: float) -> float:
        return samples[min(len(samples) - 1, round(fraction * (len(samples) - 1)))]

    return Latency(runs=len(samples), p50_ms=percentile(0.5), p90_ms=percentile(0.9),
                   mean_ms=statistics.fmean(samples), min_ms=samples[0])
