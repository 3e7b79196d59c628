"""onnxlens's claims of a wrong model at another size, asked of the plain exporter's own model
(``python -m tests.corpus.claims FILE TARGET --root ROOT --sizes JSON``).

The truth (``tests/corpus/truth.py``) runs the plain exporter's model at sizes of its own
choosing: the example, the lower bound of each declared range, twice the example, size 1,
just outside a narrowed range. onnxlens runs others (its larger size is the example's plus
three). So an onnxlens error at a size the truth never fed (ONNX403, or an ONNX107 a run
confirmed) can be right where the truth says "ok": the truth did not look there. Here the judge
looks: the target's inputs resized to the sizes the diagnostic names (its ``data["sizes"]``,
by dimension name, resized as onnxlens resizes them), eager PyTorch on them and the plain
``torch.onnx.export(..., dynamo=True)``'s model in ONNX Runtime, compared with the truth's
tolerances, in a process of its own. The claim is **confirmed** when ONNX Runtime fails or
differs where PyTorch runs; otherwise (PyTorch fails too, or the two match) the false error
stands.

Kept apart from ``truth.py``, whose code is part of the truth cache's key.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.corpus.common import PYTHON, REPO, child_env, dumps, from_json
from tests.corpus.corpus import CorpusFile
from tests.corpus.judge import AGREE, FALSE_ERROR, Row

#: the rules whose claim is a run at other sizes (their ``data["sizes"]``)
REPLAYABLE = ("ONNX403", "ONNX107")
CONFIRMED, NOT_CONFIRMED, NOT_REPLAYED = "confirmed", "not confirmed", "not replayed"


@dataclass
class Replay:
    """What the plain exporter's model did at the sizes of one claim."""

    sizes: dict[str, int]
    status: str  # CONFIRMED, NOT_CONFIRMED or NOT_REPLAYED (the replay itself failed)
    detail: str


def claims(row: Row) -> list[dict[str, int]] | None:
    """The distinct sizes of every error of a false-error row, when each of its errors is a
    claim at other sizes; None when one is not (that false error stands as it is)."""
    if row.agreement != FALSE_ERROR or row.lens is None:
        return None
    found: list[dict[str, int]] = []
    for diagnostic in row.lens.errors:
        if diagnostic.rule not in REPLAYABLE or not diagnostic.sizes:
            return None
        if diagnostic.sizes not in found:
            found.append(dict(diagnostic.sizes))
    return found or None


def replay_claims(rows: list[Row], files: list[CorpusFile], jobs: int = 2, *,
                  timeout: float = 300.0) -> int:
    """Replay the claims of every false-error row that holds only claims; a row whose every
    claim is confirmed agrees (its detail says what the plain exporter's model did), any
    other keeps its false error with the replay's answer in its detail. Returns how many rows
    the replays turned into agreement."""
    work = [(row, sizes) for row in rows if (found := claims(row)) for sizes in found]
    if not work:
        return 0
    # the row's file by its label (a cached truth names where an earlier run put the file)
    by_label = {(corpus_file.source, corpus_file.label): corpus_file for corpus_file in files}

    def ask(row: Row, sizes: dict[str, int]) -> Replay:
        return run_replay(by_label[(row.source, row.file)], row.target, sizes, timeout)

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        replays = list(pool.map(lambda item: ask(*item), work))
    by_row: dict[int, list[Replay]] = {}
    for (row, _), answer in zip(work, replays):
        by_row.setdefault(id(row), []).append(answer)
    turned = 0
    for row in rows:
        answers = by_row.get(id(row))
        if not answers:
            continue
        said = "; ".join(f"at {_sizes(a.sizes)}: {a.status}: {a.detail}" for a in answers)
        if all(answer.status == CONFIRMED for answer in answers):
            row.agreement, turned = AGREE, turned + 1
            row.detail = f"onnxlens's claim replayed on the plain exporter's model: {said}"
        else:
            row.detail = f"{row.detail}; replayed: {said}"
    return turned


def _sizes(sizes: dict[str, int]) -> str:
    return ", ".join(f"{name}={size}" for name, size in sizes.items())


def run_replay(corpus_file: CorpusFile, target: str, sizes: dict[str, int],
               timeout: float) -> Replay:
    """One claim, in a fresh interpreter (a handful per corpus: no warm parent)."""
    command = [str(PYTHON), "-m", "tests.corpus.claims", str(corpus_file.path), target,
               "--root", str(corpus_file.root), "--sizes", json.dumps(sizes)]
    entries = [str(directory) for directory in corpus_file.python_path]
    extra = {"PYTHONPATH": os.pathsep.join(filter(None, [
        *entries, os.environ.get("PYTHONPATH", "")]))} if entries else None
    try:
        process = subprocess.run(command, cwd=REPO, env=child_env(extra),
                                 capture_output=True, text=True, timeout=timeout,
                                 start_new_session=True)
    except subprocess.TimeoutExpired:
        return Replay(sizes, NOT_REPLAYED, f"no answer after {timeout:g} s")
    try:
        return from_json(Replay, json.loads(process.stdout.strip().splitlines()[-1]))
    except (IndexError, ValueError):
        tail = " | ".join(process.stderr.strip().splitlines()[-3:])[:300]
        return Replay(sizes, NOT_REPLAYED, f"exit status {process.returncode}: {tail}")


# -- the replay process ----------------------------------------------------------------------

def replay(built: Any, sizes: dict[str, int]) -> Replay:
    """Export ``built`` with the plain exporter and run both runtimes at ``sizes``."""
    import onnxruntime as ort
    import torch

    from exporter.pipeline.dynamic_dims import declared_dims
    from exporter.pipeline.stages.dynamic import resized_inputs
    from tests.corpus.truth import PhaseFailed, SizeRun, _export_kwargs, _fresh, _run_both

    reference = copy.deepcopy(built.model)
    program = torch.onnx.export(built.model, _fresh(built.args), dynamo=True,
                                **_export_kwargs(built))
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(program.model_proto.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    declared = declared_dims(built.model, built.args, built.kwargs,
                             built.options.get("dynamic_shapes"))
    try:
        args, kwargs = resized_inputs(built.args, built.kwargs, declared, sizes)
    except KeyError as missing:
        return Replay(sizes, NOT_REPLAYED, f"the claim names no size for {missing}")
    run = SizeRun({name: int(size) for name, size in sizes.items()}, "onnxlens's claim")
    try:
        eager_error = _run_both(built, reference, session, args, kwargs, run)
    except PhaseFailed as failed:  # ONNX Runtime raised
        error = failed.error if failed.error is not None else failed.message
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return Replay(sizes, CONFIRMED, f"PyTorch runs, ONNX Runtime fails: {first}"[:400])
    if eager_error:
        return Replay(sizes, NOT_CONFIRMED, f"PyTorch itself fails: {eager_error}"[:400])
    if run.problem:
        return Replay(sizes, CONFIRMED, f"ONNX Runtime differs from PyTorch: {run.problem}"[:400])
    return Replay(sizes, NOT_CONFIRMED, "ONNX Runtime matches PyTorch")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.corpus.claims")
    parser.add_argument("file", type=Path)
    parser.add_argument("target")
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--sizes", required=True, help='JSON: {"dimension name": size}')
    options = parser.parse_args(argv)
    from tests.corpus.truth import _in_the_call, _load, find_target

    path, root = options.file.resolve(), options.root.resolve()
    sizes = {str(name): int(size) for name, size in json.loads(options.sizes).items()}
    target = find_target(path, options.target)
    # What the model prints goes to stderr: stdout carries the answer alone.
    sys.stdout.flush()
    real_stdout = os.dup(1)
    os.dup2(2, 1)
    answers: list[Replay] = []
    try:
        if getattr(target, "export_call_line", None) is not None:
            _in_the_call(path, root, target, lambda built: answers.append(replay(built, sizes)))
        else:
            answers.append(replay(_load(path, root, target), sizes))
    except Exception as error:  # the plain export itself failed: nothing to replay on
        answers = [Replay(sizes, NOT_REPLAYED, f"{type(error).__name__}: {error}"[:400])]
    sys.stdout.flush()
    with os.fdopen(real_stdout, "w") as out:
        out.write(dumps(answers[0] if answers else Replay(
            sizes, NOT_REPLAYED, "the target's export call was not reached")) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
