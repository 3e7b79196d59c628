"""Shared fixtures: one warm export session for the whole run (as the worker will keep one)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "exporter" / "fixtures"
REPO = Path(__file__).resolve().parents[1]

# The documentation for users: the README and the pages beside it in docs/ (the rule pages
# have tests of their own). What these show (console examples, settings, CI configuration) is
# checked against the code wherever it lives.
USER_DOCS = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))


def user_docs_text() -> str:
    """Every user document, one after the other."""
    return "\n".join(path.read_text(encoding="utf-8") for path in USER_DOCS)


# The test modules whose outcome depends on the installed torch (its verdicts, its exports, its
# state and capabilities): marked ``every_torch``, they run again on every other tested torch
# (scripts/test.sh). A module that is mostly plumbing marks its few torch-dependent tests
# itself (``@pytest.mark.every_torch``, e.g. tests/onnxlens/test_save_and_run.py); a test of a
# listed module marked ``primary_torch`` does not run again (a speed shortcut's comparison with
# itself switched off, e.g. tests/corpus/test_corpus.py's warm imports: on every torch the
# corpus judges the checks with every shortcut on against the plain exporter). The rest
# (the CLI's formats and exit codes, discovery, settings, files, timeouts, the server's
# scheduling and presentation, the documents' console examples, whose verdicts
# tests/onnxlens/test_examples.py checks on every torch, and the emulation of a torch without
# the private capabilities, tests/exporter/toolchain/test_capabilities_off.py) runs on the
# primary torch only.
EVERY_TORCH = frozenset({
    "tests/corpus/test_corpus.py",
    "tests/corpus/test_truth_process.py",
    "tests/corpus/test_variants.py",
    "tests/export_worker/test_worker.py",
    "tests/exporter/pipeline/test_after_verdict.py",
    "tests/exporter/pipeline/test_comparing.py",
    "tests/exporter/pipeline/test_deploy.py",
    "tests/exporter/pipeline/test_dynamic_dims.py",
    "tests/exporter/pipeline/test_fixture_diagnostics.py",
    "tests/exporter/pipeline/test_random_draws.py",
    "tests/exporter/pipeline/test_session.py",
    "tests/exporter/pipeline/test_soundness.py",
    "tests/exporter/pipeline/test_strict_recapture.py",
    "tests/exporter/pipeline/test_verdicts.py",
    "tests/exporter/pipeline/test_weights_apart.py",
    "tests/exporter/source/test_traces.py",
    "tests/exporter/toolchain/test_cached_decomposition.py",
    "tests/exporter/toolchain/test_shortcuts.py",
    "tests/exporter/toolchain/test_speedups.py",
    "tests/exporter/toolchain/test_torch_compat.py",
    "tests/lsp/test_toolchain.py",
    "tests/lsp/test_warm_imports.py",
    "tests/onnxlens/test_examples.py",
})


# Modules that share an expensive session fixture run in one pytest-xdist process: each key
# runs where its value runs (``fixture_results`` checks every fixture file).
_SAME_PROCESS = {
    "tests/exporter/reports/test_sarif.py": "tests/exporter/pipeline/test_fixture_diagnostics.py",
}


_CORPUS_MODULE = "tests/corpus/test_corpus.py"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadscope`` by module: each test module runs in one process, so that its
    language server and module fixtures start once; the corpus's test module by part of its
    subset (tests/corpus/ci.py, ``PARTS``), each part judged where it runs. (loadscope itself
    splits a test id at its last ``::``, and a corpus test's id holds ``::`` in its parameter:
    each corpus test became a scope of its own, and every process ran the whole subset.)"""
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            if module == _CORPUS_MODULE:  # each part of the corpus's subset on its own
                from tests.corpus.ci import part_of_test

                return f"{module}::{part_of_test(nodeid.split('::', 1)[1])}"
            return _SAME_PROCESS.get(module, module)

    return ByModule(config, log)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """With ``ONNXLENS_TEST_CPU`` set, the CPU each test used (tests/cpu_usage.py)."""
    from tests import cpu_usage

    directory = os.environ.get(cpu_usage.ENVIRONMENT_VARIABLE)
    before = cpu_usage.cpu_seconds() if directory else 0.0
    yield
    if directory:
        cpu_usage.record(directory, item.nodeid, cpu_usage.cpu_seconds() - before)


# Sections of lines printed at the end of the run (e.g. the corpus's totals). Under pytest-xdist
# each worker hands its own to the controller, which prints them all.
SUMMARY: dict[str, list[str]] = {}
_SUMMARY_KEY = "onnxlens_summary"


def pytest_sessionfinish(session: pytest.Session) -> None:
    worker_output = getattr(session.config, "workeroutput", None)
    if worker_output is not None:  # a pytest-xdist worker
        worker_output[_SUMMARY_KEY] = SUMMARY


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    for title, lines in getattr(node, "workeroutput", {}).get(_SUMMARY_KEY, {}).items():
        SUMMARY.setdefault(title, []).extend(lines)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for title, lines in SUMMARY.items():
        terminalreporter.section(title)
        for line in lines:
            terminalreporter.write_line(line)


def pytest_configure(config: pytest.Config) -> None:
    missing = sorted(name for name in EVERY_TORCH if not (REPO / name).is_file())
    if missing:
        raise pytest.UsageError(f"tests/conftest.py EVERY_TORCH names no such file: {missing}")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--corpus", action="store_true",
                     help="also run the differential corpus's CI subset (tests marked corpus: "
                     "minutes; scripts/test.sh passes it)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    without_corpus = pytest.mark.skip(reason="the differential corpus runs with --corpus "
                                      "(scripts/test.sh passes it)")
    for item in items:
        if item.path.resolve().relative_to(REPO).as_posix() in EVERY_TORCH \
                and "primary_torch" not in item.keywords:
            item.add_marker(pytest.mark.every_torch)
        if "corpus" in item.keywords and not config.getoption("--corpus"):
            item.add_marker(without_corpus)


@pytest.fixture(scope="session")
def session():
    from exporter.pipeline.session import ExportSession

    export_session = ExportSession()
    export_session.warm_up()
    return export_session


@pytest.fixture(scope="session")
def fixture_results(session):
    """Check every fixture file once; tests read the results."""
    results = {}
    for workspace in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        for path in sorted(workspace.glob("*.py")):
            results[f"{workspace.name}/{path.name}"] = (workspace.resolve(),
                                                        session.check_file(path, workspace))
    return results


def _model_explorer_missing() -> bool:
    from export_worker.graph_viewer import missing_packages

    return bool(missing_packages())


#: tests of the graph viewer: Model Explorer is the `graph` extra, which scripts/setup.sh
#: installs beside the primary torch only
needs_model_explorer = pytest.mark.skipif(
    _model_explorer_missing(),
    reason='Model Explorer is not installed (pip install "onnxlens[graph]")')


def lsp_session_bytes() -> bytes:
    """An LSP client's whole session on stdin: initialize, initialized, shutdown, exit."""
    messages = (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"processId": None, "rootUri": None, "capabilities": {}}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"})
    bodies = [json.dumps(message).encode() for message in messages]
    return b"".join(b"Content-Length: %d\r\n\r\n" % len(body) + body for body in bodies)


def lsp_bodies(stdout: bytes) -> list[dict[str, Any]]:
    """The JSON bodies of a server's LSP messages on stdout."""
    return [json.loads(part.split(b"\r\n\r\n", 1)[1])
            for part in stdout.split(b"Content-Length: ")[1:]]


def process_exists(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def tmpfs(tmp_path):
    """Mount a small tmpfs with the given options (``mount -t tmpfs``: root only)."""
    mounted: list[Path] = []

    def mount(name: str, options: str) -> Path:
        point = tmp_path / name
        point.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        subprocess.run(["umount", str(point)], check=False)
