"""The GitHub Action (action.yml): its structure, the documented workflows, and its install and
check steps run as a runner runs them (the scripts, with the environment the runner gives)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import yaml

from exporter import versions
from tests.ci_integration.conftest import CLEAN_MODEL, FAILING_MODEL
from tests.ci_integration.test_pre_commit import docs_block
from tests.conftest import REPO, USER_DOCS, user_docs_text
from tests.sarif_tools import validate_with_schema

ACTION = yaml.safe_load((REPO / "action.yml").read_text())
STEPS = ACTION["runs"]["steps"]
SCRIPTS = REPO / "scripts" / "action"


def test_the_action_is_composite_and_passes_inputs_through_the_environment():
    assert ACTION["runs"]["using"] == "composite"
    for step in STEPS:
        if "run" in step:
            # an input spliced into a script is a script injection; env is not
            assert "${{" not in step["run"], step["name"]
            assert step["shell"] == "bash"
        else:
            assert re.fullmatch(r"[\w-]+/[\w/-]+@v\d+", step["uses"]), step["uses"]
    used = set(re.findall(r"inputs\.([\w-]+)", (REPO / "action.yml").read_text()))
    assert used == set(ACTION["inputs"])
    for output in ACTION["outputs"].values():
        assert re.fullmatch(r"\$\{\{ steps\.check\.outputs\.[\w-]+ \}\}", output["value"])
    assert ACTION["inputs"]["torch-version"]["default"] == versions.RECOMMENDED_TORCH.version
    assert ACTION["inputs"]["torch-index-url"]["default"] == versions.CPU_INDEX_URL
    upload = next(step for step in STEPS if step.get("uses", "").startswith(
        "github/codeql-action/upload-sarif@"))
    assert upload["with"]["category"] == "${{ inputs.category }}"
    assert "steps.check.outputs.sarif-file" in upload["if"]
    assert STEPS[-1]["run"] == 'exit "${ONNXLENS_EXIT_CODE:-2}"'  # fails last, after upload


def onnxlens_help(command: str) -> str:
    return subprocess.run([sys.executable, "-m", "onnxlens", command, "--help"],
                          capture_output=True, text=True, check=True, cwd=REPO).stdout


def test_the_steps_call_only_documented_commands_and_options():
    docs = user_docs_text()
    step_scripts = re.findall(r'"\$ONNXLENS_ACTION_PATH/(scripts/action/[\w.]+)"',
                              (REPO / "action.yml").read_text())
    assert sorted(step_scripts) == sorted(f"scripts/action/{p.name}"
                                          for p in SCRIPTS.glob("*.sh"))
    install = (SCRIPTS / "install.sh").read_text()
    assert re.findall(r"^onnxlens (.*)$", install, re.M) == ["--version"]
    assert "onnxlens --version" in docs
    check = (SCRIPTS / "check.sh").read_text()
    assert re.findall(r"^onnxlens (\w+)", check, re.M) == ["check"]
    options = set(re.findall(r"(--[\w-]+)", check))
    assert options >= {"--format", "--sarif-file", "--category"}
    help_text = onnxlens_help("check")
    for option in options:
        assert f"{option} " in help_text and option in docs, option


def docs_action_steps() -> list[dict]:
    """Every step of the documented workflow examples (the README, docs/) that uses the
    action."""
    steps = []
    blocks = [block for path in USER_DOCS
              for block in re.findall(r"```yaml\n(.*?)```", path.read_text(encoding="utf-8"), re.S)]
    for block in blocks:
        if "OWNER/onnxlens@" not in block:
            continue
        loaded = yaml.safe_load(block)
        jobs = loaded["jobs"].values() if "jobs" in loaded else [loaded]
        steps += [s for job in jobs for s in job["steps"]
                  if re.fullmatch(r"OWNER/onnxlens@v[\d.]+", s.get("uses", ""))]
    return steps


def test_the_documented_workflows_use_the_actions_inputs_and_documented_options():
    workflow = yaml.safe_load(docs_block("# .github/workflows/onnxlens.yml"))
    [job] = workflow["jobs"].values()
    assert job["permissions"]["security-events"] == "write"  # for upload-sarif
    steps = docs_action_steps()
    assert len(steps) == 2  # the workflow and the sharded matrix
    help_text = onnxlens_help("check")
    for step in steps:
        assert set(step["with"]) <= set(ACTION["inputs"])
        for option in re.findall(r"(--[\w-]+)", step["with"].get("args", "")):
            assert f"{option} " in help_text, option


def run_check_step(workspace: Path, path_dirs: list[Path], **inputs: str
                   ) -> tuple[subprocess.CompletedProcess, dict[str, str], str]:
    """scripts/action/check.sh as the runner runs it: the inputs in the environment, the
    files behind GITHUB_OUTPUT and GITHUB_STEP_SUMMARY; returns the step's outputs and the
    summary."""
    output, summary = workspace / "github_output", workspace / "step_summary.md"
    output.write_text("")
    env = {**os.environ,
           "PATH": os.pathsep.join([*map(str, path_dirs), os.environ["PATH"]]),
           "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary),
           "ONNXLENS_ACTION_PATH": str(REPO),
           **{f"ONNXLENS_{name.upper()}": value for name, value in inputs.items()}}
    done = subprocess.run(["bash", str(SCRIPTS / "check.sh")], cwd=workspace, env=env,
                          capture_output=True, text=True, timeout=900)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    return done, outputs, summary.read_text() if summary.exists() else ""


def final_step_status(outputs: dict[str, str]) -> int:
    """The action's last step, with its environment."""
    env = {**os.environ, "ONNXLENS_EXIT_CODE": outputs.get("exit-code", "")}
    return subprocess.run(["bash", "-c", STEPS[-1]["run"]], env=env).returncode


def test_the_action_installs_torch_and_onnxlens_then_annotates_and_writes_sarif(tmp_path):
    """The install step into a new virtual environment (pip's own index stands in for
    PyTorch's CPU index, which this machine cannot reach), then the check step with it."""
    environment = tmp_path / "venv"
    venv.create(environment, with_pip=True)
    bin_dir = environment / "bin"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "ONNXLENS_ACTION_PATH": str(REPO), "ONNXLENS_TORCH": versions.PRIMARY_TORCH.version,
           "ONNXLENS_TORCH_INDEX_URL": ""}
    env.pop("PYTHONPATH", None)
    installed = subprocess.run(["bash", str(SCRIPTS / "install.sh")], env=env, cwd=tmp_path,
                               capture_output=True, text=True, timeout=1200)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    assert f"torch {versions.PRIMARY_TORCH.version}" in installed.stdout
    assert (bin_dir / "onnxlens").exists()

    workspace = tmp_path / "workspace"
    (workspace / "models").mkdir(parents=True)
    shutil.copy(FAILING_MODEL, workspace / "models" / "bad.py")
    shutil.copy(CLEAN_MODEL, workspace / "models" / "good.py")
    done, outputs, summary = run_check_step(
        workspace, [bin_dir], paths="models", args="--timeout 600", upload_sarif="true",
        category="models", sarif_file="onnxlens.sarif")
    assert done.returncode == 0, done.stderr  # the upload step still runs
    assert outputs == {"exit-code": "1", "sarif-file": "onnxlens.sarif"}
    annotations = [line for line in done.stdout.splitlines() if line.startswith("::")]
    assert [line.split("::")[1] for line in annotations] == [
        "error file=models/bad.py,line=7,col=13,endLine=7,endColumn=32,title=ONNX201",
        "error file=models/bad.py,line=8,col=13,endLine=8,endColumn=29,title=ONNX201"]
    assert summary.count("| ONNX201 | error | `models/bad.py:") == 2
    log = json.loads((workspace / "onnxlens.sarif").read_text())
    assert log["runs"][0]["automationDetails"] == {"id": "models/"}
    assert len(log["runs"][0]["results"]) == 2
    assert validate_with_schema(log) == []
    assert final_step_status(outputs) == 1


def test_a_clean_check_passes_and_uploads_nothing_unless_asked(tmp_path):
    shutil.copy(CLEAN_MODEL, tmp_path / "good.py")
    done, outputs, summary = run_check_step(tmp_path, [Path(sys.executable).parent])
    assert done.returncode == 0, done.stderr
    assert outputs == {"exit-code": "0"}
    assert "Checked 1 target(s) in 1 file(s): 0 errors" in done.stdout
    assert summary.startswith("## onnxlens\n")
    assert not (tmp_path / "onnxlens.sarif").exists()
    assert final_step_status(outputs) == 0


def test_a_sarif_file_the_check_did_not_write_is_not_uploaded(tmp_path):
    """A usage error writes no log: an old one lying there must not be uploaded as this
    commit's."""
    shutil.copy(FAILING_MODEL, tmp_path / "bad.py")
    stale = tmp_path / "onnxlens.sarif"
    stale.write_text("{}")
    os.utime(stale, (1, 1))
    done, outputs, _ = run_check_step(tmp_path, [Path(sys.executable).parent],
                                      args="--timeout -1", upload_sarif="true")
    assert done.returncode == 0
    assert outputs == {"exit-code": "2"}
    assert "--timeout" in done.stderr
    assert stale.read_text() == "{}"
    assert final_step_status(outputs) == 2


@pytest.mark.parametrize("missing", [None, ""])
def test_no_exit_code_fails_the_action(missing):
    outputs = {} if missing is None else {"exit-code": missing}
    assert final_step_status(outputs) == 2
