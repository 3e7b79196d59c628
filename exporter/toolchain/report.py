"""What a worker's toolchain is, as the worker tells the front ends (``Ready``,
``WorkerStatus``) and the JSON report's ``toolchain`` shows it: made by
``exporter.toolchain.status`` in the worker, read by front ends that never import torch, so this
module imports nothing of the toolchain."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolchainFacts:
    packages: dict[str, str | None]  # None: not installed
    torch_tested: bool
    tested_torch: list[str]
    #: capability name -> "" when it works, else why it fell back
    capabilities: dict[str, str]
    #: speed patch name -> "" when on, else why it is off
    speedups: dict[str, str]


@dataclass(frozen=True)
class ToolchainReport(ToolchainFacts):
    #: one line for a user whose torch is untested or whose checks are degraded; None: neither
    message: str | None
