"""``python -m tests.corpus``: judge onnxlens's verdicts against the plain exporter's on the
whole differential corpus, print the table and totals; exit 1 on any disagreement.

    .venv/bin/python -m tests.corpus [--only exportdb|transformers|fixtures|examples]...
                                     [--jobs N] [--select REGEX] [--markdown FILE] [--json FILE]
                                     [--keep-workspace DIR] [--no-cache] [--batch]
                                     [--env NAME=VALUE]...
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

from tests.corpus.common import to_json
from tests.corpus.corpus import SOURCES, Corpus, materialize
from tests.corpus.fixes import confirm_fixes, fix_table, fix_totals, fix_totals_line
from tests.corpus.harness import Outcome, Totals, disagreements, run_corpus
from tests.corpus.judge import Row


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _seconds(value: float) -> str:
    return f"{value:.1f}" if value else "-"


def table(rows: list[Row]) -> list[list[str]]:
    header = ["source", "file", "target", "truth", "onnxlens", "agreement",
              "plain s", "onnxlens s", "detail"]
    body = [[row.source, row.file, row.target, row.truth_verdict, row.lens_verdict,
             row.agreement, _seconds(row.truth_seconds), _seconds(row.lens_seconds),
             row.detail] for row in rows]
    return [header, *body]


def runtime_table(rows: list[Row]) -> list[list[str]]:
    """Each target judged on a runtime besides ONNX Runtime's CPU provider (docs/runtimes.md):
    the runtime by itself on the plain model (OpenVINO, ONNX Runtime Web; NNAPI and CoreML by
    ONNX Runtime's mobile usability checker), and onnxlens's deploy stage."""
    phases = {"openvino-cpu": {"openvino": "fails", "openvino_mismatch": "differs"},
              "ort-web": {"ort_web": "fails", "ort_web_mismatch": "differs"}}
    body = []
    for row in rows:
        truth, lens = row.truth, row.lens
        ran = {r.runtime: r for r in lens.runtimes
               if r.precision == "fp32"} if lens is not None else {}
        phase = truth.failure.phase if truth.failure is not None else ""
        for runtime, failures in phases.items():
            if runtime not in truth.runtime_seconds and runtime not in ran:
                continue
            plain = failures.get(phase) or ("matches" if runtime in truth.runtimes else "-")
            mine = ran.get(runtime)
            body.append([row.target, runtime, plain, mine.state if mine else "-",
                         row.agreement, f"{truth.runtime_seconds.get(runtime, 0.0):.2f}",
                         f"{mine.seconds:.2f}" if mine else "-"])
        for runtime, checked in sorted(truth.mobile.items()):  # ONNX Runtime's table
            mine = ran.get(runtime)
            body.append([row.target, runtime, f"{len(checked.left)} of {checked.nodes} to CPU",
                         f"{len(mine.unsupported)} of {mine.nodes} to CPU" if mine else "-",
                         row.agreement, "-", f"{mine.seconds:.2f}" if mine else "-"])
    header = ["target", "runtime", "runtime alone", "onnxlens", "agreement", "alone s",
              "onnxlens s"]
    return [header, *body] if body else []


def totals_lines(totals: Totals, wall: float) -> list[str]:
    return [
        f"targets {totals.targets}: agree {totals.agree}, false errors {totals.false_errors}, "
        f"missed {totals.missed}, wrong cause {totals.wrong_cause}, tool failures "
        f"{totals.tool_failures}, not judged {totals.not_judged}; "
        f"not buildable {totals.not_buildable}"
        + (f"; onnxlens errors the truth did not run, confirmed on the plain exporter's model: "
           f"{totals.claims_confirmed}" if totals.claims_confirmed else ""),
        f"time onnxlens/plain {totals.ratio:.2f} (stage times {totals.lens_seconds:.0f} s vs "
        f"export+ORT {totals.truth_seconds:.0f} s, on the targets both exported); processes: "
        f"onnxlens {totals.lens_wall:.0f} s, truth {totals.truth_wall:.0f} s (not cached); "
        f"wall {wall:.0f} s",
    ]


def render_text(rows: list[list[str]], width: int = 70) -> str:
    clipped = [[cell if len(cell) <= width else cell[:width - 1] + "…" for cell in row]
               for row in rows]
    widths = [max(len(row[i]) for row in clipped) for i in range(len(clipped[0]))]
    return "\n".join("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
                     for row in clipped)


def render_markdown(rows: list[list[str]], outcome: Outcome, corpus: Corpus,
                    wall: float) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["# Differential corpus", "", *[f"* {line}" for line in
                                           totals_lines(outcome.totals, wall)], "",
             "| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows[1:]]
    runtimes = runtime_table(outcome.rows)
    if runtimes:
        lines += ["", "## Runtimes", "", "| " + " | ".join(runtimes[0]) + " |",
                  "|" + "---|" * len(runtimes[0])]
        lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in runtimes[1:]]
    if corpus.not_buildable:
        lines += ["", "## Not buildable", "", "| source | name | reason |", "|---|---|---|"]
        lines += [f"| {n.source} | {n.name} | {cell(n.reason)} |" for n in corpus.not_buildable]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.corpus", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", choices=SOURCES,
                        help="only this part of the corpus (repeatable; fixtures includes "
                        "examples)")
    parser.add_argument("--jobs", type=int, default=2, help="subprocesses at a time")
    parser.add_argument("--select", help="only targets whose name or file matches this regex")
    parser.add_argument("--timm-families", metavar="NAMES",
                        help="comma-separated timm modules to probe (default: all 98; "
                        "tests/corpus/README.md)")
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    parser.add_argument("--json", type=Path,
                        help="also write every row here (truth and onnxlens in full)")
    parser.add_argument("--keep-workspace", type=Path,
                        help="materialize into this directory (kept) instead of a temporary one")
    parser.add_argument("--no-cache", action="store_true", help="recompute every truth")
    parser.add_argument("--batch", action="store_true",
                        help="check the files of one root together, in up to --jobs onnxlens "
                        "processes (faster; default: one process per file)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="extra environment variable for onnxlens (repeatable)")
    parser.add_argument("--truth-timeout", type=float, default=300.0)
    parser.add_argument("--fix-budget", type=float, default=0.0, metavar="SECONDS",
                        help="let onnxlens try fixes for each failing target for this long, "
                        "then judge every fix it shows with the plain exporter "
                        "(tests/corpus/fixes.py; default 0: the verdicts alone)")
    options = parser.parse_args(argv)
    sources = list(options.only or SOURCES)
    if "fixtures" in sources and "examples" not in sources:
        sources.append("examples")
    env = dict(item.split("=", 1) for item in options.env)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="onnxlens-corpus-") as temporary:
        workspace = options.keep_workspace or Path(temporary)
        workspace.mkdir(parents=True, exist_ok=True)
        families = options.timm_families.split(",") if options.timm_families else None
        corpus = materialize(workspace.resolve(), sources, options.jobs, log=_log,
                             timm_families=families)
        if options.select:
            pattern = re.compile(options.select)
            corpus = corpus.select(lambda f, t: bool(pattern.search(t) or pattern.search(f.label)))
        count = sum(len(f.targets) + len(f.annotation_problems) for f in corpus.files)
        _log(f"{count} targets in {len(corpus.files)} files; workspace {workspace}")
        outcome = run_corpus(corpus, options.jobs, env=env, batch=options.batch,
                             use_cache=not options.no_cache,
                             timeout=options.truth_timeout, log=_log,
                             fix_budget=options.fix_budget)
        checks = confirm_fixes(outcome.rows, options.jobs, timeout=options.truth_timeout,
                               use_cache=not options.no_cache) if options.fix_budget else []
    wall = time.perf_counter() - started
    rows = table(outcome.rows)
    print(render_text(rows))
    print()
    for line in totals_lines(outcome.totals, wall):
        print(line)
    runtimes = runtime_table(outcome.rows)
    if runtimes:
        print()
        print(render_text(runtimes))
    fixes = fix_totals(outcome.rows, checks)
    if options.fix_budget:
        print()
        print(render_text(fix_table(outcome.rows, checks), width=120))
        print(fix_totals_line(fixes))
    if options.json:
        options.json.write_text(json.dumps({
            "totals": to_json(outcome.totals), "rows": to_json(outcome.rows),
            "not_buildable": to_json(corpus.not_buildable),
            "fixes": {"totals": to_json(fixes), "shown": [
                {"file": c.row.file, "target": c.row.target, "fix": c.trial.key,
                 "plain exporter": c.truth, "confirmed": c.confirmed} for c in checks]},
        }, indent=1), encoding="utf-8")
    if options.markdown:
        options.markdown.write_text(render_markdown(rows, outcome, corpus, wall),
                                    encoding="utf-8")
    return 1 if disagreements(outcome.rows) or fixes.false_fixes else 0


if __name__ == "__main__":
    sys.exit(main())
