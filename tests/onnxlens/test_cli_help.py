"""The command line explains itself (issue "read by people", item 4): help for every command
and argument, ``check FILE::TARGET``, the nearest command for a mistyped one, ``--version``
without torch, ``graph``'s missing extra before any check."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from onnxlens import cli
from onnxlens.cli import main
from tests.conftest import REPO


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = cli._parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {"onnxlens": parser, **commands.choices}


@pytest.mark.parametrize("name", list(_commands()))
def test_every_command_and_argument_has_help(name):
    parser = _commands()[name]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            assert all(choice.help for choice in action._choices_actions)
            continue
        assert action.help, f"{name} {action.option_strings or action.dest} has no help"
    text = parser.format_help()
    assert "exit status: 0 no error, 1 errors found" in text
    assert "5 nothing checked with --require-targets" in text
    if name != "onnxlens":
        assert "FILE::TARGET names one" in text and "# onnx-export:" in text


def test_check_help_says_the_default_format_and_what_a_path_may_be():
    text = " ".join(_commands()["check"].format_help().split())
    assert "(default text: compiler-style lines)" in text
    assert "FILE::TARGET (that target alone)" in text
    assert "--require-targets" in text


@pytest.mark.parametrize("typed, suggested", [("chek", "check"), ("rules", "rule"),
                                              ("sav", "save")])
def test_a_mistyped_command_suggests_the_nearest(typed, suggested, capsys):
    with pytest.raises(SystemExit) as exited:
        main([typed, "x.py"])
    assert exited.value.code == 2
    assert f"unknown command '{typed}'; did you mean '{suggested}'?" in capsys.readouterr().err


def test_version_answers_from_metadata_without_importing_torch():
    code = ("import sys\nfrom onnxlens.cli import main\n"
            "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
            "print('torch imported' if 'torch' in sys.modules else 'torch not imported')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    lines = done.stdout.splitlines()
    assert lines[0].startswith("onnxlens ")
    from importlib.metadata import version

    assert f"torch {version('torch')}" in lines
    assert lines[-1] == "torch not imported"


MODEL = '''import torch


# onnx-export: args=(torch.randn(2, 4),)
class Twice(torch.nn.Module):
    def forward(self, x):
        return x * 2


# onnx-export: args=(torch.randn(2, 4),)
class Thrice(torch.nn.Module):
    def forward(self, x):
        return x * 3
'''


def test_check_file_target_checks_that_target_alone(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text(MODEL)
    assert main(["check", "m.py::Thrice", "--format", "json"]) == 0
    assert [t["name"] for t in json.loads(capsys.readouterr().out)["targets"]] == ["Thrice"]


def test_check_of_a_target_the_file_does_not_hold_is_a_usage_error(tmp_path, monkeypatch,
                                                                    capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text(MODEL)
    assert main(["check", "m.py::Twise"]) == 2
    assert capsys.readouterr().err == ("onnxlens: error: m.py has no export target 'Twise' "
                                       "(targets: Twice, Thrice)\n")


def test_graph_says_the_missing_extra_before_it_checks_anything(tmp_path, monkeypatch,
                                                                capsys):
    from onnxlens import graph

    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text(MODEL)
    monkeypatch.setattr(graph, "missing_packages", lambda: ["model_explorer"])

    def never(*args, **kwargs):
        raise AssertionError("the target was checked before the missing extra was said")

    monkeypatch.setattr(graph, "single_job", never)
    assert main(["graph", "m.py::Twice"]) == 2
    assert 'pip install "onnxlens[graph]"' in capsys.readouterr().err
