#!/usr/bin/env bash
# realmodels.sh -- answers for real-model shapes nobody tuned (issue 10,
# "Done when" 2), measured end to end on one device.
#
# 1. tunes the train grid (default grids/default.json: what attuned tunes at
#    first start on a GPU) with `attune tune` into a fresh database;
# 2. starts attuned on it with tune on miss off and asks GET /v1/tactic for
#    every shape of every held-out grid (default grids/realmodels.json;
#    --hold again for more sets): the answers *before* any of them is
#    tuned (tactic, source, predicted time, the shapes it leaned on), all
#    sets before any set is tuned, so no set's tuning informs another's;
# 3. (not with --no-miss-check) restarts attuned with tune on miss on (its
#    default) and, one shape at a time, once the device is idle: asks,
#    waits 3 s, asks again; records both sources (the second should be
#    `measured`) and lets the miss tune finish (it is the shape's tuning);
# 4. per held-out set, in the order given: `attune tune` on it (completes
#    whatever the miss tunes left; tactics already measured are skipped),
#    the table exported, and
# 5. the regret of each of the set's answers of step 2 = time of the
#    answered tactic on the shape / time of its winner (select rule of
#    docs/tuning.md, with pad/unpad copies); median and worst; also `attune
#    loo --holdout` (the model of this tree, offline on the same rows);
#    at the end the leave-one-out over the train grid.
#
# usage: bench/realmodels.sh [--build DIR] [--device ID] [--train GRID]
#                            [--hold GRID]... [--no-miss-check] [--out DIR]
# On the GPU machine: tests/gpu/run.sh --no-tests --realmodels (device 0).
# On the CPU, to try the script itself:
#   bench/realmodels.sh --device cpu --train grids/cpu-loo.json --hold grids/cpu-small.json
# Writes $OUT/realmodels.txt (everything printed), realmodels-before.json
# and realmodels-miss.json (the answers of steps 2 and 3) and
# $OUT/attuned.log (the daemon's log: the miss tunes' start and end lines) and
# $OUT/realmodels-table.json (the tuned rows as fleet JSON: rerun step 5
# anywhere with `attune import` + `attune loo --grid TRAIN --holdout HOLD`).
# Exit 0 when every step ran (the figures are reported, not judged).
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build DEVICE=0 TRAIN=$ROOT/grids/default.json HOLDS=() MISS=1
OUT=${OUT:-$ROOT/realmodels-out}
while [ $# -gt 0 ]; do
    case $1 in
    --build) BUILD=$2; shift ;;
    --device) DEVICE=$2; shift ;;
    --train) TRAIN=$2; shift ;;
    --hold) HOLDS+=("$2"); shift ;;
    --no-miss-check) MISS=0 ;;
    --out) OUT=$2; shift ;;
    *) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//;$d' >&2; exit 2 ;;
    esac
    shift
done
[ ${#HOLDS[@]} -gt 0 ] || HOLDS=("$ROOT/grids/realmodels.json")
mkdir -p "$OUT"
TXT=$OUT/realmodels.txt
dir=$(mktemp -d)
DB=$dir/a.db
pid=""
stop_daemon() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; pid=""; }
trap 'stop_daemon; cp "$dir/attuned.log" "$OUT/attuned.log" 2>/dev/null; rm -rf "$dir"' EXIT
say() { echo "[realmodels $(date -u +%H:%M:%S)] $*" | tee -a "$TXT" >&2; }

start_daemon() { # extra attuned options...
    port=$((20000 + RANDOM % 20000))
    "$BUILD/attuned" --port $port --db "$DB" --no-default-grid "$@" >>"$dir/attuned.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/v1/health" >/dev/null && return 0; sleep 0.1; done
    say "attuned did not start:"; tail -20 "$dir/attuned.log" | tee -a "$TXT" >&2
    return 1
}

t0=$(date +%s)
say "step 1: tune $(basename "$TRAIN") on device $DEVICE"
"$BUILD/attune" tune --db "$DB" --device "$DEVICE" --grid "$TRAIN" --quiet >"$dir/tune.log" 2>&1 ||
    { say "tuning failed"; tail -20 "$dir/tune.log" | tee -a "$TXT"; exit 1; }
say "tuned in $(($(date +%s) - t0)) s"

say "step 2: answers before tuning (tune on miss off)"
start_daemon --no-tune-on-miss || exit 1
python3 - "$port" "$DEVICE" "${HOLDS[@]}" >"$OUT/realmodels-before.json" <<'PY' || { say "queries failed"; exit 1; }
import json, os, sys, urllib.request
port, dev, grids = sys.argv[1], sys.argv[2], sys.argv[3:]
out = []
for grid in grids:
    for s in json.load(open(grid))["shapes"]:
        key = "b%(b)d.hq%(hq)d.hkv%(hkv)d.sq%(sq)d.skv%(skv)d.d%(d)d.%(dtype)s." % s + ("c" if s["causal"] else "nc")
        with urllib.request.urlopen("http://127.0.0.1:%s/v1/tactic?device=%s&shape=%s" % (port, dev, key), timeout=30) as r:
            a = json.load(r)
        e = {k: a.get(k) for k in ("shape", "tactic", "source", "time_us", "from_shapes", "from_shape", "distance")}
        e["set"] = os.path.basename(grid)
        out.append(e)
json.dump(out, sys.stdout)
PY
stop_daemon

echo "[]" >"$OUT/realmodels-miss.json"
if [ "$MISS" = 1 ]; then
say "step 3: tune on miss: ask, 3 s later ask again, one shape at a time"
start_daemon || exit 1
python3 - "$port" "$DEVICE" "$BUILD/attune" "${HOLDS[@]}" >"$OUT/realmodels-miss.json" 2>>"$TXT" <<'PY' || { say "miss check failed"; exit 1; }
import json, sys, time, urllib.request
port, dev, attune, grids = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def ask(key):
    with urllib.request.urlopen("http://127.0.0.1:%s/v1/tactic?device=%s&shape=%s" % (port, dev, key), timeout=30) as r:
        return json.load(r)
def miss_busy():
    """Shapes missed and queued, plus the one being tuned, on any device."""
    with urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=30) as r:
        return sum(int(float(l.split()[-1])) for l in r.read().decode().splitlines()
                   if (l.startswith("attune_queue_depth{") and 'queue="miss"' in l)
                   or l.startswith("attune_miss_tuning{"))
def idle(key, limit):
    """The device is idle again: no missed shape is queued or being tuned
    (key's quick pass and full tune are over). Watching rows instead (none
    new for 4 s) let a large shape's tune, whose single tactics take longer
    than that, run on into the next shape's 3 s."""
    t = time.time()
    while time.time() - t < limit:
        if miss_busy() == 0:
            return
        time.sleep(0.25)
out = []
for s in [s for grid in grids for s in json.load(open(grid))["shapes"]]:
    key = "b%(b)d.hq%(hq)d.hkv%(hkv)d.sq%(sq)d.skv%(skv)d.d%(d)d.%(dtype)s." % s + ("c" if s["causal"] else "nc")
    first = ask(key)
    time.sleep(3.0)
    second = ask(key)
    out.append({"shape": key, "first": first["source"], "tuning": first.get("tuning"),
                "second": second["source"], "second_tactic": second["tactic"]})
    print("  %-44s first %-9s (tuning %s)  3 s later %s" % (key, first["source"], first.get("tuning"),
          second["source"]), file=sys.stderr)
    idle(key, 90)
json.dump(out, sys.stdout)
PY
stop_daemon
say "miss checks done ($(($(date +%s) - t0)) s)"
fi

for HOLD in "${HOLDS[@]}"; do
SET=$(basename "$HOLD")
say "step 4: tune the held-out set $SET"
"$BUILD/attune" tune --db "$DB" --device "$DEVICE" --grid "$HOLD" --quiet >"$dir/tune2.log" 2>&1 ||
    { say "tuning failed"; tail -20 "$dir/tune2.log" | tee -a "$TXT"; exit 1; }
"$BUILD/attune" export --db "$DB" --device "$DEVICE" -o "$OUT/realmodels-table.json" ||
    { say "export failed"; exit 1; }
say "tuned ($(($(date +%s) - t0)) s)"

say "step 5: $SET: regret of the answers given before tuning"
python3 - "$OUT/realmodels-table.json" "$OUT/realmodels-before.json" "$OUT/realmodels-miss.json" "$SET" <<'PY' | tee -a "$TXT"
import json, math, statistics, sys
table, before, miss = (json.load(open(p)) for p in sys.argv[1:4])
before = [a for a in before if a.get("set", sys.argv[4]) == sys.argv[4]]
bound = {"f16": 5e-3, "bf16": 3e-2, "f32": 1e-4}  # select_max_rel_err's defaults
rows = {}
for m in table["measurements"]:
    rows.setdefault(m["shape_key"], []).append(m)
tm = lambda m: m["time_us_copies"] if m.get("time_us_copies") is not None else m["time_us"]
regs = []
print("| shape | answered before tuning | source | winner | answered us | winner us | regret |")
print("|---|---|---|---|---:|---:|---:|")
for a in before:
    ms = [m for m in rows.get(a["shape"], []) if m["status"] == "ok" and m["time_us"] is not None]
    if not ms:
        print("| %s | %s | %s | (not tuned) | | | |" % (a["shape"], a["tactic"], a["source"]))
        continue
    dt = ms[0]["shape"]["dtype"]
    best = min(m["rel_err"] for m in ms)
    elig = [m for m in ms if m["rel_err"] <= bound[dt] and m["rel_err"] <= 8 * best]
    win = min(elig, key=lambda m: (tm(m), m["rel_err"]))
    got = [m for m in elig if m["tactic"] == a["tactic"]]
    r = tm(got[0]) / tm(win) if got else math.inf
    regs.append(r)
    print("| %s | %s | %s | %s | %s | %.2f | %.3f |" % (a["shape"], a["tactic"], a["source"], win["tactic"],
          "%.2f" % tm(got[0]) if got else "-", tm(win), r))
if regs:
    print("\nanswers before tuning: %d shapes, median regret %.3f, worst %.3f, geomean %.3f" % (
        len(regs), statistics.median(regs), max(regs), math.exp(sum(map(math.log, regs)) / len(regs))))
print("sources before tuning: %s" % ", ".join(sorted({a["source"] for a in before})))
ok = sum(1 for m in miss if m["second"] == "measured")
if miss: print("tune on miss: second lookup 3 s after the first is measured for %d of %d shapes "
      "(first lookups: %s)" % (ok, len(miss), ", ".join(sorted({m["first"] for m in miss}))))
PY
say "$SET: attune loo --holdout (this tree's model, offline on the same rows, the backend's listing)"
"$BUILD/attune" loo --db "$DB" --device "$DEVICE" --grid "$TRAIN" --holdout "$HOLD" 2>&1 | tee -a "$TXT"
done
say "attune loo over $(basename "$TRAIN")"
"$BUILD/attune" loo --db "$DB" --device "$DEVICE" --grid "$TRAIN" 2>&1 | tee -a "$TXT"
say "done ($(($(date +%s) - t0)) s)"
grep -E "miss_tune|error" "$dir/attuned.log" | tail -40 >>"$TXT"
exit 0
