#!/usr/bin/env bash
# runoff.sh -- does the tuner's runoff (tuner/tuner.h, docs/tuning.md
# "Runoff") make its winners steadier? Each shape is tuned REPS times into
# a fresh database with --runoff 0 and with --runoff 2, the two modes in
# turns, and each tune's winner and stored time printed; then the last
# runoff tune's rows (attune results) for the notes of the runoff.
#
# usage: bench/runoff.sh [--build DIR] [--device ID] [--reps N] SHAPE...
# On the GPU machine: tests/gpu/run.sh --no-tests --exec 'bash
# bench/runoff.sh --build $BUILD SHAPE...'.
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build DEVICE=0 REPS=3 SHAPES=()
while [ $# -gt 0 ]; do
    case $1 in
    --build) shift; BUILD=$1 ;;
    --device) shift; DEVICE=$1 ;;
    --reps) shift; REPS=$1 ;;
    -h|--help) sed -n 2,10p "$0"; exit 0 ;;
    -*) echo "runoff.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) SHAPES+=("$1") ;;
    esac
    shift
done
[ ${#SHAPES[@]} -gt 0 ] || { echo "runoff.sh: no shape (see --help)" >&2; exit 2; }
ATTUNE=$BUILD/attune
[ -x "$ATTUNE" ] || { echo "runoff.sh: no $ATTUNE (build first, or --build DIR)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
STATUS=0
printf "%-44s %-7s %-4s %-62s %10s\n" shape runoff rep winner us
for s in "${SHAPES[@]}"; do
    for rep in $(seq 1 "$REPS"); do
        for mode in 0 2; do
            db=$TMP/$mode.db
            rm -f "$db"*
            if ! "$ATTUNE" tune --db "$db" --device "$DEVICE" --quiet --runoff "$mode" --shape "$s" \
                    >"$TMP/tune.log" 2>&1; then
                echo "runoff.sh: tune of $s failed:" >&2; tail -5 "$TMP/tune.log" >&2; STATUS=1
                continue
            fi
            "$ATTUNE" winners --db "$db" --device "$DEVICE" --json | python3 -c '
import json, sys
for row in json.load(sys.stdin)["winners"]:
    w = row["winner"] or {}
    print("%-44s %-7s %-4s %-62s %10.1f" % (sys.argv[1], sys.argv[2], sys.argv[3],
          w.get("tactic", "(none)"), w.get("time_us_total") or float("nan")))' "$s" "$mode" "$rep" || STATUS=1
        done
    done
    "$ATTUNE" results --db "$TMP/2.db" --device "$DEVICE" --shape "$s" | head -14
done
exit $STATUS
