"""What an output mismatch says about its cause (exporter/pipeline/comparing.py): when the
graph torch.onnx translated, run in PyTorch, gives ONNX Runtime's values, the difference comes
before the translation (eager PyTorch took a path torch.export did not trace), and the hint
says so instead of sending the user to an ONNX502 that cannot come. The verdicts themselves
are judged on tests/exporter/fixtures/capture_paths against the plain exporter by the
corpus."""

from __future__ import annotations

from tests.conftest import FIXTURES

CAPTURE_PATHS = FIXTURES / "capture_paths"


def test_a_mismatch_the_exported_graph_already_has_is_blamed_on_the_capture(session):
    result = session.check_file(CAPTURE_PATHS / "model.py", CAPTURE_PATHS)
    hints = {(target.name, d.rule): d.hint for target in result.targets
             for d in target.diagnostics}
    for target in ("PaddedEncoder", "GradModeInAHelper", "RequiresGradBranch",
                   "GradModeInASubmoduleWithADynamicBatch"):
        assert "gives ONNX Runtime's values: the difference comes before the translation" \
            in hints[target, "ONNX501"], target
    assert "comes before the translation" in \
        hints["GradModeInASubmoduleWithADynamicBatch", "ONNX403"]
    # the translation is what differs: look for where the values diverge
    assert hints["WrongTranslationOfTheOutput", "ONNX501"].startswith("See ONNX502")
