"""Session fixtures of the differential corpus: the CI subset is materialized, checked by
onnxlens and judged against the plain exporter once per session; the totals are printed at
the end of the run."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import SUMMARY
from tests.corpus.ci import ci_corpus, run_ci
from tests.corpus.corpus import Corpus
from tests.corpus.harness import Outcome


@pytest.fixture(scope="session")
def corpus_ci(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    """The CI subset, materialized in a temporary workspace."""
    return ci_corpus(Path(tmp_path_factory.mktemp("corpus")))


@pytest.fixture(scope="session")
def corpus_ci_outcome(corpus_ci: Corpus) -> Outcome:
    """Truth, onnxlens's verdicts and the agreement of every target of the subset."""
    from tests.corpus.__main__ import totals_lines

    started = time.perf_counter()
    outcome = run_ci(corpus_ci)
    SUMMARY.setdefault("differential corpus (CI subset)", []).extend(
        totals_lines(outcome.totals, time.perf_counter() - started))
    return outcome
