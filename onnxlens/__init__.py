"""onnxlens's front end: the ``onnxlens`` command (``python -m onnxlens``).

It sits above the three packages it drives and none of them imports it: ``exporter`` (the
library: targets, the export pipeline, reports), ``export_worker`` (the process that runs the
user's code) and ``lsp_server`` (the language server). The import contracts in pyproject.toml
keep it so.
"""
