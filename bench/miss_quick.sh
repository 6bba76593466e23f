#!/usr/bin/env bash
# miss_quick.sh -- how long a lookup of a shape nobody tuned waits for a
# `measured` answer: attuned with tune on miss on a copy of a tuned table
# (the asked shapes' rows removed, the device id made this GPU's), each
# shape asked once, then polled every 0.05 s until its answer's source is
# `measured`. Prints per shape the seconds to `measured` (since issue 29
# item 2: the full tune's end, the quick pass leaving the winner mark to
# it) and the daemon's miss_quick_end and miss_full_end lines.
#
# usage: bench/miss_quick.sh TABLE.json[.gz] KEY...
#   e.g. bench/miss_quick.sh bench/realmodels-holdout9-h200.json.gz \
#            b2.hq24.hkv24.sq44776.skv44776.d128.bf16.nc
# Environment: BUILD (default build-gpu: tests/gpu/run.sh's build, whose
# libraries must be on LD_LIBRARY_PATH as run.sh sets them), DEVICE (0),
# WAIT_S (give up after this, 60).
set -u -o pipefail
[ $# -ge 2 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-gpu}
DEVICE=${DEVICE:-0}
WAIT_S=${WAIT_S:-60}
TABLE=$1
shift
dir=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT

uuid=$("$BUILD/attune" devices --json | python3 -c "
import json, sys
ids = [d['id'] for d in json.load(sys.stdin)['devices'] if d.get('index') == $DEVICE]
print(ids[0] if ids else '')")
[ -n "$uuid" ] || { echo "miss_quick: no CUDA device $DEVICE" >&2; exit 1; }
python3 - "$TABLE" "$uuid" "$dir/table.json" "$@" <<'PY' || exit 1
import gzip, json, sys
src, uuid, dst, keys = sys.argv[1], sys.argv[2], sys.argv[3], set(sys.argv[4:])
with open(src, "rb") as f:
    raw = f.read()
t = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
old = t["device"]["id"]
def key(s):
    return "b%(b)d.hq%(hq)d.hkv%(hkv)d.sq%(sq)d.skv%(skv)d.d%(d)d.%(dtype)s." % s + ("c" if s["causal"] else "nc")
n = len(t["measurements"])
t["measurements"] = [m for m in t["measurements"] if key(m["shape"]) not in keys]
print("miss_quick: %d of %d rows kept" % (len(t["measurements"]), n), file=sys.stderr)
json.dump(json.loads(json.dumps(t).replace(old, uuid)), open(dst, "w"))
PY
"$BUILD/attune" import --db "$dir/a.db" "$dir/table.json" >&2 || exit 1
port=$((20000 + RANDOM % 20000))
"$BUILD/attuned" --port $port --db "$dir/a.db" --no-default-grid >"$dir/attuned.log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/v1/health" >/dev/null && break; sleep 0.1; done
python3 - "$port" "$uuid" "$WAIT_S" "$dir/attuned.log" "$@" <<'PY'
import json, re, sys, time, urllib.request
port, dev, wait_s, log, keys = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5:]
def ask(key):
    url = "http://127.0.0.1:%s/v1/tactic?device=%s&shape=%s" % (port, dev, key)
    with urllib.request.urlopen(url, timeout=30) as r:
        a = json.load(r)
        return a["source"], a.get("tuning", "")
for key in keys:
    t0 = time.time()
    (first, tuning) = (src, _) = ask(key)
    # refused by admission (predicted over --miss-budget-s): nothing to wait for
    while src != "measured" and not tuning.startswith("refused") and time.time() - t0 < wait_s:
        time.sleep(0.05)
        src, _ = ask(key)
    print("%s asked at %s: first %s (tuning %s), %s after %.2f s" % (
        key, time.strftime("%H:%M:%S", time.gmtime(t0)), first, tuning or "-", src,
        time.time() - t0))
    for line in open(log):
        if re.search(r"event=miss_(tune_start|quick_end|full_end) .*shape=%s " % re.escape(key),
                     line):
            print("  " + line.rstrip())
PY
