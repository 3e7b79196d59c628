"""The diagnostics store (lsp_server/store.py): what each check found, per file, so that a
re-check clears what it no longer finds on every file it had reported on."""

from __future__ import annotations

from pathlib import Path

from exporter.findings.diagnostics import Diagnostic, Location, Range
from lsp_server.store import DiagnosticsStore, group_by_file

MODEL, HELPER, OTHER = "file:///ws/model.py", "file:///ws/helper.py", "file:///ws/other.py"


def found(message: str, path: str = "/ws/model.py", line: int = 1) -> Diagnostic:
    return Diagnostic("ONNX201", message, Location(Path(path), Range.of(line, 1, line, 5)),
                      "Model")


def test_a_recheck_clears_what_it_no_longer_finds_in_another_file():
    store = DiagnosticsStore()
    in_model, in_helper = found("in model"), found("in helper", "/ws/helper.py")
    assert store.replace(MODEL, {MODEL: [in_model], HELPER: [in_helper]}) == {MODEL, HELPER}
    # checked again: the helper's problem is gone; the helper must be published (empty)
    assert store.replace(MODEL, {MODEL: [in_model]}) == {MODEL, HELPER}
    assert store.for_file(HELPER) == []
    assert store.for_file(MODEL) == [in_model]


def test_each_check_keeps_its_own_findings_in_a_shared_file():
    store = DiagnosticsStore()
    from_model = found("seen checking model", "/ws/helper.py")
    from_other = found("seen checking other", "/ws/helper.py", line=2)
    store.replace(MODEL, {HELPER: [from_model]})
    store.replace(OTHER, {HELPER: [from_other]})
    assert store.for_file(HELPER) == [from_model, from_other]
    assert store.replace(OTHER, {}) == {HELPER}  # other closed: only its findings go
    assert store.for_file(HELPER) == [from_model]


def test_a_file_is_shown_in_the_same_order_whichever_check_ended_last():
    first, second = DiagnosticsStore(), DiagnosticsStore()
    from_model = found("seen checking model", "/ws/helper.py")
    from_other = found("seen checking other", "/ws/helper.py", line=2)
    first.replace(MODEL, {HELPER: [from_model]})
    first.replace(OTHER, {HELPER: [from_other]})
    second.replace(OTHER, {HELPER: [from_other]})
    second.replace(MODEL, {HELPER: [from_model]})
    assert first.for_file(HELPER) == second.for_file(HELPER)


def test_clearing_returns_every_file_that_showed_something():
    store = DiagnosticsStore()
    store.replace(MODEL, {MODEL: [found("a")], HELPER: [found("b", "/ws/helper.py")]})
    store.replace(OTHER, {OTHER: []})  # nothing found: nothing held
    assert store.clear() == {MODEL, HELPER}
    assert store.all() == [] and store.for_file(MODEL) == []


def test_all_is_every_finding_once_for_the_sarif_log():
    store = DiagnosticsStore()
    a, b, c = found("a"), found("b", "/ws/helper.py"), found("c", "/ws/other.py")
    store.replace(MODEL, {MODEL: [a], HELPER: [b]})
    store.replace(OTHER, {OTHER: [c]})
    assert sorted(d.message for d in store.all()) == ["a", "b", "c"]


def test_findings_are_grouped_by_the_file_they_are_in():
    a, b, c = found("a"), found("b", "/ws/helper.py"), found("c")
    grouped = group_by_file([a, b, c], lambda path: f"file://{path}")
    assert grouped == {MODEL: [a, c], HELPER: [b]}
