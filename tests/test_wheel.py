"""The wheel a user installs: built from this checkout, installed in a fresh venv outside the
repository (the CPU torch pinned first, as the README says), it runs ``onnxlens --version``,
``onnxlens check`` on a copy of ``examples/`` and ``onnxlens lsp``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from exporter import __version__, versions
from tests.conftest import REPO, lsp_bodies, lsp_session_bytes

_PIP = ["-m", "pip", "install", "--quiet", "--disable-pip-version-check"]


def _run(command: list[str], cwd: Path, **kwargs: object) -> subprocess.CompletedProcess:
    # no PYTHONPATH: the installed wheel alone, not this checkout
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, timeout=900,
                          **kwargs)  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` directory of a fresh venv holding the wheel with its export and lsp
    extras."""
    home = tmp_path_factory.mktemp("wheel")
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                  "--quiet", "-w", str(home / "dist"), str(REPO)], cwd=home)
    assert built.returncode == 0, built.stderr.decode()
    (wheel,) = (home / "dist").glob("onnxlens-*.whl")
    assert wheel.name.startswith(f"onnxlens-{__version__}-")
    names = zipfile.ZipFile(wheel).namelist()
    assert "onnxlens/cli.py" in names and "exporter/findings/rule_docs/ONNX201.md" in names
    assert not [name for name in names if name.startswith(("tests/", "bench/", "examples/"))]

    venv = home / "venv"
    created = _run([sys.executable, "-m", "venv", str(venv)], cwd=home)
    assert created.returncode == 0, created.stderr.decode()
    python = str(venv / "bin" / "python")
    pins = versions.PRIMARY_TORCH.pins()
    torch = _run([python, *_PIP, *pins], cwd=home)
    assert torch.returncode == 0, torch.stderr.decode()
    onnxlens = _run([python, *_PIP, f"{wheel}[export,lsp]", *pins], cwd=home)
    assert onnxlens.returncode == 0, onnxlens.stderr.decode()
    return venv / "bin"


def test_the_wheel_says_its_version(installed: Path, tmp_path: Path) -> None:
    done = _run([str(installed / "onnxlens"), "--version"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.decode().splitlines()
    assert lines[0] == f"onnxlens {__version__}"
    torch = versions.PRIMARY_TORCH.version
    assert any(line.startswith("torch") and torch in line for line in lines)


def test_the_wheel_checks_a_copy_of_the_examples(installed: Path, tmp_path: Path) -> None:
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    done = _run([str(installed / "onnxlens"), "check", "examples", "--format", "json"],
                cwd=tmp_path)
    assert done.returncode == 1, done.stderr.decode()  # the failing examples are errors
    report = json.loads(done.stdout)
    found = {(d["rule"], d["path"], d["range"]["start"]["line"])
             for d in report["diagnostics"]}
    assert ("ONNX102", "examples/failing/fixed_batch.py", 9) in found
    assert ("ONNX201", "examples/failing/special_functions.py", 14) in found
    targets = {t["name"]: t for t in report["targets"]}
    assert targets["MLPModel"]["ok"] and targets["MNISTModel"]["ok"]


def test_the_wheel_starts_the_language_server(installed: Path, tmp_path: Path) -> None:
    done = _run([str(installed / "onnxlens"), "lsp"], cwd=tmp_path, input=lsp_session_bytes())
    assert done.returncode == 0, done.stderr.decode()
    bodies = lsp_bodies(done.stdout)
    initialized = next(body for body in bodies if body.get("id") == 1)
    assert initialized["result"]["serverInfo"] == {"name": "onnxlens", "version": __version__}
    assert {"id": 2, "jsonrpc": "2.0", "result": None} in bodies
