"""The bundled examples: what a newcomer sees first. The seed models are clean; every failing
example is reported at its own line."""

from __future__ import annotations

import json

from onnxlens.cli import main
from tests.conftest import REPO

EXPECTED = [
    ("ONNX502", "examples/failing/custom_translation.py", 21, 18),
    ("ONNX501", "examples/failing/custom_translation.py", 22, 16),
    ("ONNX401", "examples/failing/double_precision.py", 10, 30),
    ("ONNX102", "examples/failing/fixed_batch.py", 9, 17),
    ("ONNX201", "examples/failing/special_functions.py", 14, 20),
    ("ONNX101", "examples/failing/special_functions.py", 15, 12),
    ("ONNX201", "examples/failing/special_functions.py", 17, 27),
]


def test_examples(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    assert main(["check", "examples", "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    found = [(d["rule"], d["path"], d["range"]["start"]["line"], d["range"]["start"]["column"])
             for d in report["diagnostics"]]
    assert found == EXPECTED
    targets = {t["name"]: t for t in report["targets"]}
    assert targets["MLPModel"]["ok"] and targets["MNISTModel"]["ok"]
    mlp_inputs = targets["MLPModel"]["summary"]["inputs"]
    assert [i["name"] for i in mlp_inputs] == ["tensor_input", "tensor_x", "list_input_index_0"]
    assert all(i["shape"] == ["batch_size", 8] for i in mlp_inputs)
    stages = {s["name"]: s["state"] for s in targets["MNISTModel"]["stages"]}
    assert stages.pop("deploy") == "skipped"  # no runtime named besides ort-cpu
    assert set(stages.values()) == {"passed"}
