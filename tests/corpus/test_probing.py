"""The probe workers (tests/corpus/probing.py): a model that prints while it is built or run
is no result of the probe (a transformers model that printed ended a whole corpus run)."""

from __future__ import annotations

from tests.corpus.probing import probe_cached

NOISY_PROBE = """\
import os
import subprocess
import sys

from tests.corpus.probing import emit, quiet

quiet()
for name in sys.argv[1:]:
    print("{not a result", flush=True)
    os.write(1, b"written to the descriptor\\n")
    subprocess.run([sys.executable, "-c", "print('a child process prints')"], check=True)
    emit({"name": name, "buildable": True, "reason": ""})
"""


def test_what_a_probed_model_prints_is_no_result(tmp_path):
    (tmp_path / "noisy_probe.py").write_text(NOISY_PROBE)
    cache = tmp_path / "cache" / "noisy.jsonl"
    found = probe_cached("noisy_probe", ["first", "second"], cache, jobs=1, item_seconds=60,
                         env={"PYTHONPATH": str(tmp_path)})
    assert found == {"first": {"name": "first", "buildable": True, "reason": ""},
                     "second": {"name": "second", "buildable": True, "reason": ""}}
