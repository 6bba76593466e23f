#!/usr/bin/env bash
# stall_ncu.sh -- where a compute-bound kernel's warps wait: ncu's
# speed-of-light, scheduler, warp-state, instruction-mix and source-counter
# sections for one tactic of one shape (one eager run through libattune,
# bench/tactics_time.py --reps 0 --eager 1), then the SASS lines with the
# most stall samples and the stall reasons summed over the kernel.
# Run on the GPU machine through
#   tests/gpu/run.sh --no-tests --exec 'bash bench/stall_ncu.sh KEY TACTIC [NAME]'
# (which exports BUILD and OUT). Writes $OUT/stall-NAME.txt (the
# sections, each pipe's raw utilisation, then the tables) and
# $OUT/stall-NAME.csv.gz (every SASS line with its samples: ncu --page
# source --csv --print-source sass). NAME defaults to
# the shape's dtype. Clocks are left as the card has them.
# bench/stall_regions.py sums the CSV's samples by address range (no GPU
# needed): python3 bench/stall_regions.py stall-NAME.csv.gz.
set -u -o pipefail
if [ $# -lt 2 ]; then
    echo "usage: stall_ncu.sh KEY TACTIC [NAME]" >&2
    exit 2
fi
KEY=$1 TACTIC=$2 NAME=${3:-$(echo "$1" | cut -d. -f7)}
OUT=${OUT:-.}
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -z "${ATTUNE_LIB:-}" ]; then
    [ -n "${BUILD:-}" ] || { echo "stall_ncu.sh: set ATTUNE_LIB or BUILD (the build tree)" >&2; exit 2; }
    export ATTUNE_LIB=$BUILD/libattune.so.1
fi
command -v ncu >/dev/null || { echo "stall_ncu.sh: no ncu on PATH" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
rep=$TMP/rep
txt=$OUT/stall-$NAME.txt
# The attention kernel only (fused_sm90_kernel<...>; e4m3's V^T pre-pass,
# sm90_vt_kernel, is left out by the regex).
if ! ncu --clock-control none -k 'regex:fused_sm90' --launch-count 1 \
    --section SpeedOfLight --section SchedulerStats --section WarpStateStats \
    --section InstructionStats --section ComputeWorkloadAnalysis \
    --section SourceCounters --import-source no -o "$rep" \
    python3 "$HERE/tactics_time.py" "$KEY" --tactics "$TACTIC" \
    --reps 0 --eager 1 --sets 1 >"$TMP/ncu.log" 2>&1; then
    tail -20 "$TMP/ncu.log" >&2
    echo "stall_ncu.sh: ncu or tactics_time.py failed" >&2
    exit 1
fi
{
    echo "# $KEY $TACTIC ($(date -u '+%F %T') UTC, $(nvidia-smi --query-gpu=name,uuid --format=csv,noheader | head -1))"
    ncu -i "$rep.ncu-rep" --page details
} >"$txt" 2>&1 || { echo "stall_ncu.sh: ncu -i --page details failed ($txt)" >&2; exit 1; }
# Each pipe's share of the elapsed cycles and of the issued instructions
# (the ComputeWorkloadAnalysis section's raw metrics): whether the XU
# (MUFU and conversions), the FMA or ALU pipes, shared memory or the
# tensor cores are near their peak.
{
    echo
    echo "## pipes (ncu --page raw: sm__pipe_*, sm__inst_executed_pipe_*, shared memory's wavefronts)"
    ncu -i "$rep.ncu-rep" --page raw | grep -E 'sm__pipe_|sm__inst_executed_pipe_|mem_shared|smsp__issue_active' |
        sed 's/^ *//'
} >>"$txt" 2>&1 || echo "stall_ncu.sh: no pipe metrics in the report ($txt)" >&2
ncu -i "$rep.ncu-rep" --page source --csv --print-source sass >"$TMP/src.csv" 2>>"$txt" ||
    { echo "stall_ncu.sh: ncu -i --page source failed ($txt)" >&2; exit 1; }
gzip -9n <"$TMP/src.csv" >"$OUT/stall-$NAME.csv.gz"
# the tables (stall_regions.py --tables: SASS lines by samples, reasons,
# samples by opcode, top lines by offset, instructions by opcode)
python3 "$HERE/stall_regions.py" --tables "$TMP/src.csv" >>"$txt" 2>&1 ||
    { echo "stall_ncu.sh: the tables failed ($txt)" >&2; exit 1; }
echo "== $KEY $TACTIC: $txt"
grep -E 'Duration|SM Frequency|Compute \(SM\) Throughput|Issue Slots Busy|Issued Warp Per Scheduler|No Eligible|Active Warps Per Scheduler|Eligible Warps Per Scheduler|Warp Cycles Per Issued' "$txt" | sed 's/  */ /g' | head -20
sed -n '/## SASS lines/,/## executed/p' "$txt" | head -40
