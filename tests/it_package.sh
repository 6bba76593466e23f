#!/bin/sh
# it_package.sh -- `cpack -G DEB` builds the three packages; extracted into a
# scratch root (dpkg-deb -x, what dpkg -i unpacks) the installed `attune
# devices` and `attuned --version` run from there, attuned serves with the
# unit's own arguments, the unit verifies and names /usr paths, pkg-config
# and the Python module work from the root, and the maintainer scripts parse.
# What a scratch root cannot show (systemd starting the unit after dpkg -i
# on a clean Debian) is the procedure of docs/deploy.md, "Packages".
# Skipped (77) without cpack or dpkg-deb, or without attuned.
set -eu
: "${ATTUNE_BUILD_DIR:?}" "${ATTUNE_SOURCE_DIR:?}"
for t in cpack dpkg-deb; do
    command -v $t >/dev/null 2>&1 || { echo "skip: $t not found"; exit 77; }
done
[ -n "${ATTUNED_BIN:-}" ] || { echo "skip: attuned not built"; exit 77; }
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

(cd "$ATTUNE_BUILD_DIR" && cpack -G DEB -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1) ||
    { cat "$tmp/cpack.log"; echo "FAIL cpack"; exit 1; }
arch=$(dpkg --print-architecture)
ver=$(sed -n 's/^project(attune VERSION \([0-9.]*\).*/\1/p' "$ATTUNE_SOURCE_DIR/CMakeLists.txt")
for p in attune_${ver}_$arch libattune-client_${ver}_$arch python3-attune-client_${ver}_all; do
    if [ -f "$tmp/pkg/$p.deb" ]; then ok "built $p.deb"; else bad "no $p.deb"; fi
done
root=$tmp/root
mkdir -p "$root"
for f in "$tmp"/pkg/*.deb; do dpkg-deb -x "$f" "$root"; done

# The daemon package depends on the library at the same version, and on
# what its binaries link.
deps=$(dpkg-deb -f "$tmp/pkg/attune_${ver}_$arch.deb" Depends)
case $deps in
*"libattune-client (= $ver)"*libsqlite3-0*libmicrohttpd12*) ok "attune Depends: $deps" ;;
*) bad "attune Depends: $deps" ;;
esac

lib=$root/usr/lib
out=$(LD_LIBRARY_PATH=$lib "$root/usr/bin/attune" devices 2>&1) || true
case $out in
*"cpu "*"cpu "*) ok "installed attune devices lists the CPU" ;;
*) bad "installed attune devices: $out" ;;
esac
out=$("$root/usr/bin/attuned" --version 2>&1) || true
[ "$out" = "attuned $ver" ] && ok "installed attuned --version: $out" || bad "attuned --version: $out"

# The unit: /usr paths, every one present in the package; verifies.
unit=$root/usr/lib/systemd/system/attuned.service
exe=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$unit")
[ "$exe" = /usr/bin/attuned ] && ok "unit ExecStart=$exe" || bad "unit ExecStart=$exe"
for g in $(sed -n 's/^ExecStart=//p' "$unit" | tr ' ' '\n' | grep '^/usr/'); do
    [ -e "$root$g" ] || bad "unit names $g, not in the package"
done
if command -v systemd-analyze >/dev/null 2>&1; then
    # verify checks that ExecStart's binary exists: the root's
    mkdir -p "$tmp/unit"
    sed "s#=/usr/bin/attuned#=$root/usr/bin/attuned#" "$unit" >"$tmp/unit/attuned.service"
    if v=$(systemd-analyze verify "$tmp/unit/attuned.service" 2>&1) && [ -z "$v" ]; then
        ok "systemd-analyze verify: clean"
    else
        bad "systemd-analyze verify: $v"
    fi
fi

# attuned from the package, with the unit's arguments under the root (a
# free port, a scratch database): it serves.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
args=$(sed -n 's/^ExecStart=[^ ]* //p' "$unit" | sed "s#/var/lib/attune/attune.db#$tmp/var/attune.db#; s#--port 7373#--port $port#; s# /usr/# $root/usr/#g")
mkdir -p "$tmp/var"
# shellcheck disable=SC2086
LD_LIBRARY_PATH=$lib "$root/usr/bin/attuned" $args --no-default-grid >"$tmp/attuned.log" 2>&1 &
pid=$!
i=0
until curl -sf "http://127.0.0.1:$port/v1/health" >"$tmp/health" 2>/dev/null; do
    i=$((i + 1))
    [ $i -lt 200 ] || break
    sleep 0.1
done
grep -q '"status":"ok"' "$tmp/health" 2>/dev/null && ok "packaged attuned serves /v1/health" ||
    { cat "$tmp/attuned.log"; bad "packaged attuned did not serve"; }
kill $pid && wait $pid 2>/dev/null || true
pid=

# Library package: header, pkg-config relative to its own location.
pc=$(PKG_CONFIG_PATH=$lib/pkgconfig pkg-config --cflags --libs attune_client 2>&1) || true
case $pc in
*"-I$lib/pkgconfig/../../include"*"-lattune_client"*) ok "pkg-config: $pc" ;;
*) bad "pkg-config: $pc" ;;
esac
[ -f "$root/usr/include/attune.h" ] && ok "attune.h installed" || bad "no attune.h"

# Python package: the module imports from Debian's module directory.
if PYTHONPATH=$root/usr/lib/python3/dist-packages python3 -c \
    'import attune_client, sys; sys.exit(0 if attune_client.__file__.startswith(sys.argv[1]) else 1)' "$root"; then
    ok "python3 imports attune_client from the package"
else
    bad "python3 attune_client import"
fi

for s in postinst prerm postrm; do
    f=$ATTUNE_SOURCE_DIR/packaging/deb/$s
    if dpkg-deb -I "$tmp/pkg/attune_${ver}_$arch.deb" $s >/dev/null 2>&1 && sh -n "$f"; then
        ok "$s in the package, parses"
    else
        bad "$s missing or broken"
    fi
done
exit $fail
