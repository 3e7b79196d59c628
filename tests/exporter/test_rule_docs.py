"""Every rule the code can emit has its documentation page, and diagnostics link to it."""

from __future__ import annotations

import re

from exporter.rules import RULES
from tests.conftest import REPO

DOCS = REPO / "docs" / "rules"


def test_every_rule_has_a_page_with_the_sections():
    for rule in RULES.values():
        page = (DOCS / f"{rule.id}.md").read_text(encoding="utf-8")
        assert page.startswith(f"# {rule.id}: {rule.name}\n"), rule.id
        for section in ("## What it means", "## Example", "## How to fix"):
            assert section in page, (rule.id, section)
        assert rule.doc_url.endswith(f"docs/rules/{rule.id}.md")


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
