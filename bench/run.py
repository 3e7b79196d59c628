"""onnxlens benchmarks: every figure is a ratio against plain ``torch.onnx.export`` measured in
the same run, alternating baseline and onnxlens. Prints tables and appends them to
``bench/RESULTS.md``. Never pass/fail.

    .venv/bin/python bench/run.py [--quick] [--only recheck,cold,big,scaling,torches]
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
DEFAULT_SECTIONS = "recheck,cold,big,scaling,torches"
TARGETS = {"(a) seed MLP": "MLPModel", "(b) MNIST": "MNISTModel",
           "(c) 6-layer encoder": "Encoder"}


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

async def start_server(root: Path, python: str = PYTHON) -> Any:
    config = ClientServerConfig(server_command=[python, "-m", "lsp_server"], server_env=ENV)
    client = await config.start()
    client.publish_events = []  # type: ignore[attr-defined]
    client.published = asyncio.Event()  # type: ignore[attr-defined]
    features = client.protocol.fm.features
    original = features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS]

    def recording(params: types.PublishDiagnosticsParams) -> None:
        client.publish_events.append((time.perf_counter(), params.uri))
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
        initialization_options={"trusted": True}))
    return client


async def stop_server(client: Any) -> None:
    await client.shutdown_session()
    await client.stop()


async def wait_publish(client: Any, uri: str, since: int, timeout: float = 300) -> float:
    """When the first publish for ``uri`` after event ``since`` arrived. Sleeps until a publish
    arrives: polling would take CPU from the check it measures (2 cores)."""
    deadline = time.monotonic() + timeout
    while True:
        client.published.clear()
        for stamp, published in client.publish_events[since:]:
            if published == uri:
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

async def bench_recheck(repeats: int) -> list[str]:
    client = await start_server(REPO)
    baseline = Baseline()
    lines = ["| model | onnxlens didSave→diagnostics | plain export+ORT (warm) | ratio | n |",
             "|---|---|---|---|---|"]
    reused = []
    try:
        for name, path in MODELS.items():
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
                  f"ratios above): {', '.join(reused)}.", "", await _responsiveness(client)]
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


async def bench_torches(repeats: int) -> list[str]:
    """The warm re-check on every tested torch in one run: a warm server and a warm baseline
    per torch, their samples interleaved (the others sit idle meanwhile)."""
    pythons = torch_venvs()
    servers = {version: await start_server(REPO, python) for version, python in pythons.items()}
    baselines = {version: Baseline(python) for version, python in pythons.items()}
    lines = ["| model | torch | onnxlens didSave→diagnostics | plain export+ORT (warm) | "
             "ratio | n |", "|---|---|---|---|---|---|"]
    across = []
    try:
        for name, path in MODELS.items():
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
        for client in servers.values():
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


async def bench_cold(repeats: int) -> list[str]:
    path, target = MODELS["(a) seed MLP"], TARGETS["(a) seed MLP"]
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
            "|---|---|---|---|---|", row("(a) seed MLP", ours, theirs)]


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
    ours = _measure([PYTHON, "-m", "exporter.cli", "check", str(BENCH / "models" / "big.py")])
    theirs = _measure([PYTHON, "-c", _BIG_PLAIN.format(models=str(BENCH / "models"))])
    return ["| 1.07 B parameters | wall | peak RSS |", "|---|---|---|",
            f"| onnxlens check, `weights=\"none\"` | {ours[0]:.1f} s | **{ours[1]:.0f} MB** |",
            f"| plain torch.onnx.export, real weights | {theirs[0]:.1f} s | {theirs[1]:.0f} MB |",
            f"| ratio | {ours[0] / theirs[0]:.2f} | {ours[1] / theirs[1]:.2f} |"]


# -- 5: scaling ----------------------------------------------------------------------------

def _scaling_models(kind: str, depth: int) -> tuple[Any, tuple]:
    import torch

    torch.manual_seed(0)
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


def bench_scaling(repeats: int, depths: list[int]) -> list[str]:
    import tempfile

    sys.path.insert(0, str(BENCH))
    from baseline import export_and_run

    from exporter.session import ExportSession

    session = ExportSession()
    session.warm_up()
    lines = ["| model | N | onnxlens check | plain export+ORT | ratio | n |",
             "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as scratch:
        for kind in ("MLP", "Transformer"):
            for depth in depths:
                path = Path(scratch) / f"scaling_{kind}_{depth}.py"
                path.write_text(_SCALING_FILE.format(kind=kind, depth=depth))
                model, args = _scaling_models(kind, depth)
                export_and_run(model, args, {}, None)  # warm-up
                session.check_file(path, REPO)
                runs = repeats if depth < 64 else max(3, repeats // 2)
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
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
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
    args = parser.parse_args()
    repeats = 3 if args.quick else 7
    # The re-check's ratios are the goals closest to their limit on a noisy shared VM: more
    # samples (both sides, alternating as always) steady their medians.
    recheck_repeats = 3 if args.quick else 11
    only = set(args.only.split(","))
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
    if "torches" in only:
        sections.append(("6. Warm re-check on every tested torch (goal: within 20 %)",
                         asyncio.run(bench_torches(recheck_repeats))))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    report = [f"## Run of {stamp}", "", machine(), "",
              "Medians after a warm-up, baseline and onnxlens alternating in the same run; "
              "(min–max) in brackets. Command: `.venv/bin/python bench/run.py`"
              + (" --quick" if args.quick else "")
              + (f" --only {args.only}" if args.only != DEFAULT_SECTIONS else "") + ".", ""]
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
