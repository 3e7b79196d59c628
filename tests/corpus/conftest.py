"""Session fixtures of the differential corpus: the CI subset is materialized, checked by
onnxlens and judged against the plain exporter once per session; the totals are printed at
the end of the run."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.corpus.ci import ci_corpus, run_ci
from tests.corpus.corpus import Corpus
from tests.corpus.harness import Outcome

_RUNS: list[tuple[Outcome, float]] = []


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "corpus: the differential corpus (slow: minutes)")


@pytest.fixture(scope="session")
def corpus_ci(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    """The CI subset, materialized in a temporary workspace."""
    return ci_corpus(Path(tmp_path_factory.mktemp("corpus")))


@pytest.fixture(scope="session")
def corpus_ci_outcome(corpus_ci: Corpus) -> Outcome:
    """Truth, onnxlens's verdicts and the agreement of every target of the subset."""
    started = time.perf_counter()
    outcome = run_ci(corpus_ci)
    _RUNS.append((outcome, time.perf_counter() - started))
    return outcome


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from tests.corpus.__main__ import totals_lines

    for outcome, seconds in _RUNS:
        terminalreporter.section("differential corpus (CI subset)")
        for line in totals_lines(outcome.totals, seconds):
            terminalreporter.write_line(line)
