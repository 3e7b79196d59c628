"""A check job's progress (export_worker/jobs.py): what the editor shows before the check
ends. A capture that fails in every strategy torch.onnx.export tries is shown at once, with
torch's first error on its line, before the draft export collects every problem (issue 42:
the first squiggle early); then the capture's complete list, what translate found, the
answer."""

from __future__ import annotations

from typing import Any

import torch

from check_service.files import find_target
from export_worker.jobs import run_job
from export_worker.messages import JobRequest
from exporter.findings.result import CheckResult
from tests.conftest import FIXTURES


def _located(result: CheckResult) -> list[tuple[str, int]]:
    return [(d.rule, d.location.range.start.line) for d in result.diagnostics]


def _message(result: CheckResult) -> str:
    return result.diagnostics[0].message


def test_a_failing_capture_is_shown_before_the_draft_export_runs(session, monkeypatch):
    events: list[tuple[str, Any]] = []
    draft_export = torch.export.draft_export

    def recorded(*args: Any, **kwargs: Any) -> Any:
        events.append(("draft export", None))
        return draft_export(*args, **kwargs)

    monkeypatch.setattr(torch.export, "draft_export", recorded)
    workspace = FIXTURES / "data_dependent_branch"
    request = JobRequest("check", find_target(workspace / "model.py", "Gate"), str(workspace),
                         progress=True)
    answer = run_job(session, request, lambda data: events.append(("progress", data)))

    kinds = [kind for kind, _ in events]
    # then what translate found in the draft's graph
    assert kinds[:3] == ["progress", "draft export", "progress"], kinds
    first, complete = events[0][1], events[2][1]
    (target,) = first.targets
    assert [(s.name, s.state.value) for s in target.stages] == [
        ("load", "passed"), ("capture", "failed")]
    # torch's first error, on the line that branches on a tensor's value
    assert _located(first) == [("ONNX101", 7)]
    assert "torch.export failed" in _message(first)
    # then the draft export's list, which the answer keeps (with the ONNX106 note, off by
    # default, that the later stages checked the draft's graph)
    assert _located(complete) == [("ONNX101", 7), ("ONNX106", 7)]
    assert "depends on the values inside a tensor" in _message(complete)
    assert answer.result is not None and ("ONNX101", 7) in _located(answer.result)
