"""The exported model at another precision (the deploy stage's ``precision``,
docs/runtimes.md#precisions), made by ONNX Runtime's own tools as a user deploying it would:
float16 by ``onnxruntime.transformers.float16`` (inputs and outputs kept float32, its default
list of operators kept in float32), int8 by ``onnxruntime.quantization.quantize_static`` (QDQ
format, signed 8-bit activations and weights) calibrated on the example inputs. ``keep``
names ONNX nodes left at float32 (the converter's ``node_block_list``, the quantizer's
``nodes_to_exclude``): how a fix is proven.

Both tools take a whole model, so the in-memory weights are put back into a copy of it; a
model above protobuf's 2 GB limit is not converted (said so, never passed).
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx

from exporter.pipeline.weights_apart import PROTOBUF_LIMIT, with_weights

#: the largest error each precision may add, as a share of the value's own scale (its
#: largest magnitude in PyTorch): float16 keeps 11 significant bits, and an int8 tensor has
#: 256 steps across its calibrated range
BUDGETS = {"fp16": 1e-2, "int8": 5e-2}
#: how each tool is told to leave nodes at float32, as the fix says it
KEEP_ARGUMENT = {"fp16": "node_block_list", "int8": "nodes_to_exclude"}
TOOL = {"fp16": "onnxruntime.transformers.float16.convert_float_to_float16",
        "int8": "onnxruntime.quantization.quantize_static"}


class ConversionFailed(Exception):
    """The tool refused the model (its message), or the model cannot be handed to it."""


def convert(model: onnx.ModelProto, weights: dict[str, np.ndarray], precision: str,
            feeds: dict[str, np.ndarray], keep: tuple[str, ...] = ()) -> onnx.ModelProto:
    """``model`` (its in-memory initializers in ``weights``) at ``precision``, with its own
    weights inside; ``feeds``: the example inputs by graph input name (int8's calibration)."""
    size = model.ByteSize() + sum(array.nbytes for array in weights.values())
    if size > PROTOBUF_LIMIT:
        raise ConversionFailed(f"the model is {size / 2**30:.1f} GB, above the 2 GB that "
                               "ONNX Runtime's converters take in one piece")
    whole = with_weights(model, weights)
    try:
        with _quiet_root_logger(), _tools_importable():
            if precision == "fp16":
                return _float16(whole, keep)
            return _int8(whole, feeds, keep)
    except ConversionFailed:
        raise
    except Exception as error:  # the tools raise anything (ValueError, KeyError, onnx's)
        raise ConversionFailed(f"{TOOL[precision]} failed: {type(error).__name__}: "
                               f"{error}") from error


def _float16(model: onnx.ModelProto, keep: tuple[str, ...]) -> onnx.ModelProto:
    from onnxruntime.transformers.float16 import convert_float_to_float16

    converted = convert_float_to_float16(model, keep_io_types=True,
                                         node_block_list=list(keep) or None)
    assert isinstance(converted, onnx.ModelProto)
    return converted


def _int8(model: onnx.ModelProto, feeds: dict[str, np.ndarray],
          keep: tuple[str, ...]) -> onnx.ModelProto:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class ExampleInputs(CalibrationDataReader):
        def __init__(self) -> None:
            self.left = iter([feeds])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.left, None)

    with tempfile.TemporaryDirectory(prefix="onnxlens-int8-") as directory:
        path = Path(directory) / "int8.onnx"
        quantize_static(model, path, ExampleInputs(), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        nodes_to_exclude=list(keep))
        return onnx.load(path)


@contextlib.contextmanager
def _tools_importable() -> Iterator[None]:
    """``onnxruntime.transformers`` puts its own directory on ``sys.path`` when first
    imported, and its modules (``onnxruntime.quantization`` imports them) import one another
    through that entry. A check gives each target the ``sys.path`` it started with, so after
    an earlier target imported the package the entry is gone: it is put back while the tools
    run, and taken out again after (the user's code never sees it)."""
    spec = importlib.util.find_spec("onnxruntime.transformers")
    locations = spec.submodule_search_locations if spec is not None else None
    directory = next(iter(locations)) if locations else None
    added = directory is not None and directory not in sys.path
    if added:
        sys.path.append(str(directory))
    try:
        yield
    finally:
        while added and directory in sys.path:
            sys.path.remove(str(directory))


@contextlib.contextmanager
def _quiet_root_logger() -> Iterator[None]:
    """The quantizer logs advice ("consider pre-processing") on the root logger at WARNING:
    noise in a check's output, so it is held back while the tools run."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)
