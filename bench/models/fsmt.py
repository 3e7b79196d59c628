"""transformers' FSMT (an encoder–decoder translation model) from a small config with random
weights: torch.export fails on it (a real model whose capture fails)."""

import torch
from transformers import FSMTConfig, FSMTForConditionalGeneration


# onnx-export: name="FSMT"
def build_fsmt():
    torch.manual_seed(0)
    config = FSMTConfig(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                        decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                        use_cache=False)
    model = FSMTForConditionalGeneration(config).eval()
    return model, (), {"input_ids": torch.randint(0, 1000, (2, 8)),
                       "decoder_input_ids": torch.randint(0, 1000, (2, 6))}
