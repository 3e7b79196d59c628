"""Session fixtures of the differential corpus: each part of the CI subset (tests/corpus/ci.py,
``PARTS``) is materialized, checked by onnxlens and judged against the plain exporter once per
session, when a test first needs it; the totals are printed at the end of the run."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SUMMARY
from tests.corpus.ci import ci_corpus, run_ci
from tests.corpus.corpus import Corpus
from tests.corpus.harness import Outcome

Judged = Callable[[str], tuple[Corpus, Outcome]]


@pytest.fixture(scope="session")
def corpus_ci_part(tmp_path_factory: pytest.TempPathFactory) -> Judged:
    """``part`` → the part of the CI subset, materialized in a temporary workspace, and its
    truth, onnxlens's verdicts and their agreement, computed once."""
    from tests.corpus.__main__ import totals_lines

    judged: dict[str, tuple[Corpus, Outcome]] = {}

    def part(name: str) -> tuple[Corpus, Outcome]:
        if name not in judged:
            started = time.perf_counter()
            corpus = ci_corpus(Path(tmp_path_factory.mktemp(f"corpus-{name}")), name)
            outcome = run_ci(corpus)
            SUMMARY.setdefault("differential corpus (CI subset)", []).extend(
                f"{name}: {line}" for line in totals_lines(outcome.totals,
                                                             time.perf_counter() - started))
            judged[name] = corpus, outcome
        return judged[name]

    return part
