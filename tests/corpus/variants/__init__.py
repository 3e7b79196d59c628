"""Generated variants of the cases a mechanism must hold on, judged as any other target: each
case in many forms that differ in everything a reproduction did not pin down (how the
dimension is declared, which axis, which comparison, a branch, an assertion or
``torch._check``, what each path computes, names and sizes), so that a fix that learned one
case and not its cause shows as a disagreement.

The forms are not all combinations (thousands): each variant draws every choice on its own from
a generator seeded with the variant's number, so the same variants come back at every run, each
value of each list appears in several variants with different partners
(``tests/corpus/test_variants.py`` checks it), and no choice is tied to another. Nothing
generated is committed.

One module per mechanism, each a generator of :class:`Variant` (its docstring says what it
varies):

* ``soundness``: a declared dynamic range that the code's guard on the size narrows (ONNX107).
* ``decorators``: an operator without a translation reached through decorated functions
  (ONNX2xx at the operator's line).
* ``stdio``: models that print, write to the streams' descriptors, log to stdout, start a
  subprocess on it, at import, in ``__init__`` or ``forward``: the report is unaffected.
* ``export_calls``: each ``torch.onnx.export`` call of a marked function is a target
  (``function@line``); the other calls the code reaches export, return their program and are
  read back, wherever they sit, and write nothing into the user's tree.
* ``warm_imports``: an installed package whose import changes global state is not imported
  ahead by the worker: unrelated files checked after it in one process keep their verdicts.
* ``odd_sizes``: a graph right at every size the truth runs and wrong in ONNX Runtime at the
  odd size onnxlens runs; the judge replays onnxlens's sizes on the plain exporter's model
  (``tests/corpus/claims.py``).
* ``warm_namespaces``: an installed package imported ahead registers operators in a
  namespace of its own; unrelated files that reach them through ``torch.ops`` without importing
  it get the plain process's failure, not the operator's.
"""

from __future__ import annotations

from collections.abc import Callable

from tests.corpus.variants.common import Variant, write_variants
from tests.corpus.variants.decorators import decorators_variants
from tests.corpus.variants.export_calls import export_call_variants
from tests.corpus.variants.odd_sizes import odd_size_variants
from tests.corpus.variants.soundness import soundness_variants
from tests.corpus.variants.stdio import stdio_variants
from tests.corpus.variants.warm_imports import warm_import_variants, warm_namespace_variants

MECHANISMS: dict[str, Callable[[], list[Variant]]] = {"soundness": soundness_variants}
MECHANISMS["decorators"] = decorators_variants
MECHANISMS["stdio"] = stdio_variants
MECHANISMS["export_calls"] = export_call_variants
MECHANISMS["warm_imports"] = warm_import_variants
MECHANISMS["warm_namespaces"] = warm_namespace_variants
MECHANISMS["odd_sizes"] = odd_size_variants


def all_variants() -> list[Variant]:
    return [variant for generate in MECHANISMS.values() for variant in generate()]


__all__ = ["MECHANISMS", "Variant", "all_variants", "write_variants"]
