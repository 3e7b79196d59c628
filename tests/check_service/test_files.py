"""A file read once and its targets found once (check_service/files.py), and the one way a
job is built (check_service/requests.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from check_service.files import TargetNotFound, file_targets, find_target
from check_service.requests import job_request
from exporter.config.options import Options

SOURCE = """\
# -*- coding: latin-1 -*-
import torch

# onnx-export: args=(torch.randn(2),)
class Caf\xe9(torch.nn.Module):
    def forward(self, x):
        return x


# onnx-export: args=(torch.randn(2),
class Broken(torch.nn.Module):
    pass
"""


def test_a_files_text_is_decoded_by_its_declared_encoding_and_its_targets_found_once(tmp_path):
    path = tmp_path / "model.py"
    path.write_bytes(SOURCE.encode("latin-1"))
    found = file_targets(path)
    assert found.text == SOURCE and found.path == path.resolve()
    assert [(t.name, t.definition.start.line) for t in found.targets] == [("Caf\xe9", 5)]
    assert [(d.rule, d.location.range.start.line) for d in found.diagnostics] == [("ONNX001", 10)]
    assert file_targets(path, frozenset({"Other"})).targets == []


def test_a_file_that_cannot_be_decoded_has_its_reason_and_no_target(tmp_path):
    path = tmp_path / "model.py"
    path.write_bytes(b"import torch\nx = '\xff'\n")
    found = file_targets(path)
    assert found.targets == [] and found.text == ""
    ((rule, line),) = [(d.rule, d.location.range.start.line) for d in found.diagnostics]
    assert (rule, line) == ("ONNX002", 2)


def test_a_target_not_in_the_file_is_named_with_what_the_file_holds(tmp_path):
    path = tmp_path / "model.py"
    path.write_bytes(SOURCE.encode("latin-1"))
    assert find_target(path, "Caf\xe9").name == "Caf\xe9"
    with pytest.raises(TargetNotFound) as missing:
        find_target(path, "Broken")
    assert [t.name for t in missing.value.found.targets] == ["Caf\xe9"]


def test_a_job_carries_the_settings_limits_and_export_options_and_the_editors_text(tmp_path):
    path = tmp_path / "model.py"
    path.write_bytes(SOURCE.encode("latin-1"))
    (target,) = file_targets(path).targets
    settings = replace(Options(), timeoutSeconds=0.0, memoryLimitMB=512, opset=20)
    request = job_request("save", target, tmp_path, settings, text="edited", output="m.onnx")
    # the target as found here: the worker does not look for it again
    assert (request.kind, request.target, request.workspace) == ("save", target, str(tmp_path))
    assert (target.name, target.path) == ("Caf\xe9", path.resolve())
    # 0 s: no limit
    assert (request.timeout, request.memory_limit_mb) == (None, 512)
    assert (request.settings.opset, request.text, request.output) == (20, "edited", "m.onnx")
