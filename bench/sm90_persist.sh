#!/usr/bin/env bash
# sm90_persist.sh -- the sm90a kernels' persistent grid on the GPU machine:
# correctness with every block taking many items (gpu_fused with
# ATTUNE_SM90_PERSIST=2, causal too, and the grid capped at 17 blocks), the
# kernels' local-memory instructions (SASS), then persistent against one
# item per block by the tuner's protocol (bench/ab_env.py, values 0, 1, 2
# of ATTUNE_SM90_PERSIST) on prefill shapes.
#
#   tests/gpu/run.sh --no-tests --exec "bash bench/sm90_persist.sh [--reps N]"
#
# BUILD and OUT come from run.sh. Writes OUT/persist.log (tests, SASS) and
# OUT/persist-ab.md (the A/B tables).
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}
BUILD=${BUILD:-${ATTUNE_GPU_BUILD:-$ROOT/build-gpu}}
REPS=4
while [ $# -gt 0 ]; do
    case $1 in
    --reps) shift; REPS=${1:-4} ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: sm90_persist.sh [--reps N]" >&2; exit 2 ;;
    esac
    shift
done
LOG=$OUT/persist.log
mkdir -p "$OUT"
say() { echo "[persist $(date +%H:%M:%S)] $*" | tee -a "$LOG" >&2; }

say "build gpu_fused"
cmake --build "$BUILD" -j "$(nproc)" --target gpu_fused >>"$LOG" 2>&1 || { say "build failed"; exit 1; }
STATUS=0
for envs in "ATTUNE_SM90_PERSIST=2 ATTUNE_SM90_GRID=17" "ATTUNE_SM90_PERSIST=1"; do
    say "gpu_fused with $envs"
    (cd "$BUILD" && env $envs timeout 300 ctest -R '^gpu_fused$' --output-on-failure) >>"$LOG" 2>&1
    rc=$?
    say "gpu_fused with $envs: exit $rc"
    [ $rc -eq 0 ] || STATUS=1
    grep -E "checks, [0-9]+ failed|^FAIL" "$LOG" | tail -3 >&2
done

if command -v cuobjdump >/dev/null; then
    for bin in $(find "$BUILD" -name '*.so' -o -name 'gpu_fused' -type f | head -3); do
        say "SASS local memory (STL/LDL) of the sm90a kernels in $bin"
        bash "$ROOT/bench/sass_ops.sh" "$bin" 'fused_sm90_kernel' '^(STL|LDL|HGMMA)$' >>"$LOG" 2>&1
    done
fi

say "A/B: ATTUNE_SM90_PERSIST=0,1,2, $REPS rounds"
mkdir -p "$BUILD/persist-ab"
python3 "$ROOT/bench/ab_env.py" --attune "$BUILD/attune" --env ATTUNE_SM90_PERSIST=0,1,2 \
    --reps "$REPS" --filter sm90a --out "$BUILD/persist-ab" \
    --shape b2.hq16.hkv16.sq8192.skv8192.d128.bf16.nc \
    --shape b2.hq16.hkv16.sq8192.skv8192.d128.bf16.c \
    --shape b2.hq16.hkv16.sq4096.skv4096.d256.bf16.nc \
    --shape b2.hq16.hkv16.sq8192.skv8192.d64.bf16.nc \
    >"$OUT/persist-ab.md" 2>>"$LOG" || STATUS=1
say "done (status $STATUS)"
exit $STATUS
