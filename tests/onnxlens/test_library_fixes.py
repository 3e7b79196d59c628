"""The export switches of timm that onnxlens tries (docs/fixes.md), each on a real model that
fails without its switch and passes with it. timm is not in the `dev` extra (it imports
torchvision): these run where it is installed (scripts/setup.sh installs it beside a torch that
pins a torchvision: the 2.14.1 leg)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.onnxlens.test_fixes import LIBRARY, _check, _edited

pytestmark = pytest.mark.every_torch  # which fix works depends on the installed torch


def test_a_failure_in_timm_attention_gets_exportable(capsys, tmp_path):
    """timm's fused attention with a relative position bias fails to decompose; the user's
    own `timm.create_model(...)` call with `exportable=True` exports and matches."""
    pytest.importorskip("timm")
    model = LIBRARY / "timm_relpos_attention.py"
    status, report = _check(capsys, model, "--format", "json")
    assert status == 1
    (failure,) = [d for d in json.loads(report)["diagnostics"] if d["severity"] == "error"]
    assert failure["rule"] == "ONNX202"
    (fix,) = failure["fixes"]
    assert fix["key"] == "timm:exportable"
    assert fix["source"] == "timm"
    assert fix["title"] == ("Build the model with `exportable=True` (timm's attention as plain "
                            "tensor operations)")
    (edit,) = fix["edits"]
    assert Path(edit["path"]).resolve() == model.resolve()
    assert edit["range"]["start"] == edit["range"]["end"] == {"line": 13, "column": 66}
    assert edit["text"] == ", exportable=True"
    fixed = tmp_path / model.name
    fixed.write_text(_edited(model, fix))
    assert ('timm.create_model("test_vit_relpos", pretrained=False, exportable=True).eval()'
            in fixed.read_text())
    assert _check(capsys, fixed, "--fix-budget", "0")[0] == 0


def test_a_timm_model_without_fused_attention_gets_no_trial(capsys, tmp_path):
    """Built `exportable=True` already, the same model has nothing for the switch to change:
    a failure there (here: a tolerance no float32 export meets) costs no trial."""
    pytest.importorskip("timm")
    model = tmp_path / "model.py"
    model.write_text((LIBRARY / "timm_relpos_attention.py").read_text()
                     .replace('pretrained=False)', 'pretrained=False, exportable=True)')
                     .replace('name="vit_relpos"', 'name="vit_relpos", atol=0, rtol=0'))
    status, report = _check(capsys, model, "--format", "json")
    assert status == 1
    errors = [d for d in json.loads(report)["diagnostics"] if d["severity"] == "error"]
    assert errors[0]["rule"] == "ONNX501"  # a numerics failure: a stage a switch could change
    (target,) = json.loads(report)["targets"]
    assert target["fix_trials"] == []
