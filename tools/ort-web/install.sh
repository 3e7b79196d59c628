#!/usr/bin/env bash
# Install the pinned onnxruntime-web into tools/ort-web/node_modules, where onnxlens's deploy
# stage finds it in a source checkout (runtimes = ["ort-web"]; docs/runtimes.md). Idempotent:
# does nothing when node_modules matches package.json + package-lock.json. Needs Node.js.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
source "$here/../apt_install.sh"
command -v npm >/dev/null || apt_install nodejs npm

stamp="node_modules/.onnxlens-install-stamp"
fingerprint() { { cat package.json; cat package-lock.json 2>/dev/null || true; } | cksum; }
want="$(fingerprint)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -d node_modules/onnxruntime-web ]; then
    echo "tools/ort-web: node_modules up to date"
    exit 0
fi
if [ -f package-lock.json ]; then
    npm ci --no-audit --no-fund --loglevel=error </dev/null
else
    npm install --no-audit --no-fund --loglevel=error </dev/null
    want="$(fingerprint)"
fi
echo "$want" >"$stamp"
