#!/bin/sh
# it_arch_check.sh -- scripts/check_arch.sh in ctest: every kernel file
# compiled for sm_87 (Orin) and sm_110 (Thor) without spills outside the
# configurations those architectures do not get, and, where the build has
# the sm_90a kernels, none whose wgmma ptxas serialised; then that second
# check once more on a copy of the reports with such an advisory planted,
# which must fail. Skipped (77) without nvcc or in a build configured with
# ATTUNE_WITH_CUDA=OFF.
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
    rc=0
    "$ATTUNE_SOURCE_DIR/scripts/check_arch.sh" --logs "$logs" 87 110 || rc=$?
    [ $rc -eq 0 ] || exit $rc
    [ -d "$logs/sm_90a" ] || exit 0
    # planted: ptxas's advisory, as CUDA 13.0 words it, for a kernel of
    # the sm_90a report (the check names the kernel and fails)
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    cp -r "$logs" "$tmp/logs"
    one=$(find "$tmp/logs/sm_90a" -name "*.log" | sort | head -1)
    fn=$(sed -nE "s/.*Compiling entry function '([^']+)'.*/\1/p" "$one" | head -1)
    echo "ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are serialized due to insufficient register resources for the function '$fn'" >>"$one"
    rc=0
    out=$(ATTUNE_ARCH_CHECK_DIR=$tmp/out "$ATTUNE_SOURCE_DIR/scripts/check_arch.sh" --logs "$tmp/logs" 87 110) || rc=$?
    case $rc/$out in
    1/*"FAIL sm_90a: "*"ptxas serialises its wgmma (C7512)"*) echo "ok   a planted serialised wgmma is caught" ;;
    *) echo "$out"; echo "FAIL the planted serialised wgmma (exit $rc)"; exit 1 ;;
    esac
    exit 0
fi
exec "$ATTUNE_SOURCE_DIR/scripts/check_arch.sh" 87 110
