#!/usr/bin/env bash
# build_ab.sh -- a compile-time switch of the kernels, A against B, by the
# tuner's protocol: builds a second tree (BUILD-b) configured as BUILD
# with CUDA_DEFINE added to its CUDA flags, then bench/ab_env.py with a
# wrapper whose AB_BIN picks the binary (A: BUILD's attune, B: the other),
# forward then backward over --reps rounds, each run a fresh process.
#
#   tests/gpu/run.sh --no-tests --exec "bash bench/build_ab.sh DEFINE [ab_env args]"
#   e.g. bash bench/build_ab.sh -DFUSED_MBAR_TIMEOUT_NS=0 --reps 3 --filter sm90a \
#            --shape b2.hq16.hkv16.sq8192.skv8192.d128.bf16.nc
#
# BUILD and OUT come from run.sh. Prints ab_env's table (A = as built,
# B = with DEFINE); the second tree's build log goes to OUT/build-b.log.
# AB_TESTS=REGEX: then also build B's GPU tests matching REGEX and run
# them there (ctest -R REGEX; OUT/ctest-b.log), so a switch that changes a
# kernel is checked against the reference, not only timed; the exit
# status is then ctest's. AB_SRC=DIR: B is built from the source tree DIR
# instead (another commit's, e.g. `git archive REV | tar -x -C DIR`
# here, carried over), with DEFINE "" for none: this tree against that
# one. B's build log naming a wgmma that ptxas serialises ("instructions
# are serialized", C75xx) stops the A/B before it times anything (exit 3):
# it would time a crippled kernel (docs/kernels.md, version 3.30);
# AB_ALLOW_SERIAL=1 times it anyway. (A's build, the default, is held to
# the same by it_arch_check.)
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}
BUILD=${BUILD:-${ATTUNE_GPU_BUILD:-$ROOT/build-gpu}}
[ $# -ge 1 ] || { sed -n 2,13p "$0" >&2; exit 2; }
DEFINE=$1
shift
B=$BUILD-b
. "$ROOT/bench/second_tree.sh"
echo "[build_ab] configure and build $B with $DEFINE" >&2
second_tree "${AB_SRC:-$ROOT}" "$B" "$DEFINE" "$OUT/build-b.log" attune ||
    { echo "[build_ab] build of $B failed: $OUT/build-b.log" >&2; exit 1; }
if [ "${AB_ALLOW_SERIAL:-0}" != 1 ] && grep -q "instructions are serialized" "$OUT/build-b.log"; then
    echo "[build_ab] B ($DEFINE): ptxas serialises wgmma in $(grep -c "instructions are serialized" \
        "$OUT/build-b.log") kernel builds ($OUT/build-b.log); not timed (AB_ALLOW_SERIAL=1 times it)" >&2
    exit 3
fi
WRAP=$B/attune-ab
printf '#!/bin/sh\nexec "${AB_BIN:-%s}" "$@"\n' "$BUILD/attune" >"$WRAP" # unset: A (ab_env's reads)
chmod +x "$WRAP"
mkdir -p "$B/ab"
echo "[build_ab] A = $BUILD/attune, B = $B/attune (${AB_SRC:+$AB_SRC, }$DEFINE)" >&2
python3 "$ROOT/bench/ab_env.py" --attune "$WRAP" --env "AB_BIN=$BUILD/attune,$B/attune" \
    --out "$B/ab" "$@"
rc=$?
if [ -n "${AB_TESTS:-}" ]; then
    echo "[build_ab] B's tests matching '$AB_TESTS' (ctest-b.log)" >&2
    # the targets are the tests' names (tests/CMakeLists.txt: one executable each)
    TARGETS=$(ctest --test-dir "$B" -N -R "$AB_TESTS" 2>/dev/null | sed -n 's/^ *Test *#[0-9]*: *//p')
    { [ -z "$TARGETS" ] || cmake --build "$B" -j "$(nproc)" --target $TARGETS; } >>"$OUT/build-b.log" 2>&1 &&
        ctest --test-dir "$B" -R "$AB_TESTS" --output-on-failure >"$OUT/ctest-b.log" 2>&1
    rc=$?
    tail -n 15 "$OUT/ctest-b.log" >&2
fi
exit $rc
