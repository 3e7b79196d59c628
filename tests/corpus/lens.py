"""onnxlens's verdict on one file: ``onnxlens check --format json FILE --root ROOT`` in its own
subprocess, read back into dataclasses.

Extra environment variables pass through (``env=``), so the same corpus can be checked with a
speed shortcut switched off and the verdicts compared: :meth:`LensTarget.verdict` is the part of
a result that must not change (rules, severities, locations), without times or numbers.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.corpus.common import ONNXLENS, PRECISION_VARIABLE, RUNTIMES_VARIABLE, child_env

FILE_TIMEOUT = 60.0  # per file, plus PER_TARGET_TIMEOUT per target
PER_TARGET_TIMEOUT = 320.0  # onnxlens stops a target itself after 300 s (ONNX901)


@dataclass(frozen=True)
class Place:
    path: str  # absolute
    line: int
    column: int = 0
    end_line: int = 0
    end_column: int = 0


@dataclass
class LensDiagnostic:
    rule: str
    severity: str
    message: str
    place: Place
    related: list[Place] = field(default_factory=list)
    target: str = ""
    #: the sizes a run at other sizes fed (ONNX403, a confirmed ONNX107), by dimension name
    sizes: dict[str, int] = field(default_factory=dict)

    @property
    def headline(self) -> str:
        first = self.message.splitlines()[0] if self.message else ""
        return f"{self.rule} {self.severity} line {self.place.line}: {first}"[:240]


@dataclass
class LensStage:
    name: str
    state: str
    seconds: float
    reason: str = ""


@dataclass(frozen=True)
class LensEdit:
    place: Place  # the range replaced (absolute path)
    text: str


@dataclass
class LensTrial:
    """A fix onnxlens tried (``--fix-budget``; docs/fixes.md)."""

    key: str
    source: str
    title: str
    verdict: str  # works, fails, not-tried
    seconds: float
    detail: str
    edits: list[LensEdit]


@dataclass(frozen=True)
class LensRuntime:
    """The deploy stage's verdict on one runtime (the summary's ``runtimes``)."""

    runtime: str
    state: str  # matches, differs, fails, not run here
    seconds: float
    precision: str = "fp32"  # the model as exported, or a precision variant
    nodes: int | None = None  # the runtime's own graph
    unsupported: tuple[str, ...] = ()  # the nodes it cannot take (or leaves to the CPU)


@dataclass
class LensTarget:
    name: str
    ok: bool
    stages: list[LensStage]
    diagnostics: list[LensDiagnostic]
    fix_trials: list[LensTrial] = field(default_factory=list)
    runtimes: list[LensRuntime] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return sum(stage.seconds for stage in self.stages)

    @property
    def errors(self) -> list[LensDiagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    def verdict(self) -> tuple[Any, ...]:
        """What a speed shortcut must leave unchanged."""
        return (self.ok, tuple(sorted((d.rule, d.severity, d.place, tuple(d.related))
                                      for d in self.diagnostics)))


@dataclass
class LensFile:
    path: str
    exit_code: int
    targets: dict[str, LensTarget] = field(default_factory=dict)
    # diagnostics that belong to no discovered target (a rejected pragma)
    loose: list[LensDiagnostic] = field(default_factory=list)
    failure: str = ""  # timeout, crash, exit status 2, unreadable output
    wall_seconds: float = 0.0


def _place(root: Path, entry: dict[str, Any]) -> Place:
    path = Path(entry["path"])
    rng = entry["range"]
    return Place(str((path if path.is_absolute() else root / path).resolve()),
                 rng["start"]["line"], rng["start"]["column"],
                 rng["end"]["line"], rng["end"]["column"])


def parse(report: dict[str, Any], paths: list[Path], root: Path,
          exit_code: int) -> dict[str, LensFile]:
    """Split one report into its files (``paths``; target names are unique among them)."""
    files = {str(path.resolve()): LensFile(str(path), exit_code) for path in paths}
    owners: dict[str, LensTarget] = {}
    for target in report["targets"]:
        path = Path(target["path"])
        owner = files.get(str((path if path.is_absolute() else root / path).resolve()))
        if owner is None:
            continue
        owners[target["name"]] = owner.targets[target["name"]] = LensTarget(
            target["name"], bool(target["ok"]),
            [LensStage(s["name"], s["state"], float(s["seconds"]), s.get("reason", ""))
             for s in target["stages"]], [],
            [LensTrial(t["key"], t["source"], t["title"], t["verdict"], float(t["seconds"]),
                       t["detail"], [LensEdit(_place(root, e), e["text"]) for e in t["edits"]])
             for t in target.get("fix_trials", [])],
            [LensRuntime(r["runtime"], r["state"], float(r["seconds"]),
                         r.get("precision", "fp32"), r.get("nodes"),
                         tuple(r.get("unsupported") or ()))
             for r in (target.get("summary") or {}).get("runtimes", [])])
    for entry in report["diagnostics"]:
        diagnostic = LensDiagnostic(entry["rule"], entry["severity"], entry["message"],
                                    _place(root, entry),
                                    [_place(root, r) for r in entry.get("related", [])],
                                    entry.get("target", ""),
                                    dict((entry.get("data") or {}).get("sizes") or {}))
        target = owners.get(diagnostic.target)
        if target is not None:
            target.diagnostics.append(diagnostic)
        elif diagnostic.place.path in files:
            files[diagnostic.place.path].loose.append(diagnostic)
    return {str(path): files[str(path.resolve())] for path in paths}


def run_onnxlens(path: Path, root: Path, targets: int = 1, *,
                 env: dict[str, str] | None = None, timeout: float | None = None,
                 fix_budget: float = 0.0) -> LensFile:
    """Check one file in its own process."""
    return run_onnxlens_files([path], root, targets, env=env, timeout=timeout,
                              fix_budget=fix_budget)[str(path)]


def run_onnxlens_files(paths: list[Path], root: Path, targets: int = 1, *,
                       env: dict[str, str] | None = None, timeout: float | None = None,
                       fix_budget: float = 0.0) -> dict[str, LensFile]:
    """Check several files of one root in one process (``targets``: how many they hold, for
    the timeout). Paths in the report are resolved against ``root``, the working directory.
    ``fix_budget``: seconds per failing target to try fixes (0: the verdict alone)."""
    command = [str(ONNXLENS), "check", "--format", "json", *map(str, paths), "--root", str(root),
               "--fix-budget", f"{fix_budget:g}"]
    runtimes = os.environ.get(RUNTIMES_VARIABLE)
    if runtimes:  # the corpus judged on these runtimes too (the truth reads the same)
        command += ["--runtimes", runtimes]
    precision = os.environ.get(PRECISION_VARIABLE)
    if precision:
        command += ["--precision", precision]
    limit = timeout or FILE_TIMEOUT * len(paths) + (PER_TARGET_TIMEOUT + fix_budget) \
        * max(targets, 1)
    started = time.perf_counter()

    def failed(code: int, reason: str, wall: float) -> dict[str, LensFile]:
        return {str(p): LensFile(str(p), code, failure=reason, wall_seconds=wall / len(paths))
                for p in paths}

    try:
        process = subprocess.run(command, cwd=root, env=child_env(env), capture_output=True,
                                 text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return failed(-1, f"timed out after {limit:g} s", limit)
    wall = time.perf_counter() - started
    tail = " | ".join(process.stderr.strip().splitlines()[-3:])[:500]
    if process.returncode not in (0, 1):
        return failed(process.returncode, f"exit status {process.returncode}: {tail}", wall)
    try:
        results = parse(json.loads(process.stdout), paths, root, process.returncode)
    except (ValueError, KeyError, TypeError) as error:
        return failed(process.returncode, f"unreadable JSON ({error}): {tail}", wall)
    for result in results.values():
        result.wall_seconds = wall / len(paths)
    return results
