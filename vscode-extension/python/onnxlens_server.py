"""Start the onnxlens language server from the extension's bundle.

The bundled pure-Python libraries (pygls, lsprotocol, sarif-om, ...) come first on
``sys.path``; torch, onnx, onnxscript and onnxruntime come from the interpreter's own
environment. The export worker the server starts gets only the bundled ``exporter`` and
``lsp_server`` packages on its path, so the bundle never shadows what torch imports.
"""

import os
import runpy
import sys

TOOL = os.path.dirname(os.path.abspath(__file__))
LIBS = os.path.join(os.path.dirname(TOOL), "libs")

sys.path[:0] = [TOOL, LIBS]
runpy.run_module("lsp_server", run_name="__main__", alter_sys=True)
