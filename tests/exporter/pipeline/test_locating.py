"""Which guards a draft export added are a dimension's specialization (ONNX102)
(exporter/pipeline/locating.py)."""

from __future__ import annotations

import pytest

from exporter.pipeline.locating import guards_a_dimension, holds_at_every_size
from exporter.pipeline.onnx_nodes import names_in_message

SOURCES = {"s77": "L['x'].size()[0]"}


@pytest.mark.parametrize("expression", [
    "((s77//2)) <= s77",  # x[: x.shape[0] // 2]
    "s77 <= 2*s77",
    "s0 + s1 >= s0",
    "s5 >= 0",
])
def test_a_guard_true_at_every_size_constrains_nothing(expression):
    assert holds_at_every_size(expression)
    assert not guards_a_dimension({"expr": expression, "symbol_to_sources": SOURCES})


@pytest.mark.parametrize("expression", [
    "Eq(8*s77, 32)",  # reshape(4, 8): specialized
    "s77 >= 10",  # narrowed
    "Ne(s77, 1)",
    "Eq(Mod(s77, 2), 0)",
    "Unknown(s77) <= 3",  # not decidable here: kept
])
def test_a_guard_false_at_some_size_is_reported(expression):
    assert not holds_at_every_size(expression)
    assert guards_a_dimension({"expr": expression, "symbol_to_sources": SOURCES})


def test_a_guard_on_unbacked_values_only_is_no_dimension():
    assert not guards_a_dimension({"expr": "Eq(u0, 1)", "symbol_to_sources": {}})


def test_a_long_toolchain_error_is_never_cut_mid_sentence():
    """ONNX Runtime's and the ONNX checker's errors in a finding's message (ONNX3xx, ONNX4xx):
    whole sentences that fit, at least the first, never a sentence's start alone."""
    from exporter.pipeline.locating import short_message as _short

    first = "[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find Erf(13) for a double."
    long_error = f"{first}\n  {'Tried every provider. ' * 20}Last sentence."
    shortened = _short(long_error)
    assert shortened.startswith("NOT_IMPLEMENTED: Could not find Erf(13) for a double. Tried")
    assert shortened.endswith("Tried every provider. (…)") and len(shortened) <= 310
    one_sentence = "x" * 400 + " ends here."
    assert _short(one_sentence) == one_sentence
    assert _short("short, no stop") == "short, no stop"


@pytest.mark.parametrize(("message", "op_type"), [
    ("[ONNXRuntimeError] : 1 : FAIL : Fatal error: my_domain:Gelu2(-1) is not a registered "
     "function/op", "Gelu2"),
    ("Fatal error: com.example:Fused_Attention(1) is not a registered function/op",
     "Fused_Attention"),
    ("Fatal error: :Softsign(-1) is not a registered function/op", "Softsign"),
])
def test_an_operator_without_a_kernel_is_found_by_its_type(message, op_type):
    """ONNX Runtime names the operator it has no kernel for: the nodes of that type are where
    the session failed (ONNX401 at the line that made them)."""
    assert names_in_message(message) == (None, op_type)
