"""Exit statuses, usage errors, and the warnings the command prints on stderr."""

from __future__ import annotations

import sys
from typing import Any

from exporter import versions
from exporter.config.pyproject import ProjectConfig

EXIT_OK, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # SIGINT or SIGTERM: the report holds what was checked before


class UsageError(Exception):
    """A mistake in the command line or its files: one line on stderr, exit 2."""


class ToolchainMissing(UsageError):
    """torch, onnx, onnxscript or onnxruntime cannot be imported (ONNX904)."""


_TOOLCHAIN_PACKAGES = {"torch", "onnx", "onnxscript", "onnxruntime", "onnx_ir", "numpy"}
_SERVER_PACKAGES = {"pygls", "lsprotocol", "cattrs", "attrs"}


def missing_package(error: ModuleNotFoundError) -> str:
    """What to install, for a package a command imported and did not find."""
    name = (error.name or "").partition(".")[0]
    if name in _TOOLCHAIN_PACKAGES:
        return (f"ONNX904: a dependency of the export toolchain is missing ({error}). Install "
                f"it into {sys.executable}: {versions.install_hint()}")
    if name in _SERVER_PACKAGES:
        return (f"the language server needs {name}, which is missing ({error}). Install the "
                f"server's extra into {sys.executable}: pip install 'onnxlens[lsp]'")
    return (f"a package onnxlens needs is missing ({error}); reinstall onnxlens into "
            f"{sys.executable}")


def worker_unavailable(error: Exception) -> UsageError:
    """The usage error (exit 2) for a worker that could not start: ONNX904 when the export
    toolchain is missing."""
    if not str(error).startswith("the export toolchain is missing"):
        return UsageError(f"the export worker could not start: {error}")
    return ToolchainMissing(
        f"ONNX904: a dependency of the export toolchain is missing "
        f"({str(error).rpartition(': ')[2]}). Install it into {sys.executable}: "
        f"{versions.install_hint()}")


def print_worker_notes(ready: Any) -> None:
    """What the worker said when it started: unknown ONNXLENS_* names, a degraded torch."""
    for warning in ready.warnings:
        print(f"onnxlens: warning: {warning}", file=sys.stderr)
    message = ready.toolchain.message
    if message:
        print(message, file=sys.stderr)


def warn_config(config: ProjectConfig) -> None:
    for problem in config.problems:
        print(f"onnxlens: warning: {problem}", file=sys.stderr)
