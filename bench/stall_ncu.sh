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
python3 - "$TMP/src.csv" >>"$txt" 2>&1 <<'EOF' || { echo "stall_ncu.sh: the tables failed ($txt)" >&2; exit 1; }
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
# ncu prints a kernel header line or two before the table; find the header.
h = next(i for i, r in enumerate(rows) if "Source" in r and "Address" in r)
head, body = rows[h], [r for r in rows[h + 1:] if len(r) == len(rows[h])]
col = {n: i for i, n in enumerate(head)}
samp = next(n for n in head if n.startswith("Warp Stall Sampling (All"))
def num(r, n):
    try:
        return float(r[col[n]].replace(",", ""))
    except (ValueError, KeyError):
        return 0.0
total = sum(num(r, samp) for r in body) or 1.0
print("\n## SASS lines by stall samples (%d lines, %d samples)" % (len(body), total))
for r in sorted(body, key=lambda r: -num(r, samp))[:45]:
    print("%6.2f%%  %s  %s" % (100 * num(r, samp) / total, r[col["Address"]], r[col["Source"]]))
# Per-reason columns, where this ncu prints them (stall_* metrics).
reasons = [n for n in head if n.lower().startswith("stall") or "smsp__pcsamp" in n]
if reasons:
    print("\n## stall reasons summed over the kernel")
    for n, v in sorted(((n, sum(num(r, n) for r in body)) for n in reasons), key=lambda x: -x[1])[:20]:
        print("%8.0f  %s" % (v, n))
# Stall samples by opcode, each with its three largest reasons (the
# "Not Issued" duplicates left out), and the lines' offsets from the
# kernel's first instruction (as cuobjdump prints them) in the table above.
if reasons:
    base = min(int(r[col["Address"]], 16) for r in body)
    own = [n for n in reasons if "Not Issued" not in n and n.startswith("stall_")]
    byop = {}
    for r in body:
        w = r[col["Source"]].split()
        op = (w[1] if w and w[0].startswith("@") and len(w) > 1 else (w[0] if w else "?")).split(".")[0]
        d = byop.setdefault(op, {})
        for n in own:
            d[n[6:]] = d.get(n[6:], 0.0) + num(r, n)
    alls = sum(sum(d.values()) for d in byop.values()) or 1.0
    print("\n## stall samples by opcode (%d samples), each with its largest reasons" % alls)
    for op, d in sorted(byop.items(), key=lambda x: -sum(x[1].values()))[:16]:
        s = sum(d.values()) or 1.0
        top = ", ".join("%s %.0f%%" % (k, 100 * v / s) for k, v in sorted(d.items(), key=lambda x: -x[1])[:3])
        print("%6.2f%%  %-10s %s" % (100 * s / alls, op, top))
    print("\n## the 30 lines with the most samples, by offset from the kernel's start")
    for r in sorted(body, key=lambda r: -num(r, samp))[:30]:
        top = sorted(((n[6:], num(r, n)) for n in own), key=lambda x: -x[1])[:2]
        print("%6.2f%%  %05x  %-50s %s" % (100 * num(r, samp) / total, int(r[col["Address"]], 16) - base,
                                         r[col["Source"]].strip()[:50], ", ".join("%s %d" % t for t in top)))
# Instruction mix by opcode (executed instructions).
ex = next((n for n in head if n.startswith("Instructions Executed")), None)
if ex:
    ops = {}
    for r in body:
        op = r[col["Source"]].split()[0] if r[col["Source"]].split() else "?"
        if op.startswith("@"):
            op = r[col["Source"]].split()[1]
        ops[op.split(".")[0]] = ops.get(op.split(".")[0], 0) + num(r, ex)
    tot = sum(ops.values()) or 1.0
    print("\n## executed instructions by opcode (%d in all)" % tot)
    for op, v in sorted(ops.items(), key=lambda x: -x[1])[:25]:
        print("%6.2f%%  %s" % (100 * v / tot, op))
EOF
echo "== $KEY $TACTIC: $txt"
grep -E 'Duration|SM Frequency|Compute \(SM\) Throughput|Issue Slots Busy|Issued Warp Per Scheduler|No Eligible|Active Warps Per Scheduler|Eligible Warps Per Scheduler|Warp Cycles Per Issued' "$txt" | sed 's/  */ /g' | head -20
sed -n '/## SASS lines/,/## executed/p' "$txt" | head -40
