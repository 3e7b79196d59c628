"""The runtimes a check can run the exported model on and the precisions it can run it at
(the ``runtimes`` and ``precision`` settings and pragma keys, docs/runtimes.md). ONNX
Runtime's CPU execution provider at float32 is the reference every check runs (the runtime,
numerics and dynamic stages); the others are checked by the deploy stage when named."""

from __future__ import annotations

from collections.abc import Collection

#: each runtime's name, and what it is
RUNTIMES: dict[str, str] = {
    "ort-cpu": "ONNX Runtime's CPU execution provider (every check runs it)",
    "openvino-cpu": "OpenVINO on the CPU (the `openvino` package, onnxlens's `runtimes` extra)",
    "ort-web": "ONNX Runtime Web, its WebAssembly backend (what a browser runs without a GPU), "
               "under Node.js (the npm package onnxruntime-web)",
    "nnapi": "ONNX Runtime's NNAPI provider (Android): which nodes it takes, from ONNX "
             "Runtime's operator table (static: it does not run here)",
    "coreml": "ONNX Runtime's CoreML provider (Apple devices): which nodes it takes, from ONNX "
              "Runtime's operator table (static: it does not run here)",
    "cuda": "ONNX Runtime's CUDA execution provider (run where onnxruntime has it and a GPU is)",
    "tensorrt": "ONNX Runtime's TensorRT execution provider (run where onnxruntime has it and a "
                "GPU is)",
}
#: what every check runs
REFERENCE_RUNTIME = "ort-cpu"
DEFAULT_RUNTIMES = (REFERENCE_RUNTIME,)


#: each precision's name, and how the model is brought to it
PRECISIONS: dict[str, str] = {
    "fp32": "the model as exported (every check runs it)",
    "fp16": "converted to float16 by ONNX Runtime's converter "
            "(onnxruntime.transformers.float16), its inputs and outputs kept float32",
    "int8": "quantized to int8 by ONNX Runtime's static QDQ quantization "
            "(onnxruntime.quantization), calibrated on the example inputs",
}
REFERENCE_PRECISION = "fp32"
DEFAULT_PRECISIONS = (REFERENCE_PRECISION,)


def unknown_names(names: object, known: Collection[str]) -> list[str] | None:
    """The names in ``names`` that ``known`` lacks, or None when ``names`` is no list or tuple
    of strings."""
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        return None
    return [name for name in names if name not in known]
