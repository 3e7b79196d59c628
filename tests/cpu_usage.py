"""How much CPU each test used, for whoever makes the test run faster next (wall durations
say little where more processes than cores share them).

``ONNXLENS_TEST_CPU=DIR`` (scripts/test.sh sets it under ``ONNXLENS_TEST_REPORTS``): each
pytest process appends one line per test to ``DIR/cpu-<pid>.tsv``: the test id and the CPU
seconds its setup, call and teardown used, the process's own and that of every process below
it, ended or still running (workers, servers, exports, installs; a module's language server
and the corpus's warm truth parent, which live across tests, are counted in the tests during
which they work, not at their end or never). ``python -m tests.cpu_usage DIR`` prints the
totals by module.
"""

from __future__ import annotations

import os
import resource
import sys
from collections import Counter
from pathlib import Path

ENVIRONMENT_VARIABLE = "ONNXLENS_TEST_CPU"


def cpu_seconds() -> float:
    """The CPU time of this process and of every process below it: those it reaped, and
    those still running with what they reaped (export_worker.process_tree)."""
    from export_worker.process_tree import tree_cpu_seconds

    tree = tree_cpu_seconds(os.getpid())
    if tree is not None:
        return tree
    own = resource.getrusage(resource.RUSAGE_SELF)  # no /proc: the ended children only
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def record(directory: str, test_id: str, seconds: float) -> None:
    with open(Path(directory) / f"cpu-{os.getpid()}.tsv", "a", encoding="utf-8") as file:
        file.write(f"{test_id}\t{seconds:.2f}\n")


def by_module(directory: Path) -> Counter[str]:
    totals: Counter[str] = Counter()
    for path in directory.glob("cpu-*.tsv"):
        for line in path.read_text(encoding="utf-8").splitlines():
            test_id, _, seconds = line.rpartition("\t")
            totals[test_id.split("::", 1)[0]] += float(seconds)
    return totals


def main(argv: list[str]) -> int:
    totals = by_module(Path(argv[0]))
    print(f"{sum(totals.values()):8.1f}  CPU seconds in all")
    for module, seconds in totals.most_common():
        print(f"{seconds:8.1f}  {module}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
