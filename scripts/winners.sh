#!/bin/sh
# winners.sh ATTUNE DB DEVICE GRID -- print the winner of every grid shape.
set -eu
attune=$1 db=$2 dev=$3 grid=$4
python3 - "$grid" <<'PY' | while read -r key; do
import json, sys
for s in json.load(open(sys.argv[1]))["shapes"]:
    print("b%d.hq%d.hkv%d.sq%d.skv%d.d%d.%s.%s" % (s["b"], s["hq"], s["hkv"], s["sq"], s["skv"],
          s["d"], s["dtype"], "c" if s["causal"] else "nc"))
PY
    "$attune" results --db "$db" --device "$dev" --shape "$key" --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
w = [m for m in r["measurements"] if m["winner"]]
if w:
    m = w[0]
    t = m["time_us_copies"] if m["time_us_copies"] is not None else m["time_us"]
    print("%-44s %-30s %10.2f us  rel_err %.2e" % (r["shape"], m["tactic"], t, m["rel_err"]))
else:
    print("%-44s (no winner)" % r["shape"])'
done
