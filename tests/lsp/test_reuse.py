"""A check's result is reused only while nothing it depends on changed: the document text, the
settings, and the content of the workspace modules it imports. A check that reads a data file
is always run again. ``ResultCache`` (lsp_server/reuse.py) on its own, then in a real server."""

from __future__ import annotations

import dataclasses
import os
import sys
import textwrap

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from export_worker.inputs import digest
from export_worker.messages import CheckAnswer, JobDone, JobFailed, JobInputs, JobRequest
from exporter.config.options import ExportOptions
from exporter.findings.positions import Range
from exporter.findings.result import CheckResult
from exporter.source.targets import Target
from exporter.toolchain import shortcuts
from lsp_server.reuse import ResultCache, installed_packages
from tests.lsp.conftest import (
    SERVER,
    open_file,
    record_publishes,
    server_status,
    session,
    uri_of,
    wait_for,
)

WORKER = "4242/0"  # the worker process: its pid and how often it was restarted


def check_request(root, text: str = "import helper\n", name: str = "Model",
                  path: str = "model.py", **changes) -> JobRequest:
    target = Target(name, root / path, "class", name, Range.of(3, 1, 4, 9))
    request = JobRequest("check", target, str(root), text=text,
                         timeout=60.0, memory_limit_mb=4096, record_inputs=True,
                         progress=True, id="job-1")
    return dataclasses.replace(request, **changes)


def done(root) -> JobDone:
    """A check that read the workspace module ``helper.py``."""
    helper = str(root / "helper.py")
    return JobDone("job-1", CheckAnswer(CheckResult(),
                                      inputs=JobInputs({helper: digest(helper)})),
                   seconds=1.0, pid=4242)


@pytest.fixture
def root(tmp_path):
    (tmp_path / "helper.py").write_text("SCALE = 2\n")
    return tmp_path


def test_the_same_request_to_the_same_worker_reuses_the_result(root):
    cache = ResultCache()
    outcome = done(root)
    cache.put(check_request(root), WORKER, outcome, installed_packages())
    # another request for the same check: only its id differs
    assert cache.get(check_request(root, id="job-2"), WORKER) is outcome
    assert (cache.checked, cache.reused) == (1, 1)


@pytest.mark.parametrize("change", [
    {"text": "import helper\n# edited\n"},
    {"name": "Other"},
    {"path": "/elsewhere/model.py"},
    {"settings": ExportOptions(opset=18)},
    {"settings": ExportOptions(atol=1e-3)},
    {"timeout": 5.0},
    {"memory_limit_mb": 1024},
], ids=lambda change: next(iter(change)))
def test_a_request_that_differs_is_checked_again(root, change):
    cache = ResultCache()
    cache.put(check_request(root), WORKER, done(root), installed_packages())
    assert cache.get(check_request(root, **change), WORKER) is None


@pytest.mark.parametrize("worker", ["4243/0", "4242/1"], ids=["another-pid", "restarted"])
def test_another_worker_process_checks_again(root, worker):
    """``onnxlens.restartWorker`` forgets every result: the restart count is part of it."""
    cache = ResultCache()
    cache.put(check_request(root), WORKER, done(root), installed_packages())
    assert cache.get(check_request(root), worker) is None


def test_an_imported_module_edited_on_disk_is_checked_again(root):
    cache = ResultCache()
    cache.put(check_request(root), WORKER, done(root), installed_packages())
    (root / "helper.py").write_text("SCALE = 3\n")
    assert cache.get(check_request(root), WORKER) is None


def test_a_package_installed_since_the_check_is_checked_again(root, monkeypatch):
    site = root / "venv" / "site-packages"
    site.mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    cache = ResultCache()
    cache.put(check_request(root), WORKER, done(root), installed_packages())
    assert cache.get(check_request(root), WORKER) is not None
    (site / "newpkg-1.0.dist-info").mkdir()  # what `pip install newpkg` adds
    stamp = os.stat(site).st_mtime_ns + 1_000_000_000  # a coarse clock sees it too
    os.utime(site, ns=(stamp, stamp))
    assert cache.get(check_request(root), WORKER) is None


def test_a_check_that_read_a_data_file_is_never_reused(root):
    cache = ResultCache()
    unreusable = dataclasses.replace(done(root), answer=CheckAnswer(CheckResult(),
                                                                  inputs=None))
    cache.put(check_request(root), WORKER, unreusable, installed_packages())
    assert cache.get(check_request(root), WORKER) is None
    assert cache.checked == 1


def test_a_job_without_an_answer_is_never_reused(root):
    cache = ResultCache()
    cache.put(check_request(root), WORKER, JobFailed("job-1", "timeout"), installed_packages())
    assert cache.get(check_request(root), WORKER) is None


def test_reuse_has_an_off_switch(root, monkeypatch):
    cache = ResultCache()
    cache.put(check_request(root), WORKER, done(root), installed_packages())
    monkeypatch.setenv(shortcuts.ENVIRONMENT_VARIABLE, "result-reuse")
    assert cache.get(check_request(root), WORKER) is None


def test_the_least_recently_used_result_is_forgotten_first(root):
    cache = ResultCache(limit=2)
    first, second, third = (check_request(root, target=name) for name in ["A", "B", "C"])
    for request in (first, second):
        cache.put(request, WORKER, done(root), installed_packages())
    assert cache.get(first, WORKER) is not None  # used again: kept over the second
    cache.put(third, WORKER, done(root), installed_packages())
    assert [cache.get(r, WORKER) is not None for r in (first, second, third)] == \
        [True, False, True]


def test_every_result_can_be_forgotten(root):
    cache = ResultCache()
    cache.put(check_request(root), WORKER, done(root), installed_packages())
    cache.clear()
    assert cache.get(check_request(root), WORKER) is None


# -- in a real server ----------------------------------------------------------------------

MODEL = textwrap.dedent("""\
    from pathlib import Path

    import torch

    from helper import scale


    # onnx-export: args=(torch.rand(2, 3),)
    class Scaled(torch.nn.Module):
        def forward(self, x):
            return scale(x)


    # onnx-export: args=(torch.rand(2, 3),)
    def from_data():
        factor = float(Path(__file__).with_name("factor.txt").read_text())
        return torch.nn.Hardtanh(-factor, factor)
""")
HELPER = "import torch\n\n\ndef scale(x):\n    return {body}\n"


def _write_workspace(root) -> None:
    (root / "model.py").write_text(MODEL)
    (root / "helper.py").write_text(HELPER.format(body="torch.sigmoid(x) * 2"))
    (root / "factor.txt").write_text("2.0")


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, tmp_path):
    _write_workspace(tmp_path)
    async with session(lsp_client, tmp_path):
        yield


async def _published(client: LanguageClient, publishes: list, uri: str, action) -> list[str]:
    """Do ``action`` and wait for the next check result of ``uri`` (not what a check
    published early, ``data.early``); its rules."""
    before = len(publishes)
    action()
    await wait_for(lambda: any(p.uri == uri and not any(
        isinstance(d.data, dict) and d.data.get("early") for d in p.diagnostics)
        for p in publishes[before:]), what=f"diagnostics of {uri}")
    return sorted(str(d.code) for d in client.diagnostics.get(uri, []))


def _save(client: LanguageClient, uri: str) -> None:
    client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))


def _change_settings(client: LanguageClient, settings: dict[str, object]) -> None:
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"onnxlens": settings}))


async def _counts(client: LanguageClient) -> tuple[int, int]:
    results = (await server_status(client))["results"]
    return results["checked"], results["reused"]


async def _counts_reach(client: LanguageClient, expected: tuple[int, int]) -> tuple[int, int]:
    """The counts once the check in flight has finished both targets (each target's result
    is published as it ends: the first publish can come before the other target is done)."""
    import asyncio

    deadline = asyncio.get_running_loop().time() + 90
    counts = await _counts(client)
    while counts != expected and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.2)
        counts = await _counts(client)
    return counts


async def test_results_are_reused_only_while_their_inputs_are_unchanged(client: LanguageClient):
    root = client.workspace_root
    publishes = record_publishes(client)
    uri = uri_of(root / "model.py")

    assert await _published(client, publishes, uri, lambda: open_file(client, root / "model.py")) \
        == []
    assert await _counts(client) == (2, 0)  # two targets, both run

    # Saved again unchanged: the target that imports only modules is reused, the one that
    # reads factor.txt runs again.
    assert await _published(client, publishes, uri, lambda: _save(client, uri)) == []
    assert await _counts(client) == (3, 1)

    # The imported module changed on disk: the same document is checked again and the new
    # problem is found, at its own line in the helper (the call in model.py is its chain).
    helper = uri_of(root / "helper.py")
    (root / "helper.py").write_text(HELPER.format(body="torch.special.i0(x)"))
    assert await _published(client, publishes, uri, lambda: _save(client, uri)) == []
    assert await _counts_reach(client, (5, 1)) == (5, 1)
    assert sorted(str(d.code) for d in client.diagnostics.get(helper, [])) == ["ONNX201"]

    # A setting that reaches the check (the opset) is part of what must be unchanged; the
    # open document is checked again as soon as it changes, without a save or a restart.
    assert await _published(client, publishes, uri, lambda: _change_settings(
        client, {"opset": 20})) == []
    assert await _counts_reach(client, (7, 1)) == (7, 1)

    # Unchanged again: reused, with the helper's problem still reported.
    assert await _published(client, publishes, uri, lambda: _save(client, uri)) == []
    assert await _counts_reach(client, (8, 2)) == (8, 2)
    assert sorted(str(d.code) for d in client.diagnostics.get(helper, [])) == ["ONNX201"]

    # A setting that changes only what is shown applies at once too, from the reused result.
    assert await _published(client, publishes, uri, lambda: _change_settings(
        client, {"opset": 20, "ignore": ["ONNX201"]})) == []
    assert await _counts_reach(client, (9, 3)) == (9, 3)
    await wait_for(lambda: list(client.diagnostics.get(helper, [None])) == [],
                   what="the ignored rule gone from the helper")


NO_REUSE = pytest_lsp.ClientServerConfig(
    server_command=SERVER.server_command,
    server_env={**(SERVER.server_env or {}), shortcuts.ENVIRONMENT_VARIABLE: "result-reuse"})


@pytest_lsp.fixture(config=NO_REUSE)
async def client_without_reuse(lsp_client: LanguageClient, tmp_path):
    _write_workspace(tmp_path)
    async with session(lsp_client, tmp_path):
        yield


async def test_result_reuse_has_an_off_switch(client_without_reuse: LanguageClient):
    client = client_without_reuse
    root = client.workspace_root
    publishes = record_publishes(client)
    uri = uri_of(root / "model.py")
    assert await _published(client, publishes, uri, lambda: open_file(client, root / "model.py")) \
        == []
    assert await _published(client, publishes, uri, lambda: _save(client, uri)) == []
    assert await _counts(client) == (4, 0)  # saved unchanged: both targets run again


DEPLOYED = textwrap.dedent("""\
    import torch


    # onnx-export: args=(torch.rand(2, 3),), runtimes=["openvino-cpu", "ort-web"],
    #     precision=["fp16", "int8"]
    class Deployed(torch.nn.Module):
        def forward(self, x):
            return torch.sigmoid(x) * 2
""")


@pytest_lsp.fixture(config=SERVER)
async def deployed_client(lsp_client: LanguageClient, tmp_path):
    (tmp_path / "model.py").write_text(DEPLOYED)
    async with session(lsp_client, tmp_path):
        yield


async def test_a_check_on_other_runtimes_and_precisions_is_reused_too(
        deployed_client: LanguageClient):
    """Issue 43: the deploy stage writes the model for OpenVINO, ONNX Runtime Web and the
    quantizer, and reads their answers back; what a check wrote itself is no input, so the
    result is reused as any other."""
    client = deployed_client
    root = client.workspace_root
    publishes = record_publishes(client)
    uri = uri_of(root / "model.py")
    assert await _published(client, publishes, uri, lambda: open_file(client, root / "model.py")) \
        == []
    assert await _counts(client) == (1, 0)
    assert await _published(client, publishes, uri, lambda: _save(client, uri)) == []
    assert await _counts(client) == (1, 1)  # saved unchanged: reused, not checked again
