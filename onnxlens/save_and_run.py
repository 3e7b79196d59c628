"""``onnxlens save`` and ``onnxlens run``: one target, in an export worker of its own
(``export_worker.single_job``), as a check and the language server's save and run are: the
user's code never runs in this process."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from check_service.outcomes import Limits
from check_service.requests import job_limits, job_request
from export_worker.messages import (
    CheckAnswer,
    JobAnswer,
    JobDone,
    JobError,
    JobKind,
    JobOutcome,
    RunAnswer,
    SaveAnswer,
)
from exporter.config.pyproject import find_root, load_config
from exporter.config.schema import COMMAND_LINE_LOAD_SECONDS
from exporter.reports.render import display_path, format_diagnostic, printable
from exporter.reports.run import run_report_json
from exporter.source.targets import Target
from onnxlens.messages import (
    EXIT_ERRORS,
    EXIT_OK,
    UsageError,
    print_worker_notes,
    warn_config,
    worker_unavailable,
)
from onnxlens.options import command_options
from onnxlens.outputs import check_output_path


def resolve_target(spec: str, root_option: Path | None) -> tuple[Path, str, Path]:
    file_part, separator, name = spec.rpartition("::")
    if not separator or not file_part or not name:
        raise UsageError(f"expected FILE::TARGET, got {spec!r}")
    path = Path(file_part)
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    return path.resolve(), name, (root_option or find_root(path)).resolve()


def find_target(path: Path, name: str) -> Target:
    """The target ``name`` of ``path``, found statically (nothing of the file runs here)."""
    from check_service.files import TargetNotFound
    from check_service.files import find_target as find

    try:
        return find(path, name)
    except TargetNotFound as missing:
        found = missing.found
    if not found.text and found.diagnostics:  # the file cannot be read
        problem = found.diagnostics[0]
        raise UsageError(f"{display_path(path)}: {problem.message[:1].lower()}"
                         f"{problem.message[1:]}")
    names = ", ".join(t.name for t in found.targets) or "none"
    for diagnostic in found.diagnostics:
        print(format_diagnostic(diagnostic), file=sys.stderr)
    raise UsageError(f"{display_path(path)} has no export target {name!r} (targets: {names})")


def single_job(args: argparse.Namespace, kind: JobKind, *, optimize: bool = True,
               **fields: Any) -> tuple[Target, JobEnd]:
    """Run a save or run job on ``args.target``: the target and the job's outcome."""
    from export_worker.single_job import WorkerUnavailable, run_single_job

    path, name, root = resolve_target(args.target, args.root)
    target = find_target(path, name)
    config = load_config(root)
    warn_config(config)
    options = command_options(args, config)
    request = job_request(kind, target, root, options,
                          load_default=COMMAND_LINE_LOAD_SECONDS, **fields)
    request = replace(request, settings=replace(request.settings, optimize=optimize))
    try:
        # what the model prints (and the exporter's progress) goes to stderr: stdout
        # carries onnxlens's own output alone (``run --format json``)
        job = run_single_job(request, on_output=lambda line: print(line, file=sys.stderr))
    except WorkerUnavailable as error:
        raise worker_unavailable(error) from error
    print_worker_notes(job.ready)
    return target, JobEnd(job.outcome, job_limits(options, COMMAND_LINE_LOAD_SECONDS))


@dataclass(frozen=True)
class JobEnd:
    """A save or run job's outcome: its answer, or the diagnostic that says why it has none
    (ONNX901 timeout, ONNX902 the process died, ONNX903 memory)."""

    outcome: JobOutcome
    limits: Limits

    @property
    def answer(self) -> JobAnswer | None:
        return self.outcome.answer if isinstance(self.outcome, JobDone) else None

    def print_problems(self, target: Target) -> None:
        """The errors the job found, or the ONNX90x diagnostic of a job that did not end."""
        from check_service.outcomes import target_result

        answer = self.answer
        if answer is None:
            diagnostics = target_result(target, self.outcome, self.limits).diagnostics
        elif isinstance(answer, (SaveAnswer, RunAnswer)):
            diagnostics = list(answer.diagnostics)
        else:  # a graph job's findings are its check's (onnxlens/graph.py prints them)
            diagnostics = []
        for diagnostic in diagnostics:
            print(format_diagnostic(diagnostic), file=sys.stderr)

    @property
    def reason(self) -> str:
        if self.answer is None:
            return {"timeout": "the export did not finish in time (ONNX901)",
                    "memory": "the export went past the memory limit (ONNX903)"}.get(
                getattr(self.outcome, "failure", ""), "the process exporting it died (ONNX902)")
        # the job's words for the server's message; the CLI says what is unchanged itself
        answer = self.answer
        error = answer.error if not isinstance(answer, CheckAnswer) else None
        return printable((error or "the export failed").removesuffix(
            "; the file was not written"))


def save_command(args: argparse.Namespace) -> int:
    source = Path(args.target.rpartition("::")[0])
    check_output_path(args.output, [source] if source.is_file() else [], stream_ok=False)
    # The check runs onnxscript's optimizer as torch.onnx.export does (unless --no-optimize):
    # what is saved is the model that was checked.
    target, end = single_job(args, "save", output=str(args.output.absolute()),
                              threshold=args.external_data_threshold,
                              optimize=not args.no_optimize,
                              strip_source_metadata=args.strip_source_metadata)
    answer = end.answer
    if not isinstance(answer, SaveAnswer) or not answer.saved:
        end.print_problems(target)
        if isinstance(answer, JobError) and answer.internal:
            raise UsageError(f"not saved: {end.reason}")
        print(f"onnxlens: not saved: {end.reason}; {display_path(args.output)} is unchanged.",
              file=sys.stderr)
        return EXIT_ERRORS
    for path in answer.written:
        print(f"onnxlens: wrote {display_path(Path(path))}")
    if answer.diagnostics:
        print(f"onnxlens: note: the check found {len(answer.diagnostics)} problem(s) after "
              "translation; run `onnxlens check` for details.", file=sys.stderr)
    return EXIT_OK


def run_command(args: argparse.Namespace) -> int:
    model = str(args.model.absolute()) if args.model else None
    target, end = single_job(args, "run", repeat=args.repeat, model=model)
    answer = end.answer
    if not isinstance(answer, RunAnswer) or answer.report is None:
        end.print_problems(target)
        print(f"onnxlens: cannot run {args.target}: {end.reason}", file=sys.stderr)
        return EXIT_ERRORS
    if args.format == "json":
        print(json.dumps(run_report_json(answer.report), indent=2))
    else:
        print(answer.markdown or "", end="")
    return EXIT_OK if answer.report.matched else EXIT_ERRORS
