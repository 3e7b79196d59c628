"""Saving and loading ``.onnx`` files without ever leaving a half-written file behind.

A save writes into a temporary directory next to the destination, fsyncs, then moves the
files in with ``os.replace``. External data gets a content-addressed name, so the previous
model and its data stay consistent until the final rename of the ``.onnx`` file.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path

import onnx
from onnx.external_data_helper import uses_external_data

from exporter.files import UnsafePathError, output_path, plain_file_mode

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
    a save gives it) is removed: never a file this function did not write."""
    final = output_path(destination)
    directory = final.parent
    previous_data = _own_data_files(final)

    external = model.ByteSize() >= external_data_threshold or \
        _initializer_bytes(model) >= external_data_threshold
    with tempfile.TemporaryDirectory(prefix=f".{final.name}.", dir=directory) as scratch:
        staged = Path(scratch) / final.name
        written = [final]
        if external:
            data_name = _save_with_external_data(model, staged, final.name)
            staged_data = Path(scratch) / data_name
            _fsync(staged_data)
            os.chmod(staged_data, plain_file_mode())
            os.replace(staged_data, directory / data_name)
            written.append(directory / data_name)
        else:
            onnx.save_model(model, staged)
        _fsync(staged)
        os.chmod(staged, plain_file_mode())
        os.replace(staged, final)
    _fsync_directory(directory)
    for stale in previous_data - {path.name for path in written}:
        (directory / stale).unlink(missing_ok=True)
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
