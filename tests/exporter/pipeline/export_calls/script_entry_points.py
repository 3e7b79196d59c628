"""Export scripts' entry points as their authors write them: a marked function whose
parameters all have defaults (``def main(output="head.onnx", opset=18)``) is called with none,
as the script's own ``main()`` call does, and its export calls are its targets, as are a
decorated function's (a click command takes its arguments from the command line); code that
reads the command line (``argparse``'s ``parse_args()``, ``sys.argv[0]``) sees the one of
``python script_entry_points.py``: no options, the script's path
(tests/exporter/pipeline/test_export_call_targets.py)."""

import argparse
import sys
from pathlib import Path

import click
import torch
from torch import nn

parser = argparse.ArgumentParser(description="Export the heads to ONNX.")
parser.add_argument("--output", default="head.onnx")
parser.add_argument("--opset", type=int, default=18)
parser.add_argument("--dynamic-batch", action="store_true")


class Head(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.proj = nn.Linear(width, 4)

    def forward(self, x):
        return self.proj(x).softmax(dim=-1)


class Pairing(nn.Module):
    def forward(self, x):
        pairs = x.reshape(2, 2, 16)  # a batch of 4, hard-coded: the declared batch fails
        return pairs.mean(dim=1)


class Gate(nn.Module):
    def forward(self, x):
        if x.max() > 0:  # a branch on a value: the export fails here
            return x.exp()
        return x


def to_onnx(model, args, output_path, dynamic_shapes, opset):
    torch.onnx.export(model, args, str(output_path), dynamic_shapes=dynamic_shapes,
                      opset_version=opset)


# onnx-export:
def main(output="head.onnx", opset=18):
    torch.onnx.export(Head(), (torch.randn(2, 16),), output, opset_version=opset)


# onnx-export:
@torch.no_grad()
def convert(output_dir=Path("."), *, opset=18, batch=4):
    to_onnx(Pairing(), (torch.randn(batch, 16),), output_dir / "pairing.onnx",
            ({0: torch.export.Dim("batch")},), opset)


# onnx-export:
def command_line():
    options = parser.parse_args()
    torch.onnx.export(Head(8), (torch.randn(3, 8),), options.output, input_names=["x"],
                      opset_version=options.opset,
                      dynamic_axes={"x": {0: "batch"}} if options.dynamic_batch else None)


# onnx-export:
def with_argv(argv=None, *extra, **overrides):
    options = parser.parse_args(argv)
    beside_the_script = Path(sys.argv[0]).with_name("gate.onnx")
    to_onnx(Gate(), (torch.randn(6),), beside_the_script, None, options.opset)


# onnx-export:
def every_width(widths=(8, 12), make=lambda width: Head(width)):
    for width in widths:
        torch.onnx.export(make(width), (torch.randn(2, width),), f"head_{width}.onnx")


# onnx-export:
@click.command()
@click.option("--width", default=12, type=int)
@click.option("--opset", default=18, type=int)
def command(width, opset):
    torch.onnx.export(Gate(), (torch.randn(width),), "gate.onnx", opset_version=opset)


if __name__ == "__main__":
    main()
