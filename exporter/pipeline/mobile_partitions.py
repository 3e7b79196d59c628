"""Which nodes ONNX Runtime's mobile execution providers would take (NNAPI on Android, CoreML
on Apple devices), from the operator tables ONNX Runtime ships with its usability checker
(``onnxruntime.tools.mobile_helpers``, what ``check_onnx_model_mobile_usability`` prints). Neither
provider runs here, so this is ONNX Runtime's own static estimate: an operator missing from
the table, or an input of dynamic shape (NNAPI and CoreML need fixed sizes), leaves the node to
the CPU provider, and the graph is cut into partitions around it.

The graph judged is the one ONNX Runtime partitions: the model after its basic optimizations
(a ``Gather`` of constants is folded away before any provider sees it), as the checker reads
it by default. Each node left out is traced back to the exported node it came from: the same
name, or the name before ``/`` of a node ONNX Runtime fused (``node_MatMul_3/MatMulAddFusion``);
a node the optimizer made up is its own."""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from exporter.pipeline.onnx_nodes import exported_origin
from exporter.pipeline.weights_apart import checkable

#: the table of each provider (CoreML: its ML Program format, the one newer devices run)
_COREML_TABLE = "coreml_supported_mlprogram_ops.md"


@dataclass(frozen=True)
class Partitioning:
    nodes: int
    supported: int
    partitions: int
    #: (the exported node it came from, why it stays on the CPU) of each node of the main
    #: graph not taken; a node ONNX Runtime's optimizer made up stands for itself
    fallen_back: tuple[tuple[onnx.NodeProto, str], ...]


def partition(exported: onnx.ModelProto, optimized: onnx.ModelProto,
              provider: str) -> Partitioning:
    """``provider`` (``nnapi`` or ``coreml``) on ``optimized``, the graph ONNX Runtime makes
    of ``exported`` (``ort_runner.basic_optimized``)."""
    from onnxruntime.tools.mobile_helpers import usability_checker

    shaped = onnx.shape_inference.infer_shapes(checkable(optimized))
    if provider == "nnapi":
        info = usability_checker.check_nnapi_partitions(shaped, require_fixed_input_sizes=True)
    else:
        info = usability_checker.check_coreml_partitions(shaped, True, _COREML_TABLE)
    taken = {node.name for group in info.supported_groups for node in group}
    exported_nodes = {node.name: node for node in exported.graph.node}
    fallen_back = tuple((exported_origin(node.name, exported_nodes) or node,
                         _why(node, info.supported_ops_checker))
                        for node in shaped.graph.node if node.name not in taken)
    return Partitioning(info.num_nodes, info.num_supported_nodes, info.num_partitions,
                        fallen_back)


def _why(node: onnx.NodeProto, table: object) -> str:
    if not table.is_op_supported(node):  # type: ignore[attr-defined]
        return "operator not in its table"
    return "an input of dynamic shape or of a rank it does not take"
