#!/bin/sh
# it_arch_check.sh -- scripts/check_arch.sh in ctest: every kernel file
# compiled for sm_87 (Orin) and sm_110 (Thor) without spills outside the
# configurations those architectures do not get. Skipped (77) without nvcc
# or in a build configured with ATTUNE_WITH_CUDA=OFF.
# The compiles are the build's (target attune_arch_check,
# cmake/arch_check.cmake): `make test` builds them beside everything else;
# here the target is built again, which compiles only what changed since
# (nothing after make test; a kernel edit and a bare ctest: that file),
# and check_arch.sh reads ptxas's reports. A tree configured before the
# target existed compiles in check_arch.sh, cached in the build directory.
set -eu
: "${ATTUNE_SOURCE_DIR:?}" "${ATTUNE_BUILD_DIR:?}"
# A build configured without CUDA (-DATTUNE_WITH_CUDA=OFF) skips it too.
if grep -q '^ATTUNE_WITH_CUDA:BOOL=OFF' "$ATTUNE_BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
    echo "skip: this build has ATTUNE_WITH_CUDA=OFF"
    exit 77
fi
export ATTUNE_ARCH_CHECK_DIR="$ATTUNE_BUILD_DIR/arch-check"
logs=$ATTUNE_ARCH_CHECK_DIR/logs
if grep -q '^ATTUNE_CHECK_ARCHS:' "$ATTUNE_BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
    mkdir -p "$ATTUNE_ARCH_CHECK_DIR"
    cmake --build "$ATTUNE_BUILD_DIR" --target attune_arch_check -j "$(nproc 2>/dev/null || echo 2)" \
        >"$ATTUNE_ARCH_CHECK_DIR/build.log" 2>&1 ||
        { tail -20 "$ATTUNE_ARCH_CHECK_DIR/build.log"; echo "FAIL building attune_arch_check"; exit 1; }
    exec "$ATTUNE_SOURCE_DIR/scripts/check_arch.sh" --logs "$logs" 87 110
fi
exec "$ATTUNE_SOURCE_DIR/scripts/check_arch.sh" 87 110
