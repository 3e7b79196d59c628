"""Fixes onnxlens tries for a failing target (docs/fixes.md).

A *candidate* is an edit of the target's file that is known to help with a failure like this
one: a setting of the library's own API, torch's suggested ``dynamic_shapes``, a patch
context. The check that failed proposes candidates; the front end then *tries* each one: it
checks the edited text in a fresh fork of the worker, exactly as it checks the user's text.
A candidate *works* when that check exports, runs in ONNX Runtime and matches eager PyTorch
with no error left. Only fixes that work are ever shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from exporter.findings.positions import Range

#: where a candidate's knowledge comes from (docs/fixes.md lists each fix and its source)
FixSource = Literal["torch", "transformers", "timm", "onnx-diagnostic", "onnxlens"]
#: a trial's outcome: the edited check passed, it still fails, or the budget ran out first
TrialVerdict = Literal["works", "fails", "not-tried"]


@dataclass(frozen=True)
class FixEdit:
    """Replace ``range`` of ``path`` (1-based lines and columns, end exclusive) by ``text``."""

    path: Path
    range: Range
    text: str


@dataclass(frozen=True)
class QuickFix:
    """An edit offered as it is, right by construction, with no trial: a legacy export
    argument's rewrite (ONNX60x), the pragma that has an export call checked."""

    title: str
    edits: tuple[FixEdit, ...]


@dataclass(frozen=True)
class FixCandidate:
    key: str  # what it changes, the same in every check: "transformers:attn_implementation"
    title: str  # the edit in words: 'Build the config with attn_implementation="eager"'
    source: FixSource
    edits: tuple[FixEdit, ...]
    #: the finding it answers (its rule and range); None: the target's first error
    answers: tuple[str, Range] | None = None


@dataclass(frozen=True)
class FixTrial:
    candidate: FixCandidate
    verdict: TrialVerdict
    seconds: float = 0.0
    detail: str = ""  # fails: the first error the edited check still reports; not-tried: why

    @property
    def works(self) -> bool:
        return self.verdict == "works"
