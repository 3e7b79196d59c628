"""The check's time limit (exporter/pipeline/runner.py): a check stopped after the export was
known to fail ends with that verdict, not with ONNX901 (the plain exporter answers there: it
fails); one stopped before that is ONNX901. Each case stops a different part of the check: a
stage made to loop in Python, which the time limit interrupts as it interrupts a model."""

from __future__ import annotations

import dataclasses
import time

import pytest
import torch

from exporter.pipeline import runner
from tests.conftest import FIXTURES

GATE = FIXTURES / "data_dependent_branch"  # capture fails (a branch on a tensor's value)
CLEAN = FIXTURES / "clean"


def _forever(*args, **kwargs):
    while True:
        time.sleep(0.01)


def _loop(module, name):
    return lambda monkeypatch: monkeypatch.setattr(module, name, _forever)


def _loop_stage(name):
    """The stage ``name`` loops (the runner's own list holds each stage's function)."""
    return lambda monkeypatch: monkeypatch.setattr(runner, "STAGES", tuple(
        dataclasses.replace(stage, run=_forever) if stage.name == name else stage
        for stage in runner.STAGES))


@pytest.mark.parametrize("case, workspace, file, target, stop, stopped, rules", [
    # the draft graph's translation: the draft export's list is the verdict
    ("translate after a failed capture", GATE, "model.py", "Gate", _loop_stage("translate"),
     "translate", ["ONNX101"]),
    # the draft export itself: torch's first error is the verdict
    ("the draft export", GATE, "model.py", "Gate", _loop(torch.export, "draft_export"),
     "capture", ["ONNX101"]),
    # no verdict yet: the check could not say whether the export works
    ("translate after a capture that worked", CLEAN, "factory.py", "scaled",
     _loop_stage("translate"), "translate", ["ONNX901"]),
    ("the last stage of a clean model", CLEAN, "factory.py", "scaled", _loop_stage("dynamic"),
     "dynamic", ["ONNX901"]),
    ("the model's import", CLEAN, "factory.py", "scaled", _loop_stage("load"), "load",
     ["ONNX901"]),
])
def test_a_check_stopped_at_its_time_limit_keeps_a_known_verdict(
        session, monkeypatch, case, workspace, file, target, stop, stopped, rules):
    stop(monkeypatch)
    monkeypatch.setattr(session, "timeout", 8.0)
    (found,) = [t for t in session.discover(workspace / file).targets if t.name == target]
    _, result = session.run_target(found, workspace)
    assert sorted({d.rule for d in result.diagnostics if d.severity == "error"}) == rules, case
    states = {s.name: (s.state.value, s.reason) for s in result.stages}
    if rules == ["ONNX901"]:
        assert states[stopped] == ("failed", "timed out"), case
    else:
        assert states[stopped][1].startswith("stopped at the time limit (8 s) after the export "
                                             "was known to fail at capture"), case
        assert states["capture"][0] == "failed" and not result.ok
        assert "ONNX901" not in {d.rule for d in result.diagnostics}


def test_the_verdict_a_stop_from_outside_would_keep_is_handed_over_once_known(session,
                                                                              monkeypatch):
    """What the worker answers when it kills a check stuck in native code (its own timer
    cannot stop it): the result ``if_stopped`` got as soon as capture failed in every
    strategy, which is what a stop at that moment by the check's own timer gives."""
    (found,) = session.discover(GATE / "model.py").targets
    handed: list = []
    monkeypatch.setattr(session, "timeout", 60.0)
    _, result = session.run_target(found, GATE, if_stopped=handed.append)
    (stopped,) = handed  # once: when the export became known to fail
    assert [d.rule for d in stopped.diagnostics if d.severity == "error"] == ["ONNX101"]
    assert [(s.name, s.state.value) for s in stopped.stages] == [
        ("load", "passed"), ("capture", "failed"), *((s.name, "skipped") for s in
                                                      runner.STAGES[2:])]
    assert stopped.stages[1].reason.startswith("stopped at the time limit (60 s) after the "
                                               "export was known to fail at capture")
    # the check that did end found the same failure at the same place
    first = next(d for d in result.diagnostics if d.rule == "ONNX101")
    assert first.location == stopped.diagnostics[0].location


def test_no_verdict_is_handed_over_for_an_export_that_works(session):
    (found,) = [t for t in session.discover(CLEAN / "factory.py").targets if t.name == "scaled"]
    handed: list = []
    _, result = session.run_target(found, CLEAN, if_stopped=handed.append)
    assert result.ok and handed == []


def _slow_stage(name, seconds):
    """The stage ``name`` does its work ``seconds`` late (a slow exporter)."""
    def slowed(stage):
        def run(ctx):
            time.sleep(seconds)
            stage.run(ctx)
        return dataclasses.replace(stage, run=run)

    return lambda monkeypatch: monkeypatch.setattr(runner, "STAGES", tuple(
        slowed(stage) if stage.name == name else stage for stage in runner.STAGES))


@pytest.mark.parametrize("case, whole, stop, stopped, limit", [
    # the exporter's stages past the default limit: answered, not stopped
    ("a slow capture", None, _slow_stage("capture", 2.5), None, None),
    ("a slow translation", 30.0, _slow_stage("translate", 2.5), None, None),
    ("slow stages after the translation", None, _slow_stage("numerics", 1.5), None, None),
    # the model's own code past the default limit: ONNX901 at its limit
    ("the model's import", None, _loop_stage("load"), "load", 1),
    # the whole check's limit still holds after the model ran
    ("a translation past the whole limit", 6.0, _loop_stage("translate"), "translate", 6),
])
def test_the_default_limit_bounds_the_models_own_code_not_the_exporters_work(
        session, monkeypatch, case, whole, stop, stopped, limit):
    """With no timeout set, the load stage (building the model, its eager run) has the
    default limit; once the model ran to its end, the exporter's stages run to their answer
    (up to the whole check's limit): a slow export is not ONNX901 (issue 42)."""
    stop(monkeypatch)
    monkeypatch.setattr(session, "timeout", whole)
    monkeypatch.setattr(session, "load_timeout", 1.0)
    (found,) = [t for t in session.discover(CLEAN / "factory.py").targets if t.name == "scaled"]
    _, result = session.run_target(found, CLEAN)
    states = {s.name: (s.state.value, s.reason) for s in result.stages}
    if stopped is None:
        assert result.ok and result.diagnostics == [], case
        assert {state for state, _ in states.values()} <= {"passed", "skipped"}, case
        return
    (timed_out,) = result.diagnostics
    assert timed_out.rule == "ONNX901", case
    assert timed_out.message.startswith(f"The check of `scaled` did not finish within {limit} s "
                                        f"and was stopped in the {stopped} stage"), case
    assert states[stopped] == ("failed", "timed out"), case


EARLIER_EXPORT = '''import time

import torch


class SlowToExport(torch.nn.Module):
    def forward(self, x):
        if torch.compiler.is_exporting():  # eager runs at once, the export takes a while
            time.sleep(2.5)
        return x * 2


# onnx-export:
def then_another():
    torch.onnx.export(SlowToExport(), (torch.randn(2),), "first.onnx", dynamo=True)
    torch.onnx.export(torch.nn.ReLU(), (torch.randn(2),), "second.onnx", dynamo=True)


# onnx-export:
def then_a_loop():
    torch.onnx.export(SlowToExport(), (torch.randn(2),), "first.onnx", dynamo=True)
    while True:
        time.sleep(0.01)
    torch.onnx.export(torch.nn.ReLU(), (torch.randn(2),), "second.onnx", dynamo=True)
'''


@pytest.mark.parametrize("target, stopped", [("then_another@16", None),
                                             ("then_a_loop@24", "load")])
def test_an_earlier_export_inside_the_models_code_is_not_counted_against_its_limit(
        session, monkeypatch, tmp_path, target, stopped):
    """The earlier call's export runs while the target loads (the plain exporter's work,
    2.5 s past the 1 s limit on the model's own code): the target is reached and checked.
    The model's code after it still has what was left of its limit: the loop is ONNX901."""
    (tmp_path / "script.py").write_text(EARLIER_EXPORT)
    monkeypatch.setattr(session, "timeout", None)
    monkeypatch.setattr(session, "load_timeout", 1.0)
    (found,) = [t for t in session.discover(tmp_path / "script.py").targets if t.name == target]
    _, result = session.run_target(found, tmp_path)
    if stopped is None:
        assert result.ok and result.diagnostics == []
        return
    (timed_out,) = result.diagnostics
    assert timed_out.rule == "ONNX901"
    assert timed_out.message.startswith(f"The check of `{target}` did not finish within 1 s and "
                                        "was stopped in the load stage")
    assert timed_out.location.range.start.line in (22, 23)  # where the loop ran
