"""The translation registries torch.onnx.export builds (torchlib's functions for an opset),
built once per opset in a process: the part of a check's set-up that costs most after
torch's import."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from exporter.toolchain import torch_compat


class Registries:
    def __init__(self) -> None:
        self._by_opset: dict[int, Any] = {}

    def get(self, opset: int | None, table: dict[Callable, Callable] | None) -> Any:
        """The registry torch.onnx.export builds for a model of ``opset`` (None: its
        default), with ``table`` registered on top; None where this torch cannot translate
        in stages (torch_compat's "staged-translation")."""
        if not torch_compat.available("staged-translation"):
            return None
        opset = torch_compat.registry_opset(
            opset if opset is not None else torch_compat.default_opset())
        if opset not in self._by_opset:
            self._by_opset[opset] = torch_compat.build_registry(opset)
        base = self._by_opset[opset]
        return torch_compat.registry_with(base, table) if table else base
