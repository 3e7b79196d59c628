"""A job without a result becomes its target's finding (check_service/outcomes.py): the rule and
message for each way a job ends without an answer, at the target, and a cancelled job has
none."""

from __future__ import annotations

from pathlib import Path

import pytest

from check_service.outcomes import JobCancelled, Limits, target_result
from export_worker.messages import JobDone, JobError, JobFailed
from exporter.source.targets import discover

SOURCE = "import torch\n\n\n# onnx-export: args=(torch.randn(2),)\nclass Tiny(torch.nn.Module):\n" \
         "    def forward(self, x):\n        return x\n"
(TARGET,) = discover(Path("m.py"), SOURCE).targets


@pytest.mark.parametrize("outcome, limits, rule, message", [
    (JobFailed("1", "timeout", seconds=60.2), Limits(60.0, None), "ONNX901",
     "The check of `Tiny` did not finish within 60 s and was stopped"),
    # no timeout set: killed in the model's own code at its limit, or at the ceiling
    (JobFailed("1", "timeout", seconds=63.1), Limits(3600.0, None, load_timeout_seconds=60.0),
     "ONNX901", "The check of `Tiny` did not finish within 60 s and was stopped"),
    (JobFailed("1", "timeout", seconds=3603.0), Limits(3600.0, None, load_timeout_seconds=60.0),
     "ONNX901", "The check of `Tiny` did not finish within 3600 s and was stopped"),
    (JobFailed("1", "timeout"), Limits(None, None), "ONNX901",
     "The check of `Tiny` did not finish within its time limit and was stopped"),
    (JobFailed("1", "memory", peak_rss_mb=5000), Limits(60.0, 4096), "ONNX903",
     "The check of `Tiny` went past the memory limit of 4096 MB and was stopped (peak 5000 MB "
     "seen)."),
    (JobFailed("1", "crashed", "killed by SIGSEGV"), Limits(60.0, None), "ONNX902",
     "The process checking `Tiny` died: killed by SIGSEGV. The model's code crashed"),
    (JobFailed("1", "worker-lost", "the worker did not start"), Limits(60.0, None), "ONNX902",
     "`Tiny` was not checked: the worker did not start. This says nothing about the model"),
    (JobDone("1", JobError("no such target"), 0.1, 7), Limits(60.0, None), "ONNX902",
     "onnxlens could not check `Tiny`: no such target."),
])
def test_a_job_without_a_result_is_one_finding_at_the_target(outcome, limits, rule, message):
    result = target_result(TARGET, outcome, limits)
    (finding,) = result.diagnostics
    assert (finding.rule, finding.location.range) == (rule, TARGET.definition)
    assert finding.message.startswith(message)
    assert not result.ok


def test_a_cancelled_job_has_no_finding():
    with pytest.raises(JobCancelled):
        target_result(TARGET, JobFailed("1", "cancelled"), Limits(60.0, None))
