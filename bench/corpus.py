"""``bench/run.py --only corpus``: every buildable real target of the differential corpus
(tests/corpus: transformers, torchvision, timm, diffusers, ExportDB), onnxlens's check against
the plain exporter's own work for it, in the same run, on each tested torch. Never pass/fail.

* **onnxlens**: one ``onnxlens check --format json --fix-budget 0 --jobs 1`` over every file;
  a target's time is the sum of its stage times after ``load`` (what it spent in the worker
  once the model was built: the plain side's timing starts with a built model too; ``load``,
  which also runs the eager forward the comparisons need, is printed beside it).
* **plain**: ``torch.onnx.export(..., dynamo=True)`` + an ONNX Runtime session + one run, in
  a fork of one warm process (``bench/baseline.py``): each target exported once untimed, then
  timed; a failing one, how long it took to fail.

It prints the distribution of the ratio onnxlens/plain over the targets both exported
(median, p90, max) and every target above 1.0 with where its time went (its stage times).

    .venv/bin/python bench/run.py --only corpus [--corpus-select REGEX] [--corpus-source S]
    .venv-torch2.15.0/bin/python -m bench.corpus measure OUT.json [--select REGEX]  # one torch
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
#: the corpus's real sources (its fixtures, examples, export scripts and variants are ours)
REAL_SOURCES = ("exportdb", "transformers", "torchvision", "timm", "diffusers")


@dataclass
class TargetTimes:
    source: str
    file: str  # relative to the corpus workspace
    target: str
    stages: dict[str, float] = field(default_factory=dict)  # onnxlens's, by stage
    lens_ok: bool = False
    plain_seconds: float | None = None  # None: the plain export failed
    plain_error: str = ""
    plain_failed_seconds: float | None = None  # how long the plain export took to fail

    @property
    def fails_in_both(self) -> bool:
        return bool(self.stages) and not self.lens_ok and self.plain_failed_seconds is not None

    @property
    def lens_seconds(self) -> float:
        """After ``load``: the plain side's timing starts with a built model too."""
        return sum(seconds for name, seconds in self.stages.items() if name != "load")

    @property
    def ratio(self) -> float | None:
        if not self.plain_seconds or not self.stages:
            return None
        return self.lens_seconds / self.plain_seconds


# -- one torch: measure ----------------------------------------------------------------------

def measure(out: Path, select: str | None, jobs: int,
            sources: tuple[str, ...] = REAL_SOURCES) -> None:
    """Materialize the real sources, check them with onnxlens, time the plain exporter on each
    target, and write every target's times to ``out`` (run by this torch's interpreter)."""
    sys.path.insert(0, str(REPO))
    from tests.corpus.corpus import materialize

    with tempfile.TemporaryDirectory(prefix="onnxlens-bench-corpus-") as directory:
        workspace = Path(directory)
        corpus = materialize(workspace, sources, jobs,
                             log=lambda line: print(line, file=sys.stderr))
        pattern = re.compile(select) if select else None
        corpus = corpus.select(lambda file, target: pattern is None or bool(
            pattern.search(f"{file.label}::{target}")))
        found = {(str(f.path), t): TargetTimes(f.source, f.label, t)
                 for f in corpus.files for t in f.targets}
        print(f"{len(found)} targets in {len(corpus.files)} files", file=sys.stderr)
        _onnxlens_times(found, sorted({Path(path) for path, _ in found}), workspace)
        _plain_times(found)
    out.write_text(json.dumps([asdict(times) for times in found.values()], indent=1))


def _onnxlens_times(found: dict[tuple[str, str], TargetTimes], files: list[Path],
                    workspace: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(workspace)])}
    done = subprocess.run([sys.executable, "-m", "onnxlens", "check", *map(str, files),
                           "--format", "json", "--fix-budget", "0", "--jobs", "1",
                           "--root", str(workspace)], env=env, capture_output=True,
                          text=True, cwd=workspace, check=False)
    report = json.loads(done.stdout)
    for target in report["targets"]:
        path = str((workspace / target["path"]).resolve())
        times = found.get((path, target["name"]))
        if times is not None:
            times.stages = {s["name"]: s["seconds"] for s in target["stages"]
                            if s["state"] != "skipped"}
            times.lens_ok = target["ok"]


@dataclass
class PlainTimes:
    """The plain exporter on one target, as a forked child reports it."""

    seconds: float | None = None
    failed_seconds: float | None = None
    error: str = ""


def _plain_times(found: dict[tuple[str, str], TargetTimes]) -> None:
    """Each target in a fork of this process, which imports torch and the exporter once: a
    warm-up export, then the timed one (the target's model and inputs built by the pragma, not
    timed). A fork each, so that a target whose export brings the process down (torch 2.15.0
    aborted in native code on hf.mimi_encoder's second export, after another target's failed
    one) is a row, not the end of the run."""
    import warnings

    import onnxruntime  # noqa: F401 - imported once, before the forks
    import torch.onnx  # noqa: F401

    warnings.simplefilter("ignore")
    for (path, name), times in found.items():
        plain = _in_fork(f"{path}::{name}")
        times.plain_seconds, times.plain_failed_seconds = plain.seconds, plain.failed_seconds
        times.plain_error = plain.error
        print(f"plain {times.file}::{name}: {times.plain_seconds or times.plain_error}",
              file=sys.stderr)


def _in_fork(spec: str) -> PlainTimes:
    from bench.forked import in_fork

    data, status = in_fork(lambda: json.dumps(asdict(_plain_target(spec))).encode())
    if not data:
        return PlainTimes(error=f"the process ended without an answer (exit status {status})")
    return PlainTimes(**json.loads(data))


def _plain_target(spec: str) -> PlainTimes:
    from bench.baseline import export_and_run, load

    started = None
    try:
        loaded = load(spec)
        with contextlib.suppress(Exception):  # a warm-up: the timed export fails alike
            export_and_run(*loaded)
        started = time.perf_counter()
        return PlainTimes(seconds=export_and_run(*loaded))
    except Exception as error:  # a failing export is a row, not the end of the run
        return PlainTimes(
            failed_seconds=None if started is None else time.perf_counter() - started,
            error=traceback.format_exception_only(type(error), error)[-1].strip())


# -- the report ------------------------------------------------------------------------------

def summary(rows: list[TargetTimes], torch: str) -> list[str]:
    """The ratio's distribution and the targets above 1.0, as Markdown lines."""
    ratios = sorted(ratio for row in rows if (ratio := row.ratio) is not None)
    if not ratios:
        return [f"torch {torch}: no target exported by both ({len(rows)} measured).",
                *_failing_summary(rows)]
    p90 = ratios[min(len(ratios) - 1, math.ceil(0.9 * len(ratios)) - 1)]
    lines = [f"torch {torch}: {len(ratios)} targets exported by both (of {len(rows)}): "
             f"ratio onnxlens/plain median **{statistics.median(ratios):.2f}**, p90 "
             f"**{p90:.2f}**, max **{ratios[-1]:.2f}**.", ""]
    slow = sorted((row for row in rows if (row.ratio or 0) > 1.0), key=lambda r: -(r.ratio or 0))
    if slow:
        lines += ["| target | ratio | onnxlens after load (s) | plain (s) | "
                  "onnxlens's stages (s) |", "|---|---|---|---|---|"]
        lines += [f"| {row.file}::{row.target} | {row.ratio:.2f} | {row.lens_seconds:.1f} | "
                  f"{row.plain_seconds:.1f} | "
                  + ", ".join(f"{name} {seconds:.1f}" for name, seconds in row.stages.items())
                  + " |" for row in slow]
    return lines + _failing_summary(rows)


def _failing_summary(rows: list[TargetTimes]) -> list[str]:
    """The targets that fail in both: onnxlens's whole check (after ``load``; it goes on
    looking for more problems once the export is known to fail) against the time the plain
    export took to raise."""
    failing = [row for row in rows if row.fails_in_both and row.plain_failed_seconds]
    if not failing:
        return []
    ratios = sorted(row.lens_seconds / (row.plain_failed_seconds or 1) for row in failing)
    p90 = ratios[min(len(ratios) - 1, math.ceil(0.9 * len(ratios)) - 1)]
    lines = ["", f"{len(failing)} targets fail in both: onnxlens's complete check against the "
             f"plain export's time to fail, median **{statistics.median(ratios):.2f}**, p90 "
             f"**{p90:.2f}**, max **{ratios[-1]:.2f}**.", ""]
    slow = sorted((row for row in failing
                   if row.lens_seconds > (row.plain_failed_seconds or 0)),
                  key=lambda r: -r.lens_seconds / (r.plain_failed_seconds or 1))
    if slow:
        lines += ["| failing target | ratio | onnxlens after load (s) | plain, to fail (s) | "
                  "onnxlens's stages (s) |", "|---|---|---|---|---|"]
        lines += [f"| {row.file}::{row.target} | "
                  f"{row.lens_seconds / (row.plain_failed_seconds or 1):.2f} | "
                  f"{row.lens_seconds:.1f} | {row.plain_failed_seconds:.1f} | "
                  + ", ".join(f"{name} {seconds:.1f}" for name, seconds in row.stages.items())
                  + " |" for row in slow]
    return lines


def bench_corpus(pythons: dict[str, str], select: str | None, jobs: int = 2,
                 sources: tuple[str, ...] = REAL_SOURCES) -> list[str]:
    """Every tested torch in turn (one measuring process each, the machine otherwise idle)."""
    lines: list[str] = []
    for torch, python in pythons.items():
        with tempfile.TemporaryDirectory() as directory:
            out = Path(directory) / "times.json"
            started = time.perf_counter()
            command = [python, "-m", "bench.corpus", "measure", str(out), "--jobs", str(jobs),
                       *(f"--source={source}" for source in sources)]
            done = subprocess.run(command + (["--select", select] if select else []),
                                  cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                                  check=False)
            if done.returncode != 0 or not out.exists():
                lines += [f"torch {torch}: the measuring process failed (exit "
                          f"{done.returncode}).", ""]
                continue
            rows = [TargetTimes(**row) for row in json.loads(out.read_text())]
            lines += summary(rows, torch)
            lines += ["", f"({time.perf_counter() - started:.0f} s for torch {torch}.)", ""]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    measuring = commands.add_parser("measure", help="one torch: write every target's times")
    measuring.add_argument("out", type=Path)
    measuring.add_argument("--select", help="only targets whose FILE::TARGET matches")
    measuring.add_argument("--jobs", type=int, default=2, help="processes building models")
    measuring.add_argument("--source", action="append", choices=REAL_SOURCES,
                           help="only this source (repeatable; default: all five)")
    report = commands.add_parser("report", help="the summary of a measure's file")
    report.add_argument("times", type=Path)
    report.add_argument("--torch", default="?")
    args = parser.parse_args(argv)
    if args.command == "measure":
        measure(args.out, args.select, args.jobs, tuple(args.source or REAL_SOURCES))
    else:
        rows = [TargetTimes(**row) for row in json.loads(args.times.read_text())]
        print("\n".join(summary(rows, args.torch)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
