"""``onnxlens`` command line: check, save, run.

Exit status: 0 no error, 1 errors found (or the export failed), 2 usage or tool failure,
130 interrupted (``check`` still writes the report of what it checked).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from export_worker.messages import JobAnswer, JobDone, JobKind, JobOutcome, JobRequest
from export_worker.outcomes import Limits
from exporter import __version__, shortcuts, versions
from exporter.config import ProjectConfig, find_root, load_config
from exporter.report import (
    apply_severity,
    display_path,
    filter_rules,
    format_diagnostic,
    format_findings,
    format_summary,
    format_text,
    printable,
    result_json,
)
from exporter.rules import RULES
from exporter.settings_schema import DEFAULT_EXCLUDE
from exporter.source_files import might_have_targets, python_files_below
from exporter.targets import Target

EXIT_OK, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # SIGINT or SIGTERM: the report holds what was checked before
DEFAULT_TIMEOUT_SECONDS = 300.0


class UsageError(Exception):
    pass


class ToolchainMissing(UsageError):
    """torch, onnx, onnxscript or onnxruntime cannot be imported (ONNX904)."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        status = args.handler(args)
        if not sys.stdout.closed:  # the language server closes it on `exit`
            sys.stdout.flush()  # here, where a closed pipe is handled, rather than at exit
        return status
    except UsageError as error:
        print(f"onnxlens: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except ModuleNotFoundError as error:  # an install without the extras a command needs
        print(f"onnxlens: error: {_missing_package(error)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # stdout's reader went away (`onnxlens rule --all | head`): stop quietly, and keep
        # Python from complaining again when it flushes stdout at exit (Python's signal docs)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERRORS


_TOOLCHAIN_PACKAGES = {"torch", "onnx", "onnxscript", "onnxruntime", "onnx_ir", "numpy"}
_SERVER_PACKAGES = {"pygls", "lsprotocol", "cattrs", "attrs"}


def _missing_package(error: ModuleNotFoundError) -> str:
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="onnxlens", description="Find every ONNX export problem of annotated PyTorch "
        "models, located on your own source lines.")
    parser.add_argument("--version", action=_VersionAction, nargs=0,
                        help="print onnxlens's version, the export toolchain's versions and "
                        "which capabilities and speed patches are on, and exit")
    commands = parser.add_subparsers(dest="command", required=True)

    check = commands.add_parser("check", help="check every export target in files/directories")
    check.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    check.add_argument("--format", choices=("text", "json", "sarif", "github"), default="text",
                       help="github: GitHub Actions annotations, and a table of every finding "
                       "appended to $GITHUB_STEP_SUMMARY when it is set")
    check.add_argument("--output", "-o", type=Path, help="write the report here (atomically)")
    check.add_argument("--sarif-file", type=Path, metavar="FILE",
                       help="also write the SARIF log here, whatever the --format (as "
                       "pytest's --junitxml): one check for CI annotations and code scanning")
    check.add_argument("--select", type=_rule_list, help="only these rule ids or prefixes")
    check.add_argument("--ignore", type=_rule_list, help="leave out these rule ids or prefixes")
    check.add_argument("--severity", type=_severity_list, metavar="ID=LEVEL,...",
                       help="a rule's severity (error, warning or info), e.g. ONNX106=info; "
                       "over `severity` in [tool.onnxlens]")
    check.add_argument("--exclude", type=_glob_list, metavar="GLOBS",
                       help="comma-separated globs of files and directories never checked "
                       "(replaces the defaults: hidden directories, venv, build, dist, "
                       "node_modules, ...)")
    check.add_argument("--extend-exclude", type=_glob_list, metavar="GLOBS",
                       help="globs excluded beside the defaults (and `exclude`)")
    check.add_argument("--force-exclude", action="store_true",
                       help="apply the excludes to files named on the command line too (as "
                       "ruff's; the pre-commit hooks pass it, since pre-commit names every "
                       "changed file)")
    check.add_argument("--root", type=Path, help="workspace root (default: nearest directory "
                       "with pyproject.toml or .git)")
    _add_limits(check, "checking a target")
    check.add_argument("--jobs", "-j", type=_job_count, default=None, metavar="N",
                       help="check N targets at once, each in its own process (default: the "
                       "number of CPU cores)")
    check.add_argument("--shard", type=_shard, default=None, metavar="I/N",
                       help="check only shard I of N (1-based): a split of the targets that "
                       "every machine computes alike, for CI matrices; the SARIF category "
                       "becomes onnxlens/shard-I-of-N unless --category is given")
    check.add_argument("--absolute-paths", action="store_true",
                       help="SARIF: record the root's absolute path (originalUriBaseIds)")
    check.add_argument("--category", type=_category, default=None, metavar="NAME",
                       help="SARIF: the run's category (runs[].automationDetails.id NAME/; "
                       "default onnxlens), so that code scanning keeps several uploads apart")
    check.set_defaults(handler=_check)

    save = commands.add_parser("save", help="export a target and save the .onnx file")
    save.add_argument("target", metavar="FILE::TARGET")
    save.add_argument("--output", "-o", type=Path, required=True)
    save.add_argument("--external-data-threshold", type=_size, default=None, metavar="SIZE",
                      help="store weights as external data from this size on (default 2GB; "
                      "accepts 10MB, 1GB, bytes)")
    save.add_argument("--no-optimize", action="store_true", help="skip onnxscript's optimizer")
    save.add_argument("--root", type=Path)
    _add_limits(save, "the export")
    save.set_defaults(handler=_save)

    run = commands.add_parser("run", help="run a target in ONNX Runtime and compare")
    run.add_argument("target", metavar="FILE::TARGET")
    run.add_argument("--repeat", type=int, default=20, help="timed runs (default 20)")
    run.add_argument("--model", type=Path, help="run this saved .onnx instead of exporting")
    run.add_argument("--format", choices=("text", "json"), default="text")
    run.add_argument("--root", type=Path)
    _add_limits(run, "the export and run")
    run.set_defaults(handler=_run)

    rule = commands.add_parser("rule", help="print a rule's documentation page (as `ruff rule`)")
    rule.add_argument("rule_id", nargs="?", metavar="ID", help="a rule id, e.g. ONNX201")
    rule.add_argument("--all", action="store_true", help="list every rule")
    rule.set_defaults(handler=_rule)

    lsp = commands.add_parser("lsp", help="start the language server (stdio, or --tcp)")
    lsp.add_argument("--tcp", metavar="HOST:PORT")
    lsp.set_defaults(handler=_lsp)
    return parser


def _add_limits(command: argparse.ArgumentParser, what: str) -> None:
    """``--timeout`` and ``--memory-limit-mb``: the limits of each job process."""
    command.add_argument("--timeout", type=_seconds, default=None, metavar="SECONDS",
                         help=f"stop {what} after this long: ONNX901 (default 300, or "
                         "`timeout` in [tool.onnxlens]; 0 = no limit)")
    command.add_argument("--memory-limit-mb", type=_megabytes, default=None, metavar="MB",
                         help=f"stop {what} when its process uses more memory: ONNX903 "
                         "(default: `memory-limit-mb` in [tool.onnxlens], else no limit)")


def _limits(args: argparse.Namespace, config: ProjectConfig) -> tuple[float | None, int | None]:
    """The timeout (None: no limit) and the memory limit a job runs with: the flag, else
    [tool.onnxlens], else the default (300 s; no memory limit: a CI run checks models as big
    as the plain exporter can — the corpus's 300M-parameter torchvision models passed
    4096 MB)."""
    timeout = args.timeout if args.timeout is not None else config.get(
        "timeout", DEFAULT_TIMEOUT_SECONDS)
    return timeout or None, args.memory_limit_mb or config.get("memory-limit-mb")


class _VersionAction(argparse.Action):
    """``--version``: what a bug report needs (imports torch, so only when asked)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"onnxlens {__version__}")
        try:
            from exporter import toolchain
            from exporter.session import ExportSession

            ExportSession().probe_toolchain()
            print(toolchain.current().describe())
        except ImportError as error:
            print(f"export toolchain: not importable ({error})")
        parser.exit()


def _rule(args: argparse.Namespace) -> int:
    """``onnxlens rule ONNX201``: the page installed with onnxlens; ``--all``: the catalog."""
    from exporter.rules import rule_page

    if args.all:
        for rule in RULES.values():
            print(f"{rule.id}  {rule.name:<28} {rule.severity.value:<8} {rule.summary}")
        return EXIT_OK
    if not args.rule_id:
        raise UsageError("give a rule id (e.g. `onnxlens rule ONNX201`) or --all")
    rule_id = args.rule_id.strip().upper()
    if rule_id not in RULES:
        close = [known for known in RULES if known.startswith(rule_id[:5])] or list(RULES)[:3]
        raise UsageError(f"no rule {args.rule_id!r} (e.g. {', '.join(close[:5])}; "
                         "`onnxlens rule --all` lists them)")
    print(rule_page(rule_id), end="")
    if RULES[rule_id].doc_url:
        print(f"\n{RULES[rule_id].doc_url}")
    return EXIT_OK


def _lsp(args: argparse.Namespace) -> int:
    from lsp_server.__main__ import main as lsp_main

    return lsp_main(["--tcp", args.tcp] if args.tcp else [])


def _rule_list(text: str) -> list[str]:
    items = [item.strip().upper() for item in text.split(",") if item.strip()]
    for item in items:
        if not re.fullmatch(r"ONNX\d{0,3}", item) or not any(r.startswith(item) for r in RULES):
            raise argparse.ArgumentTypeError(f"unknown rule id or prefix: {item}")
    return items


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    return float(_checked("timeoutSeconds", value))  # also refuses nan and inf


def _checked(setting: str, value: Any) -> Any:
    """``value`` as the settings schema takes it, or the schema's reason as a usage error."""
    from exporter.settings_schema import BY_LSP

    checked, problem = BY_LSP[setting].check(value)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return checked


def _severity_list(text: str) -> dict[str, str]:
    pairs = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        rule, equals, level = item.partition("=")
        if not equals:
            raise argparse.ArgumentTypeError(f"expected ID=LEVEL, not {item!r}")
        pairs[rule.strip()] = level.strip().lower()
    return dict(_checked("severity", pairs))


def _glob_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _category(text: str) -> str:
    value = text.strip()
    if not value or any(character.isspace() for character in value):
        raise argparse.ArgumentTypeError(f"a category is one word without spaces, not {text!r}")
    return value


def _megabytes(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of megabytes: {text!r}") from None
    return int(_checked("memoryLimitMB", value))


def _job_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= 256:
        raise argparse.ArgumentTypeError(f"must be between 1 and 256, not {text}")
    return value


def _shard(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"not I/N (e.g. 1/4): {text!r}")
    index, count = int(match[1]), int(match[2])
    if not 1 <= index <= count:
        raise argparse.ArgumentTypeError(f"I must be between 1 and N: {text!r}")
    return index, count


def _size(text: str) -> int:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]?i?B?)?\s*", text, re.I)
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use e.g. 10MB, 2GB, 4096)")
    unit = (match[2] or "").upper().replace("I", "").rstrip("B")
    return int(float(match[1]) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[unit])


# -- shared ----------------------------------------------------------------------------------

def _warn_config(config: ProjectConfig) -> None:
    for problem in config.problems:
        print(f"onnxlens: warning: {problem}", file=sys.stderr)


def _session(config: ProjectConfig) -> Any:
    _warn_config(config)
    for name in shortcuts.unknown_names():
        print(f"onnxlens: warning: {shortcuts.ENVIRONMENT_VARIABLE} names no shortcut "
              f"{name!r} (known: {', '.join(shortcuts.SHORTCUTS)})", file=sys.stderr)
    for name in torch_compat_unknown_names():
        print(f"onnxlens: warning: ONNXLENS_CAPABILITIES_OFF names no capability {name!r}",
              file=sys.stderr)
    try:
        from exporter import toolchain, torch_compat
        from exporter.context import Settings
        from exporter.session import ExportSession

        session = ExportSession(Settings(opset=config.get("opset"), atol=config.get("atol"),
                                         rtol=config.get("rtol")))
    except ImportError as error:  # torch, onnx, onnxscript or onnxruntime is missing
        raise ToolchainMissing(
            f"ONNX904: a dependency of the export toolchain is missing ({error}). Install it "
            f"into {sys.executable}: {versions.install_hint()}") from error
    if not torch_compat.TORCH_TESTED:  # which speed patches give the same ONNX here
        session.probe_toolchain()
    message = toolchain.current().message()
    if message:
        print(message, file=sys.stderr)
    return session


def torch_compat_unknown_names() -> list[str]:
    try:
        from exporter import torch_compat
    except ImportError:
        return []
    return torch_compat.unknown_names()


def _python_files(paths: list[Path], root: Path, excluded: list[str],
                  force_exclude: bool = False) -> list[Path]:
    """The files given, and the ``*.py`` files under the directories given that no
    ``exclude``/``extend-exclude`` glob matches (relative to the root, as ruff does; a file
    named on the command line is checked even when a glob matches it, unless
    ``force_exclude``: pre-commit names every changed file)."""
    from exporter.settings_schema import is_excluded
    from exporter.sourcetext import special_kind

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


def _write_atomically(path: Path, text: str) -> None:
    from exporter.files import UnsafePathError, write_text_atomically

    try:
        write_text_atomically(path, text)
    except (UnsafePathError, OSError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise UsageError(f"{path}: {reason}") from error


def _check_output_path(path: Path, inputs: list[Path], *, stream_ok: bool = True) -> None:
    """Refuse an output the report cannot be written to before the check runs (none of its
    work is lost): one that is an input of the run (a checked source file), one that is not a
    regular file (a device or a pipe is written to as a stream when ``stream_ok``, never
    replaced), and one in a directory where no file can be created."""
    from exporter.files import UnsafePathError, check_writable, is_stream, output_path

    try:
        output_path(path, stream_ok=stream_ok)
        if not (stream_ok and is_stream(path)):
            check_writable(path)
    except (UnsafePathError, OSError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise UsageError(f"{path}: {reason}") from error
    for source in inputs:
        if path.exists() and source.exists() and os.path.samefile(path, source):
            raise UsageError(f"{path} is {display_path(source)}, an input of this run; "
                             "refusing to overwrite it")


# -- check -----------------------------------------------------------------------------------

def _check(args: argparse.Namespace) -> int:
    from export_worker.batch import BatchOptions, Shard, WorkerUnavailable, check_files

    for output in (args.output, args.sarif_file):
        if output is not None:
            _check_output_path(output, [p for p in args.paths if p.is_file()])
    if (args.output and args.sarif_file
            and args.output.resolve() == args.sarif_file.resolve()):
        raise UsageError(f"--output and --sarif-file both name {args.output}")
    root = (args.root or find_root(args.paths[0])).resolve()
    config = load_config(root)
    _warn_config(config)
    excluded = [*(args.exclude or config.get("exclude", list(DEFAULT_EXCLUDE))),
                *config.get("extend-exclude", []), *(args.extend_exclude or [])]
    files = [path for path in _python_files(args.paths, root, excluded, args.force_exclude)
             if might_have_targets(path)]
    for output in (args.output, args.sarif_file):
        if output is not None:
            _check_output_path(output, files)
    severity = {**config.get("severity", {}), **(args.severity or {})}
    timeout, memory = _limits(args, config)
    options = BatchOptions(root, _check_settings(config), timeout, memory,
                           args.jobs or os.cpu_count() or 1,
                           Shard(*args.shard) if args.shard else None)
    select = args.select or config.get("select")
    ignore = args.ignore or config.get("ignore")
    streaming = args.format == "text" and args.output is None

    def file_done(result: Any, targets: list[Any]) -> None:
        """Apply the file's suppression comments; text on stdout: each file's findings as
        soon as it and the files before it are checked (the summary follows at the end)."""
        from exporter.sourcetext import source_lines
        from exporter.suppressions import apply_suppressions

        result.file_diagnostics += apply_suppressions(result, targets, source_lines)
        found = apply_severity(filter_rules(result.diagnostics, select, ignore), severity)
        if streaming and found:
            print(format_findings(found), end="\n\n", flush=True)

    try:
        batch = check_files(files, options, file_done)
    except WorkerUnavailable as error:
        unavailable = _worker_unavailable(error)
        if isinstance(unavailable, ToolchainMissing) and (
                args.format != "text" or args.sarif_file) and files:
            _report_missing_toolchain(args, files, root, unavailable)
        raise unavailable from error
    if batch.unfinished:
        print(f"onnxlens: interrupted: {batch.unfinished} target(s) were not checked; the "
              "report holds those that were", file=sys.stderr)
    _print_worker_notes(batch.ready)
    result = batch.result
    diagnostics = apply_severity(filter_rules(result.diagnostics, select, ignore), severity)
    if args.format == "github":
        _write_step_summary(diagnostics, format_summary(result, diagnostics))
    if args.sarif_file:
        _write_atomically(args.sarif_file, _render_check(args, result, diagnostics, root,
                                                           report_format="sarif"))
        print(f"onnxlens: wrote {display_path(args.sarif_file)}", file=sys.stderr)
    if streaming:
        print(format_summary(result, diagnostics), end="")
    else:
        text = _render_check(args, result, diagnostics, root, batch.ready.toolchain)
        if args.output:
            _write_atomically(args.output, text)
            print(f"onnxlens: wrote {display_path(args.output)}", file=sys.stderr)
            if args.format != "text":
                print(format_text(result, diagnostics), end="", file=sys.stderr)
        else:
            print(text, end="")
    if batch.unfinished:
        return EXIT_INTERRUPTED
    return EXIT_ERRORS if any(d.severity == "error" for d in diagnostics) else EXIT_OK


def _check_settings(config: ProjectConfig) -> Any:
    from export_worker.messages import CheckSettings

    return CheckSettings(config.get("opset"), config.get("atol"), config.get("rtol"))


def _worker_unavailable(error: Exception) -> UsageError:
    """The usage error (exit 2) for a worker that could not start: ONNX904 when the export
    toolchain is missing."""
    if not str(error).startswith("the export toolchain is missing"):
        return UsageError(f"the export worker could not start: {error}")
    return ToolchainMissing(
        f"ONNX904: a dependency of the export toolchain is missing "
        f"({str(error).rpartition(': ')[2]}). Install it into {sys.executable}: "
        f"{versions.install_hint()}")


def _print_worker_notes(ready: Any) -> None:
    """What the worker said when it started: unknown ONNXLENS_* names, a degraded torch."""
    for warning in ready.warnings:
        print(f"onnxlens: warning: {warning}", file=sys.stderr)
    message = ready.toolchain.get("message")
    if message:
        print(message, file=sys.stderr)


def _write_step_summary(diagnostics: list[Any], summary: str) -> None:
    """GitHub Actions: every finding in the step summary (annotations stop at 10 a kind)."""
    from exporter.github import append_step_summary, step_summary

    destination = os.environ.get("GITHUB_STEP_SUMMARY")
    if not destination:
        return
    try:
        append_step_summary(Path(destination), step_summary(diagnostics, summary))
    except OSError as error:
        print(f"onnxlens: warning: cannot write the step summary {destination}: {error}",
              file=sys.stderr)


def _report_missing_toolchain(args: argparse.Namespace, files: list[Path], root: Path,
                              error: ToolchainMissing) -> None:
    """A JSON or SARIF report holding ONNX904 (at the first file), so that CI reading the
    report sees why nothing was checked; the error itself still ends the run (exit 2)."""
    from exporter.diagnostics import Diagnostic, Location, Range
    from exporter.result import CheckResult

    message = str(error).removeprefix("ONNX904: ")
    diagnostic = Diagnostic("ONNX904", message[:1].upper() + message[1:],
                            Location(files[0].resolve(), Range.of(1, 1, 1, 1)), target="")
    result = CheckResult(file_diagnostics=[diagnostic], files=[f.resolve() for f in files])
    if args.sarif_file:
        _write_atomically(args.sarif_file,
                          _render_check(args, result, [diagnostic], root, report_format="sarif"))
    if args.format == "text":
        return
    text = _render_check(args, result, [diagnostic], root)
    if args.output:
        _write_atomically(args.output, text)
    else:
        print(text, end="")


def _render_check(args: argparse.Namespace, result: Any, diagnostics: list[Any],
                  root: Path, toolchain: dict[str, Any] | None = None,
                  report_format: str | None = None) -> str:
    """The report in ``report_format`` (default: ``--format``)."""
    report_format = report_format or args.format
    if report_format == "json":
        report = result_json(result, diagnostics)
        if toolchain is not None:  # None: ONNX904, there is no toolchain to describe
            report["toolchain"] = toolchain
        return json.dumps(report, indent=2) + "\n"
    if report_format == "sarif":
        from exporter.diagnostics import sort_key
        from exporter.result import CheckResult
        from exporter.sarif import DEFAULT_CATEGORY, sarif_dict

        filtered = CheckResult(files=result.files,
                               file_diagnostics=sorted(diagnostics, key=sort_key))
        category = args.category or (
            f"{DEFAULT_CATEGORY}/shard-{args.shard[0]}-of-{args.shard[1]}" if args.shard
            else DEFAULT_CATEGORY)
        return json.dumps(sarif_dict(filtered, root, absolute_root=args.absolute_paths,
                                     category=category), indent=2) + "\n"
    if report_format == "github":
        from exporter.github import workflow_commands

        return workflow_commands(diagnostics) + format_summary(result, diagnostics)
    return format_text(result, diagnostics)


# -- save / run ------------------------------------------------------------------------------
# Both run one job in an export worker of their own (export_worker.single_job), as a check and
# the language server's save and run do: the user's code never runs in this process.

def _resolve_target(spec: str, root_option: Path | None) -> tuple[Path, str, Path]:
    file_part, separator, name = spec.rpartition("::")
    if not separator or not file_part or not name:
        raise UsageError(f"expected FILE::TARGET, got {spec!r}")
    path = Path(file_part)
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    return path.resolve(), name, (root_option or find_root(path)).resolve()


def _find_target(path: Path, name: str) -> Target:
    """The target ``name`` of ``path``, found statically (nothing of the file runs here)."""
    from exporter.sourcetext import decoding_problem, read_source
    from exporter.targets import discover

    problem = decoding_problem(path)
    if problem is not None:
        raise UsageError(f"{display_path(path)}: {problem.message[:1].lower()}"
                         f"{problem.message[1:]}")
    found = discover(path, read_source(path))
    target = next((t for t in found.targets if t.name == name), None)
    if target is None:
        names = ", ".join(t.name for t in found.targets) or "none"
        for diagnostic in found.diagnostics:
            print(format_diagnostic(diagnostic), file=sys.stderr)
        raise UsageError(f"{display_path(path)} has no export target {name!r} (targets: {names})")
    return target


def _single_job(args: argparse.Namespace, kind: JobKind,
                **fields: Any) -> tuple[Target, _JobEnd]:
    """Run a save or run job on ``args.target``: the target and the job's outcome."""
    from export_worker.single_job import WorkerUnavailable, run_single_job

    path, name, root = _resolve_target(args.target, args.root)
    target = _find_target(path, name)
    config = load_config(root)
    _warn_config(config)
    timeout, memory = _limits(args, config)
    request = JobRequest(kind, str(path), str(root), name,
                         settings=_check_settings(config), timeout=timeout,
                         memory_limit_mb=memory, **fields)
    try:
        # what the model prints (and the exporter's progress) goes to stderr: stdout
        # carries onnxlens's own output alone (``run --format json``)
        job = run_single_job(request, on_output=lambda line: print(line, file=sys.stderr))
    except WorkerUnavailable as error:
        raise _worker_unavailable(error) from error
    _print_worker_notes(job.ready)
    return target, _JobEnd(job.outcome, Limits(timeout, memory))


@dataclass(frozen=True)
class _JobEnd:
    """A save or run job's outcome: its answer, or the diagnostic that says why it has none
    (ONNX901 timeout, ONNX902 the process died, ONNX903 memory)."""

    outcome: JobOutcome
    limits: Limits

    @property
    def answer(self) -> JobAnswer | None:
        return self.outcome.answer if isinstance(self.outcome, JobDone) else None

    def print_problems(self, target: Target) -> None:
        """The errors the job found, or the ONNX90x diagnostic of a job that did not end."""
        from export_worker.outcomes import target_result
        from exporter.serialize import diagnostic_from_data

        if self.answer is None:
            diagnostics = target_result(target, self.outcome, self.limits).diagnostics
        else:
            diagnostics = [diagnostic_from_data(d) for d in self.answer.diagnostics]
        for diagnostic in diagnostics:
            print(format_diagnostic(diagnostic), file=sys.stderr)

    @property
    def reason(self) -> str:
        if self.answer is None:
            return {"timeout": "the export did not finish in time (ONNX901)",
                    "memory": "the export went past the memory limit (ONNX903)"}.get(
                getattr(self.outcome, "failure", ""), "the process exporting it died (ONNX902)")
        # the job's words for the server's message; the CLI says what is unchanged itself
        return printable((self.answer.error or "the export failed").removesuffix(
            "; the file was not written"))


def _save(args: argparse.Namespace) -> int:
    source = Path(args.target.rpartition("::")[0])
    _check_output_path(args.output, [source] if source.is_file() else [], stream_ok=False)
    # The check runs onnxscript's optimizer as torch.onnx.export does (unless --no-optimize):
    # what is saved is the model that was checked.
    target, end = _single_job(args, "save", output=str(args.output.absolute()),
                              threshold=args.external_data_threshold,
                              optimize=not args.no_optimize)
    answer = end.answer
    if answer is None or not answer.saved:
        end.print_problems(target)
        if answer is not None and answer.internal:
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


def _run(args: argparse.Namespace) -> int:
    model = str(args.model.absolute()) if args.model else None
    target, end = _single_job(args, "run", repeat=args.repeat, model=model)
    answer = end.answer
    if answer is None or answer.report is None:
        end.print_problems(target)
        print(f"onnxlens: cannot run {args.target}: {end.reason}", file=sys.stderr)
        return EXIT_ERRORS
    if args.format == "json":
        print(json.dumps(answer.report, indent=2))
    else:
        print(answer.markdown or "", end="")
    return EXIT_OK if answer.report["matched"] else EXIT_ERRORS


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
