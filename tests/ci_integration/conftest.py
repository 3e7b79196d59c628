"""What the CI integrations share: a committed copy of the working tree (what pre-commit and
a workflow's `uses:` take), and a user's project of one model file."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REPO

FAILING_MODEL = FIXTURES / "no_translation" / "model.py"  # ONNX201 at 7:13 and 8:13
CLEAN_MODEL = FIXTURES / "clean" / "factory.py"


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=onnxlens tests",
                           "-c", "user.email=tests@onnxlens.invalid", *args],
                          cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture(scope="session")
def onnxlens_repository(tmp_path_factory) -> tuple[Path, str]:
    """The working tree as it is (tracked and new files, not ignored ones) committed in a
    repository of its own, and the commit: so that uncommitted work is what gets tested."""
    copy = tmp_path_factory.mktemp("onnxlens-repository")
    listed = git(REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for name in filter(None, listed.split("\0")):
        source, destination = REPO / name, copy / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree
        destination.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            os.symlink(os.readlink(source), destination)
        else:
            shutil.copy2(source, destination)
    git(copy, "init", "-q")
    git(copy, "add", "-A")
    git(copy, "commit", "-q", "-m", "snapshot of the working tree")
    return copy, git(copy, "rev-parse", "HEAD")


def user_project(directory: Path, model: Path) -> Path:
    """A git repository holding ``model`` as ``model.py``, committed."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(model, directory / "model.py")
    git(directory, "init", "-q")
    git(directory, "add", "model.py")
    git(directory, "commit", "-q", "-m", "a model")
    return directory
