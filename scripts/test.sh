#!/usr/bin/env bash
# Run every test: installs what the tests need (Python packages, the SARIF tools, npm
# packages, code-server, Chromium), checks ruff, runs pytest, then the VS Code extension's
# tests. Extra arguments go to pytest.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${ONNXLENS_VENV:-$repo/.venv}"
bash "$repo/scripts/setup.sh"
bash "$repo/tools/sarif/install.sh" >/dev/null
cd "$repo"
"$venv/bin/ruff" check .

set +e
"$venv/bin/python" -m pytest "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "test: pytest collected no tests" >&2
    status=1
fi

# The VS Code extension: unit tests, the .vsix, end-to-end tests in code-server + Chromium.
# ONNXLENS_SKIP_EXTENSION=1 leaves them out (e.g. while working on the server alone).
extension_status=0
if [ "${ONNXLENS_SKIP_EXTENSION:-0}" != "1" ]; then
    ONNXLENS_PYTHON="$venv/bin/python" bash "$repo/vscode-extension/scripts/test.sh" \
        || extension_status=$?
fi
if [ "$status" -ne 0 ] || [ "$extension_status" -ne 0 ]; then
    echo "test: pytest exit $status, extension tests exit $extension_status" >&2
    exit 1
fi
