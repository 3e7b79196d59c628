#!/usr/bin/env bash
# Install what tests/onnxlens/test_sarif_viewer.py renders onnxlens's SARIF with: Microsoft's
# SARIF viewer component (@microsoft/sarif-web-component, with the React 16 it is built for),
# esbuild to bundle its page and playwright-core to drive Debian's Chromium, pinned in
# package.json + package-lock.json, into tools/sarif-viewer/node_modules; and Chromium from
# apt when it is missing. Idempotent: does nothing when node_modules already matches the
# package files (a stamp) and Chromium is there. Needs no network once installed. Safe with
# CI=true, no stdin.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
# apt_install PKG...
source "$here/../apt_install.sh"

command -v npm >/dev/null || apt_install nodejs npm
# The browser the test drives (never a browser download of Playwright's own).
if [ -z "${ONNXLENS_CHROMIUM:-}" ] && command -v dpkg-query >/dev/null; then apt_install chromium; fi

stamp="node_modules/.onnxlens-install-stamp"
want="$({ cat package.json package-lock.json; } | cksum)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "tools/sarif-viewer: node_modules up to date"
else
    npm ci --no-audit --no-fund --loglevel=error </dev/null
    echo "$want" >"$stamp"
fi
