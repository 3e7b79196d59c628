"""How a stage tells the pipeline it stopped."""

from __future__ import annotations


class StageFailed(Exception):
    """The stage reported its problems and later stages cannot use its output."""


class StageSkipped(Exception):
    """The stage has nothing to do for this target; the message says why."""
