"""BERT feature-extraction export, modelled on transformers' old ``convert_graph_to_onnx.py``.

Source: https://github.com/huggingface/transformers
        src/transformers/convert_graph_to_onnx.py, ``convert_pytorch`` (torch >= 1.11 branch),
        at commit 01ccbea13800e6912c1e34cbece4311cd2b6b420 (the module was deprecated and
        later removed in transformers v5); the model is adapted from
        src/transformers/models/bert/modeling_bert.py (``BertModel``).
License: Apache-2.0, Copyright 2020 The HuggingFace Team.

Adapted: instead of a ``pipeline("feature-extraction", model="bert-base-cased")`` this file
defines a much reduced ``BertModel`` (embeddings, 2 post-LayerNorm encoder layers, pooler;
hidden size 32, random weights) that returns the tuple ``(last_hidden_state, pooler_output)``.
The tokenizer's output for "This is a sample output" (7 tokens) is replaced by random token
ids of the same shape. The names and dynamic axes are what ``infer_shapes`` and
``ensure_valid_input`` compute for BERT (inputs reordered to the forward signature, outputs
``output_0``/``output_1``); the opset is the converter's CLI default, 11.
"""

import math
from pathlib import Path

import torch
import torch.nn as nn


class BertEmbeddings(nn.Module):
    def __init__(self, vocab_size, hidden_size, max_position_embeddings, type_vocab_size):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size, padding_idx=0)
        self.position_embeddings = nn.Embedding(max_position_embeddings, hidden_size)
        self.token_type_embeddings = nn.Embedding(type_vocab_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=1e-12)
        self.dropout = nn.Dropout(0.1)
        self.register_buffer(
            "position_ids", torch.arange(max_position_embeddings).expand((1, -1)), persistent=False
        )

    def forward(self, input_ids, token_type_ids):
        seq_length = input_ids.size(1)
        position_ids = self.position_ids[:, :seq_length]
        embeddings = (
            self.word_embeddings(input_ids)
            + self.token_type_embeddings(token_type_ids)
            + self.position_embeddings(position_ids)
        )
        return self.dropout(self.LayerNorm(embeddings))


class BertLayer(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, intermediate_size):
        super().__init__()
        self.num_attention_heads = num_attention_heads
        self.attention_head_size = hidden_size // num_attention_heads
        self.query = nn.Linear(hidden_size, hidden_size)
        self.key = nn.Linear(hidden_size, hidden_size)
        self.value = nn.Linear(hidden_size, hidden_size)
        self.attention_output = nn.Linear(hidden_size, hidden_size)
        self.attention_norm = nn.LayerNorm(hidden_size, eps=1e-12)
        self.intermediate = nn.Linear(hidden_size, intermediate_size)
        self.output = nn.Linear(intermediate_size, hidden_size)
        self.output_norm = nn.LayerNorm(hidden_size, eps=1e-12)
        self.dropout = nn.Dropout(0.1)

    def transpose_for_scores(self, x):
        new_x_shape = (*x.size()[:-1], self.num_attention_heads, self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states, extended_attention_mask):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))

        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_scores = attention_scores + extended_attention_mask
        attention_probs = self.dropout(nn.functional.softmax(attention_scores, dim=-1))

        context_layer = torch.matmul(attention_probs, value_layer).permute(0, 2, 1, 3)
        context_layer = context_layer.contiguous()
        all_head_size = self.num_attention_heads * self.attention_head_size
        new_context_layer_shape = (*context_layer.size()[:-2], all_head_size)
        context_layer = context_layer.view(new_context_layer_shape)

        attention_output = self.dropout(self.attention_output(context_layer))
        attention_output = self.attention_norm(attention_output + hidden_states)
        intermediate_output = nn.functional.gelu(self.intermediate(attention_output))
        layer_output = self.dropout(self.output(intermediate_output))
        return self.output_norm(layer_output + attention_output)


class BertModel(nn.Module):
    def __init__(
        self,
        vocab_size=1000,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        type_vocab_size=2,
    ):
        super().__init__()
        self.embeddings = BertEmbeddings(
            vocab_size, hidden_size, max_position_embeddings, type_vocab_size
        )
        self.layer = nn.ModuleList(
            BertLayer(hidden_size, num_attention_heads, intermediate_size)
            for _ in range(num_hidden_layers)
        )
        self.pooler = nn.Linear(hidden_size, hidden_size)

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)

        # get_extended_attention_mask: [batch, seq] -> [batch, 1, 1, seq], 0 / large negative
        extended_attention_mask = attention_mask[:, None, None, :].to(dtype=torch.float32)
        extended_attention_mask = (1.0 - extended_attention_mask) * -10000.0

        hidden_states = self.embeddings(input_ids, token_type_ids)
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states, extended_attention_mask)

        pooled_output = torch.tanh(self.pooler(hidden_states[:, 0]))
        return hidden_states, pooled_output


# onnx-export:
def export():
    # convert_pytorch() imports the exporter locally, under the same name
    from torch.onnx import export

    model = BertModel().eval()
    opset = 11  # OnnxConverterArgumentParser: --opset default=11
    output = Path("bert-feature-extraction.onnx")

    # tokenizer("This is a sample output", return_tensors="pt"): batch 1, 7 tokens
    tokens = {
        "input_ids": torch.randint(1, 1000, (1, 7)),
        "token_type_ids": torch.zeros(1, 7, dtype=torch.long),
        "attention_mask": torch.ones(1, 7, dtype=torch.long),
    }
    # infer_shapes(): every input is {0: "batch", 1: "sequence"}; outputs flattened as output_i
    dynamic_axes = {
        "input_ids": {0: "batch", 1: "sequence"},
        "token_type_ids": {0: "batch", 1: "sequence"},
        "attention_mask": {0: "batch", 1: "sequence"},
        "output_0": {0: "batch", 1: "sequence"},
        "output_1": {0: "batch"},
    }
    output_names = ["output_0", "output_1"]
    # ensure_valid_input(): inputs in the order of BertModel.forward's parameters
    ordered_input_names = ["input_ids", "attention_mask", "token_type_ids"]
    model_args = tuple(tokens[name] for name in ordered_input_names)

    with torch.no_grad():
        export(
            model,
            model_args,
            f=output.as_posix(),
            input_names=ordered_input_names,
            output_names=output_names,
            dynamic_axes=dynamic_axes,
            do_constant_folding=True,
            opset_version=opset,
        )


if __name__ == "__main__":
    export()
