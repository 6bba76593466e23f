#!/bin/sh
# it_package.sh -- `cpack -G DEB` builds the five packages; extracted into a
# scratch root (dpkg-deb -x, what dpkg -i unpacks) the installed `attune
# devices` and `attuned --version` run from there, attuned serves with the
# unit's own arguments, the unit verifies and names /usr paths, pkg-config
# and the Python module work from the root, and the maintainer scripts parse.
# libattune1 holds libattune.so.1 alone (SONAME libattune.so.1, only the
# attune_* functions exported, a shlibs file), libattune-dev the rest; a
# program built against the root with pkg-config and with CMake's
# find_package(attune) -> attune::attune runs tactics on the CPU
# (tests/consumer/runtime_consumer.c); lintian, where installed, reports no
# error on the two.
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
for p in attune_${ver}_$arch libattune-client_${ver}_$arch libattune1_${ver}_$arch \
    libattune-lookup1_${ver}_$arch libattune-dev_${ver}_$arch python3-attune-client_${ver}_all \
    python3-attune_${ver}_all; do
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

# ---- libattune: libattune1 (the runtime, named after its SONAME) and
# libattune-dev (what building against it needs).
rt=$tmp/pkg/libattune1_${ver}_$arch.deb
dev=$tmp/pkg/libattune-dev_${ver}_$arch.deb
files=$(dpkg-deb -c "$rt" | awk '$1 !~ /^d/ && $6 !~ /^.\/usr\/share\/doc\// {print $6}' | tr '\n' ' ')
case $files in
"./usr/lib/libattune.so.1 ./usr/lib/libattune.so.1.0.0 " | "./usr/lib/libattune.so.1.0.0 ./usr/lib/libattune.so.1 ")
    ok "libattune1 holds the library alone: $files" ;;
*) bad "libattune1 holds: $files" ;;
esac
files=$(dpkg-deb -c "$dev" | awk '$1 !~ /^d/ {print $6}' | tr '\n' ' ')
for f in ./usr/include/libattune.h ./usr/lib/libattune.so ./usr/lib/pkgconfig/libattune.pc \
    ./usr/lib/cmake/attune/attuneConfig.cmake ./usr/lib/cmake/attune/attuneRuntimeTargets.cmake; do
    case " $files" in *" $f "*) ;; *) bad "libattune-dev lacks $f" ;; esac
done
for p in libattune1 libattune-dev; do
    for f in copyright changelog.gz; do
        [ -f "$root/usr/share/doc/$p/$f" ] || bad "$p lacks /usr/share/doc/$p/$f"
    done
done
[ "$(dpkg-deb -I "$rt" triggers 2>&1)" = "activate-noawait ldconfig" ] ||
    bad "libattune1: no ldconfig trigger"
[ "$(readlink "$root/usr/lib/libattune.so")" = libattune.so.1 ] &&
    ok "libattune-dev: headers, libattune.so -> libattune.so.1, .pc, CMake files" ||
    bad "libattune.so -> $(readlink "$root/usr/lib/libattune.so")"
deps=$(dpkg-deb -f "$rt" Depends)
case $deps in
*libc6*) ok "libattune1 Depends (dpkg-shlibdeps): $deps" ;;
*) bad "libattune1 Depends: $deps" ;;
esac
deps=$(dpkg-deb -f "$dev" Depends)
case $deps in
*"libattune1 (= $ver)"*) ok "libattune-dev Depends: $deps" ;;
*) bad "libattune-dev Depends: $deps" ;;
esac
shlibs=$(dpkg-deb -I "$rt" shlibs 2>&1) || true
[ "$shlibs" = "libattune 1 libattune1 (>= $ver)" ] && ok "libattune1 shlibs: $shlibs" ||
    bad "libattune1 shlibs: $shlibs"
# SONAME, and nothing exported but the functions of libattune.map
so=$root/usr/lib/libattune.so.1
soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libattune.so.1 ] && ok "SONAME $soname" || bad "SONAME '$soname'"
nm -D --defined-only "$so" | awk '$3 !~ /^LIBATTUNE_/ {print $3}' | sed 's/@.*//' | sort >"$tmp/syms"
sed -n '/global:/,/local:/s/^ *\(attune_[a-z_]*\);/\1/p' "$ATTUNE_SOURCE_DIR/kernels/libattune.map" |
    sort >"$tmp/map"
if [ -s "$tmp/map" ] && cmp -s "$tmp/syms" "$tmp/map"; then
    ok "exports the $(wc -l <"$tmp/map") attune_* functions of libattune.map, nothing else"
else
    bad "exports differ from libattune.map: $(diff "$tmp/map" "$tmp/syms" | grep '^[<>]' | head -5 | tr '\n' ' ')"
fi
# a program of another project, built against the root, runs tactics on
# the CPU: with pkg-config ...
consumer=$ATTUNE_SOURCE_DIR/tests/consumer
check_run() { # $1: what built it, $2: the program
    out=$(LD_LIBRARY_PATH=$lib "$2" 2>&1) || true
    case $out in
    "ran "*" tactics, out[0][0][0][0..3] = -1 -0.75 -0.5 -0.25 "*) ok "$1: $out" ;;
    *) bad "$1: $out" ;;
    esac
    l=$(LD_LIBRARY_PATH=$lib ldd "$2" 2>/dev/null | sed -n 's/.*libattune\.so\.1 => \([^ ]*\).*/\1/p')
    case $l in
    "$root"/*) ;;
    *) bad "$1: loads libattune.so.1 from '$l', not the package" ;;
    esac
}
if pc=$(PKG_CONFIG_PATH=$lib/pkgconfig pkg-config --cflags --libs libattune 2>&1) &&
    # shellcheck disable=SC2086 # (LD_LIBRARY_PATH: ld finds libattune.so's
    # own needs, libattune_client.so.2, through it, as in /usr/lib it would)
    LD_LIBRARY_PATH=$lib cc -std=c11 -Wall -Wextra -Werror -o "$tmp/rt_pc" "$consumer/runtime_consumer.c" $pc -lm \
        >"$tmp/cc.log" 2>&1; then
    check_run "pkg-config libattune ($pc)" "$tmp/rt_pc"
else
    cat "$tmp/cc.log" 2>/dev/null
    bad "pkg-config libattune: $pc"
fi
# ... and with find_package(attune) -> attune::attune
if command -v cmake >/dev/null 2>&1; then
    if cmake -S "$consumer" -B "$tmp/cbuild" -DCMAKE_PREFIX_PATH="$root/usr" \
            -DCMAKE_BUILD_TYPE=Release >"$tmp/cmake.log" 2>&1 &&
        cmake --build "$tmp/cbuild" >>"$tmp/cmake.log" 2>&1; then
        dir=$(sed -n 's/^attune_DIR:PATH=//p' "$tmp/cbuild/CMakeCache.txt")
        case $dir in
        "$root"/*) check_run "find_package(attune) from $dir, attune::attune" "$tmp/cbuild/runtime_consumer" ;;
        *) bad "attune_DIR=$dir, not the package's" ;;
        esac
    else
        cat "$tmp/cmake.log"
        bad "consumer project against the packages (find_package(attune))"
    fi
fi
# ---- python3-attune: the binding, on libattune1 of its version; with
# Debian's numpy it runs attention on the CPU from the packages alone.
pb=$tmp/pkg/python3-attune_${ver}_all.deb
if [ -f "$pb" ]; then
    deps=$(dpkg-deb -f "$pb" Depends)
    case $deps in
    *python3*"libattune1 (= $ver)"* | *"libattune1 (= $ver)"*python3*) ok "python3-attune Depends: $deps" ;;
    *) bad "python3-attune Depends: $deps" ;;
    esac
    py=/usr/bin/python3
    [ -x $py ] || py=python3
    out=$(PYTHONPATH=$root/usr/lib/python3/dist-packages LD_LIBRARY_PATH=$lib \
        ATTUNE_URL=http://127.0.0.1:9 $py -c '
import sys, numpy as np, attune
assert attune.__file__.startswith(sys.argv[1]), attune.__file__
q = np.ones((1, 2, 4, 8), np.float32); v = np.arange(8, dtype=np.float32) * np.ones((1, 2, 4, 8), np.float32)
print("out", attune.run_numpy(q, q, v)[0, 1, 3].tolist())' "$root" 2>&1) || true
    case $out in
    "out [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]") ok "python3-attune runs attention from the packages: $out" ;;
    *"No module named 'numpy'"*) echo "skip python3-attune run: no numpy for $py" ;;
    *) bad "python3-attune: $out" ;;
    esac
else
    bad "no python3-attune_${ver}_all.deb"
fi

# ---- libattune-lookup1: the file: lookups, alone, on what it links;
# the packaged CLI answers from a table through it.
lk=$tmp/pkg/libattune-lookup1_${ver}_$arch.deb
files=$(dpkg-deb -c "$lk" | awk '$1 !~ /^d/ && $6 !~ /^.\/usr\/share\/doc\// {print $6}' | tr '\n' ' ')
case $files in
"./usr/lib/libattune_lookup.so.1 ./usr/lib/libattune_lookup.so.1.0.0 " | "./usr/lib/libattune_lookup.so.1.0.0 ./usr/lib/libattune_lookup.so.1 ")
    ok "libattune-lookup1 holds the library alone" ;;
*) bad "libattune-lookup1 holds: $files" ;;
esac
deps=$(dpkg-deb -f "$lk" Depends)
case $deps in
*libsqlite3-0*) ok "libattune-lookup1 Depends (dpkg-shlibdeps): $deps" ;;
*) bad "libattune-lookup1 Depends: $deps" ;;
esac
dpkg-deb -f "$tmp/pkg/libattune-client_${ver}_$arch.deb" Suggests | grep -q "libattune-lookup1 (= $ver)" &&
    ok "libattune-client suggests libattune-lookup1" || bad "libattune-client: no Suggests of libattune-lookup1"
LD_LIBRARY_PATH=$lib "$root/usr/bin/attune" tune --db "$tmp/t.db" --device cpu --shape b1.hq2.hkv2.sq8.skv8.d16.f32.nc \
    --budget-ms 2 --quiet >/dev/null 2>&1 &&
    LD_LIBRARY_PATH=$lib "$root/usr/bin/attune" export --db "$tmp/t.db" --device cpu -o "$tmp/t.json" \
    >/dev/null 2>&1 || true
out=$(env -u ATTUNE_LOOKUP_LIB LD_LIBRARY_PATH=$lib "$root/usr/bin/attune" query --url "file:$tmp/t.json" --device cpu \
    --shape b1.hq2.hkv2.sq8.skv8.d16.f32.nc 2>&1) || true
case $out in
*measured*) ok "the packaged CLI answers from a table in process (file:)" ;;
*) bad "attune query --url file:: $out" ;;
esac

if command -v lintian >/dev/null 2>&1; then
    # errors only: warnings are reported, not failed on. bogus-mail-host:
    # the Maintainer: (and the changelog's) is a placeholder until
    # ATTUNE_DEB_MAINTAINER is set (cmake/package.cmake).
    lintian --no-tag-display-limit --suppress-tags bogus-mail-host,bogus-mail-host-in-debian-changelog \
        "$rt" "$dev" "$lk" \
        >"$tmp/lintian" 2>&1 || true
    grep '^W:' "$tmp/lintian" | sed 's/^/     /'
    if grep -q '^E:' "$tmp/lintian"; then
        grep '^E:' "$tmp/lintian"
        bad "lintian reports errors on libattune1 / libattune-dev / libattune-lookup1"
    else
        ok "lintian: no error on libattune1, libattune-dev, libattune-lookup1"
    fi
else
    echo "skip lintian (not installed)"
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
