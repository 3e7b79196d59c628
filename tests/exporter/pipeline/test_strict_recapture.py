"""The strict re-capture both guard searches read (exporter/pipeline/strict_recapture.py): made
once per check, and the shortcut's off switch gives the same diagnostics with one draft export
per search. The model lives in an installed library, as diffusers' UNet does: the capture's own
guards name no line of the workspace, so the capture stage searches the re-capture for the guard
that narrowed `batch` (ONNX107), and ONNX Runtime failing at an odd `seq` sends the dynamic stage
to search it for a specializing line (ONNX403)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from exporter.pipeline.strict_recapture import SHORTCUT
from exporter.toolchain import shortcuts

LIBRARY = '''import torch
from torch import nn


class EvenOnly(nn.Module):
    def forward(self, x):
        if x.shape[0] >= 64:
            x = x.contiguous()
        back = x[:, ::2].repeat_interleave(2, dim=1)
        if x.shape[1] % 2:
            back = back[:, :-1]
        return torch.cat([x, back], dim=2)
'''
MODEL = '''import torch
from torch.export import Dim

from strict_recapture_library import EvenOnly


# onnx-export: args=(torch.randn(2, 16, 3),),
#     dynamic_shapes=({0: Dim("batch", min=2), 1: Dim("seq", min=2)},)
def build():
    return EvenOnly()
'''


@pytest.fixture
def checked(session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """check(shortcut off?) -> (diagnostics as a user reads them, draft exports made)."""
    library = tmp_path / "env" / "lib" / "site-packages"
    library.mkdir(parents=True)
    (library / "strict_recapture_library.py").write_text(LIBRARY, encoding="utf-8")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "model.py").write_text(MODEL, encoding="utf-8")
    monkeypatch.syspath_prepend(str(library))
    draft_export = torch.export.draft_export
    calls: list[object] = []

    def counted(*args, **kwargs):
        calls.append(args[0])
        return draft_export(*args, **kwargs)

    monkeypatch.setattr(torch.export, "draft_export", counted)

    def check(off: bool) -> tuple[list[tuple], int]:
        monkeypatch.setenv(shortcuts.ENVIRONMENT_VARIABLE, SHORTCUT if off else "")
        calls.clear()
        result = session.check_file(workspace / "model.py", workspace)
        (target,) = result.targets
        return [(d.rule, d.severity.value, d.location.range.start.line,
                 d.location.range.start.column, d.message) for d in target.diagnostics], \
            len(calls)

    return check


def test_one_strict_recapture_serves_both_searches_and_changes_no_verdict(checked):
    diagnostics, draft_exports = checked(off=False)
    assert [(rule, severity, line) for rule, severity, line, _, _ in diagnostics] == [
        ("ONNX107", "warning", 8), ("ONNX403", "error", 9)]
    assert "valid only for [2, 63]" in diagnostics[0][4]
    assert "fails at batch=5, seq=19" in diagnostics[1][4]
    assert draft_exports == 1
    assert checked(off=True) == (diagnostics, 2)
