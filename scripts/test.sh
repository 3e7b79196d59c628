#!/usr/bin/env bash
# Run every test: installs what the tests need (Python packages, the SARIF tools, npm
# packages, code-server, Chromium), checks ruff, mypy and the import contracts (settings in
# pyproject.toml), runs pytest on the primary torch, then the tests that depend on torch
# (marked `every_torch` in tests/conftest.py) again on every other tested torch
# (exporter/versions.py; each in a venv of its own that scripts/setup.sh installs), then the
# VS Code extension's tests. Extra arguments go to pytest.
# pytest runs in ONNXLENS_TEST_WORKERS processes (pytest-xdist; default: one per core, each
# test module in one process so that its server and fixtures start once; 0 runs in-process).
# ONNXLENS_SKIP_OTHER_TORCH=1 leaves the other torches out (e.g. while working on one part).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${ONNXLENS_VENV:-$repo/.venv}"
bash "$repo/scripts/setup.sh"
bash "$repo/tools/sarif/install.sh" >/dev/null
cd "$repo"
"$venv/bin/ruff" check .
"$venv/bin/python" -m mypy
"$venv/bin/lint-imports" --no-cache  # the import contracts: [tool.importlinter]

parallel=(-n "${ONNXLENS_TEST_WORKERS:-auto}" --dist loadscope)

set +e
"$venv/bin/python" -m pytest "${parallel[@]}" "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "test: pytest collected no tests" >&2
    status=1
fi

# The same verdicts on every torch a user has: the other tested torches, each in its venv.
other_status=0
if [ "${ONNXLENS_SKIP_OTHER_TORCH:-0}" != "1" ] && [ -z "${ONNXLENS_VENV:-}" ]; then
    primary="$(python3 exporter/versions.py primary)"
    for torch_version in $(python3 exporter/versions.py tested); do
        [ "$torch_version" = "$primary" ] && continue
        echo "test: torch $torch_version: the tests that depend on torch"
        ONNXLENS_TORCH="$torch_version" bash "$repo/scripts/setup.sh"
        "$repo/.venv-torch$torch_version/bin/python" -m pytest "${parallel[@]}" \
            -m every_torch "$@" || other_status=$?
    done
fi

# The VS Code extension: unit tests, the .vsix, end-to-end tests in code-server + Chromium.
# ONNXLENS_SKIP_EXTENSION=1 leaves them out (e.g. while working on the server alone).
extension_status=0
if [ "${ONNXLENS_SKIP_EXTENSION:-0}" != "1" ]; then
    ONNXLENS_PYTHON="$venv/bin/python" bash "$repo/vscode-extension/scripts/test.sh" \
        || extension_status=$?
fi
if [ "$status" -ne 0 ] || [ "$other_status" -ne 0 ] || [ "$extension_status" -ne 0 ]; then
    echo "test: pytest exit $status, other torches' pytest exit $other_status, extension" \
         "tests exit $extension_status" >&2
    exit 1
fi
