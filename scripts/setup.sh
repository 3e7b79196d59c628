#!/usr/bin/env bash
# Create .venv and install onnxlens with everything it needs. Idempotent: a second run with
# an unchanged pyproject.toml does nothing.
#
# torch is installed first and pinned (the CPU build, torch==2.13.0) so that pip never picks a
# torch build on its own: an unpinned torch pulls gigabytes of CUDA packages.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${ONNXLENS_VENV:-$repo/.venv}"
python="${PYTHON:-python3}"
torch_spec="torch==2.13.0"

if [ ! -x "$venv/bin/python" ]; then
    echo "setup: creating $venv"
    "$python" -m venv "$venv"
fi

stamp="$venv/.onnxlens-setup-stamp"
want="$(cat "$repo/pyproject.toml" "$repo/scripts/setup.sh" | cksum)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
        && "$venv/bin/python" -c "import torch, onnx, onnxscript, onnxruntime, exporter" 2>/dev/null; then
    exit 0
fi

pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
echo "setup: installing $torch_spec (CPU build)"
"${pip[@]}" "$torch_spec" </dev/null
echo "setup: installing onnxlens with the export, lsp and dev extras"
"${pip[@]}" -e "$repo[export,lsp,dev]" "$torch_spec" </dev/null
echo "$want" >"$stamp"
