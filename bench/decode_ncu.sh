#!/usr/bin/env bash
# decode_ncu.sh -- where a decode tactic's time goes: ncu's speed-of-light,
# warp-state, memory, occupancy and launch sections for attune's kernels
# (and cuDNN's) in one eager run of each tactic named
# (bench/tactics_time.py --reps 0 --eager 1), the clocks left as the card
# has them; ncu flushes the caches between kernels (its default), so a
# kernel reading what the one before wrote reads it from DRAM. Run on the
# GPU machine through
#   tests/gpu/run.sh --no-tests --exec 'bash bench/decode_ncu.sh KEY T1,T2 [RUN_SKV]'
# (which exports BUILD and OUT). Writes $OUT/ncu-<n>.txt and prints each
# kernel's duration, throughputs, occupancy and launch figures.
set -u -o pipefail
if [ $# -lt 2 ]; then
    echo "usage: decode_ncu.sh KEY TACTIC[,TACTIC...] [RUN_SKV]" >&2
    exit 2
fi
KEY=$1 TACTICS=$2 RSKV=${3:-0}
OUT=${OUT:-.}
if [ -z "${ATTUNE_LIB:-}" ]; then
    [ -n "${BUILD:-}" ] || { echo "decode_ncu.sh: set ATTUNE_LIB or BUILD (the build tree)" >&2; exit 2; }
    export ATTUNE_LIB=$BUILD/libattune.so.1
fi
n=$(ls "$OUT"/ncu-*.txt 2>/dev/null | wc -l)
f=$OUT/ncu-$n.txt
if ! ncu --clock-control none -k 'regex:splitkv|fused|combine|cudnn|sdpa|fmha|flash|reduction' \
    --section SpeedOfLight --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
    python3 "$(dirname "$0")/tactics_time.py" "$KEY" --tactics "$TACTICS" \
    --run-skv "$RSKV" --reps 0 --eager 1 --sets 1 >"$f" 2>&1; then
    tail -20 "$f" >&2
    echo "decode_ncu.sh: ncu or tactics_time.py failed ($f)" >&2
    exit 1
fi
echo "== $KEY ($TACTICS) run skv $RSKV: $f"
grep -E '^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Memory Throughput|L2 Hit Rate|SM Active Cycles|Elapsed Cycles|Achieved Occupancy|Theoretical Occupancy|Registers Per|Grid Size|Block Size|Dynamic Shared|Warp Cycles Per Issued' "$f" |
    grep -v '^    ---' | sed 's/  */ /g' | head -150 || true
