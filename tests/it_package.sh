#!/bin/sh
# it_package.sh -- `cpack -G DEB` builds the seven packages; extracted into
# a scratch root (dpkg-deb -x, what dpkg -i unpacks) the installed `attune
# devices` and `attuned --version` run from there, attuned serves with the
# unit's own arguments, the unit verifies and names /usr paths, pkg-config
# and the Python module work from the root. Each library is in the
# multiarch directory, in the package its SONAME names (libattune1,
# libattune-client2, libattune-lookup1: the library alone, a shlibs file,
# dpkg's ldconfig trigger; libattune.so.1 exports only the attune_*
# functions, each at its libattune.map version node, and is the file
# libattune.so.ABI.MINOR.0 of the header's numbers), libattune-dev holds the rest; a program built against the
# root with pkg-config and with CMake's find_package(attune) ->
# attune::attune runs tactics on the CPU (tests/consumer/runtime_consumer.c).
# Every package: Depends that name the package of each library its ELF
# files need (dpkg-shlibdeps' work, checked against `dpkg -S` here), no
# CUDA library among those needs (a CUDA build loads them at run time), ELF
# files stripped with their debug symbols in the -dbgsym .ddeb by build id,
# copyright and changelog; lintian (Debian's, scripts/deps.sh) reports no
# error on any of them. The maintainer scripts run against stand-ins of
# deb-systemd-helper, deb-systemd-invoke and systemctl: a first install
# enables and starts the unit, an upgrade of a disabled unit does not
# enable it again, removal stops it, purge forgets it.
# What a scratch root cannot show (dpkg -i on a clean Debian with only the
# Depends, the real deb-systemd-helper) is tests/clean_root.sh's, run by
# hand (it downloads a Debian root); docs/deploy.md, "Packages".
# Skipped (77) without cpack or dpkg-deb, or without attuned.
set -eu
: "${ATTUNE_BUILD_DIR:?}" "${ATTUNE_SOURCE_DIR:?}"
for t in cpack dpkg-deb; do
    command -v $t >/dev/null 2>&1 || { echo "skip: $t not found"; exit 77; }
done
[ -n "${ATTUNED_BIN:-}" ] || { echo "skip: attuned not built"; exit 77; }
tmp=$(mktemp -d)
pid=
lint_pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; [ -n "$lint_pid" ] && kill $lint_pid 2>/dev/null
      rm -rf "$tmp"' EXIT INT TERM
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

(cd "$ATTUNE_BUILD_DIR" && cpack -G DEB -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1) ||
    { cat "$tmp/cpack.log"; echo "FAIL cpack"; exit 1; }
# lintian (about 15 s of CPU) reads the packages beside the checks below,
# which only read them too; its report is judged in its place further on.
# errors fail, warnings are shown. bogus-mail-host: the Maintainer: (and
# the changelog's) is a placeholder until ATTUNE_DEB_MAINTAINER is set
# (cmake/package.cmake).
if command -v lintian >/dev/null 2>&1; then
    lintian --tag-display-limit 0 --suppress-tags bogus-mail-host,bogus-mail-host-in-debian-changelog \
        "$tmp"/pkg/*.deb >"$tmp/lintian" 2>&1 &
    lint_pid=$!
fi
arch=$(dpkg --print-architecture)
ver=$(sed -n 's/^project(attune VERSION \([0-9.]*\).*/\1/p' "$ATTUNE_SOURCE_DIR/CMakeLists.txt")
for p in attune_${ver}_$arch libattune-client2_${ver}_$arch libattune1_${ver}_$arch \
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
*"libattune-client2 (= $ver)"*libmicrohttpd12*libsqlite3-0*) ok "attune Depends: $deps" ;;
*) bad "attune Depends: $deps" ;;
esac

# the libraries' directory: lib/<multiarch triplet> (or what the build
# was configured with)
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$ATTUNE_BUILD_DIR/CMakeCache.txt")
lib=$root/usr/$libdir
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
port=$("${ATTUNE_PYTHON:-python3}" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
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
*"-I$lib/pkgconfig/"*"include"*"-lattune_client"*) ok "pkg-config: $pc" ;;
*) bad "pkg-config: $pc" ;;
esac
[ -f "$root/usr/include/attune.h" ] && ok "attune.h installed" || bad "no attune.h"

# Python package: the module imports from Debian's module directory.
if PYTHONPATH=$root/usr/lib/python3/dist-packages "${ATTUNE_PYTHON:-python3}" -c \
    'import attune_client, sys; sys.exit(0 if attune_client.__file__.startswith(sys.argv[1]) else 1)' "$root"; then
    ok "python3 imports attune_client from the package"
else
    bad "python3 attune_client import"
fi

# ---- libattune: libattune1 (the runtime, named after its SONAME) and
# libattune-dev (what building against it needs).
rt=$tmp/pkg/libattune1_${ver}_$arch.deb
dev=$tmp/pkg/libattune-dev_${ver}_$arch.deb
# the file's version: LIBATTUNE_ABI.LIBATTUNE_ABI_MINOR.0 of the header
hdr=$ATTUNE_SOURCE_DIR/kernels/libattune.h
abi=$(sed -n 's/^#define LIBATTUNE_ABI \([0-9]*\)$/\1/p' "$hdr")
minor=$(sed -n 's/^#define LIBATTUNE_ABI_MINOR \([0-9]*\)$/\1/p' "$hdr")
real=libattune.so.$abi.$minor.0
files=$(dpkg-deb -c "$rt" | awk '$1 !~ /^d/ && $6 !~ /^.\/usr\/share\/doc\// {print $6}' | tr '\n' ' ')
case $files in
"./usr/$libdir/libattune.so.1 ./usr/$libdir/$real " | "./usr/$libdir/$real ./usr/$libdir/libattune.so.1 ")
    ok "libattune1 holds the library alone: $files" ;;
*) bad "libattune1 holds: $files" ;;
esac
files=$(dpkg-deb -c "$dev" | awk '$1 !~ /^d/ {print $6}' | tr '\n' ' ')
for f in ./usr/include/libattune.h ./usr/$libdir/libattune.so ./usr/$libdir/pkgconfig/libattune.pc \
    ./usr/$libdir/cmake/attune/attuneConfig.cmake ./usr/$libdir/cmake/attune/attuneRuntimeTargets.cmake \
    ./usr/include/attune.h ./usr/$libdir/libattune_client.so ./usr/$libdir/pkgconfig/attune_client.pc \
    ./usr/$libdir/cmake/attune/attuneTargets.cmake; do
    case " $files" in *" $f "*) ;; *) bad "libattune-dev lacks $f" ;; esac
done
for p in libattune1 libattune-dev; do
    for f in copyright changelog.gz; do
        [ -f "$root/usr/share/doc/$p/$f" ] || bad "$p lacks /usr/share/doc/$p/$f"
    done
done
[ "$(dpkg-deb -I "$rt" triggers 2>&1)" = "activate-noawait ldconfig" ] ||
    bad "libattune1: no ldconfig trigger"
[ "$(readlink "$lib/libattune.so")" = libattune.so.1 ] &&
    ok "libattune-dev: headers, libattune.so -> libattune.so.1, .pc, CMake files" ||
    bad "libattune.so -> $(readlink "$lib/libattune.so")"
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
so=$lib/libattune.so.1
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
# each at the version node the map gives it (attune_plan_set_descales@@
# LIBATTUNE_1.2, ...), and the newest node the header's ABI.MINOR
nm -D --defined-only "$so" | awk '$3 !~ /^LIBATTUNE_/ {print $3}' | sort >"$tmp/vsyms"
awk '/^LIBATTUNE_[0-9.]* *[{]/ {node = $1} /^ *attune_[a-z_]*;/ {sub(/;/, "", $1); print $1 "@@" node}' \
    "$ATTUNE_SOURCE_DIR/kernels/libattune.map" | sort >"$tmp/vmap"
newest=$(awk '/^LIBATTUNE_[0-9.]* *[{]/ {node = $1} END {print node}' "$ATTUNE_SOURCE_DIR/kernels/libattune.map")
want_node=LIBATTUNE_$abi.$minor
[ "$minor" = 0 ] && want_node=LIBATTUNE_$abi
if [ -s "$tmp/vmap" ] && cmp -s "$tmp/vsyms" "$tmp/vmap" && [ "$newest" = "$want_node" ]; then
    ok "each export at its node of libattune.map; the newest, $newest, is the header's $abi.$minor ($real)"
else
    bad "symbol versions: newest node $newest, header $want_node; $(diff "$tmp/vmap" "$tmp/vsyms" | grep '^[<>]' | head -5 | tr '\n' ' ')"
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
    py=${ATTUNE_PYTHON:-/usr/bin/python3} # Debian's: its python3-numpy
    [ -x "$py" ] || py=python3
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
"./usr/$libdir/libattune_lookup.so.1 ./usr/$libdir/libattune_lookup.so.1.0.0 " | "./usr/$libdir/libattune_lookup.so.1.0.0 ./usr/$libdir/libattune_lookup.so.1 ")
    ok "libattune-lookup1 holds the library alone" ;;
*) bad "libattune-lookup1 holds: $files" ;;
esac
deps=$(dpkg-deb -f "$lk" Depends)
case $deps in
*libsqlite3-0*) ok "libattune-lookup1 Depends (dpkg-shlibdeps): $deps" ;;
*) bad "libattune-lookup1 Depends: $deps" ;;
esac
dpkg-deb -f "$tmp/pkg/libattune-client2_${ver}_$arch.deb" Suggests | grep -q "libattune-lookup1 (= $ver)" &&
    ok "libattune-client2 suggests libattune-lookup1" || bad "libattune-client2: no Suggests of libattune-lookup1"
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

# ---- every package: its documentation files; for each ELF file, the
# package of each library it needs in Depends (a library of this build:
# its sibling package; else the Debian package that holds it here), none
# of CUDA's (a CUDA build opens them at run time), stripped, and its debug
# symbols in the package's -dbgsym .ddeb under its build id
pkg_of_soname() { # $1: a SONAME; the package that holds it (this build's, or dpkg -S; cached)
    case $1 in
    libattune.so.1) echo libattune1; return ;;
    libattune_client.so.2) echo libattune-client2; return ;;
    libattune_lookup.so.1) echo libattune-lookup1; return ;;
    esac
    sed -n "s/^$1 //p" "$tmp/sonames" 2>/dev/null | grep . && return
    for path in $(ldconfig -p | awk -v n="$1" '$1 == n {print $NF}'); do
        for cand in "$path" "$(readlink -f "$path")" "${path#/usr}" "/usr$path"; do
            p=$(dpkg -S "$cand" 2>/dev/null | head -1 | sed 's/:.*//')
            [ -n "$p" ] && { echo "$1 $p" >>"$tmp/sonames"; echo "$p"; return; }
        done
    done
}
mkdir -p "$tmp/x"
for deb in "$tmp"/pkg/*.deb; do
    p=$(dpkg-deb -f "$deb" Package)
    x=$tmp/x/$p
    dpkg-deb -x "$deb" "$x"
    for f in copyright changelog.gz; do
        [ -f "$x/usr/share/doc/$p/$f" ] || bad "$p lacks /usr/share/doc/$p/$f"
    done
    deps=" $(dpkg-deb -f "$deb" Depends | tr ',|' '  ') "
    dbg=$tmp/pkg/$p-dbgsym_${ver}_$arch.ddeb
    [ -f "$dbg" ] && dpkg-deb -c "$dbg" | awk '{print $6}' >"$tmp/dbg.list" || : >"$tmp/dbg.list"
    nelf=0
    for f in $(find "$x" -type f | sort); do
        readelf -h "$f" >/dev/null 2>&1 || continue
        nelf=$((nelf + 1))
        rel=${f#"$x"}
        for so in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
            case $so in
            libcuda.so* | libcudart* | libcudnn* | libcublas* | libnv*) bad "$p: $rel needs $so (CUDA must load at run time)"; continue ;;
            esac
            dp=$(pkg_of_soname "$so")
            if [ -z "$dp" ]; then
                bad "$p: $rel needs $so, which no Debian package here holds"
            else
                case $deps in
                *" $dp "*) ;;
                *) bad "$p: $rel needs $so ($dp), not in Depends:$deps" ;;
                esac
            fi
        done
        if readelf -S "$f" | grep -q '\.debug_info'; then
            bad "$p: $rel is not stripped"
        fi
        id=$(readelf -n "$f" | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p')
        d=${id#??}
        grep -qx "./usr/lib/debug/.build-id/$(echo "$id" | cut -c1-2)/$d.debug" "$tmp/dbg.list" ||
            bad "$p: $rel: no debug symbols for build id '$id' in $(basename "$dbg")"
    done
    ok "$p: $nelf ELF files, each library they need in Depends, stripped, symbols in -dbgsym; copyright, changelog"
done

if [ -n "$lint_pid" ]; then # started after cpack
    rc=0
    wait $lint_pid || rc=$?
    lint_pid=
    grep '^W:' "$tmp/lintian" | sed 's/^/     /'
    if grep -q '^E:' "$tmp/lintian"; then
        grep '^E:' "$tmp/lintian"
        bad "lintian reports errors"
    elif [ $rc -ne 0 ]; then
        cat "$tmp/lintian"
        bad "lintian exited $rc"
    else
        ok "lintian: no error on the $(ls "$tmp"/pkg/*.deb | wc -l) packages"
    fi
else
    echo "skip lintian (not installed)"
fi

# ---- the maintainer scripts, run against stand-ins that record their
# calls (the real deb-systemd-helper is tests/clean_root.sh's): as
# dh_installsystemd does, systemctl only for daemon-reload
for s in postinst prerm postrm; do
    dpkg-deb -I "$tmp/pkg/attune_${ver}_$arch.deb" $s >"$tmp/$s" 2>/dev/null && sh -n "$tmp/$s" ||
        bad "$s missing from the package or broken"
    if grep -Eq '^[^#]*systemctl +(--system +)?(enable|disable|start|stop|restart|mask)' "$tmp/$s"; then
        bad "$s calls systemctl for more than daemon-reload"
    fi
done
stub=$tmp/stub
mkdir -p "$stub/bin" "$stub/run/systemd/system" "$stub/etc"
for t in deb-systemd-helper deb-systemd-invoke systemctl; do
    # was-enabled answers what $WAS_ENABLED says (1: enabled or new)
    printf '#!/bin/sh\necho "%s $*" >>"%s/calls"\n[ "$1 $2" = "--quiet was-enabled" ] && [ "${WAS_ENABLED:-1}" = 0 ] && exit 1\nexit 0\n' \
        "$t" "$stub" >"$stub/bin/$t"
    chmod +x "$stub/bin/$t"
done
run_script() { # $1: script, $2...: its arguments; the calls it made, one line each
    : >"$stub/calls"
    sed "s#/run/systemd/system#$stub/run/systemd/system#g; s#/etc/attune#$stub/etc/attune#g" "$tmp/$1" >"$tmp/$1.t"
    script=$1
    shift
    PATH=$stub/bin:$PATH sh "$tmp/$script.t" "$@" >/dev/null 2>&1 || echo "exit $?" >>"$stub/calls"
    tr '\n' ';' <"$stub/calls"
}
want_calls() { # $1: what, $2: the calls seen, $3: the calls wanted
    [ "$2" = "$3" ] && ok "$1" || bad "$1: calls '$2', wanted '$3'"
}
c=$(WAS_ENABLED=1 run_script postinst configure)
want_calls "postinst, first install: token, unit enabled and started" "$c" \
    "deb-systemd-helper unmask attuned.service;deb-systemd-helper --quiet was-enabled attuned.service;deb-systemd-helper enable attuned.service;systemctl --system daemon-reload;deb-systemd-invoke start attuned.service;"
[ "$(stat -c %a "$stub/etc/attune/token" 2>/dev/null)" = 600 ] && [ "$(wc -c <"$stub/etc/attune/token")" -eq 65 ] &&
    ok "postinst wrote a 0600 token of 64 hex digits" || bad "postinst token: $(ls -l "$stub/etc/attune" 2>&1)"
old=$(cat "$stub/etc/attune/token")
c=$(WAS_ENABLED=0 run_script postinst configure 0.0.9)
want_calls "postinst, upgrade of a unit the admin disabled: not enabled again" "$c" \
    "deb-systemd-helper unmask attuned.service;deb-systemd-helper --quiet was-enabled attuned.service;deb-systemd-helper update-state attuned.service;systemctl --system daemon-reload;deb-systemd-invoke restart attuned.service;"
[ "$(cat "$stub/etc/attune/token")" = "$old" ] && ok "an upgrade keeps the token" || bad "an upgrade changed the token"
c=$(WAS_ENABLED=1 run_script postinst configure 0.0.9)
want_calls "postinst, upgrade of an enabled unit: restarted" "$c" \
    "deb-systemd-helper unmask attuned.service;deb-systemd-helper --quiet was-enabled attuned.service;deb-systemd-helper enable attuned.service;systemctl --system daemon-reload;deb-systemd-invoke restart attuned.service;"
want_calls "prerm upgrade: nothing (postinst restarts)" "$(run_script prerm upgrade 0.1.1)" ""
want_calls "prerm remove: stopped" "$(run_script prerm remove)" "deb-systemd-invoke stop attuned.service;"
want_calls "postrm remove: the unit's state masked" "$(run_script postrm remove)" \
    "deb-systemd-helper mask attuned.service;systemctl --system daemon-reload;"
c=$(run_script postrm purge)
want_calls "postrm purge: the unit's state forgotten" "$c" \
    "deb-systemd-helper purge attuned.service;deb-systemd-helper unmask attuned.service;systemctl --system daemon-reload;"
[ ! -e "$stub/etc/attune" ] && ok "purge removes the token" || bad "purge left $stub/etc/attune"
rm -rf "$stub/run/systemd"
c=$(WAS_ENABLED=1 run_script postinst configure)
want_calls "postinst without a running systemd: enabled, nothing started" "$c" \
    "deb-systemd-helper unmask attuned.service;deb-systemd-helper --quiet was-enabled attuned.service;deb-systemd-helper enable attuned.service;"
exit $fail
