"""export_worker/namespace_watch.py: which lookups of a warm import's operator namespace count
as reached (in a process of their own: the watch patches ``builtins.__import__`` and
``torch.ops`` for good, as in a job process)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO

SCRIPT = '''
import json, sys, types
import torch
from export_worker.namespace_watch import NamespaceWatch, operator_namespaces

for ns in ("ns_used", "ns_enumerated", "ns_imported", "ns_defined"):
    library = torch.library.Library(ns, "DEF")
    library.define("twice(Tensor x) -> Tensor")
    library.impl("twice", lambda x: x * 2, "CompositeExplicitAutograd")
    globals()["keep_" + ns] = library
assert {"ns_used", "ns_enumerated", "ns_imported"} <= operator_namespaces()
torch.ops.ns_used  # cached by the worker before the job: the watch drops it
sys.modules["owner_pkg"] = types.ModuleType("owner_pkg")
watch = NamespaceWatch({ns: frozenset({"owner_pkg"}) for ns in
                        ("ns_used", "ns_enumerated", "ns_imported", "ns_defined")})
watch.start()
exec("import torch\\ny = torch.ops.ns_used.twice(torch.ones(2))", {"__name__": "model"})
exec("import torch\\nz = getattr(torch.ops, 'ns_enumerated')", {"__name__": "torch._export.x"})
try:  # the user's own library of a namespace the warm import took
    exec("import torch\\nlib = torch.library.Library('ns_defined', 'DEF')", {"__name__": "m"})
except RuntimeError:
    pass
exec("import owner_pkg, torch\\nw = torch.ops.ns_imported.twice", {"__name__": "other"})
print(json.dumps({"reached": sorted(watch.reached()), "imported": sorted(watch.imported)}))
'''


def test_only_a_lookup_by_code_that_never_imported_the_owner_is_reached():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          cwd=REPO, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    # ns_enumerated: looked up by the toolchain's code; ns_imported: after `import owner_pkg`
    assert found["reached"] == ["ns_defined", "ns_used"]
    assert {"torch", "owner_pkg"} <= set(found["imported"])
