"""The scratch directory a check's exports write to (exporter/pipeline/scratch_files.py), and
what the interception replaces while a target loads and puts back after
(exporter/pipeline/intercepted_calls.py)."""

from __future__ import annotations

import builtins
import io
import os
import threading
from pathlib import Path

import pytest

from exporter.pipeline.scratch_files import ScratchFiles


def test_a_write_goes_to_the_copy_and_a_read_of_the_path_sees_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scratch = ScratchFiles()
    assert scratch.copy_of("model.onnx") is None  # nothing written yet: no directory either
    assert scratch.directory is None
    copy = Path(scratch.file("model.onnx"))
    try:
        assert scratch.directory is not None and copy.is_relative_to(scratch.directory)
        assert copy.parts[-len(tmp_path.parts):] == (*tmp_path.parts[1:], "model.onnx")
        copy.write_bytes(b"model")
        # the same file, however it is named
        assert scratch.copy_of("model.onnx") == str(copy)
        assert scratch.copy_of(tmp_path / "model.onnx") == str(copy)
        assert scratch.copy_of(os.fsencode(tmp_path / "sub" / ".." / "model.onnx")) == str(copy)
        assert scratch.seen("other.onnx") == "other.onnx"  # never written: the real path
        assert scratch.seen(3) == 3  # a descriptor is not a path
        assert scratch.file(copy) == copy  # already in the scratch directory
        assert not (tmp_path / "model.onnx").exists()
    finally:
        scratch.remove()
    assert not Path(scratch.directory).exists()


def test_a_write_into_a_missing_directory_is_left_to_fail(tmp_path, monkeypatch):
    """As without the check: the write fails, naming the user's path, and writes nothing."""
    monkeypatch.chdir(tmp_path)
    scratch = ScratchFiles()
    assert scratch.file("missing/model.onnx") == "missing/model.onnx"
    assert scratch.directory is None


def test_a_folder_is_mirrored_and_made(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scratch = ScratchFiles()
    try:
        folder = Path(scratch.folder("."))
        assert folder.is_dir() and folder != tmp_path
        (folder / "report.md").write_text("report")
        assert scratch.copy_of("report.md") == str(folder / "report.md")
    finally:
        scratch.remove()


def test_the_interception_puts_back_what_it_replaced():
    import onnx
    import onnx.checker
    import torch

    from exporter.pipeline.intercepted_calls import intercepting

    replaced = [(torch.onnx, "export"), (torch.onnx.ONNXProgram, "save"), (onnx, "save"),
                (onnx, "save_model"), (onnx, "load"), (onnx, "load_model"),
                (onnx.checker, "check_model"), (builtins, "open"), (io, "open"), (os, "stat"),
                (threading, "excepthook")]
    before = [getattr(owner, name) for owner, name in replaced]
    with intercepting(None):
        assert all(getattr(owner, name) is not value
                   for (owner, name), value in zip(replaced, before))
    assert [getattr(owner, name) for owner, name in replaced] == before


def test_a_name_bound_while_intercepting_calls_the_original_afterwards(tmp_path, monkeypatch):
    """A module that did ``from torch.onnx import export`` while it was imported keeps the
    stand-in: outside a check it is the plain function again."""
    import torch

    from exporter.pipeline.intercepted_calls import intercepting

    monkeypatch.chdir(tmp_path)
    with intercepting(None):
        bound_open = builtins.open
        bound_export = torch.onnx.export
    with bound_open("plain.txt", "w") as file:
        file.write("written where asked")
    assert (tmp_path / "plain.txt").read_text() == "written where asked"
    with pytest.raises(TypeError):
        bound_export()  # the plain function's own complaint: no model
