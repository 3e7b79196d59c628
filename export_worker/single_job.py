"""One save or run job in an export worker of its own: what ``onnxlens save`` and ``onnxlens
run`` do. The user's code runs in a job process of the worker, as for a check and as in the
language server, never in the CLI's process: a model that exits, hangs, crashes or writes to
descriptor 1 costs that job (ONNX901/902/903), and the CLI still says what happened."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass

from export_worker.client import WorkerClient, WorkerUnavailable
from export_worker.messages import JobFailed, JobOutcome, JobRequest, Ready


@dataclass(frozen=True)
class SingleJob:
    ready: Ready  # the worker's toolchain and warnings
    outcome: JobOutcome


def run_single_job(request: JobRequest, on_output: Callable[[str], None],
                   python: str = sys.executable) -> SingleJob:
    """Start a worker, run ``request`` in it and stop it. ``on_output`` gets each line the
    worker and the job wrote (the model's prints among them). Raises ``WorkerUnavailable``
    when the worker cannot start (``.missing``: no toolchain). On SIGINT the job and the
    worker are killed and ``KeyboardInterrupt`` is raised."""
    return asyncio.run(_run(request, on_output, python))


async def _run(request: JobRequest, on_output: Callable[[str], None],
               python: str) -> SingleJob:
    client = WorkerClient(python=python, on_output=on_output, spare=False)
    await client.start()
    try:
        ready = await client.wait_ready()
        outcome = await client.submit(request)
    finally:
        await client.stop()
    if isinstance(outcome, JobFailed) and outcome.failure == "cancelled":
        raise KeyboardInterrupt
    return SingleJob(ready, outcome)


__all__ = ["SingleJob", "WorkerUnavailable", "run_single_job"]
