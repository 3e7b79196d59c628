"""What a job runs with, from the flags and ``[tool.onnxlens]``: its limits and the export
settings."""

from __future__ import annotations

import argparse

from export_worker.messages import CheckSettings
from exporter.config import ProjectConfig
from onnxlens.argument_types import megabytes, seconds

DEFAULT_TIMEOUT_SECONDS = 300.0


def add_limits(command: argparse.ArgumentParser, what: str) -> None:
    """``--timeout`` and ``--memory-limit-mb``: the limits of each job process."""
    command.add_argument("--timeout", type=seconds, default=None, metavar="SECONDS",
                         help=f"stop {what} after this long: ONNX901 (default 300, or "
                         "`timeout` in [tool.onnxlens]; 0 = no limit)")
    command.add_argument("--memory-limit-mb", type=megabytes, default=None, metavar="MB",
                         help=f"stop {what} when its process uses more memory: ONNX903 "
                         "(default: `memory-limit-mb` in [tool.onnxlens], else no limit)")


def limits(args: argparse.Namespace, config: ProjectConfig) -> tuple[float | None, int | None]:
    """The timeout (None: no limit) and the memory limit a job runs with: the flag, else
    [tool.onnxlens], else the default (300 s; no memory limit: a CI run checks models as big
    as the plain exporter can — the corpus's 300M-parameter torchvision models passed
    4096 MB)."""
    timeout = args.timeout if args.timeout is not None else config.get(
        "timeout", DEFAULT_TIMEOUT_SECONDS)
    return timeout or None, args.memory_limit_mb or config.get("memory-limit-mb")


def check_settings(config: ProjectConfig) -> CheckSettings:
    return CheckSettings(config.get("opset"), config.get("atol"), config.get("rtol"))
