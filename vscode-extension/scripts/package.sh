#!/usr/bin/env bash
# Build dist/onnxlens.vsix: npm packages, the Python bundle, the esbuild bundle, vsce.
# Idempotent; prints the path of the .vsix as its last line.
set -euo pipefail

extension="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$extension"

# Install scripts are not needed (esbuild finds its platform package without one) and some
# download from outside the npm registry.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2
fi
bash scripts/bundle-python.sh
node scripts/build.mjs --minify
mkdir -p dist
npx --no-install vsce package --no-dependencies --out dist/onnxlens.vsix >&2
echo "$extension/dist/onnxlens.vsix"
