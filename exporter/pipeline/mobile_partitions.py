"""Which nodes ONNX Runtime's mobile execution providers would take (NNAPI on Android, CoreML
on Apple devices), from the operator tables ONNX Runtime ships with its usability checker
(``onnxruntime.tools.mobile_helpers``, what ``check_onnx_model_mobile_usability`` prints). Neither
provider runs here, so this is ONNX Runtime's own static estimate: an operator missing from
the table, or an input of dynamic shape (NNAPI and CoreML need fixed sizes), leaves the node to
the CPU provider, and the graph is cut into partitions around it."""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from exporter.pipeline.weights_apart import checkable

#: the table of each provider (CoreML: its ML Program format, the one newer devices run)
_COREML_TABLE = "coreml_supported_mlprogram_ops.md"


@dataclass(frozen=True)
class Partitioning:
    nodes: int
    supported: int
    partitions: int
    #: (ONNX node name, why it stays on the CPU) of each node of the main graph not taken
    fallen_back: tuple[tuple[str, str], ...]


def partition(model: onnx.ModelProto, provider: str) -> Partitioning:
    """``provider``: ``nnapi`` or ``coreml``."""
    from onnxruntime.tools.mobile_helpers import usability_checker

    shaped = onnx.shape_inference.infer_shapes(checkable(model))
    if provider == "nnapi":
        info = usability_checker.check_nnapi_partitions(shaped, require_fixed_input_sizes=True)
    else:
        info = usability_checker.check_coreml_partitions(shaped, True, _COREML_TABLE)
    taken = {node.name for group in info.supported_groups for node in group}
    fallen_back = tuple((node.name, _why(node, info.supported_ops_checker))
                        for node in shaped.graph.node if node.name not in taken)
    return Partitioning(info.num_nodes, info.num_supported_nodes, info.num_partitions,
                        fallen_back)


def _why(node: onnx.NodeProto, table: object) -> str:
    if not table.is_op_supported(node):  # type: ignore[attr-defined]
        return "operator not in its table"
    return "an input of dynamic shape or of a rank it does not take"
