"""onnxlens exporter: every ONNX export problem of an annotated model, on the user's line.

The package is a plain library (nothing in it knows about LSP). Importing it does not import
torch; :class:`exporter.pipeline.session.ExportSession` does.
"""

#: The one version source: pyproject.toml reads it, and tests/exporter/test_version.py checks that
#: the VS Code extension's package.json carries the same.
__version__ = "0.1.0"
