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
"""

from __future__ import annotations

from collections.abc import Callable

from tests.corpus.variants.common import Variant, write_variants
from tests.corpus.variants.soundness import soundness_variants

MECHANISMS: dict[str, Callable[[], list[Variant]]] = {"soundness": soundness_variants}


def all_variants() -> list[Variant]:
    return [variant for generate in MECHANISMS.values() for variant in generate()]


__all__ = ["MECHANISMS", "Variant", "all_variants", "write_variants"]
