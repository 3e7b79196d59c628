"""The search for more problems after the verdict runs on a budget
(exporter/pipeline/after_verdict.py): spent, it stops the draft export or a stage on the
draft's graph, and the verdict (the export fails, at torch's first error) is the one the
check without the budget gives; the check's own time limit keeps its time meanwhile."""

from __future__ import annotations

import dataclasses
import signal
import time

import pytest
import torch

from exporter.pipeline import after_verdict, runner
from exporter.toolchain import shortcuts
from tests.conftest import FIXTURES

# models whose capture fails in every strategy (each file's targets, different causes:
# a branch on a value, a size from a value, views and reshapes under dynamic dimensions)
FAILING = [("data_dependent_branch", "Gate"), ("data_dependent_size", "Repeated"),
           ("data_dependent_dynamic", "ReshapedGate"), ("data_dependent_dynamic", "MaxGate"),
           ("data_dependent_dynamic", "ExpandGate")]


def _busy(seconds: float) -> None:
    """Spend ``seconds`` of CPU time (the budget counts CPU time, not waiting)."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def _slow(function, seconds):
    def slowed(*args, **kwargs):
        _busy(seconds)
        return function(*args, **kwargs)

    return slowed


def _check(session, fixture, name):
    workspace = FIXTURES / fixture
    (target,) = [t for t in session.discover(workspace / "model.py").targets if t.name == name]
    return session.run_target(target, workspace)[1]


def _verdict(result):
    """What the budget must not change: failing or not, and torch's first error (the known
    verdict: its rule and line) among the errors."""
    errors = {(d.rule, d.location.range.start.line) for d in result.diagnostics
              if d.severity == "error"}
    return result.ok, errors


@pytest.fixture
def tiny_budget(monkeypatch):
    monkeypatch.setattr(after_verdict, "MINIMUM_SECONDS", 0.5)
    monkeypatch.setattr(after_verdict, "FACTOR", 0.0)


@pytest.mark.parametrize("fixture, name", FAILING)
def test_a_spent_budget_in_the_draft_export_keeps_the_verdict(session, monkeypatch, tiny_budget,
                                                              fixture, name):
    monkeypatch.setattr(torch.export, "draft_export", _slow(torch.export.draft_export, 1.5))
    cut = _check(session, fixture, name)
    capture = cut.stage("capture")
    assert capture is not None and capture.state.value == "failed"
    assert capture.reason.startswith("onnxlens's search for more problems after the verdict "
                                     "was stopped at its budget")
    monkeypatch.setenv(shortcuts.ENVIRONMENT_VARIABLE, "after-verdict-budget")
    whole = _check(session, fixture, name)
    assert not whole.stage("capture").reason  # the draft export ran to its end
    assert not cut.ok and not whole.ok
    # the cut check says torch's first error, which the whole check's list holds too
    assert _verdict(cut)[1] and _verdict(cut)[1] <= _verdict(whole)[1] | _known(whole), name


def _known(result):
    return {(d.rule, d.location.range.start.line) for d in result.diagnostics}


def test_a_spent_budget_in_a_stage_on_the_drafts_graph_skips_it(session, monkeypatch,
                                                               tiny_budget):
    def translate_slowly(ctx):
        _busy(5)

    monkeypatch.setattr(runner, "STAGES", tuple(
        dataclasses.replace(stage, run=translate_slowly) if stage.name == "translate" else stage
        for stage in runner.STAGES))
    result = _check(session, "data_dependent_branch", "Gate")
    translate = result.stage("translate")
    assert translate is not None and translate.state.value == "skipped"
    assert "stopped at its budget" in translate.reason and translate.seconds < 4  # of 5
    assert [d.rule for d in result.diagnostics if d.severity == "error"] == ["ONNX101"]


def test_the_budget_counts_cpu_time_and_leaves_the_checks_time_limit_alone():
    """Waiting spends no budget (a busy machine changes nothing), working does; the check's
    wall-clock limit, another timer, fires at its own time meanwhile."""
    fired: list[float] = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(time.monotonic()))
    try:
        started = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, 0.8)
        with pytest.raises(after_verdict.BudgetSpent), \
                after_verdict.spending(time.process_time() + 0.3):
            time.sleep(0.5)  # waiting: nothing spent
            assert time.monotonic() - started >= 0.5
            _busy(2)  # working: spent after 0.3 s of it
        assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)  # the budget's timer is off
        time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
        assert len(fired) == 1 and fired[0] - started == pytest.approx(0.8, abs=0.2)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_spent_budget_stops_a_stage_before_it_starts():
    with pytest.raises(after_verdict.BudgetSpent), \
            after_verdict.spending(time.process_time() - 1):
        raise AssertionError("the block ran")


def test_no_budget_with_the_shortcut_off(monkeypatch):
    monkeypatch.setenv(shortcuts.ENVIRONMENT_VARIABLE, "after-verdict-budget")
    assert after_verdict.deadline_after(100.0) is None
    monkeypatch.delenv(shortcuts.ENVIRONMENT_VARIABLE)
    deadline = after_verdict.deadline_after(100.0)
    assert deadline is not None
    assert deadline - time.process_time() == pytest.approx(200.0, abs=1)
    small = after_verdict.deadline_after(1.0)
    assert small is not None
    assert small - time.process_time() == pytest.approx(after_verdict.MINIMUM_SECONDS, abs=1)


FIXED_CHANNELS = '''
import torch
from torch.export import Dim


# onnx-export: args=(torch.randn(2, 4, 16, 16),), dynamic_shapes=({0: Dim.DYNAMIC, 1: Dim.DYNAMIC},)
class Denoiser(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 8, 3)

    def forward(self, sample):
        return self.conv(sample)
'''


def test_a_spent_budget_keeps_a_specialized_dimension_its_rule(session, monkeypatch, tiny_budget,
                                                               tmp_path):
    """diffusers' UNet export script, with every axis of ``sample`` in ``dynamic_axes``: torch
    fixes the channels, and torch.onnx's retry with the suggested shapes raises "conflicts
    between user-specified ranges and inferred ranges". Its draft export ran out of budget,
    and the verdict said ONNX105, "capture failed"; it is ONNX102, as the whole check says."""
    (tmp_path / "model.py").write_text(FIXED_CHANNELS)
    (target,) = session.discover(tmp_path / "model.py").targets
    monkeypatch.setattr(torch.export, "draft_export", _slow(torch.export.draft_export, 1.5))
    cut = session.run_target(target, tmp_path)[1]
    assert "stopped at its budget" in cut.stage("capture").reason
    (error,) = [d for d in cut.diagnostics if d.severity == "error"]
    assert error.rule == "ONNX102"
    assert "conflicts between user-specified ranges" in error.message
    monkeypatch.setenv(shortcuts.ENVIRONMENT_VARIABLE, "after-verdict-budget")
    whole = session.run_target(target, tmp_path)[1]
    assert [d.rule for d in whole.diagnostics if d.severity == "error"] == ["ONNX102"]
