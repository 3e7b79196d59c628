#!/usr/bin/env bash
# Create a venv and install onnxlens with everything it needs. Idempotent: a second run with
# an unchanged pyproject.toml, exporter/versions.py and setup script does nothing.
#
#   bash scripts/setup.sh                       # .venv, the primary torch (CPU build)
#   ONNXLENS_TORCH=2.14.1 bash scripts/setup.sh # .venv-torch2.14.1, with torchvision beside it
#
# The torch versions onnxlens supports, and what each installs beside it, are listed once in
# exporter/versions.py (read here without importing the project). torch is installed first and
# pinned on every pip line so that pip never picks a torch build on its own: an unpinned torch
# pulls gigabytes of CUDA packages.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
versions="$repo/exporter/versions.py"
torch_version="${ONNXLENS_TORCH:-$("$python" "$versions" primary)}"
# Every pin for this torch (torch==X, and e.g. torchvision==Y); fails on an unsupported one.
read -r -a torch_specs <<<"$("$python" "$versions" pins "$torch_version")"
if [ -n "${ONNXLENS_VENV:-}" ]; then
    venv="$ONNXLENS_VENV"
elif [ "$torch_version" = "$("$python" "$versions" primary)" ]; then
    venv="$repo/.venv"
else
    venv="$repo/.venv-torch$torch_version"
fi

if [ ! -x "$venv/bin/python" ]; then
    echo "setup: creating $venv"
    "$python" -m venv "$venv"
fi

stamp="$venv/.onnxlens-setup-stamp"
want="$(cat "$repo/pyproject.toml" "$repo/scripts/setup.sh" "$versions" | cksum) $torch_version"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
        && "$venv/bin/python" -c "import torch, onnx, onnxscript, onnxruntime, exporter" 2>/dev/null; then
    exit 0
fi

pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
echo "setup: installing ${torch_specs[*]} into $venv"
"${pip[@]}" "${torch_specs[@]}" </dev/null
# The graph viewer (the `graph` extra, ~550 MB) only beside the primary torch: its tests
# depend on no torch (tests/conftest.py, EVERY_TORCH)
# OpenVINO (the `runtimes` extra, ~180 MB) beside every torch: the deploy stage's verdicts are
# checked on each (tests/exporter/pipeline/test_deploy.py)
extras="export,lsp,dev,runtimes"
[ "$torch_version" = "$("$python" "$versions" primary)" ] && extras="$extras,graph"
# timm (its fix trial's tests, tests/onnxlens/test_library_fixes.py) where the torch release
# pins a torchvision: timm imports torchvision, and a torchvision from PyPI may not import
# beside the pinned torch (tests/corpus/README.md)
if printf '%s\n' "${torch_specs[@]}" | grep -q '^torchvision=='; then
    extras="$extras,timm"
fi
echo "setup: installing onnxlens with the $extras extras"
"${pip[@]}" -e "$repo[$extras]" "${torch_specs[@]}" </dev/null
echo "$want" >"$stamp"
