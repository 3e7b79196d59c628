"""onnxlens exporter: every ONNX export problem of an annotated model, on the user's line.

The package is a plain library (nothing in it knows about LSP). Importing it does not import
torch; :class:`exporter.session.ExportSession` does.
"""

__version__ = "0.1.0"
