#!/bin/sh
# it_cmake_package.sh -- the libraries as another project sees them:
# installed (`cmake --install --component client`, `runtime` and `dev`, the
# Debian packages' components) into a scratch prefix, a consumer project
# (tests/consumer/) configured with find_package(attune) against that
# prefix, built and run (attune::attune_client asks a daemon that is not there;
# attune::attune runs every CPU tactic); and the installed pkg-config files
# name that prefix's include and lib directories, not the default /usr/local.
# Skipped (77) without the client library (libcurl missing) or pkg-config.
set -eu
: "${ATTUNE_BUILD_DIR:?}" "${ATTUNE_SOURCE_DIR:?}"
[ -n "${ATTUNE_CLIENT_LIB:-}" ] || { echo "skip: attune_client not built"; exit 77; }
command -v pkg-config >/dev/null 2>&1 || { echo "skip: pkg-config not found"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

prefix=$tmp/prefix
# the libraries' directory: lib/<multiarch triplet> (or what the build was
# configured with)
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$ATTUNE_BUILD_DIR/CMakeCache.txt")
for c in client runtime dev; do
    cmake --install "$ATTUNE_BUILD_DIR" --prefix "$prefix" --component $c >>"$tmp/install.log" 2>&1 ||
        { cat "$tmp/install.log"; echo "FAIL cmake --install --component $c"; exit 1; }
done
ok "installed the client, runtime and dev components into a scratch prefix"

# find_package(attune) from a project that knows only the prefix
if cmake -S "$ATTUNE_SOURCE_DIR/tests/consumer" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_BUILD_TYPE=Release >"$tmp/configure.log" 2>&1 &&
    cmake --build "$tmp/build" >"$tmp/build.log" 2>&1; then
    ok "consumer configured with find_package(attune) and built"
else
    cat "$tmp/configure.log" "$tmp/build.log" 2>/dev/null
    bad "consumer configure/build"
fi
dir=$(sed -n 's/^attune_DIR:PATH=//p' "$tmp/build/CMakeCache.txt" 2>/dev/null)
case $dir in
"$prefix"/*) ok "attune_DIR=$dir (the prefix)" ;;
*) bad "attune_DIR=$dir, not under $prefix" ;;
esac
# the consumer asks a port where nothing listens: the default answer
port=$("${ATTUNE_PYTHON:-python3}" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
out=$("$tmp/build/consumer" "http://127.0.0.1:$port" 2>&1) || true
case $out in
*"fused/pad=8 default") ok "consumer runs against the installed library: $out" ;;
*) bad "consumer output: $out" ;;
esac
# libattune.so.1 needs libattune_client.so.2 beside it: a prefix outside
# the loader's paths needs LD_LIBRARY_PATH (the executable's RUNPATH covers
# its own needs only)
out=$(LD_LIBRARY_PATH=$prefix/$libdir "$tmp/build/runtime_consumer" 2>&1) || true
case $out in
"ran "*" tactics, out[0][0][0][0..3] = -1 -0.75 -0.5 -0.25 "*)
    ok "attune::attune runs on the CPU: $out" ;;
*) bad "runtime_consumer output: $out" ;;
esac
if command -v ldd >/dev/null 2>&1; then
    for p in consumer:libattune_client runtime_consumer:libattune; do
        lib=$(LD_LIBRARY_PATH=$prefix/$libdir ldd "$tmp/build/${p%%:*}" | sed -n "s/.*${p#*:}\.so[^ ]* => \([^ ]*\).*/\1/p")
        case $lib in
        "$prefix"/*) ok "${p%%:*} loads $lib" ;;
        *) bad "${p%%:*} loads ${p#*:} from '$lib', not the prefix" ;;
        esac
    done
fi

# pkg-config: the prefix's directories, wherever it was installed
real=$(cd "$prefix" && pwd -P)
cflags=$(PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig pkg-config --cflags attune_client 2>&1) || true
libs=$(PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig pkg-config --libs attune_client 2>&1) || true
inc=$(echo "$cflags" | sed -n 's/^-I\([^ ]*\).*/\1/p')
ldir=$(echo "$libs" | sed -n 's/^-L\([^ ]*\).*/\1/p')
if [ -n "$inc" ] && [ "$(cd "$inc" 2>/dev/null && pwd -P)" = "$real/include" ] &&
    [ -f "$inc/attune.h" ]; then
    ok "pkg-config --cflags: $cflags (the prefix's include)"
else
    bad "pkg-config --cflags: $cflags"
fi
if [ -n "$ldir" ] && [ "$(cd "$ldir" 2>/dev/null && pwd -P)" = "$real/$libdir" ]; then
    ok "pkg-config --libs: $libs"
else
    bad "pkg-config --libs: $libs"
fi
# and a program built with what it says compiles and links
if cc $cflags -o "$tmp/pc_consumer" "$ATTUNE_SOURCE_DIR/tests/consumer/consumer.c" $libs \
        >"$tmp/cc.log" 2>&1 &&
    LD_LIBRARY_PATH=$prefix/$libdir "$tmp/pc_consumer" "http://127.0.0.1:$port" >/dev/null 2>&1; then
    ok "a program built with pkg-config's flags links and runs"
else
    cat "$tmp/cc.log"
    bad "build with pkg-config flags"
fi
rtflags=$(PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig pkg-config --cflags --libs libattune 2>&1) || true
# shellcheck disable=SC2086
if LD_LIBRARY_PATH=$prefix/$libdir cc -o "$tmp/pc_runtime" "$ATTUNE_SOURCE_DIR/tests/consumer/runtime_consumer.c" \
        $rtflags -lm \
        >"$tmp/cc.log" 2>&1 &&
    LD_LIBRARY_PATH=$prefix/$libdir "$tmp/pc_runtime" >/dev/null 2>&1; then
    ok "pkg-config libattune ($rtflags): builds and runs"
else
    cat "$tmp/cc.log"
    bad "build with pkg-config libattune: $rtflags"
fi
exit $fail
