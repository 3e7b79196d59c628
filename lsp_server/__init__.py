"""The onnxlens language server (pygls): live ONNX export diagnostics in any LSP editor.

Run it with ``python -m lsp_server`` (stdio) or ``onnxlens lsp``. The server never imports
torch: every check runs in the warm, isolated export worker (``export_worker``).
"""
