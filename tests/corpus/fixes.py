"""The fixes onnxlens proved, judged by the plain exporter (``python -m tests.corpus --fixes``).

onnxlens tries the fixes that apply to a failing target and shows those whose check passed
(docs/fixes.md). Here every fix it showed is applied to a copy of the target's file, as a
user would apply it by hand, and the truth (``tests/corpus/truth.py``: the plain
``torch.onnx.export(..., dynamo=True)``, ONNX Runtime, the comparison with eager PyTorch)
runs on the copy. A shown fix whose truth does not pass is a **false fix**, a disagreement.
"""

from __future__ import annotations

import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from exporter.findings.diagnostics import Range
from exporter.findings.fixes import FixEdit
from exporter.source.edits import apply_edits
from tests.corpus.judge import Row
from tests.corpus.lens import LensTrial
from tests.corpus.truth import DEFAULT_TIMEOUT, run_truth


@dataclass
class FixCheck:
    """One fix onnxlens showed, and what the plain exporter made of it."""

    row: Row
    trial: LensTrial
    truth: str  # "ok", or "fails: <phase>", "timeout", ...
    confirmed: bool


@dataclass
class FixTotals:
    failing: int = 0  # targets the truth says fail, onnxlens agreeing
    with_candidates: int = 0  # ... for which onnxlens tried at least one fix
    with_fix: int = 0  # ... and found one that works
    false_fixes: int = 0  # fixes shown that the plain exporter does not confirm
    trial_seconds: float = 0.0  # the trials' time, in all


def failing_rows(rows: list[Row]) -> list[Row]:
    return [row for row in rows if row.truth.status == "failed" and row.lens is not None
            and row.agreement == "agree"]


def confirm_fixes(rows: list[Row], jobs: int = 2, *, timeout: float = DEFAULT_TIMEOUT,
                  use_cache: bool = True) -> list[FixCheck]:
    """The truth of every fix onnxlens showed, each on an edited copy of its file's folder."""
    shown = [(row, trial) for row in rows if row.lens is not None
             for trial in row.lens.fix_trials if trial.verdict == "works"]
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        return list(pool.map(lambda item: _confirm(item[0], item[1], timeout, use_cache),
                             shown))


def _confirm(row: Row, trial: LensTrial, timeout: float, use_cache: bool) -> FixCheck:
    # the file the fix edits, where this run put it (a cached truth names where an earlier
    # run did)
    (path,) = {Path(edit.place.path) for edit in trial.edits}
    with tempfile.TemporaryDirectory(prefix="onnxlens-fix-") as temporary:
        # the file's folder, so that what it imports beside it is there too
        copy = Path(temporary) / path.parent.name
        shutil.copytree(path.parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
        edited = copy / path.name
        edits = [FixEdit(path, Range.of(e.place.line, e.place.column, e.place.end_line,
                                        e.place.end_column), e.text) for e in trial.edits]
        edited.write_text(apply_edits(path.read_text(encoding="utf-8"), edits),
                          encoding="utf-8")
        truth = run_truth(edited, row.target, copy, timeout=timeout, use_cache=use_cache)
    verdict = "ok" if truth.ok else f"{truth.status}: {truth.failure.phase}" \
        if truth.failure else truth.status
    return FixCheck(row, trial, verdict, truth.ok)


def fix_totals(rows: list[Row], checks: list[FixCheck]) -> FixTotals:
    totals = FixTotals()
    for row in failing_rows(rows):
        assert row.lens is not None
        totals.failing += 1
        tried = [t for t in row.lens.fix_trials if t.verdict != "not-tried"]
        totals.with_candidates += bool(tried)
        totals.with_fix += any(t.verdict == "works" for t in tried)
        totals.trial_seconds += sum(t.seconds for t in tried)
    totals.false_fixes = sum(not check.confirmed for check in checks)
    return totals


def fix_table(rows: list[Row], checks: list[FixCheck]) -> list[list[str]]:
    """One row per failing target: the fixes tried, those that worked (with the plain
    exporter's verdict on each), the trials' seconds."""
    confirmed = {(id(check.row), check.trial.key): check for check in checks}
    table = [["source", "target", "failure", "tried", "works (plain exporter)", "trial s"]]
    for row in failing_rows(rows):
        assert row.lens is not None
        trials = row.lens.fix_trials
        works = [f"{t.key} ({confirmed[(id(row), t.key)].truth})"
                 for t in trials if t.verdict == "works"]
        table.append([row.source, row.target, row.lens_verdict,
                      ", ".join(f"{t.key}: {t.verdict}" for t in trials) or "-",
                      ", ".join(works) or "-", f"{sum(t.seconds for t in trials):.1f}"])
    return table


def fix_totals_line(totals: FixTotals) -> str:
    share = totals.with_fix / totals.failing if totals.failing else 0.0
    return (f"fixes: {totals.failing} failing targets, {totals.with_candidates} with fixes "
            f"to try, {totals.with_fix} with a fix that works ({share:.0%}), false fixes "
            f"{totals.false_fixes}; trials {totals.trial_seconds:.0f} s")
