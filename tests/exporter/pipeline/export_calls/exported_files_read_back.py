"""Issue 38, item 6: a script reads back the file its earlier call exported (``onnx.load``,
``onnx.checker``, ONNX Runtime, ``open``, ``os.path``, ``pathlib``), then exports again: the
check's copy of the file is what it reads, and the later call, the target, is reached."""

import os
from pathlib import Path

import onnx
import onnxruntime as ort
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 4)

    def forward(self, x):
        return self.linear(x).relu()


class Wide(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(256, 1024))  # 1 MB: external data

    def forward(self, x):
        return x @ self.weight


EXAMPLE = (torch.randn(2, 3),)


# onnx-export:
def load_it():
    torch.onnx.export(Encoder(), EXAMPLE, "enc.onnx", dynamo=True)
    outputs = [o.name for o in onnx.load("enc.onnx").graph.output]
    torch.onnx.export(Encoder(), EXAMPLE, "dec.onnx", output_names=outputs)


# onnx-export:
def run_it():
    encoder = Encoder().eval()
    torch.onnx.export(encoder, EXAMPLE, "enc.onnx", input_names=["x"])
    session = ort.InferenceSession("enc.onnx", providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"x": EXAMPLE[0].numpy()})
    torch.testing.assert_close(torch.from_numpy(got), encoder(*EXAMPLE))
    torch.onnx.export(encoder, EXAMPLE, "checked.onnx", input_names=["x"])


# onnx-export:
def look_at_it():
    torch.onnx.export(Encoder(), EXAMPLE, "enc.onnx")
    size = os.path.getsize("enc.onnx")
    assert Path("enc.onnx").exists() and os.path.isfile("enc.onnx") and size > 0
    onnx.checker.check_model("enc.onnx")
    proto = onnx.load_model_from_string(Path("enc.onnx").read_bytes())
    torch.onnx.export(Encoder(), EXAMPLE, f"enc_{len(proto.graph.node)}.onnx")


# onnx-export:
def with_external_data():
    program = torch.onnx.export(Wide(), (torch.randn(2, 256),))
    program.save("wide.onnx", external_data=True)
    assert os.path.exists("wide.onnx.data")
    loaded = onnx.load("wide.onnx")  # the weights come from wide.onnx.data
    assert onnx.numpy_helper.to_array(loaded.graph.initializer[0]).shape == (256, 1024)
    torch.onnx.export(Wide(), (torch.randn(2, 256),), "wide_again.onnx")


# onnx-export:
def absolute_and_saved_copy():
    path = os.path.abspath("absolute.onnx")
    program = torch.onnx.export(Encoder(), EXAMPLE, path)
    onnx.save(program.model_proto, "copy.onnx")
    with open(path, "rb") as exported, open("copy.onnx", "rb") as copied:
        assert onnx.load(exported).graph.output == onnx.load(copied).graph.output
    torch.onnx.export(Encoder(), EXAMPLE, "last.onnx")


if __name__ == "__main__":
    for function in (load_it, run_it, look_at_it, with_external_data, absolute_and_saved_copy):
        function()
