"""DistilBERT text-classification export, modelled on Optimum's ``export_pytorch``.

Source: https://github.com/huggingface/optimum-onnx
        optimum/exporters/onnx/convert.py, ``export_pytorch``, as of commit
        cc685ecea44b7ec0e6c0263121affbca767e9bc8 ("Torch 2.9 support (#82)", October 2025),
        which pinned the legacy exporter with ``dynamo=False,  # torch dynamo not yet
        supported``. Input/output axes from ``DistilBertOnnxConfig``
        (optimum/exporters/onnx/model_configs.py) and ``OnnxConfig._TASK_TO_COMMON_OUTPUTS``
        (optimum/exporters/onnx/base.py); the model is adapted from transformers'
        src/transformers/models/distilbert/modeling_distilbert.py
        (``DistilBertForSequenceClassification``).
License: Apache-2.0, Copyright 2022 The HuggingFace Team (both repositories).

Adapted: a reduced DistilBERT (2 layers, hidden size 32, random weights) with a 2-label
classification head that returns a dict ``{"logits": ...}`` like transformers' ModelOutput.
The dummy inputs are those of Optimum's DEFAULT_DUMMY_SHAPES (batch_size=2,
sequence_length=16), passed as Optimum does: a one-element args tuple whose last element is a
dict of keyword arguments. The opset is 14, DistilBertOnnxConfig.DEFAULT_ONNX_OPSET before
Optimum raised its defaults to 18 (July 2025); the opset is the ``opset`` argument of
``export_pytorch`` (``optimum-cli export onnx --opset 14``).
"""

import math
from collections import OrderedDict
from itertools import chain
from pathlib import Path

import torch
import torch.nn as nn


class Embeddings(nn.Module):
    def __init__(self, vocab_size, dim, max_position_embeddings):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.position_embeddings = nn.Embedding(max_position_embeddings, dim)
        self.LayerNorm = nn.LayerNorm(dim, eps=1e-12)
        self.dropout = nn.Dropout(0.1)
        self.register_buffer(
            "position_ids", torch.arange(max_position_embeddings).expand((1, -1)), persistent=False
        )

    def forward(self, input_ids):
        seq_length = input_ids.size(1)
        position_ids = self.position_ids[:, :seq_length]
        embeddings = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(embeddings))


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.dim = dim
        self.q_lin = nn.Linear(dim, dim)
        self.k_lin = nn.Linear(dim, dim)
        self.v_lin = nn.Linear(dim, dim)
        self.out_lin = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x, mask):
        bs, q_length, _dim = x.size()
        dim_per_head = self.dim // self.n_heads
        mask_reshp = (bs, 1, 1, q_length)

        def shape(t):
            return t.view(bs, -1, self.n_heads, dim_per_head).transpose(1, 2)

        def unshape(t):
            return t.transpose(1, 2).contiguous().view(bs, -1, self.n_heads * dim_per_head)

        q = shape(self.q_lin(x)) / math.sqrt(dim_per_head)
        k = shape(self.k_lin(x))
        v = shape(self.v_lin(x))
        scores = torch.matmul(q, k.transpose(2, 3))
        mask = (mask == 0).view(mask_reshp).expand_as(scores)
        scores = scores.masked_fill(mask, torch.tensor(torch.finfo(scores.dtype).min))
        weights = self.dropout(nn.functional.softmax(scores, dim=-1))
        context = unshape(torch.matmul(weights, v))
        return self.out_lin(context)


class TransformerBlock(nn.Module):
    def __init__(self, dim, n_heads, hidden_dim):
        super().__init__()
        self.attention = MultiHeadSelfAttention(dim, n_heads)
        self.sa_layer_norm = nn.LayerNorm(dim, eps=1e-12)
        self.lin1 = nn.Linear(dim, hidden_dim)
        self.lin2 = nn.Linear(hidden_dim, dim)
        self.dropout = nn.Dropout(0.1)
        self.output_layer_norm = nn.LayerNorm(dim, eps=1e-12)

    def forward(self, x, attn_mask):
        sa_output = self.sa_layer_norm(self.attention(x, attn_mask) + x)
        ffn_output = self.dropout(self.lin2(nn.functional.gelu(self.lin1(sa_output))))
        return self.output_layer_norm(ffn_output + sa_output)


class DistilBertForSequenceClassification(nn.Module):
    def __init__(self, vocab_size=1000, dim=32, n_layers=2, n_heads=4, hidden_dim=64, num_labels=2):
        super().__init__()
        self.embeddings = Embeddings(vocab_size, dim, max_position_embeddings=64)
        self.layer = nn.ModuleList(
            TransformerBlock(dim, n_heads, hidden_dim) for _ in range(n_layers)
        )
        self.pre_classifier = nn.Linear(dim, dim)
        self.classifier = nn.Linear(dim, num_labels)
        self.dropout = nn.Dropout(0.2)

    def forward(self, input_ids=None, attention_mask=None):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        hidden_state = self.embeddings(input_ids)
        for layer_module in self.layer:
            hidden_state = layer_module(hidden_state, attention_mask)
        pooled_output = hidden_state[:, 0]
        pooled_output = nn.ReLU()(self.pre_classifier(pooled_output))
        logits = self.classifier(self.dropout(pooled_output))
        return {"logits": logits}


# onnx-export:
def export():
    from torch.onnx import export as onnx_export

    model = DistilBertForSequenceClassification()
    opset = 14
    output = Path("distilbert-text-classification.onnx")
    do_constant_folding = True
    no_dynamic_axes = False

    with torch.no_grad():
        model = model.eval()

        # config.generate_dummy_inputs(framework="pt"): batch_size=2, sequence_length=16
        dummy_inputs = {
            "input_ids": torch.randint(1, 1000, (2, 16)),
            "attention_mask": torch.ones(2, 16, dtype=torch.long),
        }
        # DistilBertOnnxConfig.inputs / the "text-classification" common outputs
        dynamic_axis = {0: "batch_size", 1: "sequence_length"}
        inputs = OrderedDict({"input_ids": dynamic_axis, "attention_mask": dynamic_axis})
        outputs = OrderedDict({"logits": {0: "batch_size"}})
        input_names = list(inputs.keys())
        output_names = list(outputs.keys())

        dynamix_axes = None if no_dynamic_axes else dict(chain(inputs.items(), outputs.items()))

        # Export can work with named args but the dict containing named args has to be the
        # last element of the args tuple.
        onnx_export(
            model,
            (dummy_inputs,),
            f=output.as_posix(),
            input_names=input_names,
            output_names=output_names,
            dynamic_axes=dynamix_axes,
            do_constant_folding=do_constant_folding,
            opset_version=opset,
            dynamo=False,  # torch dynamo not yet supported
        )


if __name__ == "__main__":
    export()
