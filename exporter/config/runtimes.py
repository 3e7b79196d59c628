"""The runtimes a check can run the exported model on (the ``runtimes`` setting and pragma
key, docs/runtimes.md). ONNX Runtime's CPU execution provider is the reference every check
runs (the runtime, numerics and dynamic stages); the others are checked by the deploy stage
when named."""

from __future__ import annotations

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


def unknown_runtimes(names: object) -> list[str] | None:
    """The names in ``names`` that are no runtime, or None when ``names`` is no list or tuple
    of strings."""
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        return None
    return [name for name in names if name not in RUNTIMES]
