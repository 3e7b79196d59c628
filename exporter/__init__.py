"""onnxlens exporter: every ONNX export problem of an annotated model, on the user's line.

The package is a plain library (nothing in it knows about LSP). Importing it does not import
torch; :class:`exporter.pipeline.session.ExportSession` does.
"""

#: The one version source: pyproject.toml reads it, and tests/exporter/test_version.py checks that
#: the VS Code extension's package.json carries the same.
__version__ = "0.1.0"
#: The project's home (pyproject.toml's [project.urls] Homepage, the VS Code extension's
#: repository; tests/exporter/reports/test_sarif.py keeps them equal): SARIF's informationUri.
HOMEPAGE = "https://github.com/onnxlens/onnxlens"
