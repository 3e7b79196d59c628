"""A workspace for the warm-imports tests of issue 24 (defect 4): an "installed" package (a
directory named site-packages on PYTHONPATH, as a virtualenv's) that sets torch's default
dtype to float64 when imported, a file whose target imports it, and an unrelated file whose
targets are right only in a process where nobody changed the default dtype."""

from __future__ import annotations

import os
from pathlib import Path

SIDE_EFFECT_PACKAGE = "sideeffect_pkg"
SIDE_EFFECT = '''"""Changes torch's global state when imported, as some real libraries do."""
import torch

torch.set_default_dtype(torch.float64)

SCALE = 2.0
'''

USES = f'''import torch

import {SIDE_EFFECT_PACKAGE}


# onnx-export: args=(torch.randn(2, 4),)
class UsesPackage(torch.nn.Module):
    def forward(self, x):
        return x * {SIDE_EFFECT_PACKAGE}.SCALE
'''

# Under a float64 default dtype, torch.randn makes float64 inputs and nn.Linear float64
# weights: Mlp exports a float64 model, and Float32Input's float32 input meets float64
# weights (a false ONNX004, "mat1 and mat2 must have the same dtype").
PLAIN = '''import torch


# onnx-export: args=(torch.randn(2, 4),)
class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.linear(x))


# onnx-export: args=(torch.ones(2, 4, dtype=torch.float32),)
class Float32Input(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.linear(x)
'''


def install(site: Path, name: str, source: str) -> Path:
    package = site / name
    package.mkdir(parents=True, exist_ok=True)
    init = package / "__init__.py"
    init.write_text(source)
    return init


def site_packages(tmp_path: Path) -> Path:
    site = tmp_path / "env" / "lib" / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    return site


def python_path_with(site: Path) -> str:
    return os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))


def workspace(tmp_path: Path) -> tuple[Path, Path]:
    """(the site-packages directory holding the package, the project with uses.py and
    plain.py)."""
    site = site_packages(tmp_path)
    install(site, SIDE_EFFECT_PACKAGE, SIDE_EFFECT)
    project = tmp_path / "project"
    project.mkdir()
    (project / "uses.py").write_text(USES)
    (project / "plain.py").write_text(PLAIN)
    return site, project
