"""Running the corpus: the truth of every target and onnxlens's check of every file, each in its
own subprocess, ``jobs`` at a time; then the agreement per target.

``run_lens`` is the part a speed-shortcut test needs: it checks the same files again with extra
environment variables and returns verdicts comparable across runs
(:meth:`tests.corpus.lens.LensTarget.verdict`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.corpus.claims import replay_claims
from tests.corpus.corpus import FIXTURES, Corpus, CorpusFile
from tests.corpus.judge import (
    AGREE,
    DISAGREEMENTS,
    FALSE_ERROR,
    MISSED,
    NOT_JUDGED,
    TOOL_FAILURE,
    WRONG_CAUSE,
    Row,
    judge_file,
)
from tests.corpus.lens import LensFile, run_onnxlens_files
from tests.corpus.truth import DEFAULT_TIMEOUT, TruthResult, run_truth

Log = Callable[[str], None]
TargetKey = tuple[str, str]  # (file path, target name)


@dataclass
class Totals:
    targets: int = 0
    agree: int = 0
    false_errors: int = 0
    missed: int = 0
    wrong_cause: int = 0
    tool_failures: int = 0
    not_judged: int = 0
    not_buildable: int = 0
    claims_confirmed: int = 0  # onnxlens errors the truth did not see, replayed (claims.py)
    lens_seconds: float = 0.0  # sum of onnxlens's stage times
    truth_seconds: float = 0.0  # sum of torch.onnx.export + ONNX Runtime times
    lens_wall: float = 0.0  # wall time of the onnxlens processes
    truth_wall: float = 0.0  # wall time of the truth processes (not cached)

    @property
    def ratio(self) -> float:
        return self.lens_seconds / self.truth_seconds if self.truth_seconds else 0.0


@dataclass
class Outcome:
    rows: list[Row]
    totals: Totals
    lens_files: dict[str, LensFile] = field(default_factory=dict)


def _pool(jobs: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=max(jobs, 1))


def lens_root(corpus_file: CorpusFile, batch: bool) -> Path:
    """The root onnxlens checks a file under: its own; in a batch, a fixture's is the folder
    of every fixture (each fixture's folder is still importable, as the file's directory),
    so that the fixtures share one process instead of warming a worker each."""
    return FIXTURES if batch and corpus_file.source == "fixtures" else corpus_file.root


def lens_batches(corpus: Corpus, jobs: int, batch: bool) -> list[list[CorpusFile]]:
    """The files onnxlens checks together: one each, or (``batch``) the files of one root
    (:func:`lens_root`) in up to ``jobs`` processes, never two targets of one name in a
    process. Each process warms a worker of its own (seconds of CPU): the CI subset takes
    one per root (``jobs=1``), the whole corpus, whose big roots take minutes each, one per
    job."""
    if not batch:
        return [[corpus_file] for corpus_file in corpus.files]
    by_root: dict[Path, list[CorpusFile]] = {}
    for corpus_file in corpus.files:
        by_root.setdefault(lens_root(corpus_file, batch), []).append(corpus_file)
    batches: list[list[CorpusFile]] = []
    for files in by_root.values():
        groups: list[list[CorpusFile]] = [[] for _ in range(min(max(jobs, 1), len(files)))]
        for index, corpus_file in enumerate(files):
            names = set(corpus_file.targets)
            for offset in range(len(groups)):
                group = groups[(index + offset) % len(groups)]
                if not names & {t for f in group for t in f.targets}:
                    group.append(corpus_file)
                    break
            else:
                groups.append([corpus_file])
        batches += [group for group in groups if group]
    return batches


def check_batch(files: list[CorpusFile], env: dict[str, str] | None = None,
                fix_budget: float = 0.0) -> dict[str, LensFile]:
    """onnxlens on ``files`` (one root) in one process; when that process fails as a whole,
    each file again in its own, so that the failure lands on its file."""
    results = run_onnxlens_files([f.path for f in files], lens_root(files[0], len(files) > 1),
                                 sum(len(f.targets) for f in files),
                                 env=with_python_path(env, files), fix_budget=fix_budget)
    if len(files) > 1 and all(result.failure for result in results.values()):
        results = {}
        for corpus_file in files:
            results |= run_onnxlens_files([corpus_file.path], corpus_file.root,
                                          len(corpus_file.targets),
                                          env=with_python_path(env, [corpus_file]),
                                          fix_budget=fix_budget)
    return results


def with_python_path(env: dict[str, str] | None,
                     files: list[CorpusFile]) -> dict[str, str] | None:
    """``env`` with the files' :attr:`CorpusFile.python_path` (their "installed" packages)
    ahead on ``PYTHONPATH``."""
    entries = list(dict.fromkeys(str(d) for f in files for d in f.python_path))
    if not entries:
        return env
    given = (env or {}).get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    return {**(env or {}), "PYTHONPATH": os.pathsep.join(filter(None, [*entries, given]))}


def _check_and_log(files: list[CorpusFile], env: dict[str, str] | None,
                   log: Log | None, fix_budget: float = 0.0) -> dict[str, LensFile]:
    results = check_batch(files, env, fix_budget)
    if log:
        for corpus_file in files:
            result = results[str(corpus_file.path)]
            log(f"onnxlens {corpus_file.label}: "
                f"{result.failure or f'exit {result.exit_code}'} {result.wall_seconds:.1f} s")
    return results


def run_lens(corpus: Corpus, jobs: int = 2, *, env: dict[str, str] | None = None,
             batch: bool = False, log: Log | None = None,
             root_processes: int | None = None) -> dict[str, LensFile]:
    """onnxlens's check of every file of ``corpus`` with ``env`` added to the environment;
    keyed by file path. ``batch``: see :func:`lens_batches`."""
    found: dict[str, LensFile] = {}
    with _pool(jobs) as pool:
        for results in pool.map(lambda files: _check_and_log(files, env, log),
                                lens_batches(corpus, root_processes or jobs, batch)):
            found |= results
    return found


def lens_verdicts(corpus: Corpus, jobs: int = 2, *, env: dict[str, str] | None = None,
                  batch: bool = False, root_processes: int | None = None
                  ) -> dict[TargetKey, object]:
    """(file, target) -> onnxlens's verdict (rules, severities, locations; or the tool failure),
    comparable between two runs with different environments."""
    return verdicts_of(run_lens(corpus, jobs, env=env, batch=batch,
                                root_processes=root_processes))


def verdicts_of(lens_files: dict[str, LensFile]) -> dict[TargetKey, object]:
    """The comparable verdicts of onnxlens's results (see :func:`lens_verdicts`)."""
    verdicts: dict[TargetKey, object] = {}
    for path, result in lens_files.items():
        if result.failure:
            verdicts[(path, "*")] = ("tool failure", result.failure)
            continue
        for name, target in result.targets.items():
            verdicts[(path, name)] = target.verdict()
        verdicts[(path, "")] = tuple(sorted((d.rule, d.place) for d in result.loose))
    return verdicts


def run_corpus(corpus: Corpus, jobs: int = 2, *, env: dict[str, str] | None = None,
               batch: bool = False, use_cache: bool = True, timeout: float = DEFAULT_TIMEOUT,
               log: Log | None = None, root_processes: int | None = None,
               fix_budget: float = 0.0) -> Outcome:
    """Truth and onnxlens for every target, all in one pool of ``jobs`` subprocesses at a time;
    then the agreement. ``root_processes``: how many onnxlens processes share the files of a
    root when ``batch`` (default: ``jobs``; see :func:`lens_batches`). ``fix_budget``: seconds
    per failing target for onnxlens to try fixes (tests/corpus/fixes.py judges them)."""
    truths: dict[TargetKey, TruthResult] = {}
    lens_files: dict[str, LensFile] = {}

    def truth_task(corpus_file: CorpusFile, target: str) -> None:
        result = run_truth(corpus_file.path, target, corpus_file.root, timeout=timeout,
                           use_cache=use_cache, python_path=corpus_file.python_path)
        truths[(str(corpus_file.path), target)] = result
        if log and not result.cached:
            phase = result.failure.phase if result.failure else ""
            log(f"truth {target}: {result.status} {phase} {result.wall_seconds:.1f} s")

    def lens_task(files: list[CorpusFile]) -> None:
        lens_files.update(_check_and_log(files, env, log, fix_budget))

    tasks: list[Callable[[], None]] = [lambda b=files: lens_task(b)
                                       for files in lens_batches(corpus,
                                                                 root_processes or jobs, batch)]
    tasks += [lambda f=corpus_file, t=target: truth_task(f, t)
              for corpus_file in corpus.files for target in corpus_file.targets]
    with _pool(jobs) as pool:
        for future in [pool.submit(task) for task in tasks]:
            future.result()
    rows: list[Row] = []
    for corpus_file in corpus.files:
        file_truths = {t: truths[(str(corpus_file.path), t)] for t in corpus_file.targets}
        rows += judge_file(corpus_file, file_truths, lens_files[str(corpus_file.path)])
    confirmed = replay_claims(rows, corpus.files, jobs, timeout=timeout)
    totals = summarize(rows, corpus)
    totals.claims_confirmed = confirmed
    totals.lens_wall = sum(result.wall_seconds for result in lens_files.values())
    totals.truth_wall = sum(t.wall_seconds for t in truths.values() if not t.cached)
    return Outcome(rows, totals, lens_files)


def summarize(rows: list[Row], corpus: Corpus) -> Totals:
    totals = Totals(targets=len(rows), not_buildable=len(corpus.not_buildable))
    counters = {AGREE: "agree", FALSE_ERROR: "false_errors", MISSED: "missed",
                WRONG_CAUSE: "wrong_cause", TOOL_FAILURE: "tool_failures",
                NOT_JUDGED: "not_judged"}
    for row in rows:
        attribute = counters[row.agreement]
        setattr(totals, attribute, getattr(totals, attribute) + 1)
        if row.truth.ok and row.lens is not None:
            totals.lens_seconds += row.lens_seconds
            totals.truth_seconds += row.truth_seconds
    return totals


def disagreements(rows: list[Row]) -> list[Row]:
    return [row for row in rows if row.agreement in DISAGREEMENTS]
