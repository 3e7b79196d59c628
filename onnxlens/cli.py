"""``onnxlens`` command line: check, save, run.

Exit status: 0 no error, 1 errors found (or the export failed), 2 usage or tool failure,
130 interrupted (``check`` still writes the report of what it checked).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from exporter import __version__
from exporter.findings.rules import RULES
from onnxlens.argument_types import (
    category,
    fix_budget,
    glob_list,
    job_count,
    rule_list,
    severity_list,
    shard,
    size,
)
from onnxlens.check import check_command
from onnxlens.graph import graph_command
from onnxlens.messages import (
    EXIT_ERRORS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    missing_package,
)
from onnxlens.options import add_limits
from onnxlens.save_and_run import run_command, save_command


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
        print(f"onnxlens: error: {missing_package(error)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # stdout's reader went away (`onnxlens rule --all | head`): stop quietly, and keep
        # Python from complaining again when it flushes stdout at exit (Python's signal docs)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERRORS


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
    check.add_argument("--select", type=rule_list, help="only these rule ids or prefixes")
    check.add_argument("--ignore", type=rule_list, help="leave out these rule ids or prefixes")
    check.add_argument("--severity", type=severity_list, metavar="ID=LEVEL,...",
                       help="a rule's severity (error, warning or info), e.g. ONNX106=info; "
                       "over `severity` in [tool.onnxlens]")
    check.add_argument("--exclude", type=glob_list, metavar="GLOBS",
                       help="comma-separated globs of files and directories never checked "
                       "(replaces the defaults: hidden directories, venv, build, dist, "
                       "node_modules, ...)")
    check.add_argument("--extend-exclude", type=glob_list, metavar="GLOBS",
                       help="globs excluded beside the defaults (and `exclude`)")
    check.add_argument("--force-exclude", action="store_true",
                       help="apply the excludes to files named on the command line too (as "
                       "ruff's; the pre-commit hooks pass it, since pre-commit names every "
                       "changed file)")
    check.add_argument("--root", type=Path, help="workspace root (default: nearest directory "
                       "with pyproject.toml or .git)")
    add_limits(check, "checking a target")
    check.add_argument("--fix-budget", type=fix_budget, default=None, metavar="SECONDS",
                       help="after a target fails, try the fixes that apply to its failure "
                       "for up to this long and show those that worked (default 120, or "
                       "`fix-budget` in [tool.onnxlens]; 0 = none tried; docs/fixes.md)")
    check.add_argument("--jobs", "-j", type=job_count, default=None, metavar="N",
                       help="check N targets at once, each in its own process (default: the "
                       "number of CPU cores)")
    check.add_argument("--shard", type=shard, default=None, metavar="I/N",
                       help="check only shard I of N (1-based): a split of the targets that "
                       "every machine computes alike, for CI matrices; the SARIF category "
                       "becomes onnxlens/shard-I-of-N unless --category is given")
    check.add_argument("--absolute-paths", action="store_true",
                       help="SARIF: record the root's absolute path (originalUriBaseIds)")
    check.add_argument("--category", type=category, default=None, metavar="NAME",
                       help="SARIF: the run's category (runs[].automationDetails.id NAME/; "
                       "default onnxlens), so that code scanning keeps several uploads apart")
    check.set_defaults(handler=check_command)

    save = commands.add_parser("save", help="export a target and save the .onnx file")
    save.add_argument("target", metavar="FILE::TARGET")
    save.add_argument("--output", "-o", type=Path, required=True)
    save.add_argument("--external-data-threshold", type=size, default=None, metavar="SIZE",
                      help="store weights as external data from this size on (default 2GB; "
                      "accepts 10MB, 1GB, bytes)")
    save.add_argument("--no-optimize", action="store_true", help="skip onnxscript's optimizer")
    save.add_argument("--strip-source-metadata", action="store_true",
                      help="leave out the stack traces the exporter records in each node (they "
                      "name this machine's absolute paths) and any metadata naming such a "
                      "path: for a model that will ship (docs/graph.md)")
    save.add_argument("--root", type=Path)
    add_limits(save, "the export")
    save.set_defaults(handler=save_command)

    run = commands.add_parser("run", help="run a target in ONNX Runtime and compare")
    run.add_argument("target", metavar="FILE::TARGET")
    run.add_argument("--repeat", type=int, default=20, help="timed runs (default 20)")
    run.add_argument("--model", type=Path, help="run this saved .onnx instead of exporting")
    run.add_argument("--format", choices=("text", "json"), default="text")
    run.add_argument("--root", type=Path)
    add_limits(run, "the export and run")
    run.set_defaults(handler=run_command)

    graph = commands.add_parser(
        "graph", help="show the graph onnxlens checked in Model Explorer, its problems marked "
        "(docs/graph.md)")
    graph.add_argument("target", metavar="FILE::TARGET")
    graph.add_argument("--output-dir", type=Path, default=None, metavar="DIR",
                       help="write the model and the viewer's files here and keep them "
                       "(default: a temporary directory, removed at the end)")
    graph.add_argument("--no-serve", action="store_true",
                       help="write the files and print where each node came from, without "
                       "starting the viewer")
    graph.add_argument("--no-browser", action="store_true",
                       help="print the viewer's address instead of opening a browser")
    graph.add_argument("--format", choices=("text", "json"), default="text",
                       help="json: the files, the node to select and every node's source line")
    graph.add_argument("--root", type=Path)
    add_limits(graph, "the export")
    graph.set_defaults(handler=graph_command)

    rule = commands.add_parser("rule", help="print a rule's documentation page (as `ruff rule`)")
    rule.add_argument("rule_id", nargs="?", metavar="ID", help="a rule id, e.g. ONNX201")
    rule.add_argument("--all", action="store_true", help="list every rule")
    rule.set_defaults(handler=_rule)

    lsp = commands.add_parser("lsp", help="start the language server (stdio, or --tcp)")
    lsp.add_argument("--tcp", metavar="HOST:PORT")
    lsp.set_defaults(handler=_lsp)
    return parser


class _VersionAction(argparse.Action):
    """``--version``: what a bug report needs (imports torch, so only when asked)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"onnxlens {__version__}")
        try:
            from exporter.pipeline.session import ExportSession
            from exporter.toolchain import status

            ExportSession().probe_toolchain()
            print(status.current().describe())
        except ImportError as error:
            print(f"export toolchain: not importable ({error})")
        parser.exit()


def _rule(args: argparse.Namespace) -> int:
    """``onnxlens rule ONNX201``: the page installed with onnxlens; ``--all``: the catalog."""
    from exporter.findings.rules import rule_page

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
