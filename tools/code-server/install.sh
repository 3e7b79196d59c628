#!/usr/bin/env bash
# Install a real VS Code workbench (code-server 4.100.3, built from the npm
# registry) plus Debian's Chromium, for the VS Code extension's end-to-end tests.
#
#   cs_dir=$(bash tools/code-server/install.sh | tail -1)
#   node "$cs_dir/out/node/entry.js" --auth none --bind-addr 127.0.0.1:PORT ...
#
# Idempotent: a second run with everything in place only checks and prints the
# install dir (well under a second). Progress goes to stderr; the last (and
# only) stdout line is the install dir.
#
# Only PyPI, Debian apt and the npm registry are reachable here, so nothing may
# download from elsewhere: every install script that would (ripgrep binary,
# node-gyp headers) is skipped or fed a local file instead.
set -euo pipefail

CS_VERSION=4.100.3 # last code-server line that wants Node 20
CACHE_DIR="${ONNXLENS_CACHE_DIR:-$HOME/.cache/onnxlens}"
INSTALL_DIR="$CACHE_DIR/code-server-$CS_VERSION"
STAMP="$INSTALL_DIR/.onnxlens-install-stamp"
APT_PACKAGES=(
  chromium    # the browser Playwright drives (playwright-core, executablePath /usr/bin/chromium)
  ripgrep     # /usr/bin/rg replaces @vscode/ripgrep's downloaded binary (search, Quick Open)
  libkrb5-dev # headers + krb5-config to build the `kerberos` native module
  build-essential python3 # node-gyp toolchain for the native modules
)

log() { printf '[code-server-install] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# --- 1. Node: code-server 4.100.x native modules are built for Node 20 ------
command -v node >/dev/null || die "node not found (Node 20 is needed)"
node_major=$(node -p 'process.versions.node.split(".")[0]')
[[ $node_major == 20 ]] || die "Node 20 is needed, found $(node --version)"
# Native modules are tied to the Node ABI: a stamp from another ABI means rebuild.
node_abi=$(node -p 'process.versions.modules')
stamp_text="code-server=$CS_VERSION node_abi=$node_abi"

# --- 2. apt packages, only those missing ------------------------------------
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' \
    || missing+=("$pkg")
done
if ((${#missing[@]})); then
  SUDO=()
  ((EUID == 0)) || SUDO=(sudo)
  log "apt: installing ${missing[*]}"
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# --- 3. fast path: already installed ----------------------------------------
if [[ -f $STAMP && $(<"$STAMP") == "$stamp_text" ]]; then
  echo "$INSTALL_DIR"
  exit 0
fi

# --- 4. build in a temp dir next to the target, under a lock ---------------
mkdir -p "$CACHE_DIR"
exec 9>"$CACHE_DIR/.code-server-$CS_VERSION.lock"
flock 9 # two concurrent runs: the second waits, then takes the fast path
if [[ -f $STAMP && $(<"$STAMP") == "$stamp_text" ]]; then
  echo "$INSTALL_DIR"
  exit 0
fi
# Leftovers of interrupted runs (we hold the lock, so nobody is using them).
rm -rf "$CACHE_DIR/.code-server-$CS_VERSION.tmp."*
work=$(mktemp -d "$CACHE_DIR/.code-server-$CS_VERSION.tmp.XXXXXX")
trap 'rm -rf "$work"' EXIT
build="$work/code-server"
mkdir -p "$build"

# npm settings for every step below:
# - node-gyp downloads Node headers from nodejs.org unless told where they
#   are; Debian/NodeSource node ships them in /usr/include/node.
# - a post-install step runs `npx node-gyp`, which asks before fetching
#   node-gyp unless npm's "yes" is set (~/.npmrc here sets yes=false).
if [[ -z ${npm_config_nodedir:-} && -f /usr/include/node/node.h ]]; then
  export npm_config_nodedir=/usr
fi
export npm_config_yes=true npm_config_audit=false npm_config_fund=false \
  npm_config_update_notifier=false
npm_q() { npm --loglevel=error "$@" >&2; }

log "fetching code-server@$CS_VERSION from the npm registry"
(cd "$work" && npm_q pack "code-server@$CS_VERSION")
tar xzf "$work/code-server-$CS_VERSION.tgz" -C "$build" --strip-components=1
rm -f "$work/code-server-$CS_VERSION.tgz"

# The package's own postinstall.sh runs plain `npm install` (with scripts) in
# lib/vscode, where @vscode/ripgrep's script downloads rg from GitHub and
# fails. So install every level with --ignore-scripts, then rebuild by hand.
log "npm install (root, lib/vscode, lib/vscode/extensions)"
for dir in "$build" "$build/lib/vscode" "$build/lib/vscode/extensions"; do
  (cd "$dir" && npm_q install --omit=dev --ignore-scripts)
done

# Give @vscode/ripgrep Debian's rg: its postinstall skips the download when
# bin/rg is already there.
rg_dir="$build/lib/vscode/node_modules/@vscode/ripgrep/bin"
mkdir -p "$rg_dir"
cp /usr/bin/rg "$rg_dir/rg"

# Run the skipped install scripts: compiles kerberos, node-pty, spdlog, ...
# (kerberos and argon2 first try a prebuilt binary from GitHub; that fails
# fast here and they fall back to building from source).
log "npm rebuild (native modules; about a minute on 2 cores)"
(cd "$build/lib/vscode" && npm_q rebuild)
# At the root only argon2 has an install script. A bare `npm rebuild` there
# would also run code-server's own postinstall.sh, which refuses to run as
# root and re-installs lib/vscode with scripts on.
(cd "$build" && npm_q rebuild argon2)

# What code-server's postinstall.sh would have done besides npm install:
(
  cd "$build/lib/vscode"
  # VS Code looks for bundled modules (rg, oniguruma wasm) in node_modules.asar.
  ln -sfn node_modules node_modules.asar
  ln -sfn code-linux.sh bin/remote-cli/code-server
  ln -sfn browser-linux.sh bin/helpers/browser.sh
  # extensions/postinstall.mjs (skipped above) trims the bundled TypeScript.
  cd extensions && node ./postinstall.mjs >/dev/null
)

# --- 5. smoke test before declaring it done --------------------------------
log "smoke test"
(
  cd "$build/lib/vscode"
  node --input-type=commonjs -e '
    for (const m of ["kerberos", "node-pty", "@vscode/spdlog", "native-watchdog",
                     "@parcel/watcher", "@vscode/ripgrep"]) require(m);
    require("child_process").execFileSync(require("@vscode/ripgrep").rgPath, ["--version"]);'
  cd "$build" && node -e 'require("argon2")'
  # (own XDG_CONFIG_HOME: code-server writes a default config.yaml there)
  XDG_CONFIG_HOME="$work/xdg" node "$build/out/node/entry.js" --version >&2
)

# --- 6. publish: stamp inside, then one rename ------------------------------
# The stamp is written before the rename, so the install dir either does not
# exist or is complete; an interrupted run leaves only a *.tmp.* dir behind.
echo "$stamp_text" >"$build/.onnxlens-install-stamp"
if [[ -e $INSTALL_DIR ]]; then # stale (no/old stamp): replace it
  mv "$INSTALL_DIR" "$work/old"
fi
mv "$build" "$INSTALL_DIR"
log "installed code-server $CS_VERSION in $INSTALL_DIR"
echo "$INSTALL_DIR"
