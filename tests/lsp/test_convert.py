"""exporter diagnostics as LSP diagnostics (lsp_server/convert.py): the quick fixes a finding
offers travel in its data, for the code actions (lsp_server/features.py)."""

from __future__ import annotations

from pathlib import Path

from exporter.source.targets import discover
from lsp_server.client_support import ClientSupport
from lsp_server.convert import PositionConverter, to_lsp

SCRIPT = ("import torch\n\n\ndef export():\n    torch.onnx.export(model, (x,), 'm.onnx',"
          " dynamo=False)\n")


def test_the_data_carries_each_quick_fix_with_its_edits():
    (finding,) = discover(Path("script.py"), SCRIPT).diagnostics
    shown = to_lsp(finding, ClientSupport(),
                   PositionConverter("utf-16", lambda _: tuple(SCRIPT.splitlines())))
    assert [(fix["title"], fix["tried"], fix["edits"][0]["range"])
            for fix in shown.data["fixes"]] == [
        ("Remove `dynamo=False` (use the torch.export-based exporter)", False, [5, 44, 5, 58]),
        ("Check this call: mark `export` with `# onnx-export:`", False, [4, 1, 4, 1])]
