"""Running an ONNX model in ONNX Runtime Web (its WebAssembly backend, what a browser runs
without a GPU) under Node.js, for the deploy stage's ``ort-web``.

``ort_web_run.cjs`` (beside this module) runs in a ``node`` process; the model, the inputs
and the outputs pass through a temporary directory as raw bytes described by JSON, so no
value is rounded on the way; the weights a check keeps apart (weights_apart) are written once,
to a file the model refers to as its external data. onnxruntime-web is an npm package:
onnxlens looks for its ``node_modules`` in ``ONNXLENS_ORT_WEB_MODULES``, then in
``tools/ort-web`` of a source checkout (``bash tools/ort-web/install.sh``), then in npm's
global root.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from exporter.pipeline.weights_apart import with_weights_file

RUNNER = Path(__file__).with_name("ort_web_run.cjs")
MODULES_VARIABLE = "ONNXLENS_ORT_WEB_MODULES"
#: the file the weights kept apart are written to, beside the model
_WEIGHTS = "model.onnx.data"
_CHECKOUT_MODULES = Path(__file__).resolve().parents[2] / "tools" / "ort-web" / "node_modules"
#: numpy's dtype of each ONNX Runtime Web tensor type (bool and float16 travel as bytes)
_TYPES = {"float32": "float32", "float64": "float64", "int8": "int8", "uint8": "uint8",
          "int16": "int16", "uint16": "uint16", "int32": "int32", "uint32": "uint32",
          "int64": "int64", "uint64": "uint64", "bool": "bool", "float16": "float16"}
_INSTALL = ("npm install onnxruntime-web@1.30.0 in a directory and set "
            f"{MODULES_VARIABLE} to its node_modules")


@dataclass(frozen=True)
class OrtWebRun:
    """What ONNX Runtime Web did: the step that failed (``load``, ``run``) and its message,
    or the outputs."""

    failed_step: str | None = None
    message: str = ""
    outputs: list[np.ndarray] = field(default_factory=list)


def unavailable() -> str | None:
    """Why ONNX Runtime Web cannot run here (None: it can)."""
    if shutil.which("node") is None:
        return "Node.js (`node`) is not on the PATH"
    if _modules() is None:
        return f"the npm package onnxruntime-web is not found ({_INSTALL})"
    return None


def _modules() -> Path | None:
    """The ``node_modules`` holding onnxruntime-web (npm's global root is asked last: that
    takes a process)."""
    candidates = [Path(os.environ[MODULES_VARIABLE])] if os.environ.get(MODULES_VARIABLE) \
        else []
    candidates.append(_CHECKOUT_MODULES)
    found = next((path for path in candidates if (path / "onnxruntime-web").is_dir()), None)
    if found is not None:
        return found
    try:
        root = subprocess.run(["npm", "root", "-g"], capture_output=True, text=True,
                              timeout=30, stdin=subprocess.DEVNULL).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(root) if root and (Path(root) / "onnxruntime-web").is_dir() else None


def run(model: onnx.ModelProto, weights: dict[str, np.ndarray],
        feeds: dict[str, np.ndarray], timeout: float | None = None) -> OrtWebRun:
    """Load ``model`` (``weights``: its in-memory initializers) in ONNX Runtime Web and run it
    on ``feeds`` (graph input name -> array)."""
    modules = _modules()
    assert modules is not None, "call unavailable() first"
    with tempfile.TemporaryDirectory(prefix="onnxlens-ort-web-") as scratch:
        directory = Path(scratch)
        referring = with_weights_file(model, weights, directory / _WEIGHTS)
        try:
            (directory / "model.onnx").write_bytes(referring.SerializeToString())
        except ValueError:  # protobuf's 2 GB, with the weights in the proto
            return OrtWebRun("load", "the model is over protobuf's 2 GB, which onnxlens does "
                                     "not hand to ONNX Runtime Web yet")
        inputs = []
        for index, (name, array) in enumerate(feeds.items()):
            file = f"input{index}.bin"
            (directory / file).write_bytes(np.ascontiguousarray(array).tobytes())
            inputs.append({"name": name, "type": str(array.dtype), "dims": list(array.shape),
                           "file": file})
        external = [_WEIGHTS] if referring is not model else []
        (directory / "request.json").write_text(json.dumps({"inputs": inputs,
                                                            "externalData": external}))
        done = subprocess.run(["node", str(RUNNER), str(directory)], capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                              env={**os.environ, "NODE_PATH": str(modules)})
        answer_file = directory / "answer.json"
        if not answer_file.is_file():
            return OrtWebRun("load", f"node exited with status {done.returncode}: "
                                     f"{done.stderr.strip()[-500:]}")
        answer = json.loads(answer_file.read_text())
        if "step" in answer:
            return OrtWebRun(answer["step"], answer["message"])
        return OrtWebRun(outputs=[
            np.frombuffer((directory / output["file"]).read_bytes(),
                          dtype=_TYPES[output["type"]]).reshape(output["dims"])
            for output in answer["outputs"]])
