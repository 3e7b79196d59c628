"""The judge of the fixes onnxlens shows (tests/corpus/fixes.py): each is applied to a copy of
its file and the plain exporter runs on the copy; a fix it does not confirm is a false fix."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.conftest import FIXTURES
from tests.corpus.fixes import confirm_fixes, fix_totals
from tests.corpus.judge import AGREE, Row
from tests.corpus.lens import LensEdit, LensTarget, LensTrial, Place
from tests.corpus.truth import run_truth

MODEL = FIXTURES / "dynamic_specialized" / "model.py"


def _trial(key: str, place: Place, text: str) -> LensTrial:
    return LensTrial(key, "onnxlens", key, "works", 1.0, "", [LensEdit(place, text)])


@pytest.mark.corpus
def test_a_fix_is_confirmed_only_when_the_plain_exporter_passes_with_it():
    truth = run_truth(MODEL, "Grouper", MODEL.parent)
    assert truth.status == "failed"
    # as from the cache: the truth names where an earlier run's workspace had the file
    truth = replace(truth, path="/tmp/an-earlier-workspace/model.py")
    static = _trial("onnxlens:static-dimension", Place(str(MODEL), 4, 58, 4, 73), "None")
    # an edit that breaks the model: the plain exporter cannot confirm it
    broken = _trial("broken", Place(str(MODEL), 8, 16, 8, 35), "x.view(4, 2, 5)")
    lens = LensTarget("Grouper", False, [], [], [static, broken])
    row = Row("fixtures", "dynamic_specialized/model.py", "Grouper", truth, lens, "", AGREE, "")
    checks = confirm_fixes([row])
    assert [(c.trial.key, c.confirmed, c.truth) for c in checks] == [
        ("onnxlens:static-dimension", True, "ok"), ("broken", False, "failed: eager")]
    assert MODEL.read_text().count("dynamic_shapes=({0: \"batch\"},)") == 1  # copies only
    totals = fix_totals([row], checks)
    assert (totals.failing, totals.with_fix, totals.false_fixes) == (1, 1, 1)
