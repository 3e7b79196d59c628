"""Issue 38, item 6: a call that is not the target exports as the plain exporter does, and the
code after it uses what it returned (``optimize``, ``save``, ``model_proto``), so the later
call, the target, is reached; a call that raises stops the function as it does when run."""

import threading

import torch
from program_helpers import exported_elsewhere
from torch import nn


class Doubling(nn.Module):
    def forward(self, x):
        return x * 2


class Branching(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # decided by the values: torch.export cannot trace it
            return x
        return -x


EXAMPLE = (torch.randn(2, 3),)


def to_program(model, example):
    return torch.onnx.export(model, example, dynamo=True)


# onnx-export:
def optimize_then_save():
    p = torch.onnx.export(Doubling(), EXAMPLE, dynamo=True)
    p.optimize()
    p.save("a.onnx")
    torch.onnx.export(Doubling(), EXAMPLE, "b.onnx", dynamo=True)


# onnx-export:
def through_a_helper():
    program = to_program(Doubling(), EXAMPLE)
    names = [value.name for value in program.model_proto.graph.input]
    torch.onnx.export(Doubling(), EXAMPLE, "named.onnx", input_names=names)


# onnx-export:
def from_another_file():
    proto = exported_elsewhere(Doubling(), EXAMPLE, "elsewhere.onnx").model_proto
    opset = proto.opset_import[0].version
    torch.onnx.export(Doubling(), EXAMPLE, "after.onnx", opset_version=opset)


# onnx-export:
def in_a_thread():
    results = []
    worker = threading.Thread(target=lambda: results.append(torch.onnx.export(Doubling(), EXAMPLE)))
    worker.start()
    worker.join()
    results[0].save("threaded.onnx")
    torch.onnx.export(Doubling(), EXAMPLE, "after_thread.onnx")


# onnx-export:
def earlier_raises():
    torch.onnx.export(Branching(), EXAMPLE, "branching.onnx")
    torch.onnx.export(Doubling(), EXAMPLE, "never.onnx")


# onnx-export:
def earlier_raises_and_is_caught():
    try:
        torch.onnx.export(Branching(), EXAMPLE, "branching.onnx")
    except Exception as error:
        print("the first export failed:", type(error).__name__)
    torch.onnx.export(Doubling(), EXAMPLE, "fallback.onnx")


# onnx-export:
def branch_not_taken():
    program = torch.onnx.export(Doubling(), EXAMPLE)
    if program is None:  # never: the earlier call returns its program
        torch.onnx.export(Doubling(), EXAMPLE, "never.onnx")


# onnx-export:
def arguments_refused():
    # `fallback` is gone from torch.onnx.export: the call itself raises TypeError
    torch.onnx.export(Doubling(), EXAMPLE, "refused.onnx", dynamo=True, fallback=True)
    torch.onnx.export(Doubling(), EXAMPLE, "after_refused.onnx")


if __name__ == "__main__":
    for function in (optimize_then_save, through_a_helper, from_another_file, in_a_thread,
                     earlier_raises_and_is_caught, branch_not_taken, earlier_raises,
                     arguments_refused):
        function()
