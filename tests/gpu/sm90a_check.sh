#!/usr/bin/env bash
# sm90a_check.sh -- the Hopper (arch=sm90a) fused kernels in one call on the
# GPU machine: correctness over every configuration (test_fused), the
# sanitizers on small shapes, the SASS evidence, and timings against
# version 1 and PyTorch's SDPA in the same run.
#
#   bash tests/gpu/sm90a_check.sh --build      # here: binaries into build-sm90/
#   bash tests/gpu/sm90a_check.sh [--no-torch] [--bench-filter SHAPE]   # there
#
# The binaries are built standalone with nvcc (no CMake, no sqlite/jansson):
# test_fused and fused_bench over cuda_fused.cu + cuda_fused_sm90a.cu. If the
# carried ones do not run on the machine they are rebuilt there. Logs under
# $OUT (./gpu-out elsewhere): env.txt, test_fused.log, sanitizer.log,
# sass.txt, bench.log, torch.log.
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}
BIN=${SM90_BIN:-$ROOT/build-sm90}
[ -d /usr/local/cuda/bin ] && export PATH=$PATH:/usr/local/cuda/bin
CUDA_INC=$(dirname "$(command -v nvcc)")/../include
TORCH=1
BUILD_ONLY=0
BFILTER=""
while [ $# -gt 0 ]; do
    case $1 in
    --build) BUILD_ONLY=1 ;;
    --no-torch) TORCH=0 ;;
    --bench-filter) shift; BFILTER=${1:-} ;;
    *) echo "usage: sm90a_check.sh [--build] [--no-torch] [--bench-filter SHAPE]" >&2; exit 2 ;;
    esac
    shift
done
mkdir -p "$OUT"
log() { echo "[sm90a $(date +%H:%M:%S)] $*" | tee -a "$OUT/run.log" >&2; }

build() {
    mkdir -p "$BIN/obj" || return 1
    local cf="-O2 -std=c11 -D_POSIX_C_SOURCE=200809L -DATTUNE_HAVE_CUDA=1 -DATTUNE_HAVE_SM90A=1 -I$ROOT -I$CUDA_INC"
    local nf="-O3 -std=c++17 -I$ROOT -DATTUNE_HAVE_SM90A=1"
    (cd "$BIN/obj" &&
        cc $cf -c "$ROOT/tests/gpu/test_fused.c" "$ROOT/kernels/attn.c" "$ROOT/common/attune_err.c" \
            "$ROOT/common/shape.c" "$ROOT/common/tactic.c" "$ROOT/common/device_id.c" &&
        nvcc $nf -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -c "$ROOT/kernels/cuda/cuda_fused_sm90a.cu" \
            2>"$BIN/ptxas_sm90a.txt" &&
        nvcc $nf -arch=sm_90 -c "$ROOT/bench/fused_bench.cu" &&
        nvcc $nf -arch=sm_90 -c "$ROOT/kernels/cuda/cuda_fused.cu") || return 1
    (cd "$BIN/obj" &&
        nvcc -o "$BIN/test_fused" test_fused.o attn.o attune_err.o shape.o tactic.o device_id.o cuda_fused.o cuda_fused_sm90a.o -lpthread -lm &&
        nvcc -o "$BIN/fused_bench" fused_bench.o attn.o attune_err.o shape.o tactic.o device_id.o cuda_fused.o cuda_fused_sm90a.o) || return 1
}

if [ "$BUILD_ONLY" = 1 ]; then
    build && log "built $BIN/test_fused $BIN/fused_bench" && exit 0
    log "build failed"; exit 1
fi

START=$(date +%s)
{
    echo "commit: ${ATTUNE_COMMIT:-unknown}"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1
    nvcc --version 2>&1 | tail -1
} >"$OUT/env.txt"
if ! "$BIN/fused_bench" nomatch >/dev/null 2>&1; then
    log "carried binaries do not run here: rebuilding"
    build >"$OUT/build.log" 2>&1 || { log "build failed"; tail -20 "$OUT/build.log" >&2; exit 1; }
fi

STATUS=0
log "test_fused (every tactic listed for this device)"
timeout -k 10 240 "$BIN/test_fused" >"$OUT/test_fused.log" 2>&1
rc=$?
[ $rc -ne 0 ] && STATUS=1
log "test_fused exit $rc"
grep -E "failed|test_fused:|planted|passed" "$OUT/test_fused.log" | grep -v "^  " | tail -12 >&2

log "compute-sanitizer racecheck, synccheck, memcheck on the small cases (arch=sm90a only)"
# SM90_SANITIZERS (tools), SM90_SAN_FILTER (tactic text), SM90_SAN_TIMEOUT (s): a shorter run.
for tool in ${SM90_SANITIZERS:-racecheck synccheck memcheck}; do
    echo "=== $tool" >>"$OUT/sanitizer.log"
    ATTUNE_TEST_QUICK=1 ATTUNE_TEST_TACTIC=${SM90_SAN_FILTER:-arch=sm90a} timeout -k 10 ${SM90_SAN_TIMEOUT:-100} \
        compute-sanitizer --tool $tool --error-exitcode 9 "$BIN/test_fused" >>"$OUT/sanitizer.log" 2>&1
    rc=$?
    echo "=== $tool exit $rc" >>"$OUT/sanitizer.log"
    log "$tool exit $rc"
    [ $rc -ne 0 ] && STATUS=1
done
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard" "$OUT/sanitizer.log" | sort | uniq -c | head -10 >&2

log "SASS of the sm90a kernels"
cuobjdump --dump-sass "$BIN/test_fused" 2>/dev/null | awk '
    /Function :/ { fn = $3; v3 = fn ~ /fused_sm90_kernel/ }
    v3 { for (i = 1; i <= NF; i++) { op = $i; sub(/\..*/, "", op); sub(/;$/, "", op);
            if (op ~ /^(HGMMA|UTMALDG|LDL|STL|WARPGROUP|SYNCS|USETMAXREG|BAR|MUFU|LDS|STG)$/) n[fn" "op]++ } }
    END { for (k in n) print k, n[k] }' | sort >"$OUT/sass.txt"
head -40 "$OUT/sass.txt" >&2

log "fused_bench (version 1 and sm90a tactics)"
timeout -k 10 240 "$BIN/fused_bench" "$BFILTER" "${SM90_BENCH_TACTICS:-}" >"$OUT/bench.log" 2>&1
grep -E "BEST|CEILING" "$OUT/bench.log" >&2
if [ -n "${SM90_COMPARE_ENV:-}" ]; then # VAR=VALUE ...: the sm90a tactics again under them
    log "fused_bench, sm90a tactics, with $SM90_COMPARE_ENV"
    env $SM90_COMPARE_ENV timeout -k 10 120 "$BIN/fused_bench" "${SM90_COMPARE_FILTER:-$BFILTER}" arch=sm90a \
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
