"""``onnxlens check``: every target of the files and directories given, in export workers;
the report in text, JSON, SARIF or GitHub's format."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from check_service.rules import shown
from exporter.config.options import Options
from exporter.config.pyproject import find_root, load_config
from exporter.findings.diagnostics import Diagnostic
from exporter.findings.result import CheckResult
from exporter.reports.render import (
    display_path,
    format_findings,
    format_runtimes,
    format_summary,
    format_text,
    result_json,
)
from exporter.source.files import might_have_targets, python_files_below
from exporter.toolchain.report import ToolchainReport
from onnxlens.messages import (
    EXIT_ERRORS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    ToolchainMissing,
    UsageError,
    print_worker_notes,
    warn_config,
    worker_unavailable,
)
from onnxlens.nothing_checked import EXIT_NOTHING_CHECKED, nothing_checked
from onnxlens.options import command_options
from onnxlens.outputs import check_output_path, write_atomically, write_step_summary

if TYPE_CHECKING:
    from check_service.batch import BatchResult


def check_command(args: argparse.Namespace) -> int:
    paths, only = named_targets(args.paths)
    _refuse_bad_outputs(args, [p for p in paths if p.is_file()])
    root = (args.root or find_root(paths[0])).resolve()
    config = load_config(root)
    warn_config(config)
    options = command_options(args, config)
    read = python_files(paths, root, options.excluded, args.force_exclude)
    files = [path for path in read if might_have_targets(path)]
    _refuse_bad_outputs(args, files)
    streaming = args.format == "text" and args.output is None
    # no file that may hold a target: no worker (it imports torch for seconds)
    batch = _check_files(args, files, root, options, only, streaming) if files else None
    interrupted = batch is not None and (batch.ready is None or bool(batch.unfinished))
    result = batch.result if batch is not None else CheckResult()
    if not interrupted:
        result.nothing_checked = nothing_checked(paths, read, result, shard=args.shard,
                                                 required=args.require_targets)
    diagnostics = shown(result.diagnostics, options)
    if result.nothing_checked is not None and not streaming and args.format != "github":
        # (the text summary and the annotations say it on stdout)
        print(f"onnxlens: {result.nothing_checked.line}", file=sys.stderr)
    toolchain = batch.ready.toolchain if batch is not None and batch.ready else None
    _write_reports(args, result, diagnostics, root, toolchain, streaming)
    if interrupted:
        return EXIT_INTERRUPTED
    if any(d.severity == "error" for d in diagnostics):
        return EXIT_ERRORS
    return EXIT_NOTHING_CHECKED if args.require_targets and result.nothing_checked else EXIT_OK


def _refuse_bad_outputs(args: argparse.Namespace, inputs: list[Path]) -> None:
    for output in (args.output, args.sarif_file):
        if output is not None:
            check_output_path(output, inputs)
    if (args.output and args.sarif_file
            and args.output.resolve() == args.sarif_file.resolve()):
        raise UsageError(f"--output and --sarif-file both name {args.output}")


def _check_files(args: argparse.Namespace, files: list[Path], root: Path, options: Options,
                 only: dict[Path, frozenset[str]], streaming: bool) -> BatchResult:
    """Every target of ``files`` in export workers; text on stdout: each file's findings as
    soon as it and the files before it are checked (the summary follows at the end)."""
    from check_service.batch import BatchOptions, Shard, WorkerUnavailable, check_files

    batch_options = BatchOptions(root, options, args.jobs or os.cpu_count() or 1,
                                 Shard(*args.shard) if args.shard else None, only=only)

    def file_done(result: CheckResult) -> None:
        """Print the file's findings when streaming (its suppressions are applied)."""
        found = shown(result.diagnostics, options)
        if streaming and found:
            print(format_findings(found), end="\n\n", flush=True)

    try:
        batch = check_files(files, batch_options, file_done)
    except WorkerUnavailable as error:
        unavailable = worker_unavailable(error)
        if isinstance(unavailable, ToolchainMissing) and (
                args.format != "text" or args.sarif_file):
            report_missing_toolchain(args, files, root, unavailable)
        raise unavailable from error
    if batch.ready is None:
        print(f"onnxlens: interrupted while the export worker started: none of the "
              f"{batch.unfinished} target(s) was checked", file=sys.stderr)
    elif batch.unfinished:
        print(f"onnxlens: interrupted: {batch.unfinished} target(s) were not checked; the "
              "report holds those that were", file=sys.stderr)
    if batch.ready is not None:
        print_worker_notes(batch.ready)
    return batch


def _write_reports(args: argparse.Namespace, result: CheckResult,
                   diagnostics: list[Diagnostic], root: Path,
                   toolchain: ToolchainReport | None, streaming: bool) -> None:
    """The step summary, the SARIF file and the report (stdout, or ``--output``)."""
    if args.format == "github":
        write_step_summary(diagnostics, format_summary(result, diagnostics))
    if args.sarif_file:
        write_atomically(args.sarif_file, render_check(args, result, diagnostics, root,
                                                           report_format="sarif"))
        print(f"onnxlens: wrote {display_path(args.sarif_file)}", file=sys.stderr)
    if streaming:
        runtimes = format_runtimes(result)
        if runtimes:
            print(runtimes, end="\n\n")
        print(format_summary(result, diagnostics), end="")
        return
    text = render_check(args, result, diagnostics, root, toolchain)
    if args.output:
        write_atomically(args.output, text)
        print(f"onnxlens: wrote {display_path(args.output)}", file=sys.stderr)
        if args.format != "text":
            print(format_text(result, diagnostics), end="", file=sys.stderr)
    else:
        print(text, end="")


def named_targets(given: list[str]) -> tuple[list[Path], dict[Path, frozenset[str]]]:
    """The paths to check, and the targets named as ``FILE::TARGET`` (as ``save``, ``run``
    and ``graph`` take them), by resolved file: a target the file does not hold is a usage
    error before anything runs. A file also given plainly is checked whole."""
    from onnxlens.save_and_run import find_target, resolve_target

    paths: list[Path] = []
    only: dict[Path, set[str]] = {}
    whole: set[Path] = set()
    for text in given:
        if "::" not in text:
            paths.append(Path(text))
            if Path(text).is_file():
                whole.add(Path(text).resolve())
            continue
        path, name, _ = resolve_target(text, None)
        find_target(path, name)
        if path not in only:
            paths.append(Path(text.rpartition("::")[0]))
        only.setdefault(path, set()).add(name)
    return paths, {path: frozenset(names) for path, names in only.items() if path not in whole}


def python_files(paths: list[Path], root: Path, excluded: list[str],
                  force_exclude: bool = False) -> list[Path]:
    """The files given, and the ``*.py`` files under the directories given that no
    ``exclude``/``extend-exclude`` glob matches (relative to the root, as ruff does; a file
    named on the command line is checked even when a glob matches it, unless
    ``force_exclude``: pre-commit names every changed file)."""
    from exporter.config.schema import is_excluded
    from exporter.source.text import special_kind

    files: list[Path] = []
    for path in paths:
        if not path.exists():
            raise UsageError(f"{path}: no such file or directory")
        kind = special_kind(path.stat().st_mode)
        if kind is not None and not path.is_dir():  # a FIFO blocked the check for ever
            raise UsageError(f"{path} is {kind}: onnxlens reads only regular files")
        if path.is_file():
            resolved = path.resolve()
            parts = resolved.relative_to(root).parts if resolved.is_relative_to(root) \
                else (resolved.name,)
            if not (force_exclude and is_excluded(parts, excluded)):
                files.append(path)
            continue
        files.extend(python_files_below(path, root, excluded))
    return files


def report_missing_toolchain(args: argparse.Namespace, files: list[Path], root: Path,
                              error: ToolchainMissing) -> None:
    """A JSON or SARIF report holding ONNX904 (at the first file), so that CI reading the
    report sees why nothing was checked; the error itself still ends the run (exit 2)."""
    from exporter.findings.diagnostics import Diagnostic, Location, Range
    from exporter.findings.result import CheckResult

    message = str(error).removeprefix("ONNX904: ")
    diagnostic = Diagnostic("ONNX904", message[:1].upper() + message[1:],
                            Location(files[0].resolve(), Range.of(1, 1, 1, 1)), target="")
    result = CheckResult(file_diagnostics=[diagnostic], files=[f.resolve() for f in files])
    if args.sarif_file:
        write_atomically(args.sarif_file,
                          render_check(args, result, [diagnostic], root, report_format="sarif"))
    if args.format == "text":
        return
    text = render_check(args, result, [diagnostic], root)
    if args.output:
        write_atomically(args.output, text)
    else:
        print(text, end="")


def render_check(args: argparse.Namespace, result: Any, diagnostics: list[Any],
                  root: Path, toolchain: ToolchainReport | None = None,
                  report_format: str | None = None) -> str:
    """The report in ``report_format`` (default: ``--format``)."""
    report_format = report_format or args.format
    if report_format == "json":
        report = result_json(result, diagnostics)
        if toolchain is not None:  # None: ONNX904, there is no toolchain to describe
            report["toolchain"] = dataclasses.asdict(toolchain)
        return json.dumps(report, indent=2) + "\n"
    if report_format == "sarif":
        from exporter.findings.diagnostics import sort_key
        from exporter.findings.result import CheckResult
        from exporter.reports.sarif import DEFAULT_CATEGORY, sarif_dict

        filtered = CheckResult(files=result.files,
                               file_diagnostics=sorted(diagnostics, key=sort_key),
                               nothing_checked=result.nothing_checked)
        category = args.category or (
            f"{DEFAULT_CATEGORY}/shard-{args.shard[0]}-of-{args.shard[1]}" if args.shard
            else DEFAULT_CATEGORY)
        return json.dumps(sarif_dict(filtered, root, absolute_root=args.absolute_paths,
                                     category=category), indent=2) + "\n"
    if report_format == "github":
        from exporter.reports.github import workflow_commands

        return (workflow_commands(diagnostics, result.nothing_checked)
                + format_summary(result, diagnostics))
    return format_text(result, diagnostics)
