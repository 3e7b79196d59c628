"""Models exported at opset 23, where torch.onnx writes attention and RMS normalization as the
single operators `Attention` and `RMSNormalization`, for runtimes that do not take them
(tests/onnxlens/test_fixes.py): the fix, export at torch.onnx's default opset, is shown only
where the runtimes named then take every node of the line."""

import functools

import torch
import torch.nn.functional as F


# onnx-export: args=tuple(torch.randn(1, 2, 4, 8) for _ in range(3)), opset=23
class Attention(torch.nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


def grouped(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


class GroupedAttention(torch.nn.Module):
    def forward(self, query, key, value):
        return grouped(query, key, value) * 2


# onnx-export: args=(torch.randn(1, 4, 6, 8), torch.randn(1, 2, 6, 8), torch.randn(1, 2, 6, 8)), opset=23, runtimes=["coreml"]
def grouped_attention():
    return GroupedAttention()


def logged(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs)

    return wrapper


@logged
@logged
def masked(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


# onnx-export: args=(torch.randn(2, 3, 5, 4), torch.randn(2, 3, 7, 4), torch.randn(2, 3, 7, 4), torch.ones(5, 7).tril(2) > 0), opset = 23, runtimes=["nnapi", "coreml"],
class MaskedAttention(torch.nn.Module):
    def forward(self, q, k, v, mask):
        return masked(q, k, v, mask).relu()


class Block(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = torch.nn.RMSNorm(width)
        self.proj = torch.nn.Linear(width, width)

    def forward(self, x):
        return self.proj(self.norm(x))


# A query row that sees no key: PyTorch gives zeros, and so does `Attention` (opset 23), while the
# default opset's softmax averages the values: the fix would make the model wrong, so no fix
# onnx-export: args=(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4), torch.tensor([[False] * 5, [True] * 5, [True, False] * 2 + [True]])), opset=23
class BlindRow(torch.nn.Module):
    def forward(self, query, keys, values, visible):
        return F.scaled_dot_product_attention(query, keys, values, attn_mask=visible) + 1


# NNAPI has no Reciprocal, which RMS normalization is made of at the default opset: no fix
# onnx-export: args=(torch.randn(2, 16),), opset=23
class NormOnNnapi(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block(16)

    def forward(self, x):
        return self.block(x)


# onnx-export: args=(torch.randn(3, 8),), opset=23, runtimes=["coreml"]
class NormOnCoreml(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(Block(8), torch.nn.ReLU(), Block(8))

    def forward(self, x):
        return self.layers(x)


# A dynamic batch: NNAPI needs fixed sizes at any opset, so no fix
# onnx-export: args=tuple(torch.randn(2, 2, 4, 8) for _ in range(3)), dynamic_shapes=({0: torch.export.Dim("batch")},) * 3, opset=23
class DynamicAttention(torch.nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)
