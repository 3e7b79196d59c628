"""Diagnostics for each fixture kind at the exact ranges, with rule links and call chains."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from exporter.reports.render import OFF_BY_DEFAULT
from tests.conftest import FIXTURES
from tests.exporter.pipeline.test_fixture_diagnostics import EXPECTED as EXPORTER_EXPECTED
from tests.lsp.conftest import (
    close_file,
    diagnostics_for,
    open_file,
    record_publishes,
    spans,
    units,
    uri_of,
)

E, W = 1, 2
SEVERITY = {"error": E, "warning": W, "info": 3}


def _lsp_expectations() -> dict[str, dict[str, list[tuple[str, int, int, int, int, int]]]]:
    """The exporter's expectations for every fixture, as LSP sees them: per file, 0-based
    characters (every fixture is ASCII, so UTF-16 units equal code points)."""
    table = {}
    for name, rows in EXPORTER_EXPECTED.items():
        workspace = name.split("/")[0]
        by_file: dict[str, list[tuple[str, int, int, int, int, int]]] = {name: []}
        for rule, file, line, column, end_line, end_column, severity in rows:
            if rule in OFF_BY_DEFAULT:  # not published unless selected
                continue
            key = f"{workspace}/{file}"
            by_file.setdefault(key, []).append(
                (rule, line, column - 1, end_line, end_column - 1, SEVERITY[severity]))
        table[name] = by_file
    return table


EXPECTED = _lsp_expectations()

# Every fixture's verdict is judged where it is made, in-process
# (tests/exporter/pipeline/test_fixture_diagnostics.py); through the server, one fixture per
# way the server publishes what a check found (re-running all of them here cost ~1 CPU-minute
# of CI and tested the same conversion again).
THROUGH_THE_SERVER = {
    "clean/convnet.py": "a clean file: an empty publish",
    "no_translation/model.py": "findings in the checked file",
    "helper_module/model.py": "a finding in another file, published on that file",
    "decorated_helpers/model.py": "findings in two files from one check",
    "mixed/model.py": "a rule that is off by default left out, beside others",
    "soundness/narrowed.py": "warnings",
    "malformed_pragma/model.py": "problems of the annotation, found before any export",
    "wrong_translation/model.py": "findings of the ONNX Runtime comparison",
    "random_draws/model.py": "notes (information) beside errors",
    "stdio/at_import.py": "the user's prints never reach the protocol's stream",
    "stdio/in_forward.py": "the user's prints never reach the protocol's stream",
    "stdio/noisy.py": "the user's prints never reach the protocol's stream",
}


def test_the_fixtures_through_the_server_are_fixtures():
    assert set(THROUGH_THE_SERVER) <= set(EXPECTED)


# With VS Code's client only: every fixture is ASCII, so the ranges are the same in every
# position encoding, and what a client's capabilities change (links, related information,
# encodings) is tested with both clients below.
@pytest.mark.parametrize("client", ["visual-studio-code"], indirect=True)
@pytest.mark.parametrize("name", sorted(THROUGH_THE_SERVER))
async def test_fixture_diagnostics(client: LanguageClient, name: str):
    for file in EXPECTED[name]:
        client.diagnostics.pop(uri_of(FIXTURES / file), None)
    uri = open_file(client, FIXTURES / name)
    try:
        for file, expected in EXPECTED[name].items():
            found = await diagnostics_for(client, uri_of(FIXTURES / file))
            assert spans(found) == sorted(expected), file
            for diagnostic in found:
                assert diagnostic.source == "onnxlens"
                assert diagnostic.data["rule"] == diagnostic.code
    finally:
        close_file(client, uri)


@pytest.mark.parametrize("client", ["visual-studio-code"], indirect=True)
async def test_a_failing_capture_is_published_before_its_draft_export_ends(
        client: LanguageClient):
    """Issue 42: the first squiggle early. A capture that fails in every strategy is published
    at once (``data.early``) with torch's first error on the branching line; the draft
    export's list replaces it when the check ends."""
    path = FIXTURES / "data_dependent_branch" / "model.py"
    publishes = record_publishes(client)
    # a text of its own: no earlier check's result is reused
    uri = open_file(client, path, path.read_text() + "\n# checked again\n")
    try:
        final = await diagnostics_for(client, uri)
        mine = [p for p in publishes if p.uri == uri and p.diagnostics]
        first = mine[0].diagnostics
        assert all(isinstance(d.data, dict) and d.data.get("early") for d in first)
        assert [(d.code, d.range.start.line) for d in first] == [("ONNX101", 6)]
        assert first[0].message.startswith("torch.export failed")
        assert [(d.code, d.range.start.line) for d in final] == [("ONNX101", 6)]
        assert "depends on the values inside a tensor" in final[0].message
    finally:
        close_file(client, uri)


async def test_links_and_related_information_follow_capabilities(client: LanguageClient):
    uri = open_file(client, FIXTURES / "helper_module" / "model.py")
    helper = uri_of(FIXTURES / "helper_module" / "layers" / "special.py")
    try:
        found = await diagnostics_for(client, helper, lambda d: len(d) == 1)
        (diagnostic,) = found
        assert spans(found) == [("ONNX201", 6, 15, 6, 34, E)]
        publish = client.capabilities.text_document.publish_diagnostics
        if publish.code_description_support:
            # the page installed with onnxlens (bundled with the VS Code extension)
            href = diagnostic.code_description.href
            assert href.startswith("file://") and href.endswith("/rule_docs/ONNX201.md")
            assert Path(unquote(urlparse(href).path)).read_text().startswith(
                "# ONNX201: no-onnx-translation")
        else:
            assert diagnostic.code_description is None
        if publish.related_information:
            related = [(r.location.uri, r.location.range.start.line + 1, r.message)
                       for r in diagnostic.related_information]
            assert related == [(helper, 10, "called from `smooth`"),
                               (uri, 10, "called from `forward`"),
                               (uri, 7, "while checking the export target `UsesHelper`")]
        else:
            assert diagnostic.related_information is None
        assert list(client.diagnostics[uri]) == []  # nothing on the model file itself
    finally:
        close_file(client, uri)
    # Closing the model clears what its check reported on the helper module too.
    assert await diagnostics_for(client, helper, lambda d: d == []) == []


async def test_columns_follow_the_negotiated_encoding(client: LanguageClient):
    path = FIXTURES / "no_translation" / "model.py"
    text = path.read_text().replace("        a = torch.special.i0(x)",
                                    "        a = torch.special.i0(x)  # 𝛼")
    text = text.replace("        b = torch.digamma(x)", "        bé𝛽 = 1; b = torch.digamma(x)")
    uri = open_file(client, path, text)
    try:
        found = await diagnostics_for(client, uri)
        line = text.splitlines()[7]
        start = units(line[: line.index("torch.digamma")], client.position_encoding)
        assert start != line.index("torch.digamma") or client.position_encoding == "utf-32"
        assert spans(found) == [("ONNX201", 7, 12, 7, 31, E),
                                ("ONNX201", 8, start, 8, start + 16, E)]
    finally:
        close_file(client, uri)


async def test_a_byte_order_mark_from_the_client_is_no_import_error(client: LanguageClient):
    """A client that sends the file's BOM as its first character got a false ONNX002 (issue
    "nothing lost"); the file is checked as Python reads it."""
    path = FIXTURES / "no_translation" / "model.py"
    uri = open_file(client, path, "\ufeff" + path.read_text())
    try:
        # (an empty publish for the same file, left from an earlier test's close, may come
        # first: wait for this check's result; a false ONNX002 would time out here)
        found = await diagnostics_for(client, uri, expect=lambda found: bool(found))
        assert [(rule, line) for rule, line, *_ in spans(found)] == [("ONNX201", 7),
                                                                    ("ONNX201", 8)]
    finally:
        close_file(client, uri)


def test_capabilities_are_the_real_clients(client: LanguageClient):
    assert isinstance(client.capabilities, types.ClientCapabilities)
    assert client.capabilities.text_document.publish_diagnostics is not None
