"""Issue 38, item 5: a module whose top level exports (itself, through a helper of another
file, in a thread, with ``report=True``, ``ONNXProgram.save`` and ``onnx.save``) and reads the
files back, imported by the check of a pragma target and of an export call: the exports run as
the plain exporter runs them, and none of their files lands beside the module."""

import threading

import onnx
import torch
from torch import nn


class Doubling(nn.Module):
    def forward(self, x):
        return x * 2


EXAMPLE = (torch.randn(2, 3),)

torch.onnx.export(Doubling(), EXAMPLE, "module_level.onnx", dynamo=True)
PROGRAM = torch.onnx.export(Doubling(), EXAMPLE, dynamo=True, report=True)
PROGRAM.save("module_level_saved.onnx")
onnx.save(PROGRAM.model_proto, "module_level_onnx_save.onnx")
_worker = threading.Thread(target=torch.onnx.export,
                           args=(Doubling(), EXAMPLE, "module_level_thread.onnx"))
_worker.start()
_worker.join()
import export_on_import  # noqa: E402, F401  # another file's top level exports too

INPUT_NAMES = [i.name for i in onnx.load("module_level.onnx").graph.input]
assert onnx.load("module_level_thread.onnx").graph.output


# onnx-export: args=EXAMPLE
class Tripling(nn.Module):
    def forward(self, x):
        return x * 3


# onnx-export:
def export_again():
    PROGRAM.optimize()
    torch.onnx.export(Tripling(), EXAMPLE, "tripling.onnx", input_names=INPUT_NAMES)


if __name__ == "__main__":
    export_again()
