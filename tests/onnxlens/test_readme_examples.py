"""The README's ```console examples, run: each `$ onnxlens ...` line's output must hold the
lines shown after it, in order. A shown line ending in ` …` is a prefix of the real one; a
line `…` alone stands for any number of lines."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from tests.conftest import REPO


def examples() -> list[tuple[str, list[str]]]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    found = []
    for indent, body in re.findall(r"^( *)```console\n(.*?)^\1```", readme, re.S | re.M):
        lines = [line.removeprefix(indent) for line in body.splitlines()]
        for line in lines:
            if line.startswith("$ "):
                found.append((line[2:], []))
            else:
                found[-1][1].append(line)
    return found


def matches(shown: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` holds ``shown`` in order (``…`` skips, `` …`` ends a prefix)."""
    position = 0
    skipping = False
    for line in shown:
        if line == "…":
            skipping = True
            continue
        while position < len(actual):
            real = actual[position]
            position += 1
            same = real.startswith(line[:-2]) if line.endswith(" …") else real == line
            if same:
                break
            if not skipping:
                return False
        else:
            return False
        skipping = False
    return skipping or position == len(actual)


def test_the_readme_has_console_examples_of_check_github_and_rule():
    commands = [command for command, _ in examples()]
    assert any("--format github" in command for command in commands)
    assert "onnxlens rule ONNX201" in commands and "onnxlens rule --all" in commands


@pytest.mark.parametrize(("command", "shown"), examples(), ids=lambda v: str(v)[:40])
def test_a_readme_console_example_prints_what_it_shows(command, shown):
    words = shlex.split(command)
    assert words[0] == "onnxlens"
    env = {key: value for key, value in os.environ.items() if key != "GITHUB_STEP_SUMMARY"}
    done = subprocess.run([sys.executable, "-m", "onnxlens", *words[1:]], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600)
    assert matches(shown, done.stdout.splitlines()), done.stdout


def test_the_matching_rules():
    assert matches(["a", "…", "d"], ["a", "b", "c", "d"])
    assert matches(["a b …"], ["a b c"])
    assert not matches(["a", "d"], ["a", "b", "d"])
    assert not matches(["a"], ["a", "b"])
    assert matches(["a", "…"], ["a", "b"])
