"""A command's options: the command line's defaults, then ``[tool.onnxlens]``, then the flags
(``--severity`` and ``--extend-exclude`` add to the project's, the other flags replace it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from check_service.outcomes import Limits
from check_service.requests import job_limits, job_request
from exporter.config.pyproject import load_config
from exporter.config.schema import (
    COMMAND_LINE_LOAD_SECONDS,
    DEFAULT_EXCLUDE,
    DEFAULT_LOAD_SECONDS,
    EXPORT_CEILING_SECONDS,
)
from exporter.source.targets import discover
from onnxlens.cli import _parser
from onnxlens.options import command_options

SOURCE = "import torch\n\n\n# onnx-export: args=(torch.randn(2),)\nclass Tiny(torch.nn.Module):\n" \
         "    def forward(self, x):\n        return x\n"


def _options(root: Path, pyproject: str, *flags: str):
    (root / "pyproject.toml").write_text(f"[tool.onnxlens]\n{pyproject}")
    args = _parser().parse_args(["check", str(root), *flags])
    return command_options(args, load_config(root))


def test_the_command_lines_defaults(tmp_path):
    options = _options(tmp_path, "")
    # a CI run's model code may take longer, and has no memory cap; the exporter's stages
    # run to their answer, up to the ceiling
    assert job_limits(options, COMMAND_LINE_LOAD_SECONDS) == Limits(
        EXPORT_CEILING_SECONDS, None, load_timeout_seconds=300.0)
    assert options.exclude == list(DEFAULT_EXCLUDE) and options.extendExclude == []
    assert options.select == [] and options.severity == {}
    assert options.export.opset is None and options.export.optimize is True


def test_the_project_over_the_defaults(tmp_path):
    options = _options(tmp_path, 'timeout = 10\nmemory-limit-mb = 2048\nopset = 18\n'
                       'select = ["ONNX2"]\nseverity = { ONNX106 = "info" }\n')
    assert job_limits(options) == Limits(10.0, 2048)
    assert options.export.opset == 18 and options.select == ["ONNX2"]
    assert options.severity == {"ONNX106": "info"}


def test_flags_over_the_project_some_adding_to_it(tmp_path):
    options = _options(tmp_path, 'timeout = 10\nselect = ["ONNX2"]\nexclude = ["a"]\n'
                       'extend-exclude = ["b"]\nseverity = { ONNX106 = "info" }\n',
                       "--timeout", "0", "--select", "ONNX5", "--exclude", "c",
                       "--extend-exclude", "d", "--severity", "ONNX201=warning")
    assert job_limits(options) == Limits(None, None)  # --timeout 0: no limit
    assert options.select == ["ONNX5"] and options.exclude == ["c"]
    assert options.extendExclude == ["b", "d"] and options.excluded == ["c", "b", "d"]
    assert options.severity == {"ONNX106": "info", "ONNX201": "warning"}


@pytest.mark.parametrize("front_end_default", [DEFAULT_LOAD_SECONDS, COMMAND_LINE_LOAD_SECONDS])
def test_a_timeout_set_bounds_the_whole_check_and_the_default_the_models_own_code(
        tmp_path, front_end_default):
    """A job's request: with ``timeout`` set, its limit for the whole check; without, the
    front end's default for the load stage and the ceiling for the whole check."""
    (target,) = discover(tmp_path / "m.py", SOURCE).targets
    unset = job_request("check", target, tmp_path, _options(tmp_path, ""),
                        load_default=front_end_default)
    assert (unset.timeout, unset.load_timeout) == (EXPORT_CEILING_SECONDS, front_end_default)
    set_ = job_request("check", target, tmp_path, _options(tmp_path, "timeout = 20\n"),
                       load_default=front_end_default)
    assert (set_.timeout, set_.load_timeout) == (20.0, None)
