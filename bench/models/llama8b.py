"""Benchmark model for the 8 B-parameter goal: a Llama-3-8B-shaped configuration of
transformers' Llama (32 layers, hidden size 4096; 32 GB of float32 weights, more than this
machine's memory), checked without weights."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM


# onnx-export: name="Llama8B", weights="none"
def build_llama_8b():
    config = LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                         num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                         max_position_embeddings=8192, use_cache=False)
    return LlamaForCausalLM(config).eval(), (), {"input_ids": torch.randint(0, 128256, (1, 16))}
