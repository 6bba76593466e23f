#!/bin/sh
# it_cross_arm64.sh -- the CPU-only configuration cross-builds for arm64
# (Jetson's CPU) with Debian's cross toolchain, warnings as errors, and
# cpack makes its arm64 packages. Skipped (77) unless the toolchain and the
# arm64 -dev packages are installed (ATTUNE_CROSS=arm64 scripts/deps.sh),
# and on an arm64 host (a Jetson, an arm64 CI runner): there the native
# build and its tests are the arm64 build, and aarch64-linux-gnu-gcc is the
# native compiler, not a cross one.
# The build directory is kept under the build tree: later runs are
# incremental. `it_cross_arm64.sh --build-only` configures and builds that
# tree and checks nothing (`make test` builds it beside its own build:
# scripts/test_trees.sh).
set -eu
: "${ATTUNE_SOURCE_DIR:?}" "${ATTUNE_BUILD_DIR:?}"
case "$(uname -m)/$(dpkg --print-architecture 2>/dev/null || true)" in
aarch64/* | arm64/* | */arm64) echo "skip: this host is arm64 (the native build is the arm64 build)"; exit 77 ;;
esac
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || { echo "skip: no aarch64-linux-gnu-gcc"; exit 77; }
for pc in sqlite3 jansson zlib; do
    [ -f /usr/lib/aarch64-linux-gnu/pkgconfig/$pc.pc ] || { echo "skip: no arm64 $pc.pc"; exit 77; }
done
b=$ATTUNE_BUILD_DIR/cross-arm64
cmake -S "$ATTUNE_SOURCE_DIR" -B "$b" -DCMAKE_TOOLCHAIN_FILE="$ATTUNE_SOURCE_DIR/cmake/aarch64-linux-gnu.cmake" \
    -DATTUNE_WITH_CUDA=OFF -DATTUNE_WERROR=ON -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$b.log" 2>&1 ||
    { cat "$b.log"; echo "FAIL configure"; exit 1; }
cmake --build "$b" -j2 >>"$b.log" 2>&1 || { tail -40 "$b.log"; echo "FAIL build"; exit 1; }
[ "${1:-}" != --build-only ] || exit 0
fail=0
for exe in attune attuned; do
    [ -f "$b/$exe" ] || { [ $exe = attuned ] && { echo "note: attuned not built (no arm64 libmicrohttpd)"; continue; }; }
    info=$(od -An -tx1 -j18 -N2 "$b/$exe" | tr -d ' ')
    # ELF e_machine 0xb7 (little endian b7 00) is AArch64
    if [ "$info" = b700 ]; then echo "ok   $exe is an AArch64 executable"; else echo "FAIL $exe e_machine $info"; fail=1; fi
done
rm -rf "$b/pkg"
(cd "$b" && cpack -G DEB -B "$b/pkg" >>"$b.log" 2>&1) || { tail -20 "$b.log"; echo "FAIL cpack"; exit 1; }
for deb in "$b"/pkg/*.deb; do
    a=$(dpkg-deb -f "$deb" Architecture)
    case $(basename "$deb") in
    python3-*) want=all ;;
    *) want=arm64 ;;
    esac
    if [ "$a" = "$want" ]; then echo "ok   $(basename "$deb"): $a"; else echo "FAIL $(basename "$deb"): $a"; fail=1; fi
done
exit $fail
