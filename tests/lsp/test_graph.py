"""The graph view in the editor (issue 29): ``onnxlens.showGraph`` runs a graph job and serves
the checked graph in Model Explorer, the failing node selected and every node mapped to its
source line; ``onnxlens.graphNodesAt`` goes from a line to its nodes; the graph is rendered
again after each check while the client's panel shows it; a client without a panel gets the
page in the browser; an untrusted workspace gets no graph; no viewer outlives the server."""

from __future__ import annotations

import asyncio
import shutil
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from tests.conftest import REPO, needs_model_explorer
from tests.lsp.conftest import (
    SERVER,
    change_and_save,
    command,
    diagnostics_for,
    initialize_params,
    open_file,
    plain,
    served,
    server_status,
    wait_for,
)

pytestmark = needs_model_explorer

EXAMPLE = REPO / "examples" / "failing" / "double_precision.py"
NO_FIXES = {"fixBudgetSeconds": 0}


def _workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    shutil.copy(EXAMPLE, root / "double_precision.py")
    return root


def _line_of(path: Path, text: str) -> int:
    """The 0-based line holding ``text``."""
    return next(n for n, line in enumerate(path.read_text().splitlines()) if text in line)


def _page(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return bytes(answer.read())


def _gone(pid: int) -> bool:
    """No such process, or only its zombie (its parent, the server, has ended too)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


async def test_the_graph_opens_on_the_failing_node_and_maps_lines_both_ways(tmp_path):
    root = _workspace(tmp_path)
    source = root / "double_precision.py"
    erf_line = _line_of(source, "torch.erf(")
    changes: list[Any] = []
    async with served(root, graphPanel=True, settings=NO_FIXES) as client:
        @client.feature("onnxlens/graphChanged")
        def graph_changed(params: Any) -> None:
            changes.append(params)

        uri = open_file(client, source)
        await diagnostics_for(client, uri)
        started = time.monotonic()
        graph = plain(await command(client, "onnxlens.showGraph", uri, "PreciseGelu"))
        seconds = time.monotonic() - started
        assert "error" not in graph, graph
        assert (graph["uri"], graph["target"], graph["graphId"]) == (
            uri, "PreciseGelu", "main_graph")
        assert graph["url"].startswith("http://127.0.0.1:")
        page = await asyncio.to_thread(_page, graph["url"])
        assert b"<app-root" in page  # Model Explorer's web app answers
        selected = graph["nodes"][graph["selectedNode"]]
        assert selected["opType"] == "Erf" and selected["nodeId"] == graph["selectedNode"]
        location = selected["location"]
        assert location["uri"] == uri
        assert location["range"]["start"]["line"] == erf_line
        assert location["range"]["start"]["character"] == source.read_text().splitlines()[
            erf_line].index("torch.erf(")
        assert not client.shown_documents  # the client shows it in its own panel

        at = plain(await command(client, "onnxlens.graphNodesAt", uri, erf_line))
        assert at["target"] == "PreciseGelu"
        assert graph["selectedNode"] in [node["key"] for node in at["nodes"]]
        assert {node["opType"] for node in at["nodes"]} >= {"Erf", "Div", "Add"}
        nothing = plain(await command(client, "onnxlens.graphNodesAt", uri, 0))
        assert nothing["nodes"] == []

        viewer = (await server_status(client))["viewer"]["pid"]
        assert viewer is not None

        # the panel is open: a check of the edited file renders the graph again
        fixed = source.read_text().replace("x64 = x.double()", "x64 = x")
        change_and_save(client, uri, fixed, 2)
        await wait_for(lambda: changes, 120, "onnxlens/graphChanged")
        again = plain(changes[-1])
        assert "error" not in again, again
        assert again.get("selectedNode") is None  # nothing fails any more
        assert again["url"] != graph["url"]  # the new model, on the same viewer
        assert again["url"].split("/?")[0] == graph["url"].split("/?")[0]
        assert "Erf" in {node["opType"] for node in again["nodes"].values()}
        assert (await server_status(client))["viewer"]["pid"] == viewer

        # closed: no more re-rendering
        client.protocol.notify("onnxlens/graphClosed", {})
        count = len(changes)
        change_and_save(client, uri, source.read_text(), 3)
        await diagnostics_for(client, uri)
        # the check ended (its verdict published) without starting a re-render
        assert (await server_status(client))["viewer"]["renderingAgain"] is False
        assert len(changes) == count
    await wait_for(lambda: _gone(viewer), 15, "the viewer to end with the server")
    print(f"showGraph answered in {seconds:.1f} s")


async def test_a_client_without_a_panel_gets_the_page_in_the_browser(tmp_path):
    root = _workspace(tmp_path)
    async with served(root, "neovim", settings=NO_FIXES) as client:
        uri = open_file(client, root / "double_precision.py")
        graph = plain(await command(client, "onnxlens.showGraph", uri, "PreciseGelu"))
        (shown,) = client.shown_documents
        assert (shown.uri, shown.external) == (graph["url"], True)
        viewer = (await server_status(client))["viewer"]["pid"]
    await wait_for(lambda: _gone(viewer), 15, "the viewer to end with the server")


async def test_a_killed_server_leaves_no_viewer_behind(tmp_path):
    """However the server ends (here SIGKILL: no shutdown, no exit), its viewer goes."""
    root = _workspace(tmp_path)
    client = await SERVER.start()
    try:
        await client.initialize_session(initialize_params(
            "neovim", root, trusted=True, settings=NO_FIXES))
        uri = open_file(client, root / "double_precision.py")
        await command(client, "onnxlens.showGraph", uri, "PreciseGelu")
        viewer = (await server_status(client))["viewer"]["pid"]
        assert viewer is not None and not _gone(viewer)
        client._server.kill()  # type: ignore[union-attr]
        await wait_for(lambda: _gone(viewer), 15, "the viewer to end with the server")
    finally:
        await client.stop()


async def test_an_untrusted_workspace_gets_no_graph(tmp_path):
    root = _workspace(tmp_path)
    async with served(root, trusted=False, graphPanel=True) as client:
        uri = open_file(client, root / "double_precision.py")
        lenses = await client.text_document_code_lens_async(types.CodeLensParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))
        assert "onnxlens.showGraph" not in {lens.command.command for lens in lenses}
        with pytest.raises(Exception, match="the workspace is not trusted"):
            await command(client, "onnxlens.showGraph", uri, "PreciseGelu")
        with pytest.raises(Exception, match="the workspace is not trusted"):
            await command(client, "onnxlens.graphNodesAt", uri, 9)
        assert (await server_status(client))["viewer"]["pid"] is None
