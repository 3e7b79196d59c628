#!/usr/bin/env bash
# The main job: check the bundled examples and print every located diagnostic.
# examples/failing/ fails on purpose, so "problems found" (exit 1) is the expected outcome;
# only a tool failure (exit 2) makes this script fail.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$repo/scripts/setup.sh" || exit 2
cd "$repo"
"${ONNXLENS_VENV:-$repo/.venv}/bin/onnxlens" check examples "$@"
status=$?
if [ "$status" -eq 2 ]; then
    echo "check-examples: onnxlens failed (exit 2)" >&2
    exit 2
fi
exit 0
