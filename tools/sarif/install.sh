#!/usr/bin/env bash
# Install the pinned SARIF validation tools (Microsoft SARIF Multitool + the SARIF 2.1.0
# JSON schema it ships) into tools/sarif/node_modules. Idempotent: does nothing when
# node_modules already matches package.json + package-lock.json. Safe with CI=true, no stdin.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
# apt_install PKG...
source "$here/../apt_install.sh"

# Node + npm to fetch the packages.
command -v npm >/dev/null || apt_install nodejs npm
# Runtime libraries of the self-contained .NET binary (ICU is not needed: the callers set
# DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1). All are in a stock Debian image already.
if command -v dpkg-query >/dev/null; then apt_install libstdc++6 libgcc-s1 zlib1g; fi

case "$(uname -s)" in
    Linux) platform=linux ;;
    Darwin) platform=darwin ;;
    *) platform="" ;;
esac
bin="node_modules/@microsoft/sarif-multitool-$platform/Sarif.Multitool"

stamp="node_modules/.onnxlens-install-stamp"
fingerprint() { { cat package.json; cat package-lock.json 2>/dev/null || true; } | cksum; }
want="$(fingerprint)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && { [ -z "$platform" ] || [ -f "$bin" ]; }; then
    echo "tools/sarif: node_modules up to date"
else
    if [ -f package-lock.json ]; then
        npm ci --no-audit --no-fund --loglevel=error </dev/null
    else
        npm install --no-audit --no-fund --loglevel=error </dev/null
        want="$(fingerprint)"
    fi
    echo "$want" >"$stamp"
fi

if [ -z "$platform" ]; then
    echo "tools/sarif: no Sarif.Multitool binary for $(uname -s); only the schema is usable" >&2
    exit 0
fi
# The package's postinstall (chmod u+x) may be skipped by npm's install-script policy.
chmod u+x "$bin"
DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1 "./$bin" --version </dev/null
