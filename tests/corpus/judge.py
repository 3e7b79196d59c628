"""Agreement of onnxlens's verdict with the plain exporter's, per target.

* truth OK (exported, ONNX Runtime ran, outputs match, at the other size too) ⇒ onnxlens must
  report no error (warnings are fine), else **false error**;
* truth failed ⇒ onnxlens must report an error of the rule family of the failing phase, located
  (primary or related location) on a line of the truth's traceback inside the workspace when the
  truth has such a frame; no error at all is **missed**, errors of another family or elsewhere
  are **wrong cause**;
* an ONNX9xx diagnostic, a crash, a timeout or unreadable output of onnxlens is a
  **tool failure**; a truth that timed out or crashed without a phase, or a skipped target
  (``weights="none"``), is **not judged**.

A false error made only of onnxlens's runs at sizes the truth did not run is then replayed on
the plain exporter's model (``tests/corpus/claims.py``): confirmed, it agrees.

A mobile provider named (``nnapi``, ``coreml``) is judged on top of an agreement: ONNX
Runtime's mobile usability checker, run on the plain model in the truth's process, must leave
as many nodes of as large a graph to the CPU as onnxlens's summary says (a fallback where it
leaves none is a **false error**, none where it leaves some is **missed**, another count, or
no ONNX705 at a workspace line of a left-out node's stack trace, is a **wrong cause**).
Fallbacks are warnings, so this is the only place they are judged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.corpus.corpus import AnnotationProblem, CorpusFile
from tests.corpus.lens import LensDiagnostic, LensFile, LensTarget, Place
from tests.corpus.truth import ErrorInfo, Failure, Frame, MobileTruth, TruthResult

AGREE, FALSE_ERROR, MISSED, WRONG_CAUSE, TOOL_FAILURE, NOT_JUDGED = (
    "agree", "false error", "missed", "wrong cause", "tool failure", "not judged")
DISAGREEMENTS = (FALSE_ERROR, MISSED, WRONG_CAUSE, TOOL_FAILURE)

# The rule ids (or prefixes) that report a failure of each truth phase.
FAMILIES: dict[str, tuple[str, ...]] = {
    "import": ("ONNX0",), "annotation": ("ONNX0",), "build": ("ONNX0",), "eager": ("ONNX0",),
    "capture": ("ONNX1",), "translate": ("ONNX2",), "export": ("ONNX1", "ONNX2"),
    "checker": ("ONNX3",), "ort_session": ("ONNX401",), "ort_run": ("ONNX402",),
    "dynamic": ("ONNX403", "ONNX102", "ONNX107"), "mismatch": ("ONNX5",),
    "openvino": ("ONNX701", "ONNX702"), "openvino_mismatch": ("ONNX703",),
    "ort_web": ("ONNX701", "ONNX702"), "ort_web_mismatch": ("ONNX703",),
    "precision": ("ONNX702",), "precision_loss": ("ONNX706", "ONNX707"),
}
_NOT_USER_CODE = ("site-packages", "/.venv/", "/tests/corpus/", "<frozen", "<string>")


@dataclass
class Row:
    source: str
    file: str  # label: relative to the repository or the generated workspace
    target: str
    truth: TruthResult
    lens: LensTarget | None
    lens_failure: str
    agreement: str
    detail: str

    @property
    def truth_verdict(self) -> str:
        if self.truth.status == "failed" and self.truth.failure:
            return f"fails: {self.truth.failure.phase}"
        if self.truth.status == "crashed" and self.truth.failure:
            return f"crashes: {self.truth.failure.phase}"
        return self.truth.status

    @property
    def lens_verdict(self) -> str:
        if self.lens_failure:
            return "tool failure"
        if self.lens is None:
            return "-"
        errors = sorted({d.rule for d in self.lens.errors})
        warnings = sorted({d.rule for d in self.lens.diagnostics if d.severity != "error"})
        if not errors:
            return "clean" + (f" (warn {','.join(warnings)})" if warnings else "")
        return ",".join(errors)

    @property
    def truth_seconds(self) -> float:
        return self.truth.export_seconds + self.truth.ort_seconds

    @property
    def lens_seconds(self) -> float:
        return self.lens.seconds if self.lens else 0.0


def workspace_lines(failure: Failure | None, root: Path) -> set[tuple[str, int]]:
    """(file, line) of every traceback frame (and every ``File "...", line N`` named in a
    message) of the failure's exception chain that lies in the workspace."""
    if failure is None:
        return set()
    root = root.resolve()
    lines = set()
    for error in failure.errors:
        for frame in [*error.frames, *error.message_frames]:
            path = Path(frame.path)
            if not path.is_absolute() or any(part in frame.path for part in _NOT_USER_CODE):
                continue
            resolved = path.resolve()
            if resolved.is_relative_to(root):
                lines.add((str(resolved), frame.line))
    return lines


def _places(diagnostic: LensDiagnostic) -> list[Place]:
    return [diagnostic.place, *diagnostic.related]


def _on_lines(diagnostic: LensDiagnostic, lines: set[tuple[str, int]]) -> bool:
    return any((place.path, line) in lines for place in _places(diagnostic)
               for line in range(place.line, max(place.end_line, place.line) + 1))


def agreement(truth: TruthResult, diagnostics: list[LensDiagnostic],
              root: Path) -> tuple[str, str]:
    """(agreement, detail) of one target whose onnxlens check ran."""
    errors = [d for d in diagnostics if d.severity == "error"]
    broken = [d for d in diagnostics if d.rule.startswith("ONNX9")]
    if broken:
        return TOOL_FAILURE, broken[0].headline
    if truth.status == "skipped" or truth.status == "timeout" or (
            truth.status == "crashed" and truth.failure is None):
        return NOT_JUDGED, truth.note or truth.status
    if truth.status == "ok":
        if errors:
            return FALSE_ERROR, "; ".join(d.headline for d in errors[:3])
        return AGREE, ""
    failure = truth.failure
    assert failure is not None
    if not errors:
        return MISSED, f"truth: {failure.phase}: {failure.headline}"
    family = FAMILIES.get(failure.phase, ())
    fitting = [d for d in errors if d.rule.startswith(family)]
    expected = f"expected {'/'.join(family)} for {failure.phase}: {failure.headline}"
    if not fitting:
        found = "; ".join(d.headline for d in errors[:3])
        return WRONG_CAUSE, f"{expected}; onnxlens: {found}"
    lines = workspace_lines(failure, root)
    if lines and not any(_on_lines(d, lines) for d in fitting):
        where = ", ".join(f"{Path(p).name}:{n}" for p, n in sorted(lines))
        found = "; ".join(d.headline for d in fitting[:3])
        return WRONG_CAUSE, f"{expected}; truth's lines {where}; onnxlens: {found}"
    return AGREE, ""


def mobile_agreement(truths: dict[str, MobileTruth], lens: LensTarget,
                     root: Path) -> tuple[str, str]:
    """(agreement, detail) of each mobile provider onnxlens's summary and the checker judged:
    the same count, and an ONNX705 at a line of each left-out node's stack trace in the
    workspace (when it has such a line)."""
    for runtime, truth in sorted(truths.items()):
        run = next((r for r in lens.runtimes if r.runtime == runtime and r.precision == "fp32"),
                   None)
        if run is None:
            return WRONG_CAUSE, f"{runtime}: onnxlens has no verdict; the checker's: " \
                f"{len(truth.left)} of {truth.nodes} nodes left to the CPU"
        said = (f"{runtime}: the checker leaves {len(truth.left)} of {truth.nodes} nodes to "
                f"the CPU ({', '.join(truth.left[:5]) or 'none'}); onnxlens: "
                f"{len(run.unsupported)} of {run.nodes} ({run.state})")
        if truth.left and not run.unsupported:
            return MISSED, said
        if run.unsupported and not truth.left:
            return FALSE_ERROR, said
        if (len(run.unsupported), run.nodes) != (len(truth.left), truth.nodes):
            return WRONG_CAUSE, said
        fallbacks = [d for d in lens.diagnostics if d.rule == "ONNX705"]
        for trace in truth.traces:
            lines = workspace_lines(Failure("", [ErrorInfo("", "", trace)]), root)
            if lines and not any(_on_lines(d, lines) for d in fallbacks):
                where = ", ".join(f"{Path(p).name}:{n}" for p, n in sorted(lines))
                return WRONG_CAUSE, f"{runtime}: no ONNX705 at a line of a node left out ({where})"
    return AGREE, ""


def annotation_truth(corpus_file: CorpusFile, problem: AnnotationProblem) -> TruthResult:
    """A rejected pragma has no target to export: the truth is the pragma's own line."""
    return TruthResult(str(corpus_file.path), f"(pragma, line {problem.line})", "failed",
                       failure=Failure("annotation", [ErrorInfo(
                           "invalid annotation", problem.message,
                           [Frame(str(corpus_file.path.resolve()), problem.line, "")])]))


def judge_file(corpus_file: CorpusFile, truths: dict[str, TruthResult],
               lens: LensFile) -> list[Row]:
    rows = []
    for name in corpus_file.targets:
        truth = truths[name]
        target = lens.targets.get(name)
        if lens.failure or target is None:
            failure = lens.failure or "onnxlens reported no such target"
            rows.append(Row(corpus_file.source, corpus_file.label, name, truth, target,
                            failure, TOOL_FAILURE, failure))
            continue
        verdict, detail = agreement(truth, target.diagnostics, corpus_file.root)
        if verdict == AGREE:
            verdict, detail = mobile_agreement(truth.mobile, target, corpus_file.root)
        rows.append(Row(corpus_file.source, corpus_file.label, name, truth, target, "",
                        verdict, detail))
    for problem in corpus_file.annotation_problems:
        truth = annotation_truth(corpus_file, problem)
        loose = LensTarget(truth.target, not any(d.severity == "error" for d in lens.loose),
                           [], list(lens.loose))
        if lens.failure:
            rows.append(Row(corpus_file.source, corpus_file.label, truth.target, truth, None,
                            lens.failure, TOOL_FAILURE, lens.failure))
            continue
        verdict, detail = agreement(truth, loose.diagnostics, corpus_file.root)
        rows.append(Row(corpus_file.source, corpus_file.label, truth.target, truth, loose, "",
                        verdict, detail))
    return rows
