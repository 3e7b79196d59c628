"""A session keeps what is expensive to build (the torchlib registry, imports) so that a
second check in the same process pays only for the export itself."""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from exporter.config.options import ExportOptions
from exporter.findings.result import CheckResult, TargetResult
from exporter.pipeline.context import CheckContext
from exporter.pipeline.registries import Registries
from exporter.pipeline.user_modules import command_line_of, isolated_import_path
from exporter.source.notebooks import NotebookModule
from exporter.source.targets import Discovery, Target, discover
from exporter.source.text import Sources, decoding_problem, read_source


def _quiet_torch_logs() -> None:
    """torch logs graph dumps and tracebacks to stderr while exporting; we report instead.

    Only the console handlers are silenced: draft export collects its findings through
    torch's (structured) loggers, so their levels must stay as they are.
    """
    for name in ["", *logging.root.manager.loggerDict]:
        if name and not name.startswith(("torch", "onnxscript", "onnx_ir")):
            continue
        for handler in logging.getLogger(name).handlers:
            if _writes_to_the_console(handler):
                handler.setLevel(logging.CRITICAL)


def _writes_to_the_console(handler: logging.Handler) -> bool:
    """A stream handler that is no file's, or one with a ``stream`` of its own: torch 2.15's
    ``_StderrHandler`` derives from ``logging.Handler`` and follows ``sys.stderr``."""
    if isinstance(handler, logging.FileHandler):
        return False
    return isinstance(handler, logging.StreamHandler) or hasattr(type(handler), "stream")


class ExportSession:
    """Checks targets; reuse one session for many checks."""

    def __init__(self, options: ExportOptions | None = None) -> None:
        import torch  # noqa: F401 - imported once, here, for every later check

        _quiet_torch_logs()

        from exporter.toolchain import torch_compat

        self._compat = torch_compat
        self.options = options or ExportOptions()
        self.timeout: float | None = None  # seconds a check may run; None: no limit
        self.load_timeout: float | None = None  # seconds its load stage may take, if fewer
        self.registries = Registries()

    def warm_up(self) -> None:
        """Build the default registry and run the behavioural probes (the probe model through
        capture and translation, which also fills torch's caches) before the first check
        asks for them, then freeze what exists (torch, the registry: alive for the process's
        life anyway) out of the cyclic collector's reach, so that a full collection during a
        check does not walk it (≈0.2 s each in a process that imported torch)."""
        self.probe_toolchain()
        gc.freeze()

    def probe_toolchain(self) -> None:
        """The behavioural probe of torch's private APIs; on an untested torch, also the
        comparison that decides which speed patches stay on (exporter.toolchain.speedups)."""
        import warnings

        from exporter.toolchain import speedups

        opset = self.options.opset
        with warnings.catch_warnings():  # torch's deprecation warnings, not the user's
            warnings.simplefilter("ignore")
            self._compat.run_static_probes()
            self._compat.probe_pipeline(lambda: self.registry(opset, None), opset)
            speedups.verify_on_untested_torch(
                lambda: self._compat.probe_export(self.registry(opset, None), opset))

    def registry(self, opset: int | None, table: dict[Callable, Callable] | None) -> Any:
        """The registry torch.onnx.export builds for a model of ``opset`` (None: its
        default), with ``table`` registered on top."""
        return self.registries.get(opset, table)

    def discover(self, path: Path, source: str | None = None,
                 notebook: NotebookModule | None = None) -> Discovery:
        return discover(path, read_source(path) if source is None else source, notebook)

    def check_target(self, target: Target, workspace: Path) -> TargetResult:
        return self.run_target(target, workspace)[1]

    def run_target(self, target: Target, workspace: Path,
                   stage_done: Callable[[TargetResult], None] | None = None,
                   sources: Sources | None = None,
                   if_stopped: Callable[[TargetResult], None] | None = None,
                   limit_lifted: Callable[[], None] | None = None,
                   ) -> tuple[CheckContext, TargetResult]:
        """Check a target and keep its context (model, ONNX program, session) for save/run;
        ``stage_done`` gets the result so far after each stage, ``if_stopped`` the verdict
        once it is known (exporter/pipeline/runner.py), ``limit_lifted`` is told when the
        whole limit takes over from the load stage's (model_code_limit.py)."""
        from exporter.pipeline.runner import run_pipeline

        with isolated_import_path(target.path, workspace), command_line_of(target.path):
            context = CheckContext(target, workspace, self.registries, defaults=self.options,
                                   timeout=self.timeout, load_timeout=self.load_timeout,
                                   limit_lifted=limit_lifted, sources=sources or Sources())
            return context, run_pipeline(context, stage_done, if_stopped)

    def check_file(self, path: Path, workspace: Path | None = None,
                   names: Iterable[str] | None = None) -> CheckResult:
        path = path.resolve()
        workspace = (workspace or path.parent).resolve()
        result = CheckResult(files=[path])
        problem = decoding_problem(path)
        if problem is not None:
            result.file_diagnostics.append(problem)
            return result
        found = self.discover(path)
        result.file_diagnostics.extend(found.diagnostics)
        wanted = set(names) if names is not None else None
        for target in found.targets:
            if wanted is None or target.name in wanted:
                result.targets.append(self.check_target(target, workspace))
        return result
