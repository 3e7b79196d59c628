"""The timm part of the corpus: one model per architecture family of the pinned timm, chosen by
trying (the rule is in tests/corpus/README.md), each rendered as an ordinary target file.

A family is a module of timm (``timm.list_modules()``). Its probe counts the parameters of each of
the family's models on the meta device, then builds the smallest ones for real (timm's own
``test_*`` models last) until one runs its eager forward within the limits.

    python -m tests.corpus.timm_models MODULE...   # probe these families (one JSON line each)
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.corpus.common import PYTHON, REPO, child_env
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
BUILD_SECONDS = 60  # build + eager forward of one try
TRIES = 3
BATCH = 2
#: families with a batch-dynamic variant; of those, the ones whose height and width are dynamic too
DYNAMIC_FAMILIES = ("resnet", "vision_transformer", "convnext", "efficientnet", "mobilenetv3",
                    "swin_transformer")
DYNAMIC_HW_FAMILIES = ("resnet", "efficientnet")


@dataclass
class TimmSpec:
    name: str  # the target's name, e.g. "timm.resnet10t"
    model: str  # timm's model name
    family: str
    input_size: tuple[int, ...]
    dynamic_shapes: str = ""  # the pragma's value, e.g. '({0: "batch"},)'

    @property
    def file_name(self) -> str:
        return self.name.replace(".", "_").replace("-", "_") + ".py"


# -- probing (in a worker process) -----------------------------------------------------------

def _parameters_on_meta(name: str) -> int:
    import timm
    import torch

    with torch.device("meta"):
        model = timm.create_model(name, pretrained=False, exportable=True)
    return sum(parameter.numel() for parameter in model.parameters())


def probe_family(family: str) -> dict[str, Any]:
    import timm
    import torch

    sized: list[tuple[bool, int, str]] = []
    meta_errors: list[str] = []
    for name in timm.list_models(module=family):
        try:
            sized.append((name.startswith("test_"), _parameters_on_meta(name), name))
        except Exception as error:
            meta_errors.append(f"{name} on meta: {first_line(error)}")
    result: dict[str, Any] = {"name": family, "buildable": False, "models": len(sized)}
    candidates = sorted(entry for entry in sized if entry[1] <= MAX_PARAMETERS)
    if not candidates:
        smallest = min(sized, key=lambda entry: entry[1], default=None)
        result["reason"] = (f"every model over {MAX_PARAMETERS / 1e6:.0f}M parameters "
                            f"(smallest: {smallest[2]}, {smallest[1] / 1e6:.0f}M)" if smallest
                            else "no model built on the meta device: "
                            + " | ".join(meta_errors[:3]))[:1000]
        return result
    reasons = []
    for _, parameters, name in candidates[:TRIES]:
        try:
            with time_limit(BUILD_SECONDS):
                torch.manual_seed(0)
                model = timm.create_model(name, pretrained=False, exportable=True).eval()
                input_size = tuple(model.pretrained_cfg.get("input_size") or (3, 224, 224))
                example = torch.randn(BATCH, *input_size)
                started = time.perf_counter()
                with torch.no_grad():
                    model(example)
                seconds = time.perf_counter() - started
        except ProbeTimeout as error:
            reasons.append(f"{name}: build and eager forward took {error}")
            continue
        except Exception as error:
            reasons.append(f"{name}: {first_line(error)}")
            continue
        if seconds > SLOW_EAGER_SECONDS:
            reasons.append(f"{name}: too slow (eager forward {seconds:.1f} s at "
                           f"{(BATCH, *input_size)})")
            continue
        result.update(buildable=True, model=name, parameters=parameters,
                      input_size=list(input_size), eager_seconds=round(seconds, 3))
        return result
    result["reason"] = " | ".join(reasons)[:1000]
    return result


def _worker(families: list[str]) -> None:
    quiet()
    for family in families:
        print(f"probing {family}", file=sys.stderr, flush=True)
        try:
            result = probe_family(family)
        except BaseException as error:  # one bad family ends nothing
            result = {"name": family, "buildable": False, "reason": f"probe: {first_line(error)}"}
        emit(result)


# -- from the harness ------------------------------------------------------------------------

def timm_families() -> tuple[list[str] | None, str]:
    """timm's modules, asked in a subprocess (timm imports torchvision, which may not import
    beside this torch, and may break what imports after it); (None, why) when timm does not
    import here."""
    if package_version("timm") is None:
        return None, "timm is not installed (the `timm` extra: pip install timm==1.0.31 torch==...)"
    process = subprocess.run(
        [str(PYTHON), "-c", "import json, timm; print(json.dumps(sorted(timm.list_modules())))"],
        cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=300)
    if process.returncode != 0:
        lines = [line for line in process.stderr.strip().splitlines() if line.strip()]
        why = lines[-1] if lines else f"exit status {process.returncode}"
        return None, (f"timm {package_version('timm')} does not import beside torch "
                      f"{package_version('torch')} (torchvision {package_version('torchvision')}"
                      f"): {why}")[:1000]
    return json.loads(process.stdout.strip().splitlines()[-1]), ""


def probe_all(families: list[str], jobs: int = 2,
              log: Log | None = None) -> dict[str, dict[str, Any]]:
    cache = cache_file("timm", Path(__file__), ("timm", "torchvision"))
    return probe_cached("tests.corpus.timm_models", families, cache, jobs=jobs,
                        item_seconds=900, log=log)


def specs(probed: dict[str, dict[str, Any]]) -> list[TimmSpec]:
    """Every buildable family's model, plus the dynamic-shape variants."""
    out: list[TimmSpec] = []
    for family, result in probed.items():
        if not result.get("buildable"):
            continue
        spec = TimmSpec(f"timm.{result['model']}", result["model"], family,
                        tuple(result["input_size"]))
        out.append(spec)
        if family in DYNAMIC_FAMILIES:
            out.append(TimmSpec(f"{spec.name}.dynamic", spec.model, family, spec.input_size,
                                '({0: "batch"},)'))
        if family in DYNAMIC_HW_FAMILIES:
            out.append(TimmSpec(f"{spec.name}.dynamic_hw", spec.model, family, spec.input_size,
                                '({0: "batch", 2: "height", 3: "width"},)'))
    return out


def render(spec: TimmSpec) -> str:
    """The target file a user would write for ``spec``."""
    pragma = f'# onnx-export: name="{spec.name}"'
    if spec.dynamic_shapes:
        pragma += f", dynamic_shapes={spec.dynamic_shapes}"
    shape = ", ".join(str(size) for size in (BATCH, *spec.input_size))
    return (
        f'"""timm\'s `{spec.model}` (family `{spec.family}`), random weights.\n\n'
        f'Generated by tests/corpus for timm {package_version("timm")}."""\n'
        "\n"
        "import timm\n"
        "import torch\n"
        "\n"
        "\n"
        f"{pragma}\n"
        "def build_model():\n"
        "    torch.manual_seed(0)\n"
        f'    model = timm.create_model("{spec.model}", pretrained=False, exportable=True).eval()\n'
        f"    return model, (torch.randn({shape}),)\n"
    )


def main(argv: list[str] | None = None) -> int:
    _worker(list(argv if argv is not None else sys.argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
