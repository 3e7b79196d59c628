"""Every rule the code can emit has its documentation page, and diagnostics link to it."""

from __future__ import annotations

import re

from exporter.findings.rules import RULES
from onnxlens.cli import main
from onnxlens.rule_pages import terminal_markdown
from tests.conftest import REPO

DOCS = REPO / "docs" / "rules"


def test_every_rule_has_a_page_with_the_sections():
    for rule in RULES.values():
        page = (DOCS / f"{rule.id}.md").read_text(encoding="utf-8")
        assert page.startswith(f"# {rule.id}: {rule.name}\n"), rule.id
        for section in ("## What it means", "## Example", "## How to fix"):
            assert section in page, (rule.id, section)
        # installed with the package (exporter/findings/rule_docs is docs/rules), opened from links
        assert rule.doc_path.read_text(encoding="utf-8") == page
        assert rule.doc_link == rule.doc_path.as_uri()
        assert rule.doc_url is None  # no web address unless one is configured


def test_a_configured_docs_url_is_used_by_every_link(monkeypatch):
    monkeypatch.setenv("ONNXLENS_RULE_DOCS_URL", "https://docs.example.org/onnxlens/rules/")
    rule = RULES["ONNX201"]
    assert rule.doc_url == rule.doc_link == "https://docs.example.org/onnxlens/rules/ONNX201.md"


def test_rule_command_prints_the_page_and_lists_the_catalog(capsys):
    assert main(["rule", "onnx201"]) == 0  # piped: the page, its links spelled out
    assert capsys.readouterr().out == terminal_markdown(
        (DOCS / "ONNX201.md").read_text(encoding="utf-8"))
    assert main(["rule", "--all"]) == 0
    listed = capsys.readouterr().out.splitlines()[1:-1]  # after the header, before the note
    assert [line.split()[0] for line in listed] == list(RULES)
    assert listed[0].split()[1:4] == ["invalid-annotation", "error", "on"]
    assert main(["rule", "ONNX299"]) == 2
    assert "no rule 'ONNX299' (e.g. ONNX201, ONNX202, ONNX203" in capsys.readouterr().err


def test_the_text_report_points_at_the_rule_command(capsys):
    assert main(["check", str(REPO / "tests/exporter/fixtures/no_translation/model.py")]) == 1
    assert "   docs: onnxlens rule ONNX201\n" in capsys.readouterr().out


def test_index_lists_every_rule_and_nothing_else():
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    assert set(re.findall(r"\[(ONNX\d{3})\.md\]", index)) == set(RULES)
    assert {p.stem for p in DOCS.glob("ONNX*.md")} == set(RULES)


def test_emitted_rule_ids_are_all_in_the_catalog():
    emitted = set()
    for package in ("exporter", "export_worker", "lsp_server"):
        for path in (REPO / package).rglob("*.py"):
            emitted |= set(re.findall(r'"(ONNX\d{3})"', path.read_text(encoding="utf-8")))
    assert {"ONNX901", "ONNX902", "ONNX903"} <= emitted
    assert emitted <= set(RULES)
