"""``onnxlens`` command line: check, save, run, graph, rule, toolchain, lsp.

Exit status: 0 no error, 1 errors found (or the export failed), 2 usage or tool failure,
5 nothing checked with ``--require-targets``, 130 interrupted (``check`` still writes the
report of what it checked).
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
from onnxlens.argument_types import category, job_count, shard, size
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
from onnxlens.options import LIMITS, add_setting_flags
from onnxlens.save_and_run import run_command, save_command


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    unknown = _unknown_command(parser, argv)
    if unknown:
        parser.error(unknown)
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


_TARGETS = """A target is a model marked in its file: `# onnx-export: args=(...)` above a
class or function, a torch.onnx.ExportableModule, or a function that calls torch.onnx.export
(docs/targets.md). FILE::TARGET names one: examples/mlp.py::MLPModel."""

_EXIT_STATUS = """exit status: 0 no error, 1 errors found (or the export failed), 2 usage or
tool failure, 5 nothing checked with --require-targets, 130 interrupted"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="onnxlens", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Find every ONNX export problem of annotated PyTorch models, located on "
        "your own source lines.\n\n" + _TARGETS,
        epilog=_EXIT_STATUS + "\n\n`onnxlens COMMAND --help` describes a command; "
        "docs/cli.md has them all.")
    parser.add_argument("--version", action=_VersionAction, nargs=0,
                        help="print onnxlens's version and the installed versions of torch, "
                        "onnx, onnxscript and onnxruntime, and exit (`onnxlens toolchain` "
                        "says which capabilities work)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _add_check(commands)
    _add_save(commands)
    _add_run(commands)
    _add_graph(commands)
    _add_rule(commands)
    _add_toolchain(commands)
    _add_lsp(commands)
    return parser


def _add_check(commands: Any) -> None:
    check = _command(commands, "check", "check every export target in files and directories",
                     "Check every target in the files and directories given (*.py and "
                     "Jupyter notebooks), each in a process of its own, and report every "
                     "problem the exporter would hit on its source line.")
    check.add_argument("paths", nargs="+", metavar="PATH",
                       help="a file, a directory (searched for *.py and *.ipynb) or "
                       "FILE::TARGET (that target alone)")
    check.add_argument("--format", choices=("text", "json", "sarif", "github"), default="text",
                       help="the report's format (default text: compiler-style lines); "
                       "github: GitHub Actions annotations, and a table of every finding "
                       "appended to $GITHUB_STEP_SUMMARY when it is set")
    check.add_argument("--output", "-o", type=Path, help="write the report here (atomically)")
    check.add_argument("--sarif-file", type=Path, metavar="FILE",
                       help="also write the SARIF log here, whatever the --format (as "
                       "pytest's --junitxml): one check for CI annotations and code scanning")
    check.add_argument("--force-exclude", action="store_true",
                       help="apply the excludes to files named on the command line too (as "
                       "ruff's; the pre-commit hooks pass it, since pre-commit names every "
                       "changed file)")
    check.add_argument("--root", type=Path, help="workspace root (default: nearest directory "
                       "with pyproject.toml or .git)")
    add_setting_flags(check, "checking a target")  # --select, --timeout, ... (the schema's)
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
    check.add_argument("--require-targets", action="store_true",
                       help="fail (exit 5) when no target was checked: a mistyped path, an "
                       "empty directory, files without a marked model (default: a warning "
                       "in every format, exit 0)")
    check.set_defaults(handler=check_command)


def _add_save(commands: Any) -> None:
    save = _command(commands, "save", "export a target and save the .onnx file",
                    "Check one target and save the model that was checked, atomically.")
    save.add_argument("target", metavar="FILE::TARGET", help="the target to export")
    save.add_argument("--output", "-o", type=Path, required=True, metavar="FILE",
                      help="the .onnx file to write (its weights beside it as external data "
                      "from --external-data-threshold on)")
    save.add_argument("--external-data-threshold", type=size, default=None, metavar="SIZE",
                      help="store weights as external data from this size on (default 2GB; "
                      "accepts 10MB, 1GB, bytes)")
    save.add_argument("--no-optimize", action="store_true", help="skip onnxscript's optimizer")
    save.add_argument("--strip-source-metadata", action="store_true",
                      help="leave out the stack traces the exporter records in each node (they "
                      "name this machine's absolute paths) and any metadata naming such a "
                      "path: for a model that will ship (docs/graph.md)")
    _root(save)
    add_setting_flags(save, "the export", only=LIMITS)
    save.set_defaults(handler=save_command)


def _add_run(commands: Any) -> None:
    run = _command(commands, "run", "run a target in ONNX Runtime and compare with PyTorch",
                   "Export one target (or take a saved model), run it in ONNX Runtime on "
                   "its example inputs, compare the outputs with PyTorch's and time it.")
    run.add_argument("target", metavar="FILE::TARGET", help="the target to run")
    run.add_argument("--repeat", type=int, default=20, metavar="N",
                     help="timed runs (default 20)")
    run.add_argument("--model", type=Path, metavar="FILE",
                     help="run this saved .onnx instead of exporting")
    run.add_argument("--format", choices=("text", "json"), default="text",
                     help="the report's format (default text)")
    _root(run)
    add_setting_flags(run, "the export and run", only=LIMITS)
    run.set_defaults(handler=run_command)


def _add_graph(commands: Any) -> None:
    graph = _command(commands, "graph", "show the checked graph in Model Explorer, its "
                     "problems marked", "Check one target and show its ONNX graph in Google's "
                     "Model Explorer, the failing node selected and each node linked to its "
                     "source line (docs/graph.md; needs the `graph` extra).")
    graph.add_argument("target", metavar="FILE::TARGET", help="the target to show")
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
    _root(graph)
    add_setting_flags(graph, "the export", only=LIMITS)
    graph.set_defaults(handler=graph_command)


def _add_rule(commands: Any) -> None:
    rule = _command(commands, "rule", "print a rule's page (as `ruff rule`)",
                    "Print a rule's documentation page, or list every rule.")
    rule.add_argument("rule_id", nargs="?", metavar="ID", help="a rule id, e.g. ONNX201")
    rule.add_argument("--all", action="store_true",
                      help="list every rule: name, default severity, on or off by default")
    rule.set_defaults(handler=_rule)


def _add_toolchain(commands: Any) -> None:
    toolchain = _command(commands, "toolchain", "say which capabilities and speed patches "
                         "work with this torch", "Print the export toolchain's versions and "
                         "which of onnxlens's capabilities and speed patches are on with "
                         "this torch (it imports torch, in a process of its own: seconds).")
    toolchain.set_defaults(handler=_toolchain)


def _add_lsp(commands: Any) -> None:
    lsp = _command(commands, "lsp", "start the language server (stdio, or --tcp)",
                   "Start the language server, for an editor (docs/editors.md).")
    lsp.add_argument("--tcp", metavar="HOST:PORT",
                     help="listen on this address instead of talking over stdio")
    lsp.set_defaults(handler=_lsp)


def _command(commands: Any, name: str, summary: str,
             description: str) -> argparse.ArgumentParser:
    """A subcommand whose --help says what it does, what a target is and the exit codes."""
    command: argparse.ArgumentParser = commands.add_parser(
        name, help=summary, description=f"{description}\n\n{_TARGETS}",
        epilog=_EXIT_STATUS, formatter_class=argparse.RawDescriptionHelpFormatter)
    return command


def _root(command: argparse.ArgumentParser) -> None:
    command.add_argument("--root", type=Path, metavar="DIR",
                         help="workspace root, whose pyproject.toml [tool.onnxlens] applies "
                         "(default: nearest directory with pyproject.toml or .git)")


def _unknown_command(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """``onnxlens chek``: "unknown command 'chek'; did you mean 'check'?" (argparse lists
    every choice instead, and Python before 3.14 never suggests one)."""
    import difflib

    commands = next(action for action in parser._actions
                    if isinstance(action, argparse._SubParsersAction))
    first = next((word for word in argv if not word.startswith("-")), None)
    if first is None or first in commands.choices or any(
            word in ("-h", "--help", "--version") for word in argv[:argv.index(first)]):
        return None
    close = difflib.get_close_matches(first, list(commands.choices), n=1, cutoff=0.6)
    suggestion = f"; did you mean '{close[0]}'?" if close else ""
    return (f"unknown command '{first}'{suggestion} (commands: "
            f"{', '.join(commands.choices)})")


class _VersionAction(argparse.Action):
    """``--version``: from the packages' metadata, at once (no torch import; ``onnxlens
    toolchain`` probes what works)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        from exporter.versions import installed_packages

        print(f"onnxlens {__version__}")
        print(installed_packages())
        parser.exit()


def _rule(args: argparse.Namespace) -> int:
    """``onnxlens rule ONNX201``: the page installed with onnxlens; ``--all``: the catalog."""
    from onnxlens.rule_pages import catalog, print_rule

    if args.all:
        print(catalog(), end="")
        return EXIT_OK
    if not args.rule_id:
        raise UsageError("give a rule id (e.g. `onnxlens rule ONNX201`) or --all")
    rule_id = args.rule_id.strip().upper()
    if rule_id not in RULES:
        close = [known for known in RULES if known.startswith(rule_id[:5])] or list(RULES)[:3]
        raise UsageError(f"no rule {args.rule_id!r} (e.g. {', '.join(close[:5])}; "
                         "`onnxlens rule --all` lists them)")
    print_rule(rule_id)
    return EXIT_OK


def _toolchain(args: argparse.Namespace) -> int:
    """What the probes of a process of its own found (the CLI never imports torch)."""
    import subprocess

    done = subprocess.run([sys.executable, "-m", "export_worker.toolchain_report"],
                          stdin=subprocess.DEVNULL, check=False)
    return EXIT_OK if done.returncode == 0 else EXIT_USAGE


def _lsp(args: argparse.Namespace) -> int:
    from lsp_server.__main__ import main as lsp_main

    return lsp_main(["--tcp", args.tcp] if args.tcp else [])
