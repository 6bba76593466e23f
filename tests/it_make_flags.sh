#!/bin/sh
# it_make_flags.sh -- issue 13: `make` warns when CMAKE_FLAGS differ from
# the flags its build directory was configured with (they would be
# silently ignored otherwise), and says nothing when they are the same.
# Uses a stand-in build directory (a CMakeCache.txt and the recorded flags)
# and skips deps (-o deps): only the Makefile's check runs; the cmake
# --build that follows fails on the stand-in, which is expected.
set -eu
: "${ATTUNE_SOURCE_DIR:?}"
command -v make >/dev/null 2>&1 || { echo "skip: make not found"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
# a make of its own, not a sub-make of the `make test` that may run this
unset MAKEFLAGS MFLAGS MAKELEVEL
mkdir "$tmp/b"
touch "$tmp/b/CMakeCache.txt"
printf '%s\n' '-DATTUNE_WITH_CUDA=OFF' >"$tmp/b/cmake-flags"
fail=0

make -s -C "$ATTUNE_SOURCE_DIR" -o deps build BUILD="$tmp/b" \
    CMAKE_FLAGS='-DATTUNE_WERROR=ON' >"$tmp/other.log" 2>&1 || true
if grep -q "make: warning: .*configured with CMAKE_FLAGS='-DATTUNE_WITH_CUDA=OFF'.*NOT applied" "$tmp/other.log"; then
    echo "ok   other flags: warned"
else
    echo "FAIL other flags: no warning"; cat "$tmp/other.log"; fail=1
fi

make -s -C "$ATTUNE_SOURCE_DIR" -o deps build BUILD="$tmp/b" \
    CMAKE_FLAGS='-DATTUNE_WITH_CUDA=OFF' >"$tmp/same.log" 2>&1 || true
if grep -q "make: warning" "$tmp/same.log"; then
    echo "FAIL same flags: warned"; cat "$tmp/same.log"; fail=1
else
    echo "ok   same flags: no warning"
fi
exit $fail
