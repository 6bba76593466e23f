#!/usr/bin/env bash
# w3.sh -- the measurements version 3.11 (docs/kernels.md) still owes:
# three consumer warpgroups at d = 128 (192x128 tiles, e4m3 and 16-bit)
# against every other tactic of the 8k d128 anchors, S's first slice
# written (SM90_S_W), and the cost of the producer's tail wait
# (SM90_TAIL_WAIT=1).
# Run on the GPU machine, after the GPU suite (which checks the 192x128
# kernels against the float64 reference):
#
#   tests/gpu/run.sh --ctest-args "-R gpu_cudnn|gpu_fused$" \
#       --exec 'bash bench/w3.sh times'
#   tests/gpu/run.sh --no-tests --exec 'bash bench/w3.sh tail'
#
# times: bench/tactics_time.py on the four anchors (e4m3 and bf16, causal
#   and not), every tactic: $OUT/w3-times-KEY.txt.
# sw: bench/build_ab.sh -DSM90_S_W=W3_SW (0: "+f" on every dtype; 1: the
#   16-bit kernels' first S slice written too) against the default (2:
#   e4m3's only) on the four anchors, the 192x128 rows (W3_REPS,
#   W3_TESTS: see the code).
# tail: bench/build_ab.sh -DSM90_TAIL_WAIT=1 against the default (0), on
#   the bf16 and e4m3 non-causal anchors, every sm90a row.
# (order, the A/B of turn orders 1 and 2, P in shared memory, ran on
#   2026-12-06 (bench/w3-h200-9e8cc54.txt) and the orders are gone:
#   commit 6565b0d has them. order3 and turn, the A/Bs of turn order 3
#   and of where a turn ends, ran on 2026-12-06 and their switches are
#   gone: commit bdcf452 has them; bench/order3-turn-h100-20261206.txt
#   the figures. So did order4, turn order 4: commit 9d58ce6,
#   bench/order4-sw-h100-9d58ce6.txt.)
# BUILD and OUT come from run.sh. Each step takes 2-5 minutes.
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}
BUILD=${BUILD:-${ATTUNE_GPU_BUILD:-$ROOT/build-gpu}}
A=b2.hq16.hkv16.sq8192.skv8192.d128
case ${1:-} in
times)
    for k in e4m3.nc bf16.nc e4m3.c bf16.c; do
        echo "[w3] tactics_time $A.$k" >&2
        ATTUNE_LIB=$BUILD/libattune.so.1 timeout 150 python3 "$ROOT/bench/tactics_time.py" "$A.$k" \
            --reps 15 >"$OUT/w3-times-$k.txt" 2>&1 || echo "[w3] $k: exit $?" >&2
    done
    ;;
sw)
    # S's first k-slice written, not read, as SM90_S_W=W3_SW (0) says,
    # against the default (2) on the 8k anchors' 192x128 rows (attune
    # tune --only: a second a run); W3_REPS rounds (6); W3_TESTS=1: B's
    # gpu_cudnn and gpu_fused against the float64 reference too
    AB_TESTS=${W3_TESTS:+"gpu_cudnn|gpu_fused$"} bash "$ROOT/bench/build_ab.sh" "-DSM90_S_W=${W3_SW:-0}" \
        --reps "${W3_REPS:-6}" --filter 192x128 --only tile=192x128 --shape "$A.e4m3.nc" --shape "$A.bf16.nc" \
        --shape "$A.e4m3.c" --shape "$A.bf16.c" >"$OUT/w3-sw.txt" 2>&1 || echo "[w3] sw: exit $?" >&2
    ;;
tail)
    bash "$ROOT/bench/build_ab.sh" -DSM90_TAIL_WAIT=1 --reps 3 --filter sm90a \
        --shape "$A.e4m3.nc" --shape "$A.bf16.nc" >"$OUT/w3-tail.txt" 2>&1 ||
        echo "[w3] tail: exit $?" >&2
    ;;
-h | --help) sed -n "2,/^set -u/{/^set -u/d;p}" "$0" ;;
*)
    echo "usage: w3.sh times|sw|tail (see --help)" >&2
    exit 2
    ;;
esac
