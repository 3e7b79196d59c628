"""Saving and loading ``.onnx`` files without ever leaving a half-written file behind.

A save writes into a temporary directory next to the destination, fsyncs, then moves the
files in with ``os.replace`` (under a lock on the directory, so that concurrent saves swap
one at a time). External data gets a content-addressed name, so the previous
model and its data stay consistent until the final rename of the ``.onnx`` file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import onnx
from onnx.external_data_helper import uses_external_data

from exporter.reports.writing import (
    UnsafePathError,
    output_path,
    plain_file_mode,
    process_exists,
)

DEFAULT_EXTERNAL_DATA_THRESHOLD = 2 * 1024**3  # the protobuf limit


def _fsync(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def _fsync_directory(path: Path) -> None:
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _initializer_bytes(model: onnx.ModelProto) -> int:
    return sum(len(tensor.raw_data) for tensor in model.graph.initializer)


def save_model(model: onnx.ModelProto, destination: Path,
               external_data_threshold: int = DEFAULT_EXTERNAL_DATA_THRESHOLD) -> list[Path]:
    """Write ``model`` to ``destination`` atomically; returns the files written. Of the
    files already there, only the data file the replaced model referred to (with the name
    a save gives it) is removed, and the scratch directories of saves that were killed:
    never a file this function did not write."""
    final = output_path(destination)
    directory = final.parent
    _remove_abandoned_scratch(directory, final.name)
    external = model.ByteSize() >= external_data_threshold or \
        _initializer_bytes(model) >= external_data_threshold
    # the scratch directory's name carries this process's id: a later save removes it when
    # this process died before it could (SIGKILL, a power cut)
    with tempfile.TemporaryDirectory(prefix=f".{final.name}.{os.getpid()}.",
                                     dir=directory) as scratch:
        staged = Path(scratch) / final.name
        data_name = _save_with_external_data(model, staged, final.name) if external else None
        if data_name is None:
            onnx.save_model(model, staged)
        else:
            _fsync(Path(scratch) / data_name)
            os.chmod(Path(scratch) / data_name, plain_file_mode())
        _fsync(staged)
        os.chmod(staged, plain_file_mode())
        written = [final] + ([directory / data_name] if data_name else [])
        # Concurrent saves to one destination swap their files in one at a time, each
        # removing the data file of the model it replaced: none leaves an orphan data file.
        with _locked(directory):
            previous_data = _own_data_files(final)
            if data_name is not None:
                os.replace(Path(scratch) / data_name, directory / data_name)
            os.replace(staged, final)
            _fsync_directory(directory)
            for stale in previous_data - {path.name for path in written}:
                (directory / stale).unlink(missing_ok=True)
    return written


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """An exclusive ``flock`` on the directory itself (no lock file is left behind)."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def _remove_abandoned_scratch(directory: Path, name: str) -> None:
    """Remove the scratch directories (``.<name>.<pid>.<random>``) of earlier saves to the
    same destination whose process no longer exists."""
    pattern = re.compile(re.escape(f".{name}.") + r"(\d+)\.[A-Za-z0-9_]+")
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            match = pattern.fullmatch(entry.name)
            if match and entry.is_dir(follow_symlinks=False) \
                    and not process_exists(int(match.group(1))):
                shutil.rmtree(entry.path, ignore_errors=True)


def _save_with_external_data(model: onnx.ModelProto, staged: Path, name: str) -> str:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    provisional = f"{name}.data.tmp"
    onnx.save_model(copy, staged, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=provisional, size_threshold=0)
    digest = hashlib.sha256((staged.parent / provisional).read_bytes()).hexdigest()[:12]
    data_name = f"{name}.{digest}.data"
    os.replace(staged.parent / provisional, staged.parent / data_name)
    reloaded = onnx.load_model(staged, load_external_data=False)
    for tensor in _external_tensors(reloaded):
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = data_name
    onnx.save_model(reloaded, staged)
    return data_name


def _own_data_files(model_path: Path) -> set[str]:
    """The data files the model at ``model_path`` refers to that a save of onnxlens wrote
    (``<model>.<12 hex digits>.data`` beside it); nothing when it is not a readable model."""
    if not model_path.is_file():
        return set()
    try:
        model = onnx.load_model(model_path, load_external_data=False)
    except Exception:  # not a model (or not ours): nothing of it is ours to remove
        return set()
    pattern = re.compile(re.escape(model_path.name) + r"\.[0-9a-f]{12}\.data")
    return {entry.value for tensor in _external_tensors(model) for entry in tensor.external_data
            if entry.key == "location" and pattern.fullmatch(entry.value)}


def _external_tensors(model: onnx.ModelProto) -> list[onnx.TensorProto]:
    return [t for t in model.graph.initializer if uses_external_data(t)]


def load_model(path: Path) -> onnx.ModelProto:
    """Load a model, refusing external data whose location escapes the model's directory."""
    path = Path(path)
    model = onnx.load_model(path, load_external_data=False)
    directory = path.parent.resolve()
    for tensor in _external_tensors(model):
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        target = (directory / location).resolve()
        if (not location or os.path.isabs(location) or ".." in Path(location).parts
                or (target.parent != directory and directory not in target.parents)):
            raise UnsafePathError(
                f"tensor {tensor.name!r} points at external data {location!r}, outside "
                f"{directory}; refusing to load it")
    onnx.load_external_data_for_model(model, str(directory))
    return model
