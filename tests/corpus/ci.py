"""The corpus's CI subset, chosen by rule: every ExportDB example, every fixture, example and
export script of this project (and those modelled on public ones), every third generated
variant of each mechanism (tests/corpus/variants/; the full corpus runs them all), a handful
of transformers architectures (a tied-embedding causal LM, an encoder, an encoder–decoder, a
windowed vision model, a decoder with dynamic batch and sequence) and, where torchvision imports
(the torch 2.14.1 leg), two classification models and a detection model.

A test of a speed shortcut checks the same subset again with the shortcut switched off and
compares onnxlens's verdicts::

    from tests.corpus.ci import ci_corpus, lens_verdicts

    corpus = ci_corpus(tmp_path)
    assert lens_verdicts(corpus, {"ONNXLENS_SOME_SHORTCUT": "0"}) == lens_verdicts(corpus)

(or use the session fixture ``corpus_ci_part`` of tests/corpus/conftest.py, whose verdicts
of each part, ``PARTS``, were computed once with the default environment).
"""

from __future__ import annotations

from pathlib import Path

from tests.corpus.corpus import (
    Corpus,
    exportdb_names,
    materialize_exportdb,
    materialize_torchvision,
    materialize_transformers,
    materialize_variants,
    project_files,
    torchvision_models,
)
from tests.corpus.harness import Outcome, TargetKey, run_corpus
from tests.corpus.harness import lens_verdicts as _lens_verdicts
from tests.corpus.variants.common import Variant

#: with torchvision (the torch 2.14.1 leg): classification and a detection model (NMS)
CI_TORCHVISION = ("resnet18", "mobilenet_v3_small", "fasterrcnn_mobilenet_v3_large_320_fpn")
CI_TRANSFORMERS = ("hf.gpt2", "hf.llama.tied", "hf.bert", "hf.t5", "hf.swin", "hf.llama.dynamic")
CI_MODEL_TYPES = ("gpt2", "llama", "bert", "t5", "swin")


def ci_variants() -> list[Variant]:
    """Every third generated variant of each mechanism: its forms, in a third of the time."""
    from tests.corpus.variants import MECHANISMS

    return [variant for generate in MECHANISMS.values() for variant in generate()[::3]]


#: the subset in parts, each judged on its own in one pytest-xdist process (tests/conftest.py):
#: the small ExportDB examples, this project's own files, the real architectures; a part that
#: ends early leaves its process free for the rest of the run
PARTS = ("exportdb", "project", "models")
_PART_OF_SOURCE = {"exportdb": "exportdb", "transformers": "models", "torchvision": "models"}


def part_of(target_id: str) -> str:
    """The part a target id (``source:file::target``) belongs to."""
    return _PART_OF_SOURCE.get(target_id.partition(":")[0], "project")


def part_of_test(nodeid: str) -> str:
    """The part a test of tests/corpus/test_corpus.py judges: its target's, or the models'
    (the warm-imports test checks the transformers and torchvision files again)."""
    parameter = nodeid.partition("[")[2]
    return part_of(parameter.rstrip("]")) if parameter else "models"


def ci_ids(part: str | None = None) -> list[str]:
    """The subset's target ids, known without building anything (for parametrizing); only
    ``part``'s when given."""
    ids = [f"exportdb:exportdb_{name}.py::exportdb.{name}" for name in exportdb_names()]
    for source in ("fixtures", "examples", "export_scripts"):
        for corpus_file in project_files(source).files:
            ids += [row_id(source, corpus_file.label, t) for t in corpus_file.targets]
            ids += [row_id(source, corpus_file.label, f"(pragma, line {p.line})")
                    for p in corpus_file.annotation_problems]
    ids += [row_id("variants", file, target) for variant in ci_variants()
            for file, target in ((variant.file_name, variant.target_name),
                                 *variant.more_targets)]
    ids += [f"transformers:{name.replace('.', '_').replace('-', '_')}.py::{name}"
            for name in CI_TRANSFORMERS]
    if torchvision_models() is not None:
        ids += [f"torchvision:tv_{name}.py::tv.{name}" for name in CI_TORCHVISION]
    return [i for i in ids if part is None or part_of(i) == part]


def row_id(source: str, label: str, target: str) -> str:
    return f"{source}:{label}::{target}"


def ci_corpus(workspace: Path, part: str | None = None) -> Corpus:
    """Materialize the subset (only ``part`` when given) under ``workspace`` (a temporary
    directory)."""
    corpus = Corpus(workspace)
    if part in (None, "exportdb"):
        corpus.extend(materialize_exportdb(workspace))
    if part in (None, "project"):
        for source in ("fixtures", "examples", "export_scripts"):
            corpus.extend(project_files(source))
        corpus.extend(materialize_variants(workspace, [v.name for v in ci_variants()]))
    if part in (None, "models"):
        corpus.extend(materialize_transformers(workspace, types=list(CI_MODEL_TYPES),
                                               names=set(CI_TRANSFORMERS)))
        corpus.extend(materialize_torchvision(workspace, CI_TORCHVISION))
    return corpus


def run_ci(corpus: Corpus, env: dict[str, str] | None = None, jobs: int = 2) -> Outcome:
    """Truth and onnxlens on the subset. onnxlens checks the files of one root together, in one
    process (``batch``), which is what keeps the subset within its time budget."""
    return run_corpus(corpus, jobs, env=env, batch=True, root_processes=1)


def lens_verdicts(corpus: Corpus, env: dict[str, str] | None = None,
                  jobs: int = 2) -> dict[TargetKey, object]:
    """onnxlens's verdicts on the subset, as :func:`run_ci` computes them, comparable across
    environments."""
    return _lens_verdicts(corpus, jobs, env=env, batch=True, root_processes=1)
