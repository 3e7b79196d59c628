"""The pre-commit hooks (.pre-commit-hooks.yaml), installed and run by the pre-commit package
as in a user's repository; and the configuration the README shows."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.specifiers import SpecifierSet

from exporter import versions
from tests.ci_integration.conftest import CLEAN_MODEL, FAILING_MODEL, git, user_project
from tests.conftest import REPO, USER_DOCS


@pytest.fixture(scope="module")
def pre_commit_env(tmp_path_factory) -> dict[str, str]:
    """pre-commit's cache in a temporary directory; the python hook's torch pinned to the
    primary tested release with a constraints file (docs/ci.md's way; here it is the CPU
    build on disk), and this interpreter's `onnxlens` on PATH for `onnxlens-system`."""
    home = tmp_path_factory.mktemp("pre-commit-home")
    constraints = home / "constraints.txt"
    constraints.write_text(f"torch=={versions.PRIMARY_TORCH.version}\n")
    return {**os.environ, "PRE_COMMIT_HOME": str(home), "PIP_CONSTRAINT": str(constraints),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def pre_commit(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pre_commit", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


def try_repo(env: dict[str, str], project: Path, repository: tuple[Path, str],
             hook: str) -> subprocess.CompletedProcess:
    """``pre-commit try-repo`` (which installs the hook in a store of its own every time)."""
    path, commit = repository
    return pre_commit(env, project, "try-repo", str(path), hook, "--ref", commit,
                      "--all-files")


def assert_failed_on_the_model(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 1, done.stdout + done.stderr
    assert "model.py:7:13: error[ONNX201]: `aten::i0` has no ONNX translation" in done.stdout
    assert "model.py:8:13: error[ONNX201]" in done.stdout
    assert re.search(r"^onnxlens.*Failed$", done.stdout, re.M)


def test_system_hook_fails_on_a_failing_model_and_passes_a_clean_one(
        onnxlens_repository, pre_commit_env, tmp_path):
    failing = user_project(tmp_path / "failing", FAILING_MODEL)
    assert_failed_on_the_model(try_repo(pre_commit_env, failing, onnxlens_repository,
                                        "onnxlens-system"))
    clean = user_project(tmp_path / "clean", CLEAN_MODEL)
    # pre-commit names every file; the default excludes still hold (--force-exclude)
    (clean / "build").mkdir()
    shutil.copy(FAILING_MODEL, clean / "build" / "generated.py")
    git(clean, "add", "build")
    git(clean, "commit", "-q", "-m", "a build output")
    done = try_repo(pre_commit_env, clean, onnxlens_repository, "onnxlens-system")
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^onnxlens.*Passed$", done.stdout, re.M)


def docs_block(first_line: str) -> str:
    """The one fenced YAML block of the user documents (the README, docs/) that starts with
    ``first_line``."""
    found = [block for path in USER_DOCS
             for block in re.findall(r"```yaml\n(.*?)```", path.read_text(encoding="utf-8"), re.S)
             if block.startswith(first_line + "\n")]
    assert len(found) == 1, first_line
    return found[0]


def test_the_readmes_configuration_passes_a_clean_model_and_fails_a_failing_one(
        onnxlens_repository, pre_commit_env, tmp_path):
    """The README's configuration names the python hook: pre-commit installs the hook's own
    environment (onnxlens, the export extra and torch, from the manifest's
    ``additional_dependencies``) and runs it on a clean model, then on a failing one. (A
    ``try-repo`` of the python hook installed that environment once more, for no other check.)"""
    repository, commit = onnxlens_repository
    config = yaml.safe_load(docs_block("# .pre-commit-config.yaml"))
    [entry] = config["repos"]
    assert entry["repo"].endswith("/onnxlens") and entry["rev"].startswith("v")
    entry["repo"], entry["rev"] = str(repository), commit  # where this test has onnxlens
    project = user_project(tmp_path / "project", CLEAN_MODEL)
    (project / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    assert pre_commit(pre_commit_env, project, "validate-config",
                      ".pre-commit-config.yaml").returncode == 0
    done = pre_commit(pre_commit_env, project, "run", "--all-files")
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^onnxlens.*Passed$", done.stdout, re.M)

    shutil.copy(FAILING_MODEL, project / "model.py")  # an edit that breaks the export
    assert_failed_on_the_model(pre_commit(pre_commit_env, project, "run", "--all-files"))


def test_the_python_hook_installs_the_export_extra_and_a_tested_torch():
    hooks = {hook["id"]: hook for hook in
             yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"onnxlens", "onnxlens-system"}
    assert {hook["entry"] for hook in hooks.values()} == {"onnxlens check --force-exclude"}
    assert hooks["onnxlens"]["language"] == "python"
    assert hooks["onnxlens-system"]["language"] == "system"
    extra, torch = hooks["onnxlens"]["additional_dependencies"]
    assert extra == ".[export]"
    allowed = SpecifierSet(torch.removeprefix("torch"))
    assert all(allowed.contains(release.version) for release in versions.TESTED_TORCH)
    newest = max(versions.TESTED_TORCH, key=lambda r: tuple(map(int, r.series.split("."))))
    major, minor = newest.series.split(".")
    assert not allowed.contains(f"{major}.{int(minor) + 1}.0")  # an untested series
