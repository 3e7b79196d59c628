"""Per target of the corpus's CI subset (tests/corpus/ci.py): onnxlens's verdict agrees with
the plain exporter's, run in its own process (see tests/corpus/judge.py for what agreeing
means). The whole corpus: ``.venv/bin/python -m tests.corpus``."""

from __future__ import annotations

import pytest

from tests.corpus.ci import ci_ids, lens_verdicts, part_of, row_id
from tests.corpus.conftest import Judged
from tests.corpus.harness import Outcome, verdicts_of
from tests.corpus.judge import AGREE, NOT_JUDGED, Row

pytestmark = pytest.mark.corpus


def _rows(outcome: Outcome) -> dict[str, Row]:
    return {row_id(row.source, row.file, row.target): row for row in outcome.rows}


def _explain(row: Row) -> str:
    truth = row.truth
    lines = [f"{row.agreement}: {row.detail}",
             f"truth: {row.truth_verdict}" + (f" — {truth.failure.headline}"
                                              if truth.failure else "")]
    if truth.failure:
        frames = [f for e in truth.failure.errors for f in e.frames
                  if "site-packages" not in f.path and "tests/corpus" not in f.path]
        lines += [f"  at {f.path}:{f.line} in {f.function}" for f in frames[-3:]]
    if truth.note:
        lines.append(f"truth note: {truth.note}")
    if row.lens_failure:
        lines.append(f"onnxlens failed: {row.lens_failure}")
    elif row.lens is not None:
        lines += [f"onnxlens: {d.headline}" for d in row.lens.diagnostics] or ["onnxlens: clean"]
    return "\n".join(lines)


@pytest.mark.parametrize("target_id", ci_ids())
def test_agrees_with_the_plain_exporter(corpus_ci_part: Judged, target_id: str) -> None:
    corpus, outcome = corpus_ci_part(part_of(target_id))
    rows = _rows(outcome)
    if target_id not in rows:
        name = target_id.rpartition("::")[2]
        reasons = [f"{n.name}: {n.reason}" for n in corpus.not_buildable
                   if name == n.name or name.startswith(n.name + ".")]
        pytest.fail(f"{target_id} is not in the corpus ({'; '.join(reasons) or 'not found'})")
    row = rows[target_id]
    if row.agreement == NOT_JUDGED:
        pytest.skip(f"not judged: {row.detail}")
    assert row.agreement == AGREE, _explain(row)


@pytest.mark.primary_torch  # tests/conftest.py: the agreement above judges it on every torch
def test_warm_imports_change_no_verdict(corpus_ci_part: Judged) -> None:
    """Speed never changes a verdict: the files whose checks import installed packages
    (transformers, torchvision), checked with the worker importing those packages ahead of
    each next check (the default, as in the agreement above: the files of one root share a
    worker) and without (``ONNXLENS_SHORTCUTS_OFF=warm-imports``), give the same verdicts."""
    corpus, outcome = corpus_ci_part("models")
    chosen = corpus.select(lambda f, t: f.source in ("transformers", "torchvision"))
    assert len(chosen.files) >= 2
    paths = {str(f.path) for f in chosen.files}
    warm = verdicts_of({path: result for path, result in outcome.lens_files.items()
                        if path in paths})
    cold = lens_verdicts(chosen, {"ONNXLENS_SHORTCUTS_OFF": "warm-imports"})
    assert cold == warm
