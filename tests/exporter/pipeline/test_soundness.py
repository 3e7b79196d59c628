"""Issue "truth, the last mile": a declared dynamic range the exported graph holds for only in
part (ONNX107, the runs at the lower bound and a larger size), locations through decorators,
and no run at another size on a draft export's graph (fixtures/soundness/)."""

from __future__ import annotations

import pytest

from exporter.pipeline.onnx_nodes import STACK_TRACE_KEY, metadata
from tests.conftest import FIXTURES

SOUNDNESS = FIXTURES / "soundness"


@pytest.fixture(scope="module")
def narrowed(session):
    result = session.check_file(SOUNDNESS / "narrowed.py", SOUNDNESS)
    return {target.name: target for target in result.targets}


def _only(target, rule):
    found = [d for d in target.diagnostics if d.rule == rule]
    assert len(found) == 1, target.diagnostics
    return found[0]


def test_a_named_range_narrowed_by_a_guard_is_an_error_at_the_guard(narrowed):
    diagnostic = _only(narrowed["Tail"], "ONNX107")
    assert diagnostic.severity == "error"
    assert diagnostic.location.range.start.line == 13  # if x.shape[1] >= 10:
    assert diagnostic.location.range.start.column == 12
    assert "`seq` (`x.shape[1]`) is declared dynamic over [2, ∞)" in diagnostic.message
    assert "valid only for [10, ∞)" in diagnostic.message
    assert "the guard `x.shape[1] >= 10`" in diagnostic.message
    # the run at the lower bound shows the ONNX model wrong there: one diagnostic, confirmed
    assert "Confirmed at seq=2 (the lower bound of the declared range)" in diagnostic.message
    assert diagnostic.data["confirmed"] is True
    assert "torch.cond" in diagnostic.hint and "Dim('seq', min=10)" in diagnostic.hint
    assert [d.rule for d in narrowed["Tail"].diagnostics] == ["ONNX107"]


def test_the_range_the_graph_holds_for_is_a_fix_to_try(narrowed):
    """docs/fixes.md: the pragma's dynamic_shapes with the dimension declared over the
    graph's range, an edit of the pragma that answers the ONNX107 (tried by the front end:
    tests/onnxlens/test_fixes.py)."""
    diagnostic = _only(narrowed["Tail"], "ONNX107")
    (candidate,) = narrowed["Tail"].fix_candidates
    assert candidate.key == "onnxlens:declared-range"
    assert candidate.answers == ("ONNX107", diagnostic.location.range)
    (edit,) = candidate.edits
    assert edit.text == "({1: torch.export.Dim('seq', min=10)},)"
    assert (edit.range.start.line, edit.range.start.column) == (8, 59)
    assert narrowed["Sound"].fix_candidates == []


def test_a_dimension_named_by_a_string_is_named(narrowed):
    diagnostic = _only(narrowed["TailByName"], "ONNX107")
    assert (diagnostic.severity, diagnostic.location.range.start.line) == ("error", 21)


def test_dim_auto_narrowed_and_wrong_at_the_lower_bound_is_an_error(narrowed):
    diagnostic = _only(narrowed["TailAuto"], "ONNX107")
    assert (diagnostic.severity, diagnostic.location.range.start.line) == ("error", 31)
    assert "Confirmed at dim1=2" in diagnostic.message


def test_dim_auto_narrowed_but_right_where_it_ran_is_a_warning(narrowed):
    target = narrowed["HarmlessAuto"]
    diagnostic = _only(target, "ONNX107")
    assert diagnostic.severity == "warning"
    assert "valid only for [5, ∞)" in diagnostic.message and "Confirmed" not in diagnostic.message
    assert not [d for d in target.diagnostics if d.severity == "error"]


def test_a_narrowed_upper_bound_is_reported(narrowed):
    diagnostic = _only(narrowed["Capped"], "ONNX107")
    assert diagnostic.severity == "error"
    assert "declared dynamic over [2, 64]" in diagnostic.message
    assert "valid only for [2, 32]" in diagnostic.message
    assert "Dim('seq', max=32)" in diagnostic.hint


@pytest.mark.parametrize("name, sizes", [("DeclaredAsValid", ("seq=10", "seq=19")),
                                         ("Sound", ("seq=2", "seq=19"))])
def test_a_sound_range_is_clean_and_run_at_its_lower_bound_and_a_larger_size(narrowed, name,
                                                                             sizes):
    target = narrowed[name]
    assert target.diagnostics == []
    runs = [entry["situation"] for entry in target.summary["numerics"]]
    assert any(f"at {sizes[0]} (the lower bound of the declared range" in r for r in runs), runs
    assert any(f"at {sizes[1]} (a larger size" in r for r in runs), runs
    assert all(entry["matched"] for entry in target.summary["numerics"])


@pytest.mark.parametrize("name, line", [("NoGrad", 25), ("InferenceMode", 32), ("Wrapped", 39),
                                        ("TwoCallsDeep", 46)])
def test_a_decorated_forward_keeps_the_failing_line(session, name, line):
    result = session.check_file(SOUNDNESS / "decorated.py", SOUNDNESS)
    target = next(t for t in result.targets if t.name == name)
    diagnostic = _only(target, "ONNX201")
    assert diagnostic.location.path.name == "decorated.py"
    assert diagnostic.location.range.start.line == line
    assert diagnostic.location.range.start.column == 16


def test_the_onnx_nodes_of_a_no_grad_forward_carry_the_users_stack(session, tmp_path):
    model = tmp_path / "model.py"
    model.write_text(
        "import torch\n\n\n"
        "# onnx-export: args=(torch.randn(2, 8),)\n"
        "class Scaled(torch.nn.Module):\n"
        "    @torch.no_grad()\n"
        "    def forward(self, x):\n"
        "        return torch.relu(x) * 3\n")
    found = session.discover(model)
    context, result = session.run_target(found.targets[0], tmp_path)
    assert result.diagnostics == []
    traces = [metadata(node).get(STACK_TRACE_KEY, "")
              for node in context.translated.model_proto.graph.node]
    assert traces and all(f'"{model}", line 8' in trace for trace in traces), traces


def test_no_run_at_another_size_on_a_draft_exports_graph(session):
    result = session.check_file(SOUNDNESS / "draft_range.py", SOUNDNESS)
    target = next(t for t in result.targets if t.name == "DataDependentHalf")
    assert "ONNX101" in [d.rule for d in target.diagnostics]
    assert "ONNX403" not in [d.rule for d in target.diagnostics]
    dynamic = next(s for s in target.stages if s.name == "dynamic")
    assert dynamic.state.value == "skipped"
    assert dynamic.reason.startswith("capture failed: the draft export's graph")
