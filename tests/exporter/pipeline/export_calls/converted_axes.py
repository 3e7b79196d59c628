"""Issue 38, item 7 (segment-anything's ``scripts/export_onnx_model.py``): ``dynamic_axes`` is
converted to ``dynamic_shapes`` by torch's own converter, which pairs its entries (then the
other ``input_names``) with ``forward``'s inputs by position, not by name. When the orders
differ, an input gets another input's entry; a dimension made dynamic that way is not called
"declared dynamic", and the message says which entry went where."""

import torch
from torch import nn


class MaskDecoder(nn.Module):
    """segment-anything's ONNX decoder, reduced: ``image_embeddings`` has a fixed number of
    channels, the points and their labels share their count."""

    def __init__(self, channels=8):
        super().__init__()
        self.point_embed = nn.Linear(2, channels)
        self.label_embed = nn.Embedding(4, channels)
        self.out = nn.Linear(channels, 1)

    def forward(self, image_embeddings, point_coords, point_labels):
        points = self.point_embed(point_coords) + self.label_embed(point_labels.long())
        image = image_embeddings.flatten(2).transpose(1, 2)
        attention = (points @ image.transpose(1, 2)).softmax(-1)
        return self.out(attention @ image)


# onnx-export:
def segment_anything():
    """The entries name the points first; ``input_names`` lists every input in order."""
    dynamic_axes = {
        "point_coords": {1: "num_points"},
        "point_labels": {1: "num_points"},
    }
    dummy_inputs = {
        "image_embeddings": torch.randn(1, 8, 4, 4),
        "point_coords": torch.randint(0, 64, (1, 5, 2), dtype=torch.float),
        "point_labels": torch.randint(0, 4, (1, 5), dtype=torch.float),
    }
    torch.onnx.export(MaskDecoder().eval(), tuple(dummy_inputs.values()), "decoder.onnx",
                      export_params=True, opset_version=17, do_constant_folding=True,
                      input_names=list(dummy_inputs.keys()), output_names=["scores"],
                      dynamic_axes=dynamic_axes)


# onnx-export:
def in_forward_order():
    """The same entries in ``forward``'s order: the conversion gives each its own."""
    torch.onnx.export(MaskDecoder().eval(), (torch.randn(1, 8, 4, 4), torch.rand(1, 5, 2),
                                             torch.ones(1, 5)), "ordered.onnx",
                      input_names=["image_embeddings", "point_coords", "point_labels"],
                      dynamic_axes={"image_embeddings": {}, "point_coords": {1: "num_points"},
                                    "point_labels": {1: "num_points"}})


class Scaling(nn.Module):
    def forward(self, x, scale):
        return x * scale


# onnx-export:
def second_input_only():
    """Only the second input has an entry: it goes to the first."""
    torch.onnx.export(Scaling(), (torch.randn(2, 3), torch.rand(2, 1)), "scaling.onnx",
                      input_names=["x", "scale"], dynamic_axes={"scale": {0: "batch"}})


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 2)

    def forward(self, features, bias):
        return self.linear(features) + bias


# onnx-export:
def names_in_another_order():
    """``input_names`` in another order than ``forward``'s: ``features`` is named ``bias``,
    and the entry for ``features`` (the second name) goes to ``features`` all the same."""
    torch.onnx.export(Classifier(), (torch.randn(3, 6), torch.zeros(3, 2)), "classifier.onnx",
                      input_names=["bias", "features"], dynamic_axes={"features": [1]})


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)

    def forward(self, tokens, mask):
        return self.embed(tokens) * mask.unsqueeze(-1)


# onnx-export:
def fewer_input_names():
    """``input_names`` names the first input only; the entries list the mask first."""
    torch.onnx.export(Masked(), (torch.randint(0, 10, (2, 5)), torch.ones(2, 5)), "masked.onnx",
                      input_names=["tokens"],
                      dynamic_axes={"mask": {1: "seq"}, "tokens": {0: "batch", 1: "seq"}})


class Windowed(nn.Module):
    def forward(self, x, y):
        if x.shape[1] > 4:  # a guard on the size: the graph holds for sizes above 4 only
            return x.sum(1, keepdim=True) + y
        return x.mean(1, keepdim=True) + y


# onnx-export:
def narrowed_by_conversion():
    """``x``'s second axis is dynamic only because it got ``y``'s entry; its code narrows it."""
    torch.onnx.export(Windowed(), (torch.randn(2, 8), torch.randn(2, 1)), "windowed.onnx",
                      input_names=["x", "y"], dynamic_axes={"y": {1: "n"}})


if __name__ == "__main__":
    for function in (segment_anything, in_forward_order, second_input_only,
                     names_in_another_order, fewer_input_names, narrowed_by_conversion):
        try:
            function()
            print(function.__name__, "exported")
        except Exception as error:
            print(function.__name__, "failed:", type(error).__name__)
