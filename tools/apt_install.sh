# Sourced by the tools' install scripts: apt_install PKG... installs the Debian packages that
# are not installed yet (apt-get update once, at the first install; sudo -n when not root;
# DEBIAN_FRONTEND=noninteractive), or says which are needed where there is no apt-get.
export DEBIAN_FRONTEND=noninteractive
apt_updated=0
apt_install() {
    local missing=() pkg
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    command -v apt-get >/dev/null || { echo "install.sh: need ${missing[*]} (no apt-get here)" >&2; exit 1; }
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo -n"
    if [ "$apt_updated" -eq 0 ]; then $sudo apt-get update -qq; apt_updated=1; fi
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
}
