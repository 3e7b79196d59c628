"""onnxlens benchmarks: every figure is a ratio against plain ``torch.onnx.export`` measured in
the same run, alternating baseline and onnxlens. Prints tables and appends them to
``bench/RESULTS.md``. Never pass/fail.

    .venv/bin/python bench/run.py [--quick] [--only recheck,cold,big,scaling,torches]
    .venv/bin/python bench/run.py --only real    # real models: transformers, torchvision
                                                 # (on the torch that has it), ~50 targets, 8 B
    .venv/bin/python bench/run.py --only load    # 50 model files opened at once
    .venv/bin/python bench/run.py --only fixes   # the verdict with fix trials on and off
    .venv/bin/python bench/run.py --only corpus  # every real corpus target, per torch (hours)

``real`` stands for real-recheck, real-torchvision, real-cold, real-scaling, jobs, big8b and
first (time to the first diagnostics on the failing examples).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pytest_lsp import ClientServerConfig, client_capabilities

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PYTHON = sys.executable
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
MODELS = {
    "(a) seed MLP": REPO / "examples" / "mlp.py",
    "(b) MNIST": REPO / "examples" / "mnist.py",
    "(c) 6-layer encoder": BENCH / "models" / "encoder.py",
}
#: real architectures from small configs (transformers), random weights
REAL_MODELS = {
    "(d) Llama (transformers)": BENCH / "models" / "llama.py",
    "(e) BERT (transformers)": BENCH / "models" / "bert.py",
    "(f) ViT (transformers)": BENCH / "models" / "vit.py",
}
#: checked on the tested torches whose venv has torchvision (bench_torches)
TORCHVISION_MODELS = {"(g) ResNet-18 (torchvision)": BENCH / "models" / "resnet.py"}
DEFAULT_SECTIONS = "recheck,cold,big,scaling,torches"
REAL_SECTIONS = "real-recheck,real-torchvision,real-cold,real-scaling,jobs,big8b,first"
TARGETS = {"(a) seed MLP": "MLPModel", "(b) MNIST": "MNISTModel",
           "(c) 6-layer encoder": "Encoder", "(d) Llama (transformers)": "Llama",
           "(e) BERT (transformers)": "Bert", "(f) ViT (transformers)": "ViT",
           "(g) ResNet-18 (torchvision)": "ResNet18"}


def stats(samples: list[float]) -> dict[str, float]:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples),
            "n": len(samples)}


def row(name: str, onnxlens: list[float], baseline: list[float], unit: str = "s") -> str:
    ours, theirs = stats(onnxlens), stats(baseline)
    ratio = ours["median"] / theirs["median"]
    return (f"| {name} | {ours['median']:.3f} {unit} ({ours['min']:.3f}–{ours['max']:.3f}) | "
            f"{theirs['median']:.3f} {unit} ({theirs['min']:.3f}–{theirs['max']:.3f}) | "
            f"**{ratio:.2f}** | {ours['n']} |")


# -- LSP plumbing --------------------------------------------------------------------------

async def start_server(root: Path, python: str = PYTHON,
                       settings: dict[str, Any] | None = None) -> Any:
    config = ClientServerConfig(server_command=[python, "-m", "lsp_server"], server_env=ENV)
    # the client carries what the benchmark records of its publishes (attributes of its own)
    client: Any = await config.start()
    client.publish_events = []
    client.fix_events = []  # publishes with a tried fix
    client.published = asyncio.Event()
    features = client.protocol.fm.features
    original = features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

    def recording(params: types.PublishDiagnosticsParams) -> None:
        early = any(isinstance(d.data, dict) and d.data.get("early") for d in params.diagnostics)
        client.publish_events.append((time.perf_counter(), params.uri, early))
        if any(isinstance(d.data, dict) and d.data.get("fixes") for d in params.diagnostics):
            client.fix_events.append((time.perf_counter(), params.uri))
        client.published.set()
        original(params)

    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = recording

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def refresh(params: None) -> None:
        return None

    await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        root_uri=root.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
        initialization_options={"trusted": True, "settings": settings or {}}))
    return client


async def stop_server(client: Any) -> None:
    await client.shutdown_session()
    await client.stop()


async def wait_publish(client: Any, uri: str, since: int, timeout: float = 300,
                       early: bool = False) -> float:
    """When the check's publish for ``uri`` after event ``since`` arrived (``early``: the first
    publish, also one made while the check still runs). Sleeps until a publish arrives:
    polling would take CPU from the check it measures (2 cores)."""
    deadline = time.monotonic() + timeout
    while True:
        client.published.clear()
        for stamp, published, is_early in client.publish_events[since:]:
            if published == uri and (early or not is_early):
                return stamp
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no diagnostics for {uri}")
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(client.published.wait(), remaining)


def open_document(client: Any, path: Path) -> str:
    uri = path.resolve().as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id="python", version=1, text=path.read_text())))
    return uri


async def save_edit(client: Any, path: Path, uri: str, version: int) -> float:
    """Edit (a comment), save, and return seconds from didSave to the publish."""
    text = path.read_text() + f"\n# bench edit {version}\n"
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
    since = len(client.publish_events)
    started = time.perf_counter()
    client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    return await wait_publish(client, uri, since) - started


async def save_unchanged(client: Any, uri: str) -> float:
    """Save again without an edit: the server reuses the last result (not a re-check)."""
    since = len(client.publish_events)
    started = time.perf_counter()
    client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    return await wait_publish(client, uri, since) - started


async def bench_first_diagnostic(repeats: int) -> list[str]:
    """Each failing example, and three real models whose capture fails (ViT with a dynamic
    image size, FSMT, EnCodec), edited and saved: seconds from didSave to its first
    diagnostics (torch's first error once every capture strategy failed, then what capture
    and translate found, published early) and to the check's complete set."""
    client = await start_server(REPO)
    lines = ["| failing example | didSave→first diagnostics | didSave→complete set | ratio | n |",
             "|---|---|---|---|---|"]
    try:
        failing = sorted((REPO / "examples" / "failing").glob("*.py"))
        real = [BENCH / "models" / name for name in ("vit_sizes.py", "fsmt.py", "encodec.py")]
        for path in [*failing, *real]:
            since = len(client.publish_events)
            uri = open_document(client, path)
            await wait_publish(client, uri, since)  # first check: warm-up
            first, complete = [], []
            for version in range(2, repeats + 2):
                text = path.read_text() + f"\n# bench edit {version}\n"
                client.text_document_did_change(types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri,
                                                                        version=version),
                    content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
                since = len(client.publish_events)
                started = time.perf_counter()
                client.text_document_did_save(types.DidSaveTextDocumentParams(
                    text_document=types.TextDocumentIdentifier(uri=uri)))
                first.append(await wait_publish(client, uri, since, early=True) - started)
                complete.append(await wait_publish(client, uri, since) - started)
            lines.append(row(path.name, first, complete))
    finally:
        await stop_server(client)
    return lines


#: seconds between a save and the one before it in bench_fix_trials
IDLE_BETWEEN_SAVES = 2.0


async def bench_fix_trials(repeats: int) -> list[str]:
    """A failing example whose fix is tried (ONNX102) and a real model that fails in
    transformers' code (Swin), edited and saved: seconds from didSave to the verdict with the
    fix trials on (the default budget) and off (``fixBudgetSeconds: 0``), alternating, each
    server idle while the other checks, 2 s after the last publish on both sides; and to the
    verdict published again with the fix."""
    servers = {"on": await start_server(REPO), "off": await start_server(
        REPO, settings={"fixBudgetSeconds": 0})}
    lines = ["| failing model | didSave→verdict, trials on | trials off | ratio | "
             "didSave→verdict with the tried fix | n |", "|---|---|---|---|---|---|"]
    try:
        for path in [REPO / "examples" / "failing" / "fixed_batch.py",
                     REPO / "tests" / "onnxlens" / "fixes" / "swin_attention.py"]:
            uris = {}
            for name, client in servers.items():  # first checks: warm-up
                since, fixed = len(client.publish_events), len(client.fix_events)
                uris[name] = open_document(client, path)
                await wait_publish(client, uris[name], since)
                if name == "on":
                    await _wait_fix(client, uris[name], fixed)
            verdict: dict[str, list[float]] = {"on": [], "off": []}
            with_fix = []
            for version in range(2, repeats + 2):
                for name, client in servers.items():
                    # a user's pause between saves, on both sides: the worker forks its
                    # spare again after the last job (docs/architecture.md §4)
                    await asyncio.sleep(IDLE_BETWEEN_SAVES)
                    fixed = len(client.fix_events)
                    started = time.perf_counter()
                    verdict[name].append(await save_edit(client, path, uris[name], version))
                    if name == "on":  # (didSave follows `started` by a few microseconds)
                        with_fix.append(await _wait_fix(client, uris[name], fixed) - started)
            ours, theirs = stats(verdict["on"]), stats(verdict["off"])
            lines.append(f"| {path.name} | {ours['median']:.2f} s ({ours['min']:.2f}–"
                         f"{ours['max']:.2f}) | {theirs['median']:.2f} s ({theirs['min']:.2f}–"
                         f"{theirs['max']:.2f}) | **{ours['median'] / theirs['median']:.2f}** | "
                         f"{statistics.median(with_fix):.2f} s | {ours['n']} |")
    finally:
        for client in servers.values():
            await stop_server(client)
    return lines


async def _wait_fix(client: Any, uri: str, since: int, timeout: float = 600) -> float:
    """When a publish for ``uri`` with a tried fix arrived, after fix event ``since``."""
    deadline = time.monotonic() + timeout
    while True:
        client.published.clear()
        for stamp, published in client.fix_events[since:]:
            if published == uri:
                return float(stamp)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no tried fix for {uri}")
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(client.published.wait(), remaining)


def _tree_usage(root_pid: int) -> tuple[int, float]:
    """(processes, summed RSS in MB) of ``root_pid`` and its descendants, from /proc. Pages
    a fork shares with the worker count once per process: an upper bound."""
    pending, count, rss_kb = [root_pid], 0, 0
    while pending:
        pid = pending.pop()
        try:
            with open(f"/proc/{pid}/status") as status:
                rss_kb += next((int(line.split()[1]) for line in status
                                if line.startswith("VmRSS:")), 0)
            count += 1
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as children:
                    pending += [int(child) for child in children.read().split()]
        except (OSError, ValueError):
            continue
    return count, rss_kb / 1024


async def bench_load(count: int) -> list[str]:
    """``count`` files, each a transformers Llama target of the size the issue "server under
    load" was measured on (4 layers, hidden size 256), opened at once with the middle one
    active, against one such file checked alone in the same server once warm (two files
    checked before it: the first teaches the worker to import transformers ahead)."""
    import shutil
    import tempfile

    scratch = Path(tempfile.mkdtemp(prefix="onnxlens-bench-load-"))
    small = REAL_MODELS["(d) Llama (transformers)"].read_text()
    source = small.replace("hidden_size=64, intermediate_size=128, head_dim=16,",
                           "hidden_size=256, intermediate_size=512, head_dim=64,")
    source = source.replace("num_hidden_layers=2,", "num_hidden_layers=4,")
    assert source.count("256") > small.count("256") and "num_hidden_layers=4" in source
    paths = []
    for index in range(count + 3):  # three more: two to warm up, and the lone check
        path = scratch / f"llama_{index:02d}.py"
        path.write_text(source.replace('name="Llama"', f'name="Llama{index}"'))
        paths.append(path)
    *warm_up, alone = paths[:3]
    opened = paths[3:]
    client = await start_server(scratch)
    try:
        for path in (*warm_up, alone):
            since = len(client.publish_events)
            started = time.perf_counter()
            uri = open_document(client, path)
            lone = await wait_publish(client, uri, since) - started
            await asyncio.sleep(2)  # the worker imports ahead and forks its spare
        worker = (await client.protocol.send_request_async("onnxlens/status", {})).worker.pid
        active = opened[len(opened) // 2].resolve().as_uri()
        client.protocol.notify("onnxlens/editors", {"active": active, "visible": [active]})
        peak_processes, peak_rss = 0, 0.0
        since = len(client.publish_events)
        started = time.perf_counter()
        uris = [open_document(client, path) for path in opened]
        active_done = asyncio.ensure_future(wait_publish(client, active, since))
        remaining = set(uris)
        while remaining:
            processes, rss = _tree_usage(worker)
            peak_processes, peak_rss = max(peak_processes, processes), max(peak_rss, rss)
            remaining -= {uri for _, uri, early in client.publish_events[since:] if not early}
            await asyncio.sleep(0.1)
        every = time.perf_counter() - started
        first = await active_done - started
        status = await client.protocol.send_request_async("onnxlens/status", {})
    finally:
        await stop_server(client)
        shutil.rmtree(scratch, ignore_errors=True)
    queue = status.queue
    return [f"{count} files, each a transformers Llama target (4 layers, hidden size 256), "
            f"opened at once with the middle one active; {queue.slots} checks at once, memory "
            f"budget {queue.budgetMB} MB (the settings' defaults on this machine).", "",
            "| figure | value |", "|---|---|",
            f"| one file checked alone (same server, warm) | {lone:.2f} s |",
            f"| the active file's diagnostics, {count} queued | {first:.2f} s "
            f"(**{first / lone:.2f}×** the lone check; goal ≤ 1.5×) |",
            f"| every file's diagnostics | {every:.1f} s ({every / count:.2f} s per file) |",
            f"| peak processes in the worker tree (worker, spare, checks) | {peak_processes} |",
            f"| peak RSS of the worker tree (shared pages counted per process) | "
            f"**{peak_rss:.0f} MB** (budget {queue.budgetMB} MB) |"]


class Baseline:
    """A warm process running plain torch.onnx.export + ORT session + run."""

    def __init__(self, python: str = PYTHON) -> None:
        self.process = subprocess.Popen([python, str(BENCH / "baseline.py")], env=ENV,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True, cwd=REPO)

    def time(self, path: Path, target: str) -> float:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(f"{path}::{target}\n")
        self.process.stdin.flush()
        return float(self.process.stdout.readline())

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


# -- 1 and 3: warm re-check and responsiveness ---------------------------------------------

async def bench_recheck(repeats: int, models: dict[str, Path] = MODELS,
                        responsiveness: bool = True, python: str = PYTHON) -> list[str]:
    client = await start_server(REPO, python)
    baseline = Baseline(python)
    lines = ["| model | onnxlens didSave→diagnostics | plain export+ORT (warm) | ratio | n |",
             "|---|---|---|---|---|"]
    reused = []
    try:
        for name, path in models.items():
            since = len(client.publish_events)
            uri = open_document(client, path)
            await wait_publish(client, uri, since)  # first check: warm-up
            baseline.time(path, TARGETS[name])  # warm-up
            ours, theirs = [], []
            for version in range(2, repeats + 2):
                theirs.append(baseline.time(path, TARGETS[name]))
                ours.append(await save_edit(client, path, uri, version))
            lines.append(row(name, ours, theirs))
            reused.append(f"{name} {await save_unchanged(client, uri) * 1000:.0f} ms")
        lines += ["", "Saving again without an edit reuses the result (not a re-check, not in the "
                  f"ratios above): {', '.join(reused)}."]
        if responsiveness:
            lines += ["", await _responsiveness(client)]
    finally:
        baseline.close()
        await stop_server(client)
    return lines


async def _responsiveness(client: Any) -> str:
    other = REPO / "examples" / "mnist.py"
    other_uri = other.resolve().as_uri()
    encoder = MODELS["(c) 6-layer encoder"]
    uri = encoder.resolve().as_uri()
    latencies: list[float] = []
    for version in range(100, 103):
        text = encoder.read_text() + f"\n# responsiveness {version}\n"
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
        since = len(client.publish_events)
        client.text_document_did_save(types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))
        done = asyncio.ensure_future(wait_publish(client, uri, since))
        while not done.done():
            started = time.perf_counter()
            await client.text_document_hover_async(types.HoverParams(
                text_document=types.TextDocumentIdentifier(uri=other_uri),
                position=types.Position(line=3, character=8)))
            latencies.append(time.perf_counter() - started)
            started = time.perf_counter()
            await client.text_document_code_lens_async(types.CodeLensParams(
                text_document=types.TextDocumentIdentifier(uri=other_uri)))
            latencies.append(time.perf_counter() - started)
            await asyncio.sleep(0.02)
        await done
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1000
    p95 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))] * 1000
    return (f"Responsiveness (hover + CodeLens on another file while model (c) is checked, "
            f"{len(latencies)} requests): p50 **{p50:.1f} ms**, p95 **{p95:.1f} ms**, "
            f"max {latencies[-1] * 1000:.1f} ms.")


# -- 6: every tested torch -----------------------------------------------------------------

def torch_venvs() -> dict[str, str]:
    """The Python of each tested torch whose venv exists (scripts/setup.sh makes them)."""
    sys.path.insert(0, str(REPO))
    from exporter import versions

    found = {}
    for release in versions.TESTED_TORCH:
        venv = REPO / (".venv" if release == versions.PRIMARY_TORCH
                       else f".venv-torch{release.version}")
        if (venv / "bin" / "python").exists():
            found[release.version] = str(venv / "bin" / "python")
    return found


def has_torchvision(python: str) -> bool:
    return subprocess.run([python, "-c", "import torchvision"], env=ENV,
                          capture_output=True).returncode == 0


async def bench_torchvision(repeats: int) -> list[str]:
    """The warm re-check of the torchvision models on the first tested torch whose venv can
    import torchvision (PyPI's torchvision does not import beside the CPU build of 2.13.0)."""
    pythons = {version: python for version, python in torch_venvs().items()
               if has_torchvision(python)}
    if not pythons:
        return ["No tested torch's venv has torchvision: `ONNXLENS_TORCH=2.14.1 bash "
                "scripts/setup.sh` makes one."]
    version, python = next(iter(pythons.items()))
    return [f"torch {version}:", "", *await bench_recheck(repeats, TORCHVISION_MODELS,
                                                          responsiveness=False, python=python)]


async def bench_torches(repeats: int) -> list[str]:
    """The warm re-check on every tested torch in one run: a warm server and a warm baseline
    per torch, their samples interleaved (the others sit idle meanwhile)."""
    pythons = torch_venvs()
    all_servers = {version: await start_server(REPO, python)
                   for version, python in pythons.items()}
    baselines = {version: Baseline(python) for version, python in pythons.items()}
    lines = ["| model | torch | onnxlens didSave→diagnostics | plain export+ORT (warm) | "
             "ratio | n |", "|---|---|---|---|---|---|"]
    across = []
    with_torchvision = {version for version, python in pythons.items()
                        if has_torchvision(python)}
    try:
        for name, path in {**MODELS, **REAL_MODELS, **TORCHVISION_MODELS}.items():
            if name in TORCHVISION_MODELS:
                servers = {v: c for v, c in all_servers.items() if v in with_torchvision}
            else:
                servers = all_servers
            uris = {}
            for version, client in servers.items():
                since = len(client.publish_events)
                uris[version] = open_document(client, path)
                await wait_publish(client, uris[version], since)  # first check: warm-up
                baselines[version].time(path, TARGETS[name])
            ours: dict[str, list[float]] = {version: [] for version in servers}
            theirs: dict[str, list[float]] = {version: [] for version in servers}
            for sample in range(2, repeats + 2):
                for version, client in servers.items():
                    theirs[version].append(baselines[version].time(path, TARGETS[name]))
                    ours[version].append(await save_edit(client, path, uris[version], sample))
            for version in servers:
                lines.append(row(f"{name} | {version}", ours[version], theirs[version]))
            first, *others = servers
            for version in others:
                ratio = statistics.median(ours[version]) / statistics.median(ours[first])
                across.append(f"{name}: torch {version} / {first} = **{ratio:.2f}**")
            for client, uri in ((servers[v], uris[v]) for v in servers):
                client.text_document_did_close(types.DidCloseTextDocumentParams(
                    text_document=types.TextDocumentIdentifier(uri=uri)))
    finally:
        for baseline in baselines.values():
            baseline.close()
        for client in all_servers.values():
            await stop_server(client)
    missing = [r for r in _tested_versions() if r not in pythons]
    return lines + ["", "onnxlens's warm re-check across torches (goal: within 20 %): "
                    + ("; ".join(across) or "only one torch installed") + "."] + (
        [f"Not measured (no venv; `ONNXLENS_TORCH=<version> scripts/setup.sh`): "
         f"{', '.join(missing)}."] if missing else [])


def _tested_versions() -> list[str]:
    from exporter import versions

    return [release.version for release in versions.TESTED_TORCH]


# -- 2: cold start -------------------------------------------------------------------------

_COLD_BASELINE = """
import time, sys
sys.path.insert(0, {repo!r})
from bench.baseline import load, export_and_run
model, args, kwargs, dynamic = load({spec!r})
export_and_run(model, args, kwargs, dynamic)
"""


async def bench_cold(repeats: int, name: str = "(a) seed MLP") -> list[str]:
    path, target = {**MODELS, **REAL_MODELS}[name], TARGETS[name]
    script = _COLD_BASELINE.format(repo=str(REPO), spec=f"{path}::{target}")
    ours, theirs = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run([PYTHON, "-c", script], env=ENV, check=True, cwd=REPO,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        theirs.append(time.perf_counter() - started)
        started = time.perf_counter()
        client = await start_server(REPO)
        uri = open_document(client, path)
        await wait_publish(client, uri, 0)
        ours.append(time.perf_counter() - started)
        await stop_server(client)
    return ["| model | server start→first diagnostics | python -c import+export+run | ratio | n |",
            "|---|---|---|---|---|", row(name, ours, theirs)]


# -- 4: big model without weights ---------------------------------------------------------

_BIG_PLAIN = """
import torch, sys
sys.path.insert(0, {models!r})
from big import Big
model = Big().eval()
torch.onnx.export(model, (torch.randn(2, 8192),), dynamo=True, verbose=False)
"""


def _measure(command: list[str]) -> tuple[float, float]:
    started = time.perf_counter()
    child = subprocess.Popen(command, env=ENV, cwd=REPO, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - started
    return elapsed, usage.ru_maxrss / 1024  # MB


def bench_big() -> list[str]:
    ours = _measure([PYTHON, "-m", "onnxlens", "check", str(BENCH / "models" / "big.py")])
    theirs = _measure([PYTHON, "-c", _BIG_PLAIN.format(models=str(BENCH / "models"))])
    return ["| 1.07 B parameters | wall | peak RSS |", "|---|---|---|",
            f"| onnxlens check, `weights=\"none\"` | {ours[0]:.1f} s | **{ours[1]:.0f} MB** |",
            f"| plain torch.onnx.export, real weights | {theirs[0]:.1f} s | {theirs[1]:.0f} MB |",
            f"| ratio | {ours[0] / theirs[0]:.2f} | {ours[1] / theirs[1]:.2f} |"]


def bench_big8b() -> list[str]:
    """A Llama-3-8B-shaped configuration without weights; the plain exporter would need its
    32 GB of float32 weights, more than this machine has, so it is not run."""
    path = BENCH / "models" / "llama8b.py"
    wall, rss = _measure([PYTHON, "-m", "onnxlens", "check", str(path), "--jobs", "1"])
    return ["| 8.0 B parameters (Llama-3-8B shape) | wall | peak RSS |", "|---|---|---|",
            f"| onnxlens check, `weights=\"none\"` | {wall:.1f} s | **{rss:.0f} MB** |",
            "| plain torch.onnx.export, real weights | not run: 32 GB of float32 weights | — |"]


# -- 7: many targets: --jobs and the plain exporter in one process per target ---------------

def _many_targets(workspace: Path) -> list[tuple[Path, str]]:
    """PyTorch's ExportDB examples, this project's examples and the real models: ~50
    targets, each file on its own (as a repository of model files)."""
    sys.path.insert(0, str(REPO))
    from exporter.pipeline.session import ExportSession
    from tests.corpus.corpus import materialize_exportdb

    session = ExportSession()
    files = [f.path for f in materialize_exportdb(workspace).files]
    files += sorted((REPO / "examples").rglob("*.py")) + list(REAL_MODELS.values())
    return [(path, target.name) for path in files
            for target in session.discover(path).targets]


def bench_jobs() -> list[str]:
    import shutil
    import tempfile

    scratch = Path(tempfile.mkdtemp(prefix="onnxlens-bench-jobs-"))
    try:
        targets = _many_targets(scratch)
        files = sorted({str(path) for path, _ in targets})
        times = {}
        for jobs in (1, 2):
            started = time.perf_counter()
            subprocess.run([PYTHON, "-m", "onnxlens", "check", *files, "--root", str(REPO),
                            "--format", "json", "--jobs", str(jobs)], env=ENV, cwd=REPO,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[jobs] = time.perf_counter() - started
        started = time.perf_counter()
        for path, target in targets:  # a failing export ends its process: timed all the same
            script = _COLD_BASELINE.format(repo=str(REPO), spec=f"{path}::{target}")
            subprocess.run([PYTHON, "-c", script], env=ENV, cwd=REPO,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        plain = time.perf_counter() - started
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return [f"{len(targets)} targets in {len(files)} files (ExportDB, examples, real models).",
            "", "| run | wall | against `--jobs 1` | against the plain processes |",
            "|---|---|---|---|",
            f"| `onnxlens check --jobs 1` | {times[1]:.1f} s | 1.00 | **{times[1] / plain:.2f}** |",
            f"| `onnxlens check --jobs 2` | {times[2]:.1f} s | **{times[1] / times[2]:.2f}× "
            f"faster** | **{times[2] / plain:.2f}** |",
            f"| {len(targets)} sequential `python -c` plain export+ORT | {plain:.1f} s | — | "
            "1.00 |"]


# -- 5: scaling ----------------------------------------------------------------------------

def _scaling_models(kind: str, depth: int) -> tuple[Any, tuple]:
    import torch

    torch.manual_seed(0)
    if kind == "Llama":
        from transformers import LlamaConfig, LlamaForCausalLM

        config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, head_dim=16,
                             num_hidden_layers=depth, num_attention_heads=4,
                             num_key_value_heads=2, use_cache=False)
        return LlamaForCausalLM(config).eval(), (torch.randint(0, 256, (2, 8)),)
    if kind == "MLP":
        layers: list[torch.nn.Module] = []
        for _ in range(depth):
            layers += [torch.nn.Linear(128, 128), torch.nn.ReLU()]
        return torch.nn.Sequential(*layers).eval(), (torch.randn(4, 128),)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True, dropout=0.0)
    model = torch.nn.TransformerEncoder(layer, depth, enable_nested_tensor=False).eval()
    return model, (torch.randn(2, 16, 64),)


_SCALING_FILE = """
import torch
from bench.run import _scaling_models


# onnx-export: name="target"
def build():
    return _scaling_models({kind!r}, {depth})
"""


def bench_scaling(repeats: int, depths: list[int],
                  kinds: tuple[str, ...] = ("MLP", "Transformer")) -> list[str]:
    import tempfile

    sys.path.insert(0, str(BENCH))
    from baseline import export_and_run

    from exporter.pipeline.session import ExportSession

    session = ExportSession()
    session.warm_up()
    lines = ["| model | N | onnxlens check | plain export+ORT | ratio | n |",
             "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as scratch:
        for kind in kinds:
            for depth in depths:
                path = Path(scratch) / f"scaling_{kind}_{depth}.py"
                path.write_text(_SCALING_FILE.format(kind=kind, depth=depth))
                model, args = _scaling_models(kind, depth)
                export_and_run(model, args, {}, None)  # warm-up
                session.check_file(path, REPO)
                # the deepest real model takes ~25 s per pair: fewer samples keep `--only
                # real` within 15 minutes
                big = depth >= 64 or (kind == "Llama" and depth >= 16)
                runs = max(3, repeats // 2) if big else repeats
                ours, theirs = [], []
                for _ in range(runs):
                    theirs.append(export_and_run(model, args, {}, None))
                    started = time.perf_counter()
                    result = session.check_file(path, REPO)
                    ours.append(time.perf_counter() - started)
                    assert not result.has_errors, [d.message for d in result.diagnostics]
                ratio = statistics.median(ours) / statistics.median(theirs)
                lines.append(f"| {kind} | {depth} | {statistics.median(ours):.3f} s | "
                             f"{statistics.median(theirs):.3f} s | **{ratio:.2f}** | {runs} |")
    return lines


# -- report --------------------------------------------------------------------------------

def machine() -> str:
    import onnx
    import onnxruntime
    import onnxscript
    import torch

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, text=True,
                            capture_output=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--",
                            ".", ":!bench/RESULTS.md"], cwd=REPO,
                           text=True, capture_output=True).stdout.strip()
    commit += " with uncommitted changes" if dirty else ""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                if line.startswith("model name")), platform.processor())
    return (f"{os.cpu_count()} cores ({cpu}), {memory:.0f} GB; Python "
            f"{platform.python_version()}, torch {torch.__version__}, onnx {onnx.__version__}, "
            f"onnxscript {onnxscript.__version__}, onnxruntime {onnxruntime.__version__}; "
            f"onnxlens {commit}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer samples (smoke run)")
    parser.add_argument("--only", default=DEFAULT_SECTIONS)
    parser.add_argument("--corpus-select", metavar="REGEX",
                        help="corpus: only the targets whose FILE::TARGET matches")
    parser.add_argument("--corpus-source", action="append", metavar="SOURCE",
                        help="corpus: only this source (repeatable; default: every real one)")
    args = parser.parse_args()
    repeats = 3 if args.quick else 7
    # The re-check's ratios are the goals closest to their limit on a noisy shared VM: more
    # samples (both sides, alternating as always) steady their medians.
    recheck_repeats = 3 if args.quick else 11
    only = set(args.only.split(","))
    if "real" in only:
        only |= set(REAL_SECTIONS.split(","))
    sections: list[tuple[str, list[str]]] = []
    started = time.perf_counter()
    if "recheck" in only:
        sections.append(("1. Warm re-check (goal ≤ 0.5) and 3. responsiveness (goal p95 ≤ 50 ms)",
                         asyncio.run(bench_recheck(recheck_repeats))))
    if "cold" in only:
        sections.append(("2. Cold start (goal ≤ 1.0)", asyncio.run(bench_cold(repeats))))
    if "big" in only:
        sections.append(("4. Big model, no weights (goal: peak RSS ≤ 1.5 GB)", bench_big()))
    if "scaling" in only:
        depths = [1, 4, 16] if args.quick else [1, 4, 16, 64]
        sections.append(("5. Scaling (the ratio must not grow with N)",
                         bench_scaling(repeats, depths)))
    if "load" in only:
        sections.append(("10. 50 files opened at once (goals: the active file within 1.5× of a "
                         "lone check; peak RSS within the budget)",
                         asyncio.run(bench_load(20 if args.quick else 50))))
    if "first" in only:
        sections.append(("9. First diagnostics on a failing model (goal ≤ 0.3× the complete "
                         "check)", asyncio.run(bench_first_diagnostic(repeats))))
    if "fixes" in only:
        sections.append(("11. The verdict while fixes are tried after it (goal: unchanged, "
                         "ratio ≈ 1)", asyncio.run(bench_fix_trials(repeats))))
    if "real-recheck" in only:
        sections.append(("1r. Warm re-check of real models (goal ≤ 0.5)",
                         asyncio.run(bench_recheck(recheck_repeats, REAL_MODELS, False))))
    if "real-torchvision" in only:
        sections.append(("1v. Warm re-check of a torchvision model (goal ≤ 0.5)",
                         asyncio.run(bench_torchvision(recheck_repeats))))
    if "real-cold" in only:
        # 5 samples: a cold pair takes ~20 s, and `--only real` must stay within 15 minutes
        sections.append(("2r. Cold start, a real model", asyncio.run(
            bench_cold(min(repeats, 5), "(d) Llama (transformers)"))))
    if "real-scaling" in only:
        sections.append(("5r. Scaling, transformers Llama with N layers", bench_scaling(
            repeats, [1, 4] if args.quick else [1, 4, 16], ("Llama",))))
    if "jobs" in only:
        sections.append(("7. ~50 targets: --jobs (goals: jobs 2 ≥ 1.7× jobs 1; ≤ 0.3× the "
                         "sequential plain exports)", bench_jobs()))
    if "big8b" in only:
        sections.append(("8. 8 B parameters, no weights (goal: peak RSS ≤ 2 GB)",
                         bench_big8b()))
    if "torches" in only:
        sections.append(("6. Warm re-check on every tested torch (goal: within 20 %)",
                         asyncio.run(bench_torches(recheck_repeats))))
    if "corpus" in only:
        sys.path.insert(0, str(REPO))
        from bench.corpus import REAL_SOURCES, bench_corpus

        sections.append(("12. Every real target of the corpus, per torch (goal: no ratio above "
                         "1.0)", bench_corpus(torch_venvs(), args.corpus_select, sources=tuple(
                             args.corpus_source or REAL_SOURCES))))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    report = [f"## Run of {stamp}", "", machine(), "",
              "Medians after a warm-up, baseline and onnxlens alternating in the same run; "
              "(min–max) in brackets. Command: `.venv/bin/python bench/run.py"
              + (" --quick" if args.quick else "")
              + (f" --only {args.only}" if args.only != DEFAULT_SECTIONS else "") + "`.", ""]
    for title, lines in sections:
        report += [f"### {title}", "", *lines, ""]
    report.append(f"Total benchmark time: {time.perf_counter() - started:.0f} s.")
    text = "\n".join(report) + "\n"
    print(text)
    results = BENCH / "RESULTS.md"
    if not results.exists():
        results.write_text("# Benchmark results\n\nAppended by `bench/run.py`; newest last.\n\n")
    with results.open("a") as handle:
        handle.write(text + "\n")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"(bench process peak RSS {usage.ru_maxrss / 1024:.0f} MB)")


if __name__ == "__main__":
    main()
