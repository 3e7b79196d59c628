"""Warm third-party imports (export_worker/warm_imports.py) in a real worker: an installed
package a check imported is imported by the worker ahead of the next check; one whose import
starts a thread is not; a package that changes on disk is picked up by a new worker, and the
check runs there with the new code (a stale module would give a wrong verdict)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch
from pytest_lsp import ClientServerConfig

from check_service.files import find_target
from export_worker import global_state
from export_worker.client import WorkerClient
from export_worker.messages import JobDone, JobRequest
from export_worker.warm_imports import WarmImports, _probe, _thread_count
from tests.conftest import REPO
from tests.lsp.conftest import (
    SERVER,
    close_file,
    command,
    diagnostics_for,
    open_file,
    served,
    server_status,
)
from tests.warm_side_effects import (
    SIDE_EFFECT,
    SIDE_EFFECT_PACKAGE,
    USES,
    install,
    python_path_with,
    site_packages,
)
from tests.warm_side_effects import workspace as side_effect_workspace

MODEL = '''import torch

import branchpkg
import threadpkg


# onnx-export: args=(torch.rand(4) + 0.5,)
class Branchy(torch.nn.Module):
    def forward(self, x):
        if branchpkg.USE_I0:
            return torch.special.i0(x)
        return x * threadpkg.FACTOR
'''


def write_package(site: Path, name: str, source: str) -> None:
    package = site / name
    package.mkdir(parents=True, exist_ok=True)
    init = package / "__init__.py"
    init.write_text(source)
    later = init.stat().st_mtime + 10  # a change even within the file system's resolution
    os.utime(init, (later, later))


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> Path:
    """A model importing two "installed" packages (a directory named site-packages on
    PYTHONPATH, as a virtualenv's): one the worker may import ahead, one whose import starts a
    thread."""
    site = tmp_path / "env" / "lib" / "site-packages"
    write_package(site, "branchpkg", "USE_I0 = False\n")
    write_package(site, "threadpkg", "import threading, time\n\nFACTOR = 2.0\n"
                  "threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    project = tmp_path / "project"
    project.mkdir()
    (project / "model.py").write_text(MODEL)
    return project


async def check(client: WorkerClient, workspace: Path) -> JobDone:
    target = find_target(workspace / "model.py", "Branchy")
    outcome = await client.submit(JobRequest("check", target, str(workspace), timeout=120))
    assert isinstance(outcome, JobDone), outcome
    return outcome


def rules(outcome: JobDone) -> list[str]:
    assert outcome.answer.result is not None
    (target,) = outcome.answer.result.targets
    return [d.rule for d in target.diagnostics]


async def test_installed_packages_are_imported_ahead_and_reimported_when_they_change(
        workspace):
    client = WorkerClient(spare=False)
    await client.start()
    try:
        first = await check(client, workspace)
        assert rules(first) == []
        assert {"branchpkg", "threadpkg"} <= set(first.library_imports)
        status = await client.status()
        assert status is not None
        assert "branchpkg" in status.warm_imports
        assert "threadpkg" not in status.warm_imports  # it starts a thread; the worker forks
        pid = client.pid

        second = await check(client, workspace)
        assert rules(second) == []
        assert "branchpkg" not in second.library_imports  # imported ahead
        assert "threadpkg" in second.library_imports  # imported by the check again

        site = Path(os.environ["PYTHONPATH"].split(os.pathsep)[0])
        write_package(site, "branchpkg", "USE_I0 = True\n")  # `pip install` a new version
        third = await check(client, workspace)
        assert rules(third) == ["ONNX201"]  # the new code, not the module imported ahead
        assert client.pid != pid  # a new worker took over and ran the check
    finally:
        await client.stop()


@pytest.mark.primary_torch  # the switch is read by the worker, whatever the torch
async def test_warm_imports_have_an_off_switch(workspace, monkeypatch):
    monkeypatch.setenv("ONNXLENS_SHORTCUTS_OFF", "warm-imports")
    client = WorkerClient(spare=False)
    await client.start()
    try:
        await check(client, workspace)
        status = await client.status()
        assert status is not None and status.warm_imports == []
        second = await check(client, workspace)
        assert "branchpkg" in second.library_imports
    finally:
        await client.stop()


# -- packages whose import changes global state (issue 24, defect 4) -------------------------

#: (a package's source, what the probe's reason names; None: it may be imported ahead)
PACKAGES = {
    "sideeffect_pkg": (SIDE_EFFECT, "torch.get_default_dtype(): torch.float32 -> torch.float64"),
    "functions_only": ("def twice(x):\n    return 2 * x\n", None),
    "sets_environ": ("import os\n\nos.environ['ONNXLENS_TEST_FLAG'] = '1'\n",
                     "os.environ: added ONNXLENS_TEST_FLAG"),
    "patches_gelu": ("import torch.nn.functional as F\n\n"
                     "F.gelu = lambda x, approximate='none': x\n",
                     "torch.nn.functional: changed gelu"),
    "patches_tensor": ("import torch\n\ntorch.Tensor.twice = lambda self: 2 * self\n",
                       "torch.Tensor: added twice"),
    "no_grad": ("import torch\n\ntorch.set_grad_enabled(False)\n",
                "torch.is_grad_enabled(): True -> False"),
    "no_mkldnn": ("import torch\n\ntorch.backends.mkldnn.enabled = False\n",
                  "torch backends: mkldnn_enabled: True -> False"),
    "deterministic": ("import torch\n\ntorch.use_deterministic_algorithms(True)\n",
                      "torch.are_deterministic_algorithms_enabled(): False -> True"),
    "meta_device": ("import torch\n\ntorch.set_default_device('meta')\n",
                    "torch.get_default_device(): 'cpu' -> 'meta'"),
    "seeds": ("import torch\n\ntorch.manual_seed(1234)\n", "torch random state"),
    "matmul_precision": ("import torch\n\ntorch.set_float32_matmul_precision('medium')\n",
                         "torch.get_float32_matmul_precision(): 'highest' -> 'medium'"),
    "aten_kernel": ("import torch\n\nLIBRARY = torch.library.Library('aten', 'IMPL')\n"
                    "LIBRARY.impl('digamma', lambda x: x, 'CPU')\n",
                    "torch.library impls: added aten/digamma/CPU"),
    "errors_on_warnings": ("import warnings\n\nwarnings.simplefilter('error')\n",
                           "warnings.filters (error)"),
    "own_operator": ("import torch\n\n"
                     "torch.library.define('own_operator::twice', '(Tensor x) -> Tensor')\n"
                     "torch.library.impl('own_operator::twice', 'CPU', lambda x: 2 * x)\n",
                     None),
    "own_pytree_node": ("import torch.utils._pytree as pytree\n\nclass Pair:\n"
                        "    def __init__(self, a, b):\n        self.a, self.b = a, b\n\n"
                        "pytree.register_pytree_node(Pair, lambda p: ((p.a, p.b), None),\n"
                        "                            lambda values, context: Pair(*values))\n",
                        None),
    "quiet": ("import logging, warnings\n\nwarnings.filterwarnings('ignore', module='quiet')\n"
              "logging.getLogger('quiet').setLevel(logging.ERROR)\n", None),
}


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_the_probe_refuses_a_package_whose_import_changes_global_state(
        name, tmp_path, monkeypatch):
    """The probe (a fork of this process, which imported torch, as the worker has) imports
    each package: one that changes global state a check can observe is refused with a
    reason naming the change; a benign one is accepted."""
    source, change = PACKAGES[name]
    site = site_packages(tmp_path)
    install(site, name, source)
    install(site / name, "sub", "X = 1\n")
    monkeypatch.syspath_prepend(str(site))
    safe, refused = _probe([name, f"{name}.sub"])
    if change is None:
        assert (safe, refused) == ([name, f"{name}.sub"], {})
        return
    assert safe == []
    why = refused[name]
    assert why.startswith("importing it changes global state a check can observe ("), why
    assert change in why
    assert refused[f"{name}.sub"] == why  # the package is refused whole
    assert torch.get_default_dtype() == torch.float32  # the probe was a fork


def test_the_fingerprint_takes_no_thread_and_sees_no_change_by_itself():
    before = global_state.snapshot()
    threads = _thread_count()
    assert global_state.changes(before, global_state.snapshot()) == []
    assert _thread_count() == threads


async def test_a_package_changing_state_only_in_the_worker_retires_it(tmp_path, monkeypatch):
    """Belt and braces: a package the probe saw change nothing, but whose import in the
    worker itself did (here: from its third import on), is in the worker all the same; the
    worker forks no check from that state, and the next check runs in a new worker."""
    site, project = side_effect_workspace(tmp_path)
    counter = tmp_path / "imports.txt"
    install(site, "sneaky_pkg", (
        "import os\n\nimport torch\n\n"
        "with open(os.environ['SNEAKY_COUNTER'], 'a') as counter:\n    counter.write('.')\n"
        "if os.path.getsize(os.environ['SNEAKY_COUNTER']) >= 3:  # the job, the probe, the "
        "worker\n    torch.set_default_dtype(torch.float64)\n\nSCALE = 2.0\n"))
    (project / "uses.py").write_text(USES.replace(SIDE_EFFECT_PACKAGE, "sneaky_pkg"))
    monkeypatch.setenv("SNEAKY_COUNTER", str(counter))
    monkeypatch.setenv("PYTHONPATH", python_path_with(site))
    output: list[str] = []
    client = WorkerClient(spare=False, on_output=output.append)
    await client.start()
    try:
        uses = find_target(project / "uses.py", "UsesPackage")
        used = await client.submit(JobRequest("check", uses, str(project), timeout=120))
        assert isinstance(used, JobDone) and "sneaky_pkg" in used.library_imports
        pid = client.pid
        float32 = find_target(project / "plain.py", "Float32Input")
        plain = await client.submit(JobRequest("check", float32, str(project), timeout=120))
        assert isinstance(plain, JobDone), plain
        assert rules(plain) == []  # not ONNX004: float32 weights, as in a fresh process
        assert client.pid != pid  # a new worker ran it
        assert counter.read_text() == "..."
        assert any("changed what a check can observe, though the probe saw no change: "
                   "torch.get_default_dtype(): torch.float32 -> torch.float64" in line
                   for line in output), output
    finally:
        await client.stop()


def _input_elem_type(path: Path) -> int:
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return model.graph.input[0].type.tensor_type.elem_type


async def test_save_model_of_an_unrelated_file_stays_float32(tmp_path):
    """Issue 24 (defect 4): once another document's check imported a package that sets
    torch's default dtype to float64, the worker imported it ahead, and `onnxlens.saveModel`
    of an unrelated target wrote a float64 model (input elem_type 11, not 1)."""
    site, project = side_effect_workspace(tmp_path)
    server = ClientServerConfig(server_command=SERVER.server_command, server_env={
        **(SERVER.server_env or {}),
        "PYTHONPATH": os.pathsep.join([str(REPO), str(site)])})
    async with served(project, config=server) as client:
        plain = open_file(client, project / "plain.py")
        try:
            assert await diagnostics_for(client, plain) == []
            before = await command(client, "onnxlens.saveModel", plain, "Mlp",
                                   str(tmp_path / "before.onnx"))
            assert before["saved"] is True
            assert _input_elem_type(tmp_path / "before.onnx") == 1  # FLOAT

            uses = open_file(client, project / "uses.py")
            assert await diagnostics_for(client, uses) == []
            after = await command(client, "onnxlens.saveModel", plain, "Mlp",
                                  str(tmp_path / "after.onnx"))
            assert after["saved"] is True
            assert _input_elem_type(tmp_path / "after.onnx") == 1  # FLOAT, not DOUBLE (11)
            status = await server_status(client)
            assert SIDE_EFFECT_PACKAGE not in status["worker"]["warm_imports"]
            close_file(client, uses)
        finally:
            close_file(client, plain)


def test_a_package_refused_for_its_side_effects_is_not_probed_again(tmp_path, monkeypatch,
                                                                     capsys):
    site = site_packages(tmp_path)
    install(site, SIDE_EFFECT_PACKAGE, SIDE_EFFECT)
    install(site / SIDE_EFFECT_PACKAGE, "sub", "X = 1\n")
    monkeypatch.syspath_prepend(str(site))
    warm = WarmImports(enabled=True)
    warm.learn([SIDE_EFFECT_PACKAGE, f"{SIDE_EFFECT_PACKAGE}.sub"])
    try:
        warm.import_pending()  # nothing is imported here: the probe refuses both
    finally:  # (had it imported the package here, the later tests would not suffer)
        torch.set_default_dtype(torch.float32)
    assert warm.imported == [] and set(warm.refused) == {SIDE_EFFECT_PACKAGE,
                                                         f"{SIDE_EFFECT_PACKAGE}.sub"}
    assert SIDE_EFFECT_PACKAGE not in sys.modules
    assert (f"onnxlens worker: not importing {SIDE_EFFECT_PACKAGE} (2 modules) ahead: "
            "importing it changes global state a check can observe (torch.get_default_dtype()"
            ": torch.float32 -> torch.float64") in capsys.readouterr().err
    warm.learn([f"{SIDE_EFFECT_PACKAGE}.other"])  # a module the next check imported
    assert warm.pending == set()
