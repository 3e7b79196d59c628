"""A target's export options: the run's defaults, overridden once by what the target gives."""

from __future__ import annotations

import pytest

from exporter.config.options import ExportOptions
from exporter.pipeline.target_options import EVALUATED_KEYS, TargetOptions


def test_the_defaults_apply_until_the_target_gives_its_own():
    options = TargetOptions.defaulting_to(ExportOptions(opset=17, atol=1e-3))
    assert (options.opset, options.atol, options.rtol) == (17, 1e-3, None)
    assert options.given == set()
    options.set("opset", 20)
    assert (options.opset, options.atol) == (20, 1e-3)
    assert options.given == {"opset"}


def test_a_given_none_is_told_apart_from_none_given():
    """``dynamic_shapes=None`` in a pragma means static, where an exportable module's own
    dynamic shapes would apply when the pragma says nothing."""
    options = TargetOptions()
    assert options.dynamic_shapes is None and "dynamic_shapes" not in options.given
    options.set("dynamic_shapes", None)
    assert "dynamic_shapes" in options.given


def test_every_evaluated_pragma_key_is_an_option_and_nothing_else_is():
    options = TargetOptions()
    for key in (*EVALUATED_KEYS, "training"):
        options.set(key, options.get(key))
    with pytest.raises(KeyError, match="no export option 'given'"):
        options.set("given", set())
    with pytest.raises(KeyError, match="no export option 'opset_version'"):
        options.get("opset_version")


@pytest.mark.parametrize("input_names, output_names, clash", [
    (["x", "x"], None, ("x", "`x` is in `input_names` twice")),
    (None, ("a", "b", "a"), ("a", "`a` is in `output_names` twice")),
    (["q", "k"], ["out", "k"], ("k", "`k` names an input and an output")),
    (["q", "k"], ["out", "weights"], None),
    (None, None, None),
])
def test_a_name_given_twice_or_to_an_input_and_an_output_is_a_clash(input_names, output_names,
                                                                      clash):
    options = TargetOptions.defaulting_to(ExportOptions())
    if input_names is not None:
        options.set("input_names", input_names)
    if output_names is not None:
        options.set("output_names", output_names)
    assert options.name_clash() == clash
