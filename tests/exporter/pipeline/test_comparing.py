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
    # the translation of an output's own operation is what differs: the hint names it, as
    # no ONNX502 comes (it said "See ONNX502" before)
    assert hints["WrongTranslationOfTheOutput", "ONNX501"].startswith(
        "The values first diverge at `aten.sigmoid.default` (FX node `sigmoid`), the "
        "operation that computes output `sigmoid`")


def test_the_first_divergence_at_an_output_is_not_blamed_on_a_later_operation(session):
    # `hidden * 3 + x` only inherits the difference of the output `hidden` (a wrong gelu): it
    # was an ONNX502 "first diverge at aten.mul.Tensor; every value computed before it matches"
    result = session.check_file(CAPTURE_PATHS / "model.py", CAPTURE_PATHS)
    (target,) = [t for t in result.targets if t.name == "WrongOutputUsedLater"]
    assert [(d.rule, d.location.range.start.line) for d in target.diagnostics] == [
        ("ONNX501", 90), ("ONNX501", 91)]
    for diagnostic in target.diagnostics:
        assert diagnostic.hint.startswith(
            "The values first diverge at `aten.gelu.default` (FX node `gelu`), the operation "
            "that computes output `gelu`")
