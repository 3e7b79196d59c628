#!/usr/bin/env bash
# Run every test: installs what the tests need (Python packages, the SARIF tools), checks
# ruff, then runs pytest. Extra arguments go to pytest.
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
    exit 1
fi
exit "$status"
