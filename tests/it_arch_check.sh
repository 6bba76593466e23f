#!/bin/sh
# it_arch_check.sh -- scripts/check_arch.sh in ctest: every kernel file
# compiled for sm_87 (Orin) and sm_110 (Thor) without spills outside the
# configurations those architectures do not get. Skipped (77) without nvcc
# or in a build configured with ATTUNE_WITH_CUDA=OFF;
# compiles are cached in the build directory. Cold it is the longest test
# (~90 s of CPU, two processes): ctest starts it first (COST in
# tests/CMakeLists.txt).
set -eu
: "${ATTUNE_SOURCE_DIR:?}" "${ATTUNE_BUILD_DIR:?}"
# A build configured without CUDA (-DATTUNE_WITH_CUDA=OFF) skips it too.
if grep -q '^ATTUNE_WITH_CUDA:BOOL=OFF' "$ATTUNE_BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
    echo "skip: this build has ATTUNE_WITH_CUDA=OFF"
    exit 77
fi
ATTUNE_ARCH_CHECK_DIR=$ATTUNE_BUILD_DIR/arch-check exec "$ATTUNE_SOURCE_DIR/scripts/check_arch.sh" 87 110
