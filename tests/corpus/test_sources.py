"""The corpus's timm and diffusers sources (tests/corpus/timm_models.py,
tests/corpus/diffusers_models.py): each generated target file is well formed — the static
discovery finds its one target with the declared dynamic shapes, and its builder makes a model
that runs in eager PyTorch. Skipped where the library is not installed (or, for timm, does not
import: tests/corpus/README.md)."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

from tests.corpus import diffusers_models, timm_models
from tests.corpus.corpus import _described


def _discovered(path: Path, text: str) -> list[str]:
    path.write_text(text, encoding="utf-8")
    found = _described(path, "test", path.parent)
    assert found is not None and found.annotation_problems == []
    return found.targets


def _build(path: Path) -> tuple[Any, tuple, dict]:
    return runpy.run_path(str(path))["build_model"]()


def test_every_diffusers_target_file_is_discovered(tmp_path: Path) -> None:
    """Every class's file and every variant's, without building anything."""
    specs = diffusers_models.variants({spec.name for spec in diffusers_models.MODELS})
    assert len({spec.name for spec in specs}) == len(specs)
    for spec in specs:
        assert _discovered(tmp_path / spec.file_name, diffusers_models.render(spec)) == [spec.name]


def test_a_diffusers_target_builds_and_runs(tmp_path: Path) -> None:
    pytest.importorskip("diffusers")
    torch = pytest.importorskip("torch")
    (spec,) = [s for s in diffusers_models.variants({"diffusers.UNet2DModel"})
               if s.name == "diffusers.UNet2DModel.dynamic"]
    path = tmp_path / spec.file_name
    assert _discovered(path, diffusers_models.render(spec)) == [spec.name]
    from exporter.source.targets import discover

    (target,) = discover(path, path.read_text(encoding="utf-8")).targets
    assert target.literal("dynamic_shapes") == spec.dynamic_shapes
    model, args, kwargs = _build(path)
    with torch.no_grad():
        output = model(*args, **kwargs).sample
    assert output.shape == kwargs["sample"].shape == (2, 3, 32, 32)


def test_a_timm_target_builds_and_runs(tmp_path: Path) -> None:
    try:
        import timm  # noqa: F401  (imports torchvision, which may not import beside this torch)
    except Exception as error:
        pytest.skip(f"timm does not import here: {type(error).__name__}: {error}")
    torch = pytest.importorskip("torch")
    spec = timm_models.TimmSpec("timm.resnet10t.dynamic", "resnet10t", "resnet", (3, 64, 64),
                                '({0: "batch"},)')
    path = tmp_path / spec.file_name
    assert _discovered(path, timm_models.render(spec)) == [spec.name]
    from exporter.source.targets import discover

    (target,) = discover(path, path.read_text(encoding="utf-8")).targets
    assert target.literal("dynamic_shapes") == ({0: "batch"},)
    model, (image,) = _build(path)
    with torch.no_grad():
        assert model(image).shape == (2, 1000)
