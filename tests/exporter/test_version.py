"""One version: ``exporter.__version__``. pyproject.toml reads it; the VS Code extension's
package.json (which npm needs) must carry the same, and so must what the documentation names."""

from __future__ import annotations

import json
import re
import sys

from exporter import __version__
from tests.conftest import REPO, user_docs_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

EXTENSION = REPO / "vscode-extension"


def test_the_version_is_a_release_number():
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__), __version__


def test_pyproject_reads_the_version_from_the_package():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"]  # written once, in exporter/__init__.py
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "exporter.__version__"}


def test_the_extension_carries_the_packages_version():
    manifest = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
    assert manifest["version"] == __version__, (
        "vscode-extension/package.json's version differs from exporter.__version__")
    lock = json.loads((EXTENSION / "package-lock.json").read_text(encoding="utf-8"))
    assert lock["version"] == lock["packages"][""]["version"] == __version__, (
        "vscode-extension/package-lock.json's version differs from exporter.__version__")


def test_the_docs_name_this_version():
    tags = re.findall(r"(?:OWNER/onnxlens@|rev: )v([\d.]+)", user_docs_text())
    assert tags and set(tags) == {__version__}
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(rf"^## \[?{re.escape(__version__)}\]?\b", changelog, re.M)


def test_the_torch_extra_pins_the_recommended_torch():
    """pyproject.toml's `torch` extra and exporter/versions.py name the same release."""
    from exporter import versions

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["optional-dependencies"]["torch"] == [
        f"torch=={versions.RECOMMENDED_TORCH.version}"]
