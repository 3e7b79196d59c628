"""The edits fixes are made of: applied where LSP and Python count positions, and a keyword
added to a call in the call's own layout."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from exporter.findings.diagnostics import Range
from exporter.findings.fixes import FixEdit
from exporter.source.edits import EditConflict, apply_edits, keyword_edits
from exporter.source.text import split_lines

PATH = Path("model.py")


def _with_keywords(source: str, keywords: dict[str, str]) -> str:
    call = ast.parse(source).body[0].value  # type: ignore[attr-defined]
    return apply_edits(source, keyword_edits(PATH, split_lines(source), call, keywords))


@pytest.mark.parametrize(("source", "expected"), [
    ("c = Config(a=1)\n", 'c = Config(a=1, attn_implementation="eager")\n'),
    ("c = Config()\n", 'c = Config(attn_implementation="eager")\n'),
    ("c = Config(\n    a=1,\n)\n", 'c = Config(\n    a=1,\n    attn_implementation="eager",\n)\n'),
    ("c = Config(\n    a=1\n)\n", 'c = Config(\n    a=1,\n    attn_implementation="eager"\n)\n'),
    ("c = Config(a=1, )\n", 'c = Config(a=1, attn_implementation="eager", )\n'),
    ("c = Config(attn_implementation='sdpa')\n", 'c = Config(attn_implementation="eager")\n'),
])
def test_a_keyword_is_added_in_the_calls_layout_or_its_value_replaced(source, expected):
    assert _with_keywords(source, {"attn_implementation": '"eager"'}) == expected


def test_two_keywords_one_replaced_one_added():
    source = "c = Config(\n    use_cache=True,\n)\n"
    assert _with_keywords(source, {"use_cache": "False", "attn_implementation": '"eager"'}) \
        == 'c = Config(\n    use_cache=False,\n    attn_implementation="eager",\n)\n'


def test_positions_count_code_points_and_every_line_break():
    source = "x = 'é'\r\ny = 1\rz = 2\n"
    edit = FixEdit(PATH, Range.of(3, 5, 3, 6), "3")  # the `2` after a lone \r
    assert apply_edits(source, [edit]) == "x = 'é'\r\ny = 1\rz = 3\n"
    accent = FixEdit(PATH, Range.of(1, 6, 1, 7), "e")
    assert apply_edits(source, [accent, edit]) == "x = 'e'\r\ny = 1\rz = 3\n"


@pytest.mark.parametrize("edits", [
    [FixEdit(PATH, Range.of(1, 1, 1, 4), "a"), FixEdit(PATH, Range.of(1, 3, 1, 5), "b")],
    [FixEdit(PATH, Range.of(9, 1, 9, 1), "a")],
    [FixEdit(PATH, Range.of(1, 40, 1, 41), "a")],
])
def test_edits_that_overlap_or_fall_outside_are_refused(edits):
    with pytest.raises(EditConflict):
        apply_edits("x = 1\n", edits)
