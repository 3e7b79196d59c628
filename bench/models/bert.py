"""A real encoder for the benchmarks: transformers' BERT from a small config (2 layers,
hidden size 64), random weights."""

import torch
from transformers import BertConfig, BertModel


# onnx-export: name="Bert"
def build_bert():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                        num_hidden_layers=2, num_attention_heads=4)
    return BertModel(config).eval(), (), {"input_ids": torch.randint(0, 256, (2, 8))}
