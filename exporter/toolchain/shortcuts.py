"""The speed shortcuts of a check, each with its own off switch.

A shortcut makes a check faster and must never change its verdict (docs/speed.md,
"Speed shortcuts"). ``ONNXLENS_SHORTCUTS_OFF`` turns shortcuts off by name (comma-separated, or
``all``); ``tests/exporter/toolchain/test_shortcuts.py`` checks targets with each one off alone and
compares the diagnostics with those of a check with all of them on.
"""

from __future__ import annotations

import os

ENVIRONMENT_VARIABLE = "ONNXLENS_SHORTCUTS_OFF"
#: a speed patch's state where torch itself does what it does: not applied, nothing lost
IN_TORCH = "torch does this itself"

SHORTCUTS: dict[str, str] = {
    "shared-provenance": "traced nodes share their provenance records instead of deep copies",
    "lazy-graph-modules": "graph modules built while tracing compile their code on first use",
    "onnx-signatures-once": "an ONNX schema's signature is computed once per operator",
    "plain-list-attributes": "plain lists of ints/floats/strings get their attribute type first",
    "lazy-frame-lines": "stack traces read source lines only for the frames they keep",
    "compiled-code-once": "a graph module's generated code is compiled once per source",
    "cached-decomposition": "the decomposition table and CIA operators are reused across checks",
    "short-py-impl": "CIA kernels are registered by dispatch key without annotation evaluation",
    "weights-apart": "large weights reach ONNX Runtime from memory, not through the protobuf",
    "result-reuse": "the language server reuses a result while nothing the check read changed",
    "strict-recapture-once": "the draft export with every declared dimension strictly dynamic "
                             "is made once per check, for both guard searches",
    "warm-imports": "installed packages a check imported are imported by the worker before "
                    "it forks the next check",
    "after-verdict-budget": "once the export is known to fail, the search for more problems "
                            "(the draft export, the stages on its graph) gets a time budget "
                            "from the failed capture's time",
}


def disabled() -> frozenset[str]:
    """The shortcuts switched off now (read each time: tests switch them per check)."""
    text = os.environ.get(ENVIRONMENT_VARIABLE, "")
    names = {name.strip() for name in text.split(",") if name.strip()}
    if "all" in names:
        return frozenset(SHORTCUTS)
    return frozenset(names & SHORTCUTS.keys())


def enabled(name: str) -> bool:
    if name not in SHORTCUTS:
        raise KeyError(f"unknown shortcut {name!r}")
    return name not in disabled()


def unknown_names() -> list[str]:
    """Names in the environment variable that are no shortcut (a typo turns nothing off)."""
    text = os.environ.get(ENVIRONMENT_VARIABLE, "")
    names = [name.strip() for name in text.split(",") if name.strip()]
    return [name for name in names if name != "all" and name not in SHORTCUTS]
