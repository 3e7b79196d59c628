"""The diffusers part of the corpus: a fixed list of model classes, each with a small config and
the inputs of its documented forward signature (both taken from the class's own unit test in
diffusers' repository, ``tests/models/**``: ``get_init_dict`` and ``get_dummy_inputs``, batch 2),
rendered as ordinary target files. The rule is in tests/corpus/README.md.

    python -m tests.corpus.diffusers_models NAME...   # probe these targets (one JSON line each)
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tests.corpus.probing import (
    Log,
    ProbeTimeout,
    cache_file,
    emit,
    first_line,
    package_version,
    probe_cached,
    quiet,
    time_limit,
)

MAX_PARAMETERS = 30_000_000
SLOW_EAGER_SECONDS = 3.0
BUILD_SECONDS = 120


@dataclass
class DiffusersSpec:
    name: str  # the target's name, e.g. "diffusers.UNet2DModel"
    model_class: str
    config: dict[str, Any]
    inputs: dict[str, str]  # keyword argument -> the expression that makes it
    dynamic_shapes: dict[str, dict[int, str] | None] | None = None

    @property
    def file_name(self) -> str:
        return self.name.replace(".", "_") + ".py"


def _spec(model_class: str, config: dict[str, Any], inputs: dict[str, str]) -> DiffusersSpec:
    return DiffusersSpec(f"diffusers.{model_class}", model_class, config, inputs)


_CROSS_ATTENTION_UNET = {
    "block_out_channels": (4, 8), "norm_num_groups": 4,
    "down_block_types": ("CrossAttnDownBlock2D", "DownBlock2D"),
    "up_block_types": ("UpBlock2D", "CrossAttnUpBlock2D"),
    "cross_attention_dim": 8, "attention_head_dim": 2, "out_channels": 4, "in_channels": 4,
    "layers_per_block": 1, "sample_size": 16,
}

#: The classes, in the order of the README: UNets, autoencoders, adapters, transformers.
MODELS: list[DiffusersSpec] = [
    _spec("UNet1DModel", {
        "block_out_channels": (8, 8, 16, 16), "in_channels": 14, "out_channels": 14,
        "time_embedding_type": "positional", "use_timestep_embedding": True,
        "flip_sin_to_cos": False, "freq_shift": 1.0, "out_block_type": "OutConv1DBlock",
        "mid_block_type": "MidResTemporalBlock1D",
        "down_block_types": ("DownResnetBlock1D",) * 4,
        "up_block_types": ("UpResnetBlock1D",) * 3, "act_fn": "swish",
    }, {"sample": "torch.randn(2, 14, 16)", "timestep": "torch.tensor([10, 10])"}),
    _spec("UNet2DModel", {
        "block_out_channels": (4, 8), "norm_num_groups": 2,
        "down_block_types": ("DownBlock2D", "AttnDownBlock2D"),
        "up_block_types": ("AttnUpBlock2D", "UpBlock2D"), "attention_head_dim": 3,
        "out_channels": 3, "in_channels": 3, "layers_per_block": 2, "sample_size": 32,
    }, {"sample": "torch.randn(2, 3, 32, 32)", "timestep": "torch.tensor([10])"}),
    _spec("UNet2DConditionModel", dict(_CROSS_ATTENTION_UNET), {
        "sample": "torch.randn(2, 4, 16, 16)", "timestep": "torch.tensor([10])",
        "encoder_hidden_states": "torch.randn(2, 4, 8)"}),
    _spec("UNet3DConditionModel", {
        **_CROSS_ATTENTION_UNET,
        "down_block_types": ("CrossAttnDownBlock3D", "DownBlock3D"),
        "up_block_types": ("UpBlock3D", "CrossAttnUpBlock3D"),
    }, {"sample": "torch.randn(2, 4, 4, 16, 16)", "timestep": "torch.tensor([10])",
        "encoder_hidden_states": "torch.randn(2, 4, 8)"}),
    _spec("UNetSpatioTemporalConditionModel", {
        "block_out_channels": (32, 64),
        "down_block_types": ("CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"),
        "up_block_types": ("UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"),
        "cross_attention_dim": 32, "num_attention_heads": 8, "out_channels": 4,
        "in_channels": 4, "layers_per_block": 2, "sample_size": 32,
        "projection_class_embeddings_input_dim": 96, "addition_time_embed_dim": 32,
    }, {"sample": "torch.randn(2, 2, 4, 32, 32)", "timestep": "torch.tensor([10])",
        "encoder_hidden_states": "torch.randn(2, 1, 32)",
        "added_time_ids": "torch.tensor([[6, 127, 0.02], [6, 127, 0.02]])"}),
    _spec("AutoencoderKL", {
        "block_out_channels": [2, 4], "in_channels": 3, "out_channels": 3,
        "down_block_types": ["DownEncoderBlock2D"] * 2, "up_block_types": ["UpDecoderBlock2D"] * 2,
        "latent_channels": 4, "norm_num_groups": 2,
    }, {"sample": "torch.randn(2, 3, 32, 32)"}),
    _spec("AutoencoderTiny", {
        "in_channels": 3, "out_channels": 3, "encoder_block_out_channels": [32, 32],
        "decoder_block_out_channels": [32, 32], "num_encoder_blocks": [1, 1],
        "num_decoder_blocks": [1, 1],
    }, {"sample": "torch.randn(2, 3, 32, 32)"}),
    _spec("VQModel", {
        "block_out_channels": [8, 16], "norm_num_groups": 8, "in_channels": 3,
        "out_channels": 3, "down_block_types": ["DownEncoderBlock2D"] * 2,
        "up_block_types": ["UpDecoderBlock2D"] * 2, "latent_channels": 3,
    }, {"sample": "torch.randn(2, 3, 32, 32)"}),
    _spec("AutoencoderDC", {
        "in_channels": 3, "latent_channels": 4, "attention_head_dim": 2,
        "encoder_block_types": ("ResBlock", "EfficientViTBlock"),
        "decoder_block_types": ("ResBlock", "EfficientViTBlock"),
        "encoder_block_out_channels": (8, 8), "decoder_block_out_channels": (8, 8),
        "encoder_qkv_multiscales": ((), (5,)), "decoder_qkv_multiscales": ((), (5,)),
        "encoder_layers_per_block": (1, 1), "decoder_layers_per_block": [1, 1],
        "downsample_block_type": "conv", "upsample_block_type": "interpolate",
        "decoder_norm_types": "rms_norm", "decoder_act_fns": "silu", "scaling_factor": 0.41407,
    }, {"sample": "torch.randn(2, 3, 32, 32)"}),
    _spec("AutoencoderKLWan", {
        "base_dim": 3, "z_dim": 16, "dim_mult": [1, 1, 1, 1], "num_res_blocks": 1,
        "temperal_downsample": [False, True, True],
    }, {"sample": "torch.randn(2, 3, 9, 16, 16)"}),
    _spec("AutoencoderKLCogVideoX", {
        "in_channels": 3, "out_channels": 3, "down_block_types": ("CogVideoXDownBlock3D",) * 4,
        "up_block_types": ("CogVideoXUpBlock3D",) * 4, "block_out_channels": (8, 8, 8, 8),
        "latent_channels": 4, "layers_per_block": 1, "norm_num_groups": 2,
        "temporal_compression_ratio": 4,
    }, {"sample": "torch.randn(2, 3, 8, 16, 16)"}),
    _spec("AutoencoderOobleck", {
        "encoder_hidden_size": 12, "decoder_channels": 12, "decoder_input_channels": 6,
        "audio_channels": 2, "downsampling_ratios": [2, 4], "channel_multiples": [1, 2],
    }, {"sample": "torch.randn(2, 2, 24)", "sample_posterior": "False"}),
    _spec("ControlNetModel", {
        key: value for key, value in _CROSS_ATTENTION_UNET.items()
        if key not in ("up_block_types", "out_channels", "sample_size")
    } | {"conditioning_embedding_out_channels": (4, 8)}, {
        "sample": "torch.randn(2, 4, 16, 16)", "timestep": "torch.tensor([10])",
        "encoder_hidden_states": "torch.randn(2, 4, 8)",
        "controlnet_cond": "torch.randn(2, 3, 32, 32)"}),
    _spec("T2IAdapter", {
        "in_channels": 3, "channels": [8, 16], "num_res_blocks": 1, "downscale_factor": 8,
        "adapter_type": "full_adapter",
    }, {"x": "torch.randn(2, 3, 64, 64)"}),
    _spec("PriorTransformer", {
        "num_attention_heads": 2, "attention_head_dim": 4, "num_layers": 2, "embedding_dim": 8,
        "num_embeddings": 7, "additional_embeddings": 4,
    }, {"hidden_states": "torch.randn(2, 8)", "timestep": "2",
        "proj_embedding": "torch.randn(2, 8)", "encoder_hidden_states": "torch.randn(2, 7, 8)"}),
    _spec("DiTTransformer2DModel", {
        "in_channels": 4, "out_channels": 8, "activation_fn": "gelu-approximate",
        "num_attention_heads": 2, "attention_head_dim": 4, "attention_bias": True,
        "num_layers": 1, "norm_type": "ada_norm_zero", "num_embeds_ada_norm": 8,
        "patch_size": 2, "sample_size": 8,
    }, {"hidden_states": "torch.randn(2, 4, 8, 8)", "timestep": "torch.randint(0, 1000, (2,))",
        "class_labels": "torch.randint(0, 4, (2,))"}),
    _spec("PixArtTransformer2DModel", {
        "sample_size": 8, "num_layers": 1, "patch_size": 2, "attention_head_dim": 2,
        "num_attention_heads": 2, "in_channels": 4, "cross_attention_dim": 8,
        "out_channels": 8, "attention_bias": True, "activation_fn": "gelu-approximate",
        "num_embeds_ada_norm": 8, "norm_type": "ada_norm_single",
        "norm_elementwise_affine": False, "norm_eps": 1e-6, "use_additional_conditions": False,
        "caption_channels": None,
    }, {"hidden_states": "torch.randn(2, 4, 8, 8)", "timestep": "torch.randint(0, 1000, (2,))",
        "encoder_hidden_states": "torch.randn(2, 8, 8)",
        "added_cond_kwargs": '{"aspect_ratio": None, "resolution": None}'}),
    _spec("SD3Transformer2DModel", {
        "sample_size": 32, "patch_size": 1, "in_channels": 4, "num_layers": 4,
        "attention_head_dim": 8, "num_attention_heads": 4, "caption_projection_dim": 32,
        "joint_attention_dim": 32, "pooled_projection_dim": 64, "out_channels": 4,
        "pos_embed_max_size": 96, "dual_attention_layers": (), "qk_norm": None,
    }, {"hidden_states": "torch.randn(2, 4, 32, 32)",
        "encoder_hidden_states": "torch.randn(2, 154, 32)",
        "pooled_projections": "torch.randn(2, 64)", "timestep": "torch.randint(0, 1000, (2,))"}),
    _spec("FluxTransformer2DModel", {
        "patch_size": 1, "in_channels": 4, "num_layers": 1, "num_single_layers": 1,
        "attention_head_dim": 16, "num_attention_heads": 2, "joint_attention_dim": 32,
        "pooled_projection_dim": 32, "axes_dims_rope": [4, 4, 8],
    }, {"hidden_states": "torch.randn(2, 16, 4)", "encoder_hidden_states": "torch.randn(2, 48, 32)",
        "pooled_projections": "torch.randn(2, 32)", "img_ids": "torch.randn(16, 3)",
        "txt_ids": "torch.randn(48, 3)", "timestep": "torch.tensor([1.0, 1.0])"}),
    _spec("Flux2Transformer2DModel", {
        "patch_size": 1, "in_channels": 4, "num_layers": 1, "num_single_layers": 1,
        "attention_head_dim": 16, "num_attention_heads": 2, "joint_attention_dim": 32,
        "timestep_guidance_channels": 256, "axes_dims_rope": [4, 4, 4, 4],
    }, {"hidden_states": "torch.randn(2, 16, 4)", "encoder_hidden_states": "torch.randn(2, 48, 32)",
        "img_ids": "torch.cartesian_prod(torch.arange(1), torch.arange(4), torch.arange(4), "
                   "torch.arange(1)).unsqueeze(0).expand(2, -1, -1)",
        "txt_ids": "torch.cartesian_prod(torch.arange(1), torch.arange(1), torch.arange(1), "
                   "torch.arange(48)).unsqueeze(0).expand(2, -1, -1)",
        "timestep": "torch.tensor([1.0, 1.0])", "guidance": "torch.tensor([1.0, 1.0])"}),
    _spec("AuraFlowTransformer2DModel", {
        "sample_size": 32, "patch_size": 2, "in_channels": 4, "num_mmdit_layers": 1,
        "num_single_dit_layers": 1, "attention_head_dim": 8, "num_attention_heads": 4,
        "caption_projection_dim": 32, "joint_attention_dim": 32, "out_channels": 4,
        "pos_embed_max_size": 256,
    }, {"hidden_states": "torch.randn(2, 4, 32, 32)",
        "encoder_hidden_states": "torch.randn(2, 256, 32)",
        "timestep": "torch.randint(0, 1000, (2,))"}),
    _spec("SanaTransformer2DModel", {
        "patch_size": 1, "in_channels": 4, "out_channels": 4, "num_layers": 1,
        "attention_head_dim": 4, "num_attention_heads": 2, "num_cross_attention_heads": 2,
        "cross_attention_head_dim": 4, "cross_attention_dim": 8, "caption_channels": 8,
        "sample_size": 32,
    }, {"hidden_states": "torch.randn(2, 4, 32, 32)",
        "encoder_hidden_states": "torch.randn(2, 8, 8)",
        "timestep": "torch.randint(0, 1000, (2,))"}),
    _spec("HunyuanDiT2DModel", {
        "sample_size": 8, "patch_size": 2, "in_channels": 4, "num_layers": 1,
        "attention_head_dim": 8, "num_attention_heads": 2, "cross_attention_dim": 8,
        "cross_attention_dim_t5": 8, "pooled_projection_dim": 4, "hidden_size": 16,
        "text_len": 4, "text_len_t5": 4, "activation_fn": "gelu-approximate",
    }, {"hidden_states": "torch.randn(2, 4, 8, 8)", "encoder_hidden_states": "torch.randn(2, 4, 8)",
        "text_embedding_mask": "torch.ones(2, 4)",
        "encoder_hidden_states_t5": "torch.randn(2, 4, 8)",
        "text_embedding_mask_t5": "torch.ones(2, 4)",
        "timestep": "torch.randint(0, 1000, (2,)).float()",
        "image_meta_size": "torch.tensor([[1024.0, 1024, 16, 16, 0, 0]] * 2)",
        "style": "torch.zeros(2, dtype=torch.long)",
        "image_rotary_emb": "[torch.ones(1, 8), torch.zeros(1, 8)]"}),
    _spec("Lumina2Transformer2DModel", {
        "sample_size": 16, "patch_size": 2, "in_channels": 4, "hidden_size": 24,
        "num_layers": 2, "num_refiner_layers": 1, "num_attention_heads": 3, "num_kv_heads": 1,
        "multiple_of": 2, "ffn_dim_multiplier": None, "norm_eps": 1e-5, "scaling_factor": 1.0,
        "axes_dim_rope": (4, 2, 2), "axes_lens": (128, 128, 128), "cap_feat_dim": 32,
    }, {"hidden_states": "torch.randn(2, 4, 16, 16)",
        "encoder_hidden_states": "torch.randn(2, 16, 32)", "timestep": "torch.rand(2)",
        "encoder_attention_mask": "torch.ones(2, 16, dtype=torch.bool)"}),
    _spec("CogVideoXTransformer3DModel", {
        "num_attention_heads": 2, "attention_head_dim": 8, "in_channels": 4, "out_channels": 4,
        "time_embed_dim": 2, "text_embed_dim": 8, "num_layers": 2, "sample_width": 8,
        "sample_height": 8, "sample_frames": 8, "patch_size": 2, "patch_size_t": None,
        "temporal_compression_ratio": 4, "max_text_seq_length": 8,
    }, {"hidden_states": "torch.randn(2, 1, 4, 8, 8)",
        "encoder_hidden_states": "torch.randn(2, 8, 8)",
        "timestep": "torch.randint(0, 1000, (2,))"}),
    _spec("CogView4Transformer2DModel", {
        "patch_size": 2, "in_channels": 4, "num_layers": 2, "attention_head_dim": 4,
        "num_attention_heads": 4, "out_channels": 4, "text_embed_dim": 8, "time_embed_dim": 8,
        "condition_dim": 4,
    }, {"hidden_states": "torch.randn(2, 4, 8, 8)", "encoder_hidden_states": "torch.randn(2, 8, 8)",
        "timestep": "torch.randint(0, 1000, (2,))",
        "original_size": "torch.tensor([[64, 64], [64, 64]])",
        "target_size": "torch.tensor([[64, 64], [64, 64]])",
        "crop_coords": "torch.tensor([[0, 0], [0, 0]])"}),
    _spec("WanTransformer3DModel", {
        "patch_size": (1, 2, 2), "num_attention_heads": 2, "attention_head_dim": 12,
        "in_channels": 4, "out_channels": 4, "text_dim": 16, "freq_dim": 256, "ffn_dim": 32,
        "num_layers": 2, "cross_attn_norm": True, "qk_norm": "rms_norm_across_heads",
        "rope_max_seq_len": 32,
    }, {"hidden_states": "torch.randn(2, 4, 2, 16, 16)",
        "encoder_hidden_states": "torch.randn(2, 12, 16)",
        "timestep": "torch.randint(0, 1000, (2,))"}),
    _spec("LTXVideoTransformer3DModel", {
        "in_channels": 4, "out_channels": 4, "num_attention_heads": 2, "attention_head_dim": 8,
        "cross_attention_dim": 16, "num_layers": 1, "qk_norm": "rms_norm_across_heads",
        "caption_channels": 16,
    }, {"hidden_states": "torch.randn(2, 512, 4)",
        "encoder_hidden_states": "torch.randn(2, 16, 16)",
        "timestep": "torch.randint(0, 1000, (2,))",
        "encoder_attention_mask": "torch.ones(2, 16, dtype=torch.bool)",
        "num_frames": "2", "height": "16", "width": "16"}),
    _spec("MochiTransformer3DModel", {
        "patch_size": 2, "num_attention_heads": 2, "attention_head_dim": 8, "num_layers": 2,
        "pooled_projection_dim": 16, "in_channels": 4, "out_channels": None,
        "qk_norm": "rms_norm", "text_embed_dim": 16, "time_embed_dim": 4,
        "activation_fn": "swiglu", "max_sequence_length": 16,
    }, {"hidden_states": "torch.randn(2, 4, 2, 16, 16)",
        "encoder_hidden_states": "torch.randn(2, 16, 16)",
        "timestep": "torch.randint(0, 1000, (2,))",
        "encoder_attention_mask": "torch.ones(2, 16, dtype=torch.bool)"}),
    _spec("LatteTransformer3DModel", {
        "sample_size": 8, "num_layers": 1, "patch_size": 2, "attention_head_dim": 4,
        "num_attention_heads": 2, "caption_channels": 8, "in_channels": 4,
        "cross_attention_dim": 8, "out_channels": 8, "attention_bias": True,
        "activation_fn": "gelu-approximate", "num_embeds_ada_norm": 1000,
        "norm_type": "ada_norm_single", "norm_elementwise_affine": False, "norm_eps": 1e-6,
    }, {"hidden_states": "torch.randn(2, 4, 1, 8, 8)",
        "encoder_hidden_states": "torch.randn(2, 8, 8)",
        "timestep": "torch.randint(0, 1000, (2,))", "enable_temporal_attentions": "True"}),
    _spec("HunyuanVideoTransformer3DModel", {
        "in_channels": 4, "out_channels": 4, "num_attention_heads": 2, "attention_head_dim": 10,
        "num_layers": 1, "num_single_layers": 1, "num_refiner_layers": 1, "patch_size": 1,
        "patch_size_t": 1, "guidance_embeds": True, "text_embed_dim": 16,
        "pooled_projection_dim": 8, "rope_axes_dim": (2, 4, 4), "image_condition_type": None,
    }, {"hidden_states": "torch.randn(2, 4, 1, 16, 16)",
        "timestep": "torch.randint(0, 1000, (2,)).float()",
        "encoder_hidden_states": "torch.randn(2, 12, 16)",
        "pooled_projections": "torch.randn(2, 8)",
        "encoder_attention_mask": "torch.ones(2, 12)",
        "guidance": "torch.randint(0, 1000, (2,)).float()"}),
    _spec("QwenImageTransformer2DModel", {
        "patch_size": 2, "in_channels": 16, "out_channels": 4, "num_layers": 2,
        "attention_head_dim": 16, "num_attention_heads": 4, "joint_attention_dim": 16,
        "guidance_embeds": False, "axes_dims_rope": (8, 4, 4),
    }, {"hidden_states": "torch.randn(2, 16, 16)", "encoder_hidden_states": "torch.randn(2, 8, 16)",
        "encoder_hidden_states_mask": "torch.ones(2, 8, dtype=torch.long)",
        "timestep": "torch.tensor([1.0, 1.0])", "img_shapes": "[(1, 4, 4)] * 2"}),
    _spec("ZImageTransformer2DModel", {
        "all_patch_size": (2,), "all_f_patch_size": (1,), "in_channels": 16, "dim": 16,
        "n_layers": 1, "n_refiner_layers": 1, "n_heads": 1, "n_kv_heads": 2, "qk_norm": True,
        "cap_feat_dim": 16, "rope_theta": 256.0, "t_scale": 1000.0, "axes_dims": [8, 4, 4],
        "axes_lens": [256, 32, 32],
    }, {"x": "[torch.randn(16, 1, 16, 16), torch.randn(16, 1, 16, 16)]",
        "cap_feats": "[torch.randn(16, 16), torch.randn(16, 16)]",
        "t": "torch.tensor([0.0, 0.0])"}),
]

_BATCH = {0: "batch"}
_IMAGE = {0: "batch", 2: "height", 3: "width"}
#: the dynamic-shape variants: class -> each keyword argument's dynamic axes
DYNAMIC: dict[str, dict[str, dict[int, str] | None]] = {
    "UNet2DModel": {"sample": _IMAGE, "timestep": None},
    "UNet2DConditionModel": {"sample": _IMAGE, "timestep": None,
                             "encoder_hidden_states": _BATCH},
    "AutoencoderKL": {"sample": _IMAGE},
    "SD3Transformer2DModel": {"hidden_states": _BATCH, "encoder_hidden_states": _BATCH,
                              "pooled_projections": _BATCH, "timestep": _BATCH},
    "FluxTransformer2DModel": {"hidden_states": _BATCH, "encoder_hidden_states": _BATCH,
                               "pooled_projections": _BATCH, "img_ids": None, "txt_ids": None,
                               "timestep": _BATCH},
    "DiTTransformer2DModel": {"hidden_states": _BATCH, "timestep": _BATCH,
                              "class_labels": _BATCH},
}


def variants(buildable: set[str]) -> list[DiffusersSpec]:
    """Every buildable class's target, plus the dynamic-shape variants."""
    out: list[DiffusersSpec] = []
    for spec in MODELS:
        if spec.name not in buildable:
            continue
        out.append(spec)
        if spec.model_class in DYNAMIC:
            out.append(replace(spec, name=f"{spec.name}.dynamic",
                               dynamic_shapes=DYNAMIC[spec.model_class]))
    return out


def render(spec: DiffusersSpec) -> str:
    """The target file a user would write for ``spec``."""
    from tests.corpus.hf_models import _call

    pragma = [f'# onnx-export: name="{spec.name}"' + ("," if spec.dynamic_shapes else "")]
    if spec.dynamic_shapes:
        pragma.append("#     dynamic_shapes={")
        pragma += [f'#         "{name}": ' + repr(dims).replace("'", '"') + ","
                   for name, dims in spec.dynamic_shapes.items()]
        pragma.append("#     }")
    inputs = "".join(f'\n        "{name}": {expression},'
                     for name, expression in spec.inputs.items())
    lines = [
        f'"""diffusers\' `{spec.model_class}` from a small config with random weights.\n\n'
        f'Generated by tests/corpus for diffusers {package_version("diffusers")}."""',
        "",
        "import torch",
        f"from diffusers import {spec.model_class}",
        "",
        "",
        *pragma,
        "def build_model():",
        "    torch.manual_seed(0)",
        f"    model = {_call(spec.model_class, spec.config, '    ')}.eval()",
        f"    return model, (), {{{inputs}\n    }}",
    ]
    return "\n".join(lines) + "\n"


# -- probing (in a worker process) -----------------------------------------------------------

def probe(spec: DiffusersSpec) -> dict[str, Any]:
    import runpy

    import torch

    result: dict[str, Any] = {"name": spec.name, "buildable": False}
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / spec.file_name
        path.write_text(render(spec), encoding="utf-8")
        try:
            with time_limit(BUILD_SECONDS):
                namespace = runpy.run_path(str(path))
                model, args, kwargs = namespace["build_model"]()
                parameters = sum(parameter.numel() for parameter in model.parameters())
                if parameters > MAX_PARAMETERS:
                    result["reason"] = f"{parameters / 1e6:.0f}M parameters"
                    return result
                started = time.perf_counter()
                with torch.no_grad():
                    model(*args, **kwargs)
                seconds = time.perf_counter() - started
        except ProbeTimeout as error:
            result["reason"] = f"build and eager forward took {error}"
            return result
        except Exception as error:
            result["reason"] = f"build or eager forward: {first_line(error)}"
            return result
    if seconds > SLOW_EAGER_SECONDS:
        result["reason"] = f"too slow (eager forward {seconds:.1f} s)"
        return result
    result.update(buildable=True, parameters=parameters, eager_seconds=round(seconds, 3))
    return result


def _worker(names: list[str]) -> None:
    quiet()
    by_name = {spec.name: spec for spec in MODELS}
    for name in names:
        print(f"probing {name}", file=sys.stderr, flush=True)
        try:
            result = probe(by_name[name])
        except BaseException as error:  # one bad class ends nothing
            result = {"name": name, "buildable": False, "reason": f"probe: {first_line(error)}"}
        emit(result)


# -- from the harness ------------------------------------------------------------------------

def probe_all(names: list[str] | None = None, jobs: int = 2,
              log: Log | None = None) -> dict[str, dict[str, Any]]:
    wanted = names if names is not None else [spec.name for spec in MODELS]
    cache = cache_file("diffusers", Path(__file__), ("diffusers",))
    return probe_cached("tests.corpus.diffusers_models", wanted, cache, jobs=jobs,
                        item_seconds=BUILD_SECONDS * 2, log=log)


def main(argv: list[str] | None = None) -> int:
    _worker(list(argv if argv is not None else sys.argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
