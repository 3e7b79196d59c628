"""The torch this process imported, and whether onnxlens is tested on it
(``exporter/versions.py``). Below both ``torch_compat`` and ``speedups``, which need it."""

from __future__ import annotations

import torch

from exporter import versions

VERSION: str = torch.__version__
TESTED: bool = versions.is_tested(VERSION)
