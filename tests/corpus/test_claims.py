"""The judge's replay of onnxlens's claims at sizes the truth did not run
(tests/corpus/claims.py): which false errors are replayed, and what the plain exporter's own
model answers at the claimed sizes, both ways."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.corpus.claims import CONFIRMED, NOT_CONFIRMED, claims, run_replay
from tests.corpus.corpus import CorpusFile
from tests.corpus.judge import AGREE, FALSE_ERROR, Row
from tests.corpus.lens import LensDiagnostic, LensTarget, Place
from tests.corpus.truth import TruthResult
from tests.corpus.variants import write_variants
from tests.corpus.variants.odd_sizes import odd_size_variants

PLACE = Place("/workspace/model.py", 5)


def _row(*diagnostics: LensDiagnostic, agreement: str = FALSE_ERROR) -> Row:
    truth = TruthResult(PLACE.path, "T", "ok")
    return Row("variants", "model.py", "T", truth, LensTarget("T", False, [], list(diagnostics)),
               "", agreement, "")


def _claim(rule: str, sizes: dict[str, int], severity: str = "error") -> LensDiagnostic:
    return LensDiagnostic(rule, severity, "message", PLACE, [], "T", sizes)


def test_only_false_errors_made_of_claims_at_sizes_are_replayed():
    at_19 = _claim("ONNX403", {"seq": 19})
    assert claims(_row(at_19, replace(at_19))) == [{"seq": 19}]
    assert claims(_row(at_19, _claim("ONNX107", {"seq": 65}))) == [{"seq": 19}, {"seq": 65}]
    # a warning beside the claim does not count; an error that is no claim keeps the row
    assert claims(_row(at_19, _claim("ONNX106", {}, "warning"))) == [{"seq": 19}]
    assert claims(_row(at_19, _claim("ONNX501", {}))) is None
    assert claims(_row(_claim("ONNX403", {}))) is None  # no sizes recorded: nothing to replay
    assert claims(_row(at_19, agreement=AGREE)) is None


def test_a_claim_is_confirmed_only_where_the_plain_exporters_model_fails(tmp_path: Path):
    """variant.odd_sizes.00's exported graph holds for even sizes only: at 19 ONNX Runtime
    fails where PyTorch runs (confirmed), at 20 the two match (not confirmed)."""
    variant = odd_size_variants()[0]
    (path,) = write_variants(tmp_path, [variant])
    corpus_file = CorpusFile("variants", path, tmp_path, [variant.target_name], [])
    (name,) = {choice.removeprefix("name=") for choice in variant.choices
               if choice.startswith("name=")}
    odd = run_replay(corpus_file, variant.target_name, {name: 19}, timeout=300)
    assert (odd.status, odd.sizes) == (CONFIRMED, {name: 19}), odd.detail
    assert "ONNX Runtime fails" in odd.detail and "Concat" in odd.detail
    even = run_replay(corpus_file, variant.target_name, {name: 20}, timeout=300)
    assert (even.status, even.detail) == (NOT_CONFIRMED, "ONNX Runtime matches PyTorch")
