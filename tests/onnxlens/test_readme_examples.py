"""The ```console examples of the README and of every page of docs/ (tests.conftest.USER_DOCS),
run: each `$ onnxlens ...` line's output must hold the lines shown after it, in order. A shown
line ending in ` …` is a prefix of the real one; a line `…` alone stands for any number of
lines."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from tests.conftest import REPO, USER_DOCS


def examples() -> list[tuple[str, str, list[str]]]:
    """(document, command, lines shown) of every console example of the user documents."""
    found: list[tuple[str, str, list[str]]] = []
    for path in USER_DOCS:
        text = path.read_text(encoding="utf-8")
        document = path.relative_to(REPO).as_posix()
        for indent, body in re.findall(r"^( *)```console\n(.*?)^\1```", text, re.S | re.M):
            lines = [line.removeprefix(indent) for line in body.splitlines()]
            assert lines and lines[0].startswith("$ "), (document, lines[:1])
            for line in lines:
                if line.startswith("$ "):
                    found.append((document, line[2:], []))
                else:
                    found[-1][2].append(line)
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


def test_the_docs_have_console_examples_of_check_github_and_rule():
    commands = [command for _, command, _ in examples()]
    assert any("--format github" in command for command in commands)
    assert "onnxlens rule ONNX201" in commands and "onnxlens rule --all" in commands
    # the README opens with a real check's diagnostic, run here like the others
    assert any(document == "README.md" and command.startswith("onnxlens check ")
               for document, command, _ in examples())


@pytest.mark.parametrize(("document", "command", "shown"), [
    pytest.param(*example, id=f"{example[0]}: {example[1]}"[:60]) for example in examples()])
def test_a_docs_console_example_prints_what_it_shows(document, command, shown):
    words = shlex.split(command)
    assert words[0] == "onnxlens"
    env = {key: value for key, value in os.environ.items() if key != "GITHUB_STEP_SUMMARY"}
    done = subprocess.run([sys.executable, "-m", "onnxlens", *words[1:]], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600)
    assert matches(shown, done.stdout.splitlines()), (document, done.stdout)


def test_the_matching_rules():
    assert matches(["a", "…", "d"], ["a", "b", "c", "d"])
    assert matches(["a b …"], ["a b c"])
    assert not matches(["a", "d"], ["a", "b", "d"])
    assert not matches(["a"], ["a", "b"])
    assert matches(["a", "…"], ["a", "b"])
