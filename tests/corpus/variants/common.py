"""What a generated variant is, and how it is written into a workspace."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Variant:
    mechanism: str
    name: str  # the variant's name: ``variant.soundness.07`` (the target's, unless ``target``)
    source: str  # the text of the file that holds the target
    line: int  # the line a finding belongs on (1-based): the guard, the failing call; 0: none
    choices: tuple[str, ...] = ()  # what was drawn, for the coverage test
    #: the target's name as onnxlens discovers it, when not ``name`` (an export call's
    #: ``function@line``)
    target: str = ""
    #: other files the target imports, as (path relative to the variants' root, text)
    files: tuple[tuple[str, str], ...] = ()
    #: "installed" packages the files import, as (path relative to :func:`site_packages`,
    #: text): outside the variants' root, on ``PYTHONPATH`` for onnxlens and the truth alike
    packages: tuple[tuple[str, str], ...] = ()
    #: the target file's path relative to the variants' root, when not ``file_name``'s
    #: default (a folder of its own: ``variant.export_calls.07/export_07.py``)
    path: str = ""
    #: other target files among ``files``, checked after this one in the same onnxlens
    #: process (the corpus's order), as (path relative to the variants' root, target name)
    more_targets: tuple[tuple[str, str], ...] = ()

    @property
    def target_name(self) -> str:
        return self.target or self.name

    @property
    def file_name(self) -> str:
        return self.path or self.name.replace(".", "_") + ".py"


def site_packages(root: Path) -> Path:
    """Where the variants under ``root`` find their "installed" packages: a directory named
    site-packages (as a virtualenv's, which is what onnxlens's worker takes for installed
    code, ``export_worker/warm_imports.py``) beside ``root``, outside it."""
    return root.parent / f"{root.name}-env" / "lib" / "site-packages"


def write_variants(root: Path, variants: list[Variant]) -> list[Path]:
    """Write each variant's file (and its other files) under ``root``; the target files'
    paths, in order."""
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for variant in variants:
        written = [(root / relative, text) for relative, text in variant.files]
        written += [(site_packages(root) / relative, text) for relative, text in variant.packages]
        for other, text in written:
            other.parent.mkdir(parents=True, exist_ok=True)
            other.write_text(text, encoding="utf-8")
        path = root / variant.file_name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(variant.source, encoding="utf-8")
        paths.append(path)
    return paths
