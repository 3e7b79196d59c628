"""Speed never changes a verdict: every shortcut of exporter.toolchain.shortcuts, switched off
alone, gives the same diagnostics (rule, file, range, severity) as a check with all of them on, on
the regression reproductions, the examples, the transformers models of the verdict tests
and the CI corpus's targets (tests/corpus).

On the primary torch each shortcut is switched off alone; on the other torches, all of them at
once: one comparison stands for the nine (each is a full check of these files):
a shortcut that changed a verdict there still shows as a difference with all of them off, and
the checks with every shortcut on meet the plain exporter's verdicts in the corpus on every
torch (tests/corpus/test_corpus.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from exporter import versions
from exporter.pipeline.session import ExportSession
from exporter.toolchain import shortcuts
from tests.conftest import FIXTURES, REPO

# result-reuse belongs to the language server (tests/lsp/test_reuse.py switches it off) and
# warm-imports to the export worker (tests/corpus/test_corpus.py, tests/lsp/test_warm_imports.py);
# strict-recapture-once acts only where both guard searches run, which none of these files
# makes happen (tests/exporter/pipeline/test_strict_recapture.py); after-verdict-budget only
# where its budget is spent, which none of these files' checks comes near
# (tests/exporter/pipeline/test_after_verdict.py spends it, with the switch off and on)
CHECK_SHORTCUTS = sorted(set(shortcuts.SHORTCUTS)
                         - {"result-reuse", "warm-imports", "strict-recapture-once",
                            "after-verdict-budget"})


def _files() -> list[tuple[Path, Path]]:
    """(file, workspace) pairs: our reproductions and examples, and real models."""
    verdicts = FIXTURES / "verdicts"
    files = [(path, verdicts) for path in sorted(verdicts.glob("*.py"))]
    files += [(path, REPO / "examples") for path in sorted((REPO / "examples").rglob("*.py"))]
    for name in ("mixed", "dynamic_size_failure", "wrong_translation", "weightless",
                 "helper_module", "clean"):
        files += [(path, FIXTURES / name) for path in sorted((FIXTURES / name).glob("*.py"))]
    try:
        import transformers  # noqa: F401
    except ImportError:
        return files
    return files + [(path, verdicts / "transformers")
                    for path in sorted((verdicts / "transformers").glob("*.py"))]


def _verdicts(session: ExportSession) -> dict[str, list[tuple]]:
    found: dict[str, list[tuple]] = {}
    for path, workspace in _files():
        result = session.check_file(path, workspace)
        for target in result.targets:
            found[f"{path.relative_to(REPO)}::{target.name}"] = sorted(
                (d.rule, str(d.location.path), d.location.range.start.line,
                 d.location.range.start.column, d.location.range.end.line,
                 d.location.range.end.column, d.severity.value)
                for d in target.diagnostics)
    return found


@pytest.fixture(scope="module")
def all_on(session) -> dict[str, list[tuple]]:
    return _verdicts(session)


def test_the_shortcuts_are_on_by_default(monkeypatch):
    monkeypatch.delenv(shortcuts.ENVIRONMENT_VARIABLE, raising=False)
    assert all(shortcuts.enabled(name) for name in shortcuts.SHORTCUTS)


def test_all_and_unknown_names(monkeypatch):
    monkeypatch.setenv(shortcuts.ENVIRONMENT_VARIABLE, "all")
    assert shortcuts.disabled() == frozenset(shortcuts.SHORTCUTS)
    monkeypatch.setenv(shortcuts.ENVIRONMENT_VARIABLE, "weights-apart, lazy-graph-modulez")
    assert shortcuts.disabled() == {"weights-apart"}
    assert shortcuts.unknown_names() == ["lazy-graph-modulez"]


@pytest.mark.primary_torch  # tests/conftest.py; on the other torches: all of them off, below
@pytest.mark.parametrize("name", CHECK_SHORTCUTS)
def test_switching_a_shortcut_off_changes_no_verdict(session, all_on, monkeypatch, name):
    assert any(all_on.values()) and any(not rows for rows in all_on.values())
    monkeypatch.setenv(shortcuts.ENVIRONMENT_VARIABLE, name)
    assert _verdicts(session) == all_on


@pytest.mark.skipif(torch.__version__.split("+")[0] == versions.PRIMARY_TORCH.version,
                    reason="on the primary torch each shortcut is switched off alone (above)")
def test_switching_every_shortcut_off_changes_no_verdict(session, all_on, monkeypatch):
    assert any(all_on.values()) and any(not rows for rows in all_on.values())
    monkeypatch.setenv(shortcuts.ENVIRONMENT_VARIABLE, ",".join(CHECK_SHORTCUTS))
    assert _verdicts(session) == all_on
