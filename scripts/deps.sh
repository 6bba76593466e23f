#!/bin/sh
# deps.sh -- make sure the Debian packages attune builds with are installed.
# As root: installs what is missing (apt-get). Otherwise: names what is
# missing and the command to install it, and fails.
set -eu
pkgs="build-essential cmake pkg-config libsqlite3-dev libjansson-dev libmicrohttpd-dev
libcurl4-openssl-dev python3 sqlite3 curl"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
    echo "deps: installing$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends $missing >/dev/null 2>&1 || {
        apt-get update -qq >/dev/null && apt-get install -y --no-install-recommends $missing
    }
else
    echo "deps: missing Debian packages:$missing" >&2
    echo "deps: install them with: sudo apt-get install$missing" >&2
    exit 1
fi
