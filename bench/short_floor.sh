#!/usr/bin/env bash
# short_floor.sh -- bench/short_floor.cu against BUILD's libattune, then
# against a second tree's for each compile-time switch given: the floors
# and the real tactics of the short few-head shapes, A and each B.
#
#   tests/gpu/run.sh --no-tests --exec "bash bench/short_floor.sh [-DX=Y ...]"
#
# BUILD and OUT come from run.sh. A tree per switch is BUILD-sf<N> (its
# build log OUT/build-sf<N>.log), configured as BUILD plus the switch in
# its CUDA flags; only libattune is built there.
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}
BUILD=${BUILD:-${ATTUNE_GPU_BUILD:-$ROOT/build-gpu}}
. "$ROOT/bench/second_tree.sh"
floor() { # LIBDIR NAME
    # sm_90a: the multicast walk's bulk copies (the rest runs as sm_90)
    nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I "$ROOT/kernels" -o "$OUT/short_floor-$2" \
        "$ROOT/bench/short_floor.cu" -L "$1" -lattune -Xlinker -rpath="$1" &&
        "$OUT/short_floor-$2"
}
echo "### A: $BUILD"
floor "$BUILD" a || exit 1
n=0
for def in "$@"; do
    n=$((n + 1))
    B=$BUILD-sf$n
    echo "### B$n: $def"
    if second_tree "$ROOT" "$B" "$def" "$OUT/build-sf$n.log" libattune; then
        floor "$B" "b$n"
    else
        echo "build of $B failed: $OUT/build-sf$n.log"
    fi
done
