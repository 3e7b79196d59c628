"""A process that checks several files (one export session, as tests/conftest.py keeps)
gives each the verdict a fresh process gives it: a file imported under the name of one
checked before (every ``model.py``) is traced with its own globals, not the earlier one's,
which torch.export's strict capture kept by name (exporter/pipeline/user_modules.py)."""

from __future__ import annotations

from tests.conftest import FIXTURES

SECOND = '''\
import math

import torch


# onnx-export: args=(torch.randn(5, 3),), dynamic_shapes=({0: "rows"},)
class SquareRoot(torch.nn.Module):
    def forward(self, x):
        return x * math.sqrt(x.shape[0])
'''


def test_a_file_named_like_one_checked_before_is_traced_with_its_own_globals(session, tmp_path):
    first = FIXTURES / "io_structure" / "model.py"
    second = tmp_path / "model.py"  # the same module name, `model`
    second.write_text(SECOND, encoding="utf-8")
    # the first's capture fails in every strategy, its strict one (dynamo) included
    assert [d.rule for d in session.check_file(first, first.parent).diagnostics] == ["ONNX104"]
    # the second's strict capture keeps `math.sqrt` of the size, which has no translation (as
    # in a fresh process); with the first one's `model` it failed: ONNX102 at a draft export
    result = session.check_file(second, second.parent)
    assert [(d.rule, d.location.range.start.line, d.message) for d in result.diagnostics] == [
        ("ONNX201", 9, "`torch._sym_sqrt` has no ONNX translation; the export fails here.")]
