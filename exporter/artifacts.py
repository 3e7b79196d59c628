"""Saving and loading ``.onnx`` files without ever leaving a half-written file behind.

A save writes into a temporary directory next to the destination, fsyncs, then moves the
files in with ``os.replace``. External data gets a content-addressed name, so the previous
model and its data stay consistent until the final rename of the ``.onnx`` file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import onnx
from onnx.external_data_helper import uses_external_data

DEFAULT_EXTERNAL_DATA_THRESHOLD = 2 * 1024**3  # the protobuf limit


class UnsafePathError(ValueError):
    """A path would leave the directory the user chose."""


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
    """Write ``model`` to ``destination`` atomically; returns the files written."""
    destination = Path(destination)
    directory = destination.parent.resolve()
    if not directory.is_dir():
        raise FileNotFoundError(f"the directory {directory} does not exist")
    final = directory / destination.name
    if final.parent != directory or destination.name in ("", ".", ".."):
        raise UnsafePathError(f"{destination} is not a file name inside {directory}")
    if final.is_symlink():
        raise UnsafePathError(f"{final} is a symbolic link; refusing to write through it")

    external = model.ByteSize() >= external_data_threshold or \
        _initializer_bytes(model) >= external_data_threshold
    with tempfile.TemporaryDirectory(prefix=f".{final.name}.", dir=directory) as scratch:
        staged = Path(scratch) / final.name
        written = [final]
        if external:
            data_name = _save_with_external_data(model, staged, final.name)
            staged_data = Path(scratch) / data_name
            _fsync(staged_data)
            os.replace(staged_data, directory / data_name)
            written.append(directory / data_name)
        else:
            onnx.save_model(model, staged)
        _fsync(staged)
        os.replace(staged, final)
    _fsync_directory(directory)
    if external:
        _remove_stale_data(directory, final.name, keep=written[1].name)
    return written


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


def _remove_stale_data(directory: Path, name: str, keep: str) -> None:
    for candidate in directory.glob(f"{name}.*.data"):
        if candidate.name != keep:
            candidate.unlink(missing_ok=True)


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
