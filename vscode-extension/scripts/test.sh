#!/usr/bin/env bash
# The extension's tests: type check, unit tests, the .vsix and its contents, then the
# end-to-end tests in a real VS Code (code-server) driven by Playwright in Debian's Chromium.
# Installs what it needs (npm packages, code-server, Chromium) idempotently.
# Extra arguments go to `playwright test` (e.g. a spec file or -g PATTERN).
set -euo pipefail

extension="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repo="$(cd "$extension/.." && pwd)"
cd "$extension"

bash scripts/package.sh >/dev/null
npx --no-install tsc --noEmit
npx --no-install playwright test --config test/unit/playwright.config.ts

code_server="$(bash "$repo/tools/code-server/install.sh" | tail -1)"
export ONNXLENS_CODE_SERVER="$code_server"
export ONNXLENS_PYTHON="${ONNXLENS_PYTHON:-${ONNXLENS_VENV:-$repo/.venv}/bin/python}"
npx --no-install playwright test --config e2e/playwright.config.ts "$@"
