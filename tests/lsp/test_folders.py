"""Which workspace folder a file is (lsp_server/server.py, ``folder_of``): the innermost of
nested folders; a symbolic link in a folder is that folder's, whatever it points to; a file
reached through a linked folder is that folder's; a file outside every folder is none's."""

from __future__ import annotations

import os

from lsp_server.server import OnnxLensServer


def test_a_file_is_its_innermost_folders_as_its_path_is_written(tmp_path):
    outer, inner, elsewhere = tmp_path / "outer", tmp_path / "outer" / "inner", tmp_path / "x"
    for folder in (inner, elsewhere):
        folder.mkdir(parents=True)
    (elsewhere / "model.py").write_text("")
    os.symlink(elsewhere / "model.py", inner / "linked.py")  # points out of every folder
    os.symlink(elsewhere, tmp_path / "alias")  # a folder opened through a link
    os.symlink(os.devnull, outer / "zero.py")
    server = OnnxLensServer()
    server.roots = [outer.resolve(), inner.resolve(), (tmp_path / "alias").resolve()]
    assert server.folder_of(outer / "model.py") == outer.resolve()
    assert server.folder_of(inner / "deep" / "model.py") == inner.resolve()
    assert server.folder_of(inner / "linked.py") == inner.resolve()
    assert server.folder_of(outer / "zero.py") == outer.resolve()
    assert server.folder_of(tmp_path / "alias" / "model.py") == elsewhere.resolve()
    assert server.folder_of(tmp_path / "other.py") is None
    server.roots = []
    assert server.folder_of(outer / "model.py") is None
