"""Diagnostics for each fixture kind at the exact ranges, with rule links and call chains."""

from __future__ import annotations

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.conftest import FIXTURES
from tests.lsp.conftest import close_file, diagnostics_for, open_file, spans, units, uri_of

E, W = 1, 2
# LSP positions: 0-based characters; lines shown 1-based here.
EXPECTED = {
    "no_translation/model.py": [("ONNX201", 7, 12, 7, 31, E), ("ONNX201", 8, 12, 8, 28, E)],
    "data_dependent_branch/model.py": [("ONNX101", 7, 11, 7, 22, E),
                                       ("ONNX106", 7, 11, 7, 22, W)],
    "dynamic_specialized/model.py": [("ONNX102", 7, 15, 7, 45, E),
                                     ("ONNX106", 7, 15, 7, 45, W)],
    "ort_kernel_missing/model.py": [("ONNX401", 7, 12, 7, 33, E)],
    "wrong_translation/model.py": [("ONNX501", 20, 15, 20, 24, E),
                                   ("ONNX502", 19, 12, 19, 39, E)],
    "malformed_pragma/model.py": [("ONNX001", 4, 15, 4, 39, E), ("ONNX001", 10, 42, 10, 71, E),
                                  ("ONNX001", 16, 47, 16, 73, E)],
    "import_error/model.py": [("ONNX002", 2, 0, 2, 33, E)],
    "clean/convnet.py": [],
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_fixture_diagnostics(client: LanguageClient, name: str):
    uri = open_file(client, FIXTURES / name)
    try:
        found = await diagnostics_for(client, uri)
        assert spans(found) == sorted(EXPECTED[name])
        for diagnostic in found:
            assert diagnostic.source == "onnxlens"
            assert diagnostic.data["rule"] == diagnostic.code
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
            assert diagnostic.code_description.href.endswith("/docs/rules/ONNX201.md")
        else:
            assert diagnostic.code_description is None
        if publish.related_information:
            related = [(r.location.uri, r.location.range.start.line + 1, r.message)
                       for r in diagnostic.related_information]
            assert related == [(uri, 10, "called from `forward`"),
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


def test_capabilities_are_the_real_clients(client: LanguageClient):
    assert isinstance(client.capabilities, types.ClientCapabilities)
    assert client.capabilities.text_document.publish_diagnostics is not None
