#!/usr/bin/env bash
# decode_ncu.sh -- where a decode tactic's time goes: ncu's speed-of-light,
# warp-state and memory sections for each kernel of one eager run of each
# tactic named (bench/tactics_time.py --reps 0 --eager 1), the clocks left
# as the card has them. Run on the GPU machine through
#   tests/gpu/run.sh --no-tests --exec 'bash bench/decode_ncu.sh KEY T1,T2 [RUN_SKV]'
# Writes $OUT/ncu-<n>.txt and prints each kernel's duration, DRAM
# throughput and top stall lines.
set -u
KEY=$1 TACTICS=$2 RSKV=${3:-0}
OUT=${OUT:-.}
n=$(ls "$OUT"/ncu-*.txt 2>/dev/null | wc -l)
f=$OUT/ncu-$n.txt
export ATTUNE_LIB=${ATTUNE_LIB:-$BUILD/libattune.so.1}
ncu --clock-control none --section SpeedOfLight --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
    python3 "$(dirname "$0")/tactics_time.py" "$KEY" --tactics "$TACTICS" \
    --run-skv "$RSKV" --reps 0 --eager 1 --sets 1 >"$f" 2>&1
echo "== $KEY ($TACTICS) run skv $RSKV: $f"
grep -E '^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Memory Throughput|L2 Hit Rate|Achieved Occupancy|Registers Per|Grid Size|Block Size|Dynamic Shared|Warp Cycles Per Issued|Stall|One or More Eligible' "$f" |
    grep -v '^    ---' | sed 's/  */ /g' | head -120
