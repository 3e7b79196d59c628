"""A real decoder for the benchmarks: transformers' Llama from a small config (2 layers,
hidden size 64), random weights."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM


# onnx-export: name="Llama"
def build_llama():
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, head_dim=16,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         use_cache=False)
    return LlamaForCausalLM(config).eval(), (), {"input_ids": torch.randint(0, 256, (2, 8))}
