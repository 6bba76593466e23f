#!/usr/bin/env bash
# sm90a_check.sh -- the Hopper (arch=sm90a) fused kernels in one call on the
# GPU machine: correctness over every configuration (test_fused), the
# sanitizers on small shapes, the SASS evidence, and timings against
# version 1 and PyTorch's SDPA in the same run.
#
#   bash tests/gpu/sm90a_check.sh [--no-torch] [--bench-filter SHAPE]
#   tests/gpu/run.sh --no-tests --exec "bash tests/gpu/sm90a_check.sh ..."
#
# The binaries are CMake's (gpu_fused and fused_bench, built here as
# targets of the build tree SM90_BUILD, else ATTUNE_GPU_BUILD, else
# build-gpu/, which tests/gpu/run.sh configures). Logs under $OUT
# (./gpu-out elsewhere): env.txt, build.log, test_fused.log, sanitizer.log,
# sass.txt, bench.log, torch.log.
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}
BUILD=${SM90_BUILD:-${ATTUNE_GPU_BUILD:-$ROOT/build-gpu}}
[ -d /usr/local/cuda/bin ] && export PATH=$PATH:/usr/local/cuda/bin
TORCH=1
BFILTER=""
while [ $# -gt 0 ]; do
    case $1 in
    --no-torch) TORCH=0 ;;
    --bench-filter) shift; BFILTER=${1:-} ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: sm90a_check.sh [--no-torch] [--bench-filter SHAPE]" >&2; exit 2 ;;
    esac
    shift
done
mkdir -p "$OUT"
log() { echo "[sm90a $(date +%H:%M:%S)] $*" | tee -a "$OUT/run.log" >&2; }

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    log "no configured build tree at $BUILD (run tests/gpu/run.sh first, or set SM90_BUILD)"
    exit 1
fi
log "building gpu_fused and fused_bench in $BUILD"
if ! cmake --build "$BUILD" -j "$(nproc 2>/dev/null || echo 8)" --target gpu_fused fused_bench >"$OUT/build.log" 2>&1; then
    log "build failed"; tail -20 "$OUT/build.log" >&2; exit 1
fi
TEST_FUSED=$BUILD/tests/gpu_fused
FUSED_BENCH=$BUILD/fused_bench

START=$(date +%s)
{
    echo "commit: ${ATTUNE_COMMIT:-unknown}"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1
    nvcc --version 2>&1 | tail -1
} >"$OUT/env.txt"

STATUS=0
log "test_fused (every tactic listed for this device)"
timeout -k 10 240 "$TEST_FUSED" >"$OUT/test_fused.log" 2>&1
rc=$?
[ $rc -ne 0 ] && STATUS=1
log "test_fused exit $rc"
grep -E "failed|test_fused:|planted|passed" "$OUT/test_fused.log" | grep -v "^  " | tail -12 >&2

log "compute-sanitizer racecheck, synccheck, memcheck on the small cases (arch=sm90a only)"
# SM90_SANITIZERS (tools), SM90_SAN_FILTER (tactic text), SM90_SAN_TIMEOUT (s): a shorter run.
for tool in ${SM90_SANITIZERS:-racecheck synccheck memcheck}; do
    echo "=== $tool" >>"$OUT/sanitizer.log"
    ATTUNE_TEST_QUICK=1 ATTUNE_TEST_TACTIC=${SM90_SAN_FILTER:-arch=sm90a} timeout -k 10 ${SM90_SAN_TIMEOUT:-100} \
        compute-sanitizer --tool $tool --error-exitcode 9 "$TEST_FUSED" >>"$OUT/sanitizer.log" 2>&1
    rc=$?
    echo "=== $tool exit $rc" >>"$OUT/sanitizer.log"
    log "$tool exit $rc"
    [ $rc -ne 0 ] && STATUS=1
done
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard" "$OUT/sanitizer.log" | sort | uniq -c | head -10 >&2

log "SASS of the sm90a kernels"
cuobjdump --dump-sass "$TEST_FUSED" 2>/dev/null | awk '
    /Function :/ { fn = $3; v3 = fn ~ /fused_sm90_kernel/ }
    v3 { for (i = 1; i <= NF; i++) { op = $i; sub(/\..*/, "", op); sub(/;$/, "", op);
            if (op ~ /^(HGMMA|UTMALDG|LDL|STL|WARPGROUP|SYNCS|USETMAXREG|BAR|MUFU|LDS|STG)$/) n[fn" "op]++ } }
    END { for (k in n) print k, n[k] }' | sort >"$OUT/sass.txt"
head -40 "$OUT/sass.txt" >&2

log "fused_bench (version 1 and sm90a tactics)"
timeout -k 10 240 "$FUSED_BENCH" "$BFILTER" "${SM90_BENCH_TACTICS:-}" >"$OUT/bench.log" 2>&1
grep -E "BEST|CEILING" "$OUT/bench.log" >&2
if [ -n "${SM90_COMPARE_ENV:-}" ]; then # VAR=VALUE ...: the sm90a tactics again under them
    log "fused_bench, sm90a tactics, with $SM90_COMPARE_ENV"
    env $SM90_COMPARE_ENV timeout -k 10 120 "$FUSED_BENCH" "${SM90_COMPARE_FILTER:-$BFILTER}" arch=sm90a \
        >"$OUT/bench_cmp.log" 2>&1
    grep -E "BEST-SM90A|BEST-FOLD" "$OUT/bench_cmp.log" >&2
fi
if [ "$TORCH" = 1 ]; then
    log "bench/fused_bench.py (PyTorch SDPA)"
    timeout -k 10 180 python3 "$ROOT/bench/fused_bench.py" "${SM90_TORCH_FILTER:-}" >"$OUT/torch.log" 2>&1
    grep -E "CEILING|TORCHBEST" "$OUT/torch.log" >&2
fi
log "done ($(($(date +%s) - START)) s), status $STATUS"
exit $STATUS
