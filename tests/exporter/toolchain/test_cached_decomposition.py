"""The decomposition that reuses its table gives exactly torch's own result, and a custom
operator registered after the table was built still gets decomposed."""

from __future__ import annotations

import pytest
import torch

from exporter.toolchain import shortcuts, speedups, torch_compat


class Normed(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(torch.nn.functional.layer_norm(x, (4,))) * 2


def _decomposed_code(model: torch.nn.Module, registry, cached: bool, monkeypatch) -> str:
    monkeypatch.setenv(shortcuts.ENVIRONMENT_VARIABLE, "" if cached else "cached-decomposition")
    program = torch.export.export(model, (torch.randn(3, 4),), strict=False,
                                  dynamic_shapes=({0: torch.export.Dim("batch")},))
    return torch_compat.decompose(program, registry).graph_module.code


def test_cached_decomposition_is_available_for_this_torch():
    assert speedups.active("cached-decomposition")


def test_cached_decomposition_matches_torchs_own(session, monkeypatch):
    registry = session.registry(None, None)
    torchs = _decomposed_code(Normed(), registry, False, monkeypatch)
    assert _decomposed_code(Normed(), registry, True, monkeypatch) == torchs
    assert _decomposed_code(Normed(), registry, True, monkeypatch) == torchs  # from the cache


@pytest.fixture
def custom_op():
    """A CompositeImplicitAutograd operator, as a user module could register one."""
    library = torch.library.Library("onnxlens_test", "DEF")
    library.define("twice(Tensor x) -> Tensor")
    library.impl("twice", lambda x: x * 2, "CompositeImplicitAutograd")
    yield torch.ops.onnxlens_test.twice.default
    library._destroy()


class UsesCustomOp(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.onnxlens_test.twice(x) + 1


def test_custom_op_registered_after_the_table_was_built_is_decomposed(session, monkeypatch,
                                                                      custom_op):
    registry = session.registry(None, None)
    _decomposed_code(Normed(), registry, True, monkeypatch)  # the table is cached before...
    cached = _decomposed_code(UsesCustomOp(), registry, True, monkeypatch)  # ...the op exists
    assert "onnxlens_test" not in cached  # decomposed, as torch's own table would
    assert cached == _decomposed_code(UsesCustomOp(), registry, False, monkeypatch)


def test_kernels_registered_the_short_way_keep_torchs_checks(custom_op):
    key = torch._C.DispatchKey.AutogradCPU

    def kernel(x: torch.Tensor) -> torch.Tensor:
        return x

    try:
        assert speedups._py_impl(custom_op, key)(kernel) is kernel
        assert custom_op.py_kernels[key] is kernel
        with pytest.raises(RuntimeError, match="Trying to override a python impl"):
            speedups._py_impl(custom_op, key)(kernel)
    finally:
        custom_op.py_kernels.pop(key, None)
        custom_op._dispatch_cache.clear()
    with pytest.raises(AssertionError, match="mode for the DispatchKey"):  # torch's own path
        speedups._py_impl(custom_op, torch._C.DispatchKey.Python)(kernel)


def test_decompose_puts_py_impl_back(session, monkeypatch):
    original = torch._ops.OperatorBase.py_impl
    _decomposed_code(Normed(), session.registry(None, None), True, monkeypatch)
    assert torch._ops.OperatorBase.py_impl is original
