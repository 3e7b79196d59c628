"""A saved model without the source metadata the exporter records (``onnxlens save
--strip-source-metadata``, docs/graph.md): the stack traces, whose frames name the absolute
paths of the machine that exported the model, and any other metadata value naming such a
path. The names the exporter gives the module hierarchy (``namespace``,
``pkg.torch.onnx.class_hierarchy``) stay: they hold no path and keep the graph readable."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import onnx
from google.protobuf.internal.containers import RepeatedCompositeFieldContainer

from exporter.reports.graph_view import STACK_TRACE_KEY

# An absolute path as the exporter writes one: in a traceback's `File "/..."`, or bare
_ABSOLUTE_PATH = re.compile(r"""(^|[\s"'(=\[,])(/[^/\s"']+){2,}|[A-Za-z]:\\[^\s"']+""")


def strip_source_metadata(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` without stack traces and without metadata that names an absolute
    path, in every graph, subgraph and function, and on the model itself."""
    stripped = onnx.ModelProto()
    stripped.CopyFrom(model)
    _keep_pathless(stripped.metadata_props)
    for node in _all_nodes(stripped):
        _keep_pathless(node.metadata_props, drop_key=STACK_TRACE_KEY)
    return stripped


def _keep_pathless(props: RepeatedCompositeFieldContainer[onnx.StringStringEntryProto],
                   drop_key: str | None = None) -> None:
    kept = [(entry.key, entry.value) for entry in props
            if entry.key != drop_key and not _ABSOLUTE_PATH.search(entry.value)]
    del props[:]
    for key, value in kept:
        props.add(key=key, value=value)


def _all_nodes(model: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    yield from _with_subgraph_nodes(model.graph.node)
    for function in model.functions:
        yield from _with_subgraph_nodes(function.node)


def _with_subgraph_nodes(nodes: Iterable[onnx.NodeProto]) -> Iterator[onnx.NodeProto]:
    for node in nodes:
        yield node
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from _with_subgraph_nodes(attribute.g.node)
            elif attribute.type == onnx.AttributeProto.GRAPHS:
                for graph in attribute.graphs:
                    yield from _with_subgraph_nodes(graph.node)
