"""``onnxlens rule``: the page rendered for a terminal, links readable; ``rule --all`` marks
the rules that are off by default (issue "read by people", item 4)."""

from __future__ import annotations

import io
import re

from rich.console import Console

from exporter.findings.rules import RULES, rule_page
from exporter.reports.render import OFF_BY_DEFAULT
from onnxlens.cli import main
from onnxlens.rule_pages import print_rule, terminal_markdown


def test_links_are_spelled_out_for_a_terminal():
    page = ("See [ONNX106](ONNX106.md), [the capture rule](ONNX101.md#example), "
            "[what a check runs](../checks.md#stages), [below](#example) and "
            "[torch](https://pytorch.org/docs).")
    assert terminal_markdown(page) == (
        "See ONNX106, the capture rule (`onnxlens rule ONNX101`), what a check runs "
        "(docs/checks.md), below and [torch](https://pytorch.org/docs).")


def test_a_piped_page_has_no_raw_relative_link(capsys):
    assert main(["rule", "onnx201"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# ONNX201: no-onnx-translation")
    assert not re.search(r"\]\((?!https?:)", out), "a relative Markdown link is left"
    assert "- ONNX202: a translation exists but raised." in out


def test_a_terminal_gets_the_page_rendered_and_nothing_cut():
    """On a terminal, rich renders it; its code blocks are wrapped, not cropped (an example's
    error line lost its end at 80 columns)."""
    terminal = io.StringIO()
    print_rule("ONNX106", Console(file=terminal, width=60, force_terminal=True,
                                  color_system=None))
    shown = terminal.getvalue()
    assert "# ONNX106" not in shown and "ONNX106: unsound-graph" in shown  # a heading
    assert "](" not in shown
    words = " ".join(line.strip() for line in shown.splitlines())
    assert "assumed this line behaves as it did for the example inputs (ONNX101)." in words


def test_the_catalog_says_which_rules_are_off_by_default(capsys):
    assert main(["rule", "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["id", "name", "severity", "default", "summary"]
    by_id = {line.split()[0]: line.split() for line in lines[1:] if line.startswith("ONNX")}
    assert set(by_id) == set(RULES)
    assert {rule for rule, columns in by_id.items() if columns[3] == "off"} == OFF_BY_DEFAULT
    assert by_id["ONNX201"][2:4] == ["error", "on"]
    assert "--select ONNX106" in lines[-1]


def test_every_rule_page_renders_on_a_terminal():
    for rule_id in RULES:
        terminal = io.StringIO()
        print_rule(rule_id, Console(file=terminal, width=100, force_terminal=True))
        assert rule_id in terminal.getvalue()
        assert "](" not in terminal_markdown(rule_page(rule_id)).replace("](http", "")
