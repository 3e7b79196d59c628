"""A process that checks several files (one export session, as tests/conftest.py keeps)
gives each the verdict a fresh process gives it: a file imported under the name of one
checked before (every ``model.py``) is traced with its own globals, not the earlier one's,
which torch.export's strict capture kept by name (exporter/pipeline/user_modules.py)."""

from __future__ import annotations

from pathlib import Path

FIRST = '''\
import torch


class Prediction:
    def __init__(self, logits):
        self.logits = logits


# onnx-export: args=(torch.randn(2, 3),)
class Wrapped(torch.nn.Module):
    def forward(self, x):
        return Prediction(x * 2)
'''

SECOND = '''\
import math

import torch


# onnx-export: args=(torch.randn(5, 3),), dynamic_shapes=({0: "rows"},)
class SquareRoot(torch.nn.Module):
    def forward(self, x):
        return x * math.sqrt(x.shape[0])
'''


def _write(root: Path, text: str) -> Path:
    root.mkdir()
    path = root / "model.py"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_file_named_like_one_checked_before_is_traced_with_its_own_globals(session, tmp_path):
    first = _write(tmp_path / "first", FIRST)
    second = _write(tmp_path / "second", SECOND)
    # the first's capture fails in every strategy, its strict one (dynamo) included
    assert [d.rule for d in session.check_file(first, first.parent).diagnostics] == ["ONNX104"]
    # the second's strict capture keeps `math.sqrt` of the size, which has no translation (as
    # in a fresh process); with the first one's `model` it failed: ONNX102 at a draft export
    result = session.check_file(second, second.parent)
    assert [(d.rule, d.location.range.start.line, d.message) for d in result.diagnostics] == [
        ("ONNX201", 9, "`torch._sym_sqrt` has no ONNX translation; the export fails here.")]
