"""Probing in worker subprocesses, cached: what the timm and diffusers sources of the corpus
share (:mod:`tests.corpus.timm_models`, :mod:`tests.corpus.diffusers_models`).

A probe module runs as ``python -m MODULE NAME...`` and prints one JSON object a line, each with
the ``name`` it probed, on a stream of its own (:func:`quiet`): what the models it builds print
goes to its standard error. :func:`probe_cached` runs the names not cached yet in ``jobs`` workers,
replaces a worker that hangs or dies (its name recorded as not buildable), and appends every
result to a JSON-lines file under ``~/.cache/onnxlens/corpus/``.
"""

from __future__ import annotations

import contextlib
import json
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any

from tests.corpus.common import CACHE, PYTHON, REPO, child_env, file_hash, sha256, versions

Log = Callable[[str], None]


def package_version(name: str) -> str | None:
    """The installed version of ``name``, read without importing it; None when missing."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def cache_file(kind: str, code: Path, packages: tuple[str, ...]) -> Path:
    """The cache of one probe: keyed by the toolchain's versions, ``packages``' versions and the
    probe's code."""
    key = sha256(json.dumps({"versions": versions(),
                             "packages": {name: package_version(name) for name in packages},
                             "code": file_hash(code)}, sort_keys=True))
    return CACHE / "corpus" / f"{kind}-probe-{key[:24]}.jsonl"


def probe_cached(module: str, names: list[str], cache: Path, *, jobs: int = 2,
                 item_seconds: float = 300.0, log: Log | None = None,
                 env: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """name -> the probe's JSON object, for every name (cached, or probed now). ``env``: the
    workers' environment on top of the corpus's (default: one thread each)."""
    extra = {"OMP_NUM_THREADS": "1"} if env is None else env
    known: dict[str, dict[str, Any]] = {}
    if cache.is_file():
        for line in cache.read_text().splitlines():
            result = json.loads(line)
            known[result["name"]] = result
    missing = [name for name in names if name not in known]
    if missing:
        cache.parent.mkdir(parents=True, exist_ok=True)
        chunks = [chunk for chunk in (missing[index::max(jobs, 1)]
                                      for index in range(max(jobs, 1))) if chunk]
        with ThreadPoolExecutor(max_workers=len(chunks)) as pool:
            for results in pool.map(lambda chunk: _probe_chunk(module, chunk, item_seconds, log,
                                                                 extra),
                                    chunks):
                with cache.open("a") as handle:
                    for result in results:
                        handle.write(json.dumps(result, sort_keys=True) + "\n")
                        known[result["name"]] = result
    return {name: known[name] for name in names}


def _probe_chunk(module: str, names: list[str], item_seconds: float, log: Log | None,
                 env: dict[str, str]) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    remaining = list(names)
    while remaining:
        process = subprocess.Popen([str(PYTHON), "-m", module, *remaining], cwd=REPO,
                                   env=child_env(env), text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert process.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(process.stdout, selectors.EVENT_READ)
        while remaining:
            if not selector.select(timeout=item_seconds):
                break  # hung: kill it and go on with the next name
            line = process.stdout.readline()
            if not line:
                break  # died
            result = json.loads(line)
            results.append(result)
            remaining.remove(result["name"])
            if log:
                log(f"probe {result['name']}: "
                    f"{'buildable' if result.get('buildable') else result.get('reason', '')[:100]}")
        process.kill()
        process.wait()
        selector.close()
        if remaining:
            lost = remaining.pop(0)
            results.append({"name": lost, "buildable": False,
                            "reason": "probe: the worker hung or crashed"})
    return results


# -- in the worker ---------------------------------------------------------------------------

class ProbeTimeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def expire(signum: int, frame: Any) -> None:
        raise ProbeTimeout(f"more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


_PROTOCOL: list[Any] = []  # the worker's results stream, once quiet() made it


def quiet() -> None:
    """A worker's warnings and library logging off, and its results on a stream of their own:
    the standard output's descriptor, which from now on goes to standard error, so that what a
    model prints (a probe of a transformers model that printed broke the JSON) is no result."""
    import logging
    import os
    import sys
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    sys.stdout.flush()
    _PROTOCOL.append(os.fdopen(os.dup(1), "w", encoding="utf-8"))
    os.dup2(2, 1)


def emit(result: dict[str, Any]) -> None:
    stream = _PROTOCOL[-1]
    stream.write(json.dumps(result, sort_keys=True) + "\n")
    stream.flush()


def timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started
