#!/usr/bin/env bash
# sm90_trace.sh -- the cycle trace of the 8k d128 anchors' Hopper tiles
# (bench/sm90_trace.py says what it prints): builds a second tree
# (BUILD-trace) with -DSM90_TRACE=1, runs each tactic below once through
# `attune tune --only` with ATTUNE_SM90_TRACE set, and writes every table
# to OUT/sm90-trace.txt. Run on the GPU machine:
#
#   tests/gpu/run.sh --no-tests --exec 'bash bench/sm90_trace.sh'
#   tests/gpu/run.sh --no-tests --exec 'bash bench/sm90_trace.sh e4m3.nc:pad=1/stages=2/tile=192x128'
#
# Arguments: DTYPE.MASK:ONLY pairs on the 8k d128 anchor, or KEY:ONLY with
# a whole shape key (one with a 'b' batch field, e.g.
# b4.hq32.hkv8.sq2048.skv2048.d128.bf16.c:pad=1/stages=2/tile=192x128)
# (default: the e4m3 and bf16 non-causal winners and their
# two-warpgroup rivals). BUILD and OUT come from run.sh.
# About a minute to build, seconds a tactic. The trace's stores make the
# kernel a little slower: read its steps against each other.
# TRACE_DEFINE adds CUDA flags to the trace build, e.g.
# TRACE_DEFINE=-DSM90_PERSIST_CLAIM=2: the persist=1 tactics claiming late;
# a persist=1 tactic is traced by item (the
# gap it prints is then between one item's epilogue and the next item).
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}
BUILD=${BUILD:-${ATTUNE_GPU_BUILD:-$ROOT/build-gpu}}
case ${1:-} in -h | --help) sed -n "2,/^set -u/{/^set -u/d;p}" "$0"; exit 0 ;; esac
A=b2.hq16.hkv16.sq8192.skv8192.d128
SPECS=("$@")
[ ${#SPECS[@]} -gt 0 ] || SPECS=(e4m3.nc:pad=1/stages=2/tile=192x128 e4m3.nc:pad=1/stages=3/tile=128x192
    bf16.nc:pad=1/stages=2/tile=192x128 bf16.nc:pad=1/stages=2/tile=128x176 e4m3.c:pad=1/stages=2/tile=192x128
    bf16.c:pad=1/stages=2/tile=128x176)
T=$BUILD-trace
. "$ROOT/bench/second_tree.sh"
FLAGS="-DSM90_TRACE=1${TRACE_DEFINE:+ $TRACE_DEFINE}"
echo "[sm90_trace] configure and build $T with $FLAGS" >&2
second_tree "$ROOT" "$T" "$FLAGS" "$OUT/build-trace.log" attune ||
    { echo "[sm90_trace] build of $T failed: $OUT/build-trace.log" >&2; exit 1; }
: >"$OUT/sm90-trace.txt"
rc=0
for spec in "${SPECS[@]}"; do
    key=${spec%%:*} only=${spec#*:}
    case $key in b[0-9]*) ;; *) key=$A.$key ;; esac
    bin=$T/trace-${spec//[^A-Za-z0-9.]/_}.bin
    rm -f "$bin" "$T/t.db"
    echo "[sm90_trace] $key --only $only" >&2
    ATTUNE_SM90_TRACE=$bin timeout 120 "$T/attune" tune --db "$T/t.db" --device 0 --shape "$key" \
        --only "$only" --quiet >>"$OUT/build-trace.log" 2>&1 || { echo "[sm90_trace] $key: tune exit $?" >&2; rc=1; }
    { echo "## $key"; python3 "$ROOT/bench/sm90_trace.py" "$bin" 2>&1; echo; } >>"$OUT/sm90-trace.txt" || rc=1
done
cat "$OUT/sm90-trace.txt"
exit $rc
