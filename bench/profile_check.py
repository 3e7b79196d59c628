"""Where a warm re-check spends its time: warms up as the export worker does, then forks once
per check and warms the fork up as the worker's spare process does (``--no-spare``: a fresh
fork, as when a job arrives before the spare is ready), and prints the time of each stage and
of the parts that dominate them, the minimum over the runs (indented parts are inside the
stage above).

    .venv/bin/python bench/profile_check.py [FILE::TARGET ...] [--runs 7] [--no-spare]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import importlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT = [f"{REPO}/examples/mlp.py::MLPModel", f"{REPO}/examples/mnist.py::MNISTModel",
           f"{REPO}/bench/models/encoder.py::Encoder"]

# (module, function, label): every call is timed; indented labels are parts of a stage.
PARTS = [
    ("export_worker.jobs", "run_job", "the whole job"),
    ("exporter.pipeline.stages.load", "_build", "  build the model"),
    ("exporter.pipeline.stages.load", "_eager_forward", "  eager forward"),
    ("exporter.toolchain.torch_compat", "capture", "  the strategies torch.onnx.export tries"),
    ("exporter.pipeline.stages.soundness", "report_narrowed", "  the ranges it narrowed"),
    ("exporter.pipeline.stages.capture", "_know_the_failure",
     "  torch's first error located (then shown)"),
    ("exporter.pipeline.stages.capture", "_draft_export", "  draft export"),
    ("exporter.pipeline.stages.capture", "_report_draft_failures",
     "  the draft export's failures located"),
    ("exporter.toolchain.torch_compat", "decompose", "  decompose"),
    ("exporter.toolchain.speedups", "_valid_cia_ops", "    find the CIA operators"),
    ("torch.export.exported_program", "_split_decomp_table_to_cia_and_python_decomp",
     "    split the decomposition table"),
    ("torch.export._unlift", "_unlift_exported_program_lifted_states", "    unlift"),
    ("torch.export._trace", "_export_to_aten_ir", "    AOT re-trace"),
    ("torch.onnx._internal.exporter._fx_passes", "insert_type_promotion_nodes",
     "    type promotion"),
    ("exporter.toolchain.torch_compat", "translate", "  translate to ONNX"),
    ("exporter.toolchain.torch_compat", "finish_model", "  opset conversion and optimizer"),
    ("exporter.pipeline.stages.translate", "_finish", "  ONNX proto and summary"),
    ("exporter.pipeline.ort_runner", "create_session", "  ORT session (fresh fork: + import)"),
]
# Context managers: the time of entering and leaving them.
CONTEXTS = [("exporter.toolchain.torch_compat", "recording_shape_guards",
             "  record the shape guards (enter and leave)"),
            ("torch.export.exported_program", "_override_composite_implicit_decomp",
             "    override the CIA kernels (enter and leave)")]
ORDER = ["the whole job", "load", "  build the model", "  eager forward", "capture",
         "  record the shape guards (enter and leave)", "  the strategies torch.onnx.export tries",
         "  the ranges it narrowed", "  torch's first error located (then shown)",
         "  draft export", "  the draft export's failures located",
         "translate", "  decompose", "    find the CIA operators",
         "    split the decomposition table", "    override the CIA kernels (enter and leave)",
         "    unlift", "    AOT re-trace", "    type promotion", "  translate to ONNX",
         "  opset conversion and optimizer",
         "  ONNX proto and summary", "validate", "runtime",
         "  ORT session (fresh fork: + import)", "numerics", "dynamic"]


def _timed(function: Callable[..., Any], label: str, totals: dict[str, float]) -> Callable:
    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            totals[label] = totals.get(label, 0.0) + time.perf_counter() - started

    return timed


def _timed_context(function: Callable[..., Any], label: str, totals: dict[str, float]) -> Any:
    @contextlib.contextmanager
    def timed(*args: Any, **kwargs: Any) -> Iterator[Any]:
        started = time.perf_counter()
        manager = function(*args, **kwargs)
        value = manager.__enter__()
        totals[label] = totals.get(label, 0.0) + time.perf_counter() - started
        try:
            yield value
        finally:
            started = time.perf_counter()
            manager.__exit__(*sys.exc_info())
            totals[label] += time.perf_counter() - started

    return timed


def instrument(totals: dict[str, float]) -> None:
    from dataclasses import replace

    from exporter.pipeline import runner as pipeline

    pipeline.STAGES = tuple(replace(stage, run=_timed(stage.run, stage.name, totals))
                            for stage in pipeline.STAGES)
    for parts, wrap in ((PARTS, _timed), (CONTEXTS, _timed_context)):
        for module, name, label in parts:
            owner = importlib.import_module(module)
            if hasattr(owner, name):  # parts of other versions are left out
                setattr(owner, name, wrap(getattr(owner, name), label, totals))


def check_in_fork(worker: Any, spec: str, run: int, totals: dict[str, float],
                  spare: bool) -> dict:
    """One check in a fork, as the worker runs it (with the installed packages the checks
    before it imported imported ahead, as the worker's warm imports do); the child's part
    times."""
    session = worker.session
    worker.warm_imports.import_pending()
    from bench.forked import in_fork
    from export_worker.jobs import run_job
    from export_worker.messages import JobRequest
    from export_worker.process import JOB_GC_THRESHOLD, warm_spare
    from export_worker.warm_imports import library_modules

    file, _, name = spec.rpartition("::")
    path = Path(file).resolve()
    text = path.read_text() + f"\n# run {run}\n"
    target = next(t for t in session.discover(path, text).targets if t.name == name)

    def one_check() -> bytes:
        gc.set_threshold(*JOB_GC_THRESHOLD)
        if spare:
            warm_spare(session)
        totals.clear()
        before = set(sys.modules)
        run_job(session, JobRequest("check", target, str(path.parent), text=text,
                                    record_inputs=True))
        return json.dumps({"totals": totals, "imports": library_modules(before)}).encode()

    data, _ = in_fork(one_check)
    answer = json.loads(data)
    worker.warm_imports.learn(answer["imports"])
    return answer["totals"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("targets", nargs="*", default=DEFAULT, metavar="FILE::TARGET")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--no-spare", action="store_true", help="time checks in fresh forks")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from export_worker.process import Worker

    worker = Worker(open(os.devnull, "wb"))  # noqa: SIM115 - lives as long as the process
    worker.warm_up()
    totals: dict[str, float] = {}
    instrument(totals)
    for spec in args.targets:
        runs = [check_in_fork(worker, spec, run, totals, not args.no_spare)
                for run in range(args.runs)]
        kind = "fresh forks" if args.no_spare else "warmed forks (the spare)"
        print(f"\n{spec.rpartition('::')[2]}: ms (wall), min of {args.runs} checks in {kind}")
        for label in ORDER:
            values = [run[label] for run in runs if label in run]
            if values:
                print(f"{min(values) * 1000:9.1f}  {label}")


if __name__ == "__main__":
    main()
