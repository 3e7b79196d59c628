#!/usr/bin/env bash
# Fill bundled/ with what the .vsix carries for the server:
#   bundled/tool  the onnxlens packages (exporter, export_worker, check_service, lsp_server) and
#                 the launcher script
#   bundled/libs  pure-Python wheels of the server's dependencies (python/requirements.txt)
# Built in a scratch directory and moved into place, so an interrupted run leaves no half.
set -euo pipefail

extension="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repo="$(cd "$extension/.." && pwd)"
python="${PYTHON:-python3}"

scratch="$(mktemp -d "$extension/.bundled.XXXX")"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/tool" "$scratch/libs"

for package in exporter export_worker check_service lsp_server; do
    cp -rL "$repo/$package" "$scratch/tool/"  # -L: exporter/findings/rule_docs links to docs/rules
done
cp "$extension/python/onnxlens_server.py" "$scratch/tool/"
find "$scratch/tool" -name __pycache__ -prune -exec rm -rf {} +

# Pure-Python wheels only (no compiled code), for every Python the server supports.
"$python" -m pip install --quiet --disable-pip-version-check --no-deps --no-compile \
    --target "$scratch/libs" --only-binary=:all: --implementation py --abi none \
    --platform any --python-version 3.10 -r "$extension/python/requirements.txt"
rm -rf "$scratch/libs/bin"

rm -rf "$extension/bundled"
mv "$scratch" "$extension/bundled"
trap - EXIT
echo "bundle-python: $(du -sh "$extension/bundled" | cut -f1) in $extension/bundled" >&2
