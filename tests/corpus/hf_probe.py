"""Which transformers architectures build from a small config: found by trying, not by a
hand-made list.

For each model type of ``MODEL_MAPPING_NAMES`` a *probe* picks the model class (the causal-LM
class of a decoder-only model, so that tied embeddings and the LM head are exported too; the
seq2seq-LM class of an encoder–decoder; the base model otherwise), builds its config with
generic small overrides (every attribute that exists: hidden sizes, layer and head counts,
vocabulary, image size, ...), instantiates it with random weights and runs one eager forward
on inputs chosen by the model's ``main_input_name``. What builds and runs becomes an
:class:`ArchSpec` (rendered as a target file by :mod:`tests.corpus.hf_models`); what does not
is recorded as not buildable, with the reason.

Probing runs in worker subprocesses (``python -m tests.corpus.hf_probe TYPE...``, one JSON
line per type) and is cached under ``~/.cache/onnxlens/corpus/``, keyed by the toolchain's
versions and this file's hash.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.corpus.common import PYTHON, REPO, child_env, from_json, to_json
from tests.corpus.probing import (
    Log,
    ProbeTimeout,
    cache_file,
    emit,
    first_line,
    probe_cached,
    quiet,
    time_limit,
)

PROBE_SECONDS = 60  # an architecture whose build + eager forward takes longer is skipped
SLOW_EAGER_SECONDS = 3.0  # ... and one whose eager forward alone takes this long (its export
#                           would take minutes)
MAX_PARAMETERS = 30_000_000
BATCH, SEQUENCE, DECODER_SEQUENCE = 2, 8, 6

# Generic small values, applied to every config attribute of that name that exists (and, for
# composite configs, to their sub-configs).
SMALL: dict[str, int] = {
    "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "intermediate_size": 128, "head_dim": 16,
    "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 128,
    "d_model": 64, "d_ff": 128, "d_kv": 16, "num_layers": 2, "num_decoder_layers": 2,
    "num_heads": 4, "n_layers": 2, "n_heads": 4, "dim": 64, "hidden_dim": 128,
    "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
    "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128,
    "ffn_dim": 128, "embed_dim": 32, "projection_dim": 32, "vocab_size": 256,
    "image_size": 32, "patch_size": 4, "window_size": 2, "num_mel_bins": 16,
    "max_source_positions": 32,
    "num_conv_pos_embeddings": 16, "num_conv_pos_embedding_groups": 4,
    "state_size": 8, "time_step_rank": 8, "rotary_dim": 8,
    "kv_lora_rank": 16, "q_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8,
    "v_head_dim": 16, "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4,
    "num_experts_per_tok": 2, "moe_intermediate_size": 32, "n_shared_experts": 1,
}
# With per-stage lists (``depths``), these are derived from them.
STAGE_DERIVED = ("num_layers", "hidden_size", "num_hidden_layers", "num_stages")
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "num_decoder_layers", "n_layers",
              "encoder_layers", "decoder_layers")


@dataclass(frozen=True)
class InputSpec:
    name: str
    kind: str  # ids | float | ones
    shape: tuple[int, ...]
    high: int = 0  # ids are drawn from [0, high)


@dataclass
class ArchSpec:
    name: str  # the target's name, e.g. "hf.llama"
    model_type: str
    config_class: str
    model_class: str
    config_kwargs: dict[str, Any]
    inputs: list[InputSpec]
    dynamic_shapes: dict[str, dict[int, str]] | None = None
    prelude: list[str] = field(default_factory=list)  # module-level statements
    decode_step: bool = False  # the inputs carry a cache filled by a first eager call
    eager_seconds: float = 0.0
    parameters: int = 0

    @property
    def file_name(self) -> str:
        return self.name.replace(".", "_").replace("-", "_") + ".py"


@dataclass
class ProbeResult:
    model_type: str
    buildable: bool
    reason: str = ""
    spec: ArchSpec | None = None


# -- probing (in a worker process) -----------------------------------------------------------

def _class(name: str) -> Any:
    import transformers

    return getattr(transformers, name)


def choose_model_class(model_type: str, encoder_decoder: bool) -> str:
    from transformers.models.auto import modeling_auto as auto

    base = auto.MODEL_MAPPING_NAMES[model_type]
    base = base[0] if isinstance(base, (tuple, list)) else base
    for mapping in (auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
                    auto.MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES):
        if model_type in mapping:
            return mapping[model_type]
    if (model_type in auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and not encoder_decoder
            and model_type not in auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES):
        return auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type]
    return base


def _small_value(key: str, value: Any, vocab: int | None, small: dict[str, int]) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and key in small:
        return small[key]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) for v in value):
        count = len(value)
        if key == "depths":
            return [1] * count
        if key in ("hidden_sizes", "embed_dims", "dims"):
            return [16 * 2 ** i for i in range(count)]
        if key in ("num_heads", "num_attention_heads"):
            return [2] * count
        if key == "conv_dim":
            return [32] * count
        if key == "image_size":
            return [small["image_size"]] * count
    if (vocab is not None and isinstance(value, int) and key.endswith(("_token_id", "_token_index"))
            and value >= vocab):
        return vocab - 1 - (sum(map(ord, key)) % 16)
    if vocab is not None and key in ("begin_suppress_tokens", "suppress_tokens") and value:
        return None
    if (vocab is not None and key == "eos_token_id" and isinstance(value, list)):
        return [token if token < vocab else vocab - 1 for token in value]
    return value


LEVELS = {"small": SMALL, "small-image64": {**SMALL, "image_size": 64}, "layers": {}}


def small_kwargs(config: Any, level: str) -> dict[str, Any]:
    """Constructor keyword arguments that make ``config`` small. The "small" levels apply every
    generic override (images of 32 or 64 pixels); "layers" only fewer layers (for configs the
    generic values break)."""
    values = config.to_dict()
    sub_configs = set(getattr(config, "sub_configs", {}) or {})
    kwargs: dict[str, Any] = {}
    small = LEVELS[level]
    vocab = small["vocab_size"] if small and isinstance(values.get("vocab_size"), int) else None
    staged = isinstance(values.get("depths"), (list, tuple))
    for key, value in values.items():
        if staged and key in STAGE_DERIVED:
            continue  # computed from the per-stage lists
        if key in sub_configs and value is not None:
            sub = getattr(config, key, None)
            if sub is not None and hasattr(sub, "to_dict"):
                kwargs[key] = {"model_type": sub.model_type, **small_kwargs(sub, level)}
            continue
        if key == "use_cache" and value is True:
            kwargs[key] = False
            continue
        if level == "layers":
            if key in LAYER_KEYS and isinstance(value, int) and not isinstance(value, bool):
                kwargs[key] = 1
            continue
        new = _small_value(key, value, vocab, small)
        if new is not value and new != value:
            kwargs[key] = new
    return kwargs


def _signature(model: Any) -> set[str]:
    import inspect

    return set(inspect.signature(model.forward).parameters)


def _find(config: Any, key: str) -> Any:
    """``config.key``, else the first sub-config that has it."""
    value = getattr(config, key, None)
    if value is not None:
        return value
    for name in getattr(config, "sub_configs", {}) or {}:
        sub = getattr(config, name, None)
        if sub is not None and getattr(sub, key, None) is not None:
            return getattr(sub, key)
    for name in ("vision_config", "backbone_config", "encoder", "text_config"):
        sub = getattr(config, name, None)
        if sub is not None and getattr(sub, key, None) is not None:
            return getattr(sub, key)
    return None


def _vocab(config: Any, decoder: bool = False) -> int:
    for key in (("decoder_vocab_size",) if decoder else ()) + ("vocab_size",):
        value = _find(config, key)
        if isinstance(value, int) and value > 0:
            return value
    return 100


def input_candidates(model: Any, config: Any) -> list[list[InputSpec]]:
    """Input sets to try, by the model's ``main_input_name``."""
    main = getattr(model, "main_input_name", "input_ids")
    candidates: list[list[InputSpec]] = []
    if main == "input_ids":
        vocab = _vocab(config)
        candidates = [[InputSpec("input_ids", "ids", (BATCH, length), vocab)]
                      for length in (SEQUENCE, 16, 64)]
    elif main == "pixel_values":
        channels = _find(config, "num_channels") or 3
        size = _find(config, "image_size") or 32
        size = list(size) if isinstance(size, (list, tuple)) else [size, size]
        shapes = [tuple(size[:2]), (64, 64), (224, 224)]
        candidates = [[InputSpec("pixel_values", "float", (BATCH, channels, *hw))]
                      for hw in dict.fromkeys(shapes)]
    elif main == "input_features":
        mels = _find(config, "num_mel_bins")
        positions = _find(config, "max_source_positions")
        if mels and positions:
            candidates.append([InputSpec("input_features", "float", (BATCH, mels, 2 * positions))])
        feature = _find(config, "feature_size") or _find(config, "input_feat_per_channel")
        channels = _find(config, "input_channels") or 1
        if feature:
            candidates.append([InputSpec("input_features", "float",
                                         (BATCH, 64, feature * channels))])
            candidates.append([InputSpec("input_features", "float", (BATCH, feature, 64))])
        candidates.append([InputSpec("input_features", "float", (BATCH, 80, 64))])
    elif main == "input_values":
        candidates = [[InputSpec("input_values", "float", (BATCH, 1600))],
                      [InputSpec("input_values", "float", (BATCH, 1, 1600))]]
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in _signature(model):
        decoder = InputSpec("decoder_input_ids", "ids", (BATCH, DECODER_SEQUENCE),
                            _vocab(config, decoder=True))
        candidates = [[*inputs, decoder] for inputs in candidates]
    return candidates


def make_inputs(inputs: list[InputSpec]) -> dict[str, Any]:
    import torch

    made = {}
    for spec in inputs:
        if spec.kind == "ids":
            made[spec.name] = torch.randint(0, spec.high, spec.shape)
        elif spec.kind == "ones":
            made[spec.name] = torch.ones(spec.shape, dtype=torch.long)
        else:
            made[spec.name] = torch.randn(spec.shape)
    return made


def _parameters_on_meta(model_class: Any, config: Any) -> int:
    import torch

    with torch.device("meta"):
        model = model_class(config)
    return sum(parameter.numel() for parameter in model.parameters())


def probe(model_type: str) -> ProbeResult:
    import torch
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    try:
        config_class = CONFIG_MAPPING[model_type]
        default = config_class()
        model_class_name = choose_model_class(model_type, default.is_encoder_decoder)
        model_class = _class(model_class_name)
    except Exception as error:
        return ProbeResult(model_type, False, f"config or class: {first_line(error)}")
    reasons = []
    for level in LEVELS:
        if level == "small-image64" and _find(default, "image_size") is None:
            continue
        try:
            kwargs = small_kwargs(default, level)
            config = config_class(**kwargs)
            parameters = _parameters_on_meta(model_class, config)
        except Exception as error:
            reasons.append(f"{level} config: {first_line(error)}")
            continue
        if parameters > MAX_PARAMETERS:
            reasons.append(f"{level} config: {parameters / 1e6:.0f}M parameters")
            continue
        try:
            with time_limit(PROBE_SECONDS):
                torch.manual_seed(0)
                model = model_class(config).eval()
                candidates = input_candidates(model, config)
                if not candidates:
                    main = getattr(model, "main_input_name", "?")
                    reasons.append(f"main input `{main}` has no generic example")
                    break
                for inputs in candidates:
                    started = time.perf_counter()
                    try:
                        with torch.no_grad():
                            model(**make_inputs(inputs))
                    except ProbeTimeout:
                        raise
                    except Exception as error:
                        reasons.append(f"{level} eager {[i.shape for i in inputs]}: "
                                       f"{first_line(error)}")
                        continue
                    seconds = time.perf_counter() - started
                    if seconds > SLOW_EAGER_SECONDS:
                        reasons.append(f"{level}: too slow (eager forward {seconds:.1f} s "
                                       f"at {[i.shape for i in inputs]})")
                        break
                    spec = ArchSpec(f"hf.{model_type}", model_type, config_class.__name__,
                                    model_class_name, kwargs, inputs,
                                    eager_seconds=seconds,
                                    parameters=parameters)
                    return ProbeResult(model_type, True, spec=spec)
        except ProbeTimeout as error:
            reasons.append(f"{level}: build and eager forward took {error}")
        except Exception as error:
            reasons.append(f"{level} build: {first_line(error)}")
    return ProbeResult(model_type, False, " | ".join(reasons)[:1000])


def _worker(model_types: list[str]) -> None:
    quiet()
    for model_type in model_types:
        print(f"probing {model_type}", file=sys.stderr, flush=True)
        try:
            result = probe(model_type)
        except BaseException as error:  # one bad architecture ends nothing
            result = ProbeResult(model_type, False, f"probe: {first_line(error)}")
        emit({"name": model_type, **to_json(result)})


# -- probing (from the harness) --------------------------------------------------------------

def model_types() -> list[str]:
    result = subprocess.run([str(PYTHON), "-c", (
        "from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES as m;"
        "print('\\n'.join(sorted(m)))")], cwd=REPO, env=child_env(), capture_output=True,
        text=True, check=True)
    return result.stdout.split()


def probe_all(jobs: int = 2, *, types: list[str] | None = None,
              log: Log | None = None) -> list[ProbeResult]:
    """Probe every model type (or ``types``), ``jobs`` worker processes at a time; cached.
    The workers use every thread, as the checks do: the eager forward is timed."""
    wanted = types or model_types()
    found = probe_cached("tests.corpus.hf_probe", wanted,
                         cache_file("hf", Path(__file__), ("transformers",)), jobs=jobs,
                         item_seconds=PROBE_SECONDS * 3, log=log, env={})
    return [from_json(ProbeResult, {**{key: value for key, value in found[name].items()
                                       if key != "name"}, "model_type": name})
            for name in wanted]


def main(argv: list[str] | None = None) -> int:
    _worker(list(argv if argv is not None else sys.argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
