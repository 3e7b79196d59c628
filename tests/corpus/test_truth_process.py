"""The truth's warm parent (tests/corpus/truth_process.py) is a speed shortcut of the judge, so
it must not change a truth: forked or started in a fresh interpreter, every target of a sample
(models that write to their standard streams or fail to build, examples, ExportDB
examples) gets the same verdict; and either way a target past its timeout is killed together
with what it started, and nothing it wrote under the temporary directory stays."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import process_exists
from tests.corpus.corpus import CorpusFile, exportdb_names, materialize_exportdb, project_files
from tests.corpus.truth import SizeRun, TruthResult, run_truth
from tests.corpus.truth_process import SWITCH

pytestmark = pytest.mark.corpus

#: fixtures whose model writes to stdout and stderr (at the Python and the fd level) or fails
#: before the export; examples that fail in translation and at another size; every eighteenth
#: ExportDB example (each target costs a fresh interpreter's seconds: a sample, not the corpus)
FIXTURES = ("stdio", "constructor_error", "import_error")
EXAMPLES = ("custom_translation.py", "fixed_batch.py")
EXPORTDB_EVERY = 18


def _sample(workspace: Path) -> list[CorpusFile]:
    files = [f for f in project_files("examples").files if f.path.name in EXAMPLES]
    files += [f for f in project_files("fixtures").files if f.path.parent.name in FIXTURES]
    chosen = {f"exportdb_{name}.py" for name in exportdb_names()[::EXPORTDB_EVERY]}
    files += [f for f in materialize_exportdb(workspace).files if f.path.name in chosen]
    return files


def _size_run(run: SizeRun | None) -> object:
    if run is None:
        return None
    return (run.sizes, run.why, [(o.index, o.dtype, o.eager_shape, o.ort_shape, o.matched)
                                 for o in run.outputs])


def verdict(result: TruthResult) -> object:
    """What the judge reads of a truth (not its timings, not values that follow random weights)."""
    failure = result.failure
    return (result.status, result.exported, result.note,
            failure and (failure.phase, [error.type for error in failure.errors]),
            _size_run(result.example), _size_run(result.lower_bound),
            _size_run(result.other_size))


def test_forked_and_fresh_truths_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sample = _sample(tmp_path)
    assert len(sample) == 2 + 5 + len(exportdb_names()[::EXPORTDB_EVERY])
    truths: dict[str, dict[tuple[str, str], object]] = {}
    for switch in ("1", "0"):
        monkeypatch.setenv(SWITCH, switch)
        truths[switch] = {(str(f.path), target): verdict(run_truth(f.path, target, f.root,
                                                                   use_cache=False))
                          for f in sample for target in f.targets}
    assert truths["1"] == truths["0"]
    statuses = {v[0] for v in truths["1"].values()}  # type: ignore[index]
    assert {"ok", "failed"} <= statuses  # the sample holds both verdicts


HANGS = '''
import os
import subprocess
import tempfile
import time
from pathlib import Path

import torch


# onnx-export: args=(torch.randn(2, 3),)
class Hangs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        child = subprocess.Popen(["sleep", "300"])
        Path(__file__).with_name("child.pid").write_text(str(child.pid))
        Path(__file__).with_name("cwd").write_text(os.getcwd())
        Path(__file__).with_name("temporary").write_text(tempfile.mkdtemp())
        time.sleep(300)

    def forward(self, x):
        return x
'''


@pytest.mark.parametrize("switch", ["1", "0"])
def test_a_target_past_its_timeout_is_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             switch: str) -> None:
    monkeypatch.setenv(SWITCH, switch)
    model = tmp_path / "hangs.py"
    model.write_text(textwrap.dedent(HANGS))
    result = run_truth(model, "Hangs", tmp_path, timeout=8, use_cache=False)
    assert result.status == "timeout"
    assert result.note == "no result after 8 s (in phase build)"
    child = int((tmp_path / "child.pid").read_text())  # what the model started goes with it
    deadline = time.monotonic() + 5
    while process_exists(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not process_exists(child)
    # nor does what it wrote stay: its working directory and its temporary files are gone
    for written in ("cwd", "temporary"):
        left = Path((tmp_path / written).read_text())
        assert left.is_absolute() and not left.exists(), written
