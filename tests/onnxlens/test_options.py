"""A command's options: the command line's defaults, then ``[tool.onnxlens]``, then the flags
(``--severity`` and ``--extend-exclude`` add to the project's, the other flags replace it)."""

from __future__ import annotations

from pathlib import Path

from check_service.outcomes import Limits
from check_service.requests import job_limits
from exporter.config.pyproject import load_config
from exporter.config.schema import DEFAULT_EXCLUDE
from onnxlens.cli import _parser
from onnxlens.options import command_options


def _options(root: Path, pyproject: str, *flags: str):
    (root / "pyproject.toml").write_text(f"[tool.onnxlens]\n{pyproject}")
    args = _parser().parse_args(["check", str(root), *flags])
    return command_options(args, load_config(root))


def test_the_command_lines_defaults(tmp_path):
    options = _options(tmp_path, "")
    # a CI run may take longer, and has no memory cap
    assert job_limits(options) == Limits(300.0, None)
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
