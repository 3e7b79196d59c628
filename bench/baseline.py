"""The baseline: plain ``torch.onnx.export(dynamo=True)`` + an ONNX Runtime session + one run,
in a process that stays warm (it has exported once before the timed runs).

Protocol (stdin/stdout, one line each): ``FILE::TARGET`` → seconds of one export+session+run.
The model and its example inputs come from the target's pragma; building them is not timed.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any


def load(spec: str) -> tuple[Any, tuple, dict, Any]:
    import torch

    from exporter.pipeline.session import ExportSession

    file, _, name = spec.rpartition("::")
    session = ExportSession()
    path = Path(file).resolve()
    target = next(t for t in session.discover(path).targets if t.name == name)
    context, _ = session.run_target(target, path.parent)
    loaded = context.need_loaded()
    with torch.no_grad():
        return loaded.model, loaded.args, loaded.kwargs, loaded.dynamic_shapes


def export_and_run(model: Any, args: tuple, kwargs: dict, dynamic_shapes: Any) -> float:
    import onnxruntime as ort
    import torch
    from torch.utils import _pytree

    started = time.perf_counter()
    program = torch.onnx.export(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes,
                                dynamo=True, verbose=False)
    session = ort.InferenceSession(program.model_proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    leaves = [leaf for leaf in _pytree.tree_leaves((args, kwargs))
              if isinstance(leaf, torch.Tensor)]
    feeds = {i.name: t.numpy() for i, t in zip(session.get_inputs(), leaves)}
    session.run(None, feeds)
    return time.perf_counter() - started


def main() -> None:
    warnings.simplefilter("ignore")
    answers = os.fdopen(os.dup(1), "w")  # the protocol; torch's prints go to stderr
    os.dup2(2, 1)
    loaded: dict[str, tuple[Any, tuple, dict, Any]] = {}
    for line in sys.stdin:
        spec = line.strip()
        if not spec:
            continue
        if spec not in loaded:
            loaded[spec] = load(spec)
            export_and_run(*loaded[spec])  # warm-up: the process has exported once
        print(f"{export_and_run(*loaded[spec]):.6f}", file=answers, flush=True)


if __name__ == "__main__":
    main()
