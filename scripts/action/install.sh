#!/usr/bin/env bash
# The GitHub Action's install step (action.yml): torch from ONNXLENS_TORCH_INDEX_URL (PyTorch's
# CPU wheels; empty: pip's own index), then onnxlens with its export extra from the action's
# checkout, into the `python` on PATH.
set -euo pipefail
: "${ONNXLENS_ACTION_PATH:?}" "${ONNXLENS_TORCH:?}"
index=()
if [ -n "${ONNXLENS_TORCH_INDEX_URL:-}" ]; then
    index=(--index-url "$ONNXLENS_TORCH_INDEX_URL")
fi
python -m pip install --disable-pip-version-check "torch==$ONNXLENS_TORCH" "${index[@]}"
# torch is pinned again so that the export packages can never replace it with another build.
python -m pip install --disable-pip-version-check "$ONNXLENS_ACTION_PATH[export]" \
    "torch==$ONNXLENS_TORCH"
onnxlens --version
