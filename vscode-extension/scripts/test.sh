#!/usr/bin/env bash
# The extension's tests: type check, unit tests, the .vsix and its contents, then the
# end-to-end tests in a real VS Code (code-server) driven by Playwright in Debian's Chromium.
# Installs what it needs (npm packages, code-server, Chromium) idempotently.
# Extra arguments go to `playwright test` (e.g. a spec file or -g PATTERN).
set -euo pipefail

extension="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repo="$(cd "$extension/.." && pwd)"
cd "$extension"

# ONNXLENS_EXTENSION_STEPS: `prepare` (everything but the end-to-end tests: the repository's
# scripts/test.sh runs it while pytest runs), `e2e` (the end-to-end tests alone), or `all`.
steps="${ONNXLENS_EXTENSION_STEPS:-all}"
case "$steps" in all|prepare|e2e) ;; *) echo "ONNXLENS_EXTENSION_STEPS: $steps?" >&2; exit 2;; esac

if [ "$steps" != e2e ]; then
    bash scripts/package.sh >/dev/null
    npx --no-install tsc --noEmit
    npx --no-install playwright test --config test/unit/playwright.config.ts
fi
code_server="$(bash "$repo/tools/code-server/install.sh" | tail -1)"
[ "$steps" = prepare ] && exit 0
if [ "$steps" = e2e ]; then
    bash scripts/package.sh >/dev/null  # the .vsix of the code as it is now
fi
export ONNXLENS_CODE_SERVER="$code_server"
export ONNXLENS_PYTHON="${ONNXLENS_PYTHON:-${ONNXLENS_VENV:-$repo/.venv}/bin/python}"
npx --no-install playwright test --config e2e/playwright.config.ts "$@"
