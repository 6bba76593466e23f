#!/usr/bin/env bash
# daemon_gpu.sh BUILD GRID -- on the GPU machine: start attuned, check it
# lists the GPU, tune GRID's shapes on CUDA device 0 through POST /v1/tune,
# and check that /v1/tactic serves, for each shape, the winner that
# /v1/results implies (fastest ok tactic within tolerance). Prints one line
# per shape; exit 1 on any mismatch. Called by tests/gpu/run.sh --daemon.
set -u -o pipefail
BUILD=$1 GRID=$2
KIND=${ATTUNE_DAEMON_KIND:-cuda} # cpu: the same check on the CPU backend
dir=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
"$BUILD/attuned" --port $port --db "$dir/a.db" --no-default-grid >"$dir/attuned.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/v1/health" >/dev/null && break; sleep 0.2; done
python3 - "$port" "$dir/token" "$GRID" "$KIND" <<'PY'
import json, sys, time, urllib.request
port, token_path, grid, kind = sys.argv[1:5]
base = "http://127.0.0.1:%s" % port
def get(path):
    with urllib.request.urlopen(base + path, timeout=30) as r:
        return json.load(r)
devs = get("/v1/devices")["devices"]
gpus = [d for d in devs if d["kind"] == kind and d["local"]]
print("devices:", ", ".join("%s %s cc %s" % (d["id"], d["name"], d["cc"]) for d in devs))
assert gpus, "attuned lists no local %s device" % kind
gpu = gpus[0]
shapes = [{k: s[k] for k in ("b", "hq", "hkv", "sq", "skv", "d", "dtype", "causal")}
          for s in json.load(open(grid))["shapes"]]
token = open(token_path).read().strip()
req = urllib.request.Request(base + "/v1/tune", method="POST",
        data=json.dumps({"device": gpu["id"], "shapes": shapes}).encode(),
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=30) as r:
    job = json.load(r)["job"]
t0 = time.time()
while True:
    j = get("/v1/jobs/%d" % job)
    if j["state"] not in ("queued", "running"):
        break
    time.sleep(0.5)
print("job %d: %s, %d/%d shapes in %.1f s" % (job, j["state"], j["done"], j["total"], time.time() - t0))
assert j["state"] == "done", j
bad = 0
for s in shapes:
    q = "&".join("%s=%s" % (k, str(v).lower() if isinstance(v, bool) else v) for k, v in s.items())
    t = get("/v1/tactic?device=%s&%s" % (gpu["id"], q))
    res = get("/v1/results?device=%s&%s" % (gpu["id"], q))["measurements"]
    # rows flagged noisy stay out of answers until re-measured (docs/tuning.md)
    ok = [m for m in res if m["status"] == "ok" and not m.get("noisy")]
    print("%-44s %-44s %9.1f us  rel_err %.1e  source=%s  (%d tactics, %d ok)" % (
        t["shape"], t["tactic"], t.get("time_us_copies") or t["time_us"], t["rel_err"], t["source"],
        len(res), len(ok)))
    # The winner the selection rule (docs/tuning.md) implies from /v1/results.
    bound = {"f16": 5e-3, "bf16": 3e-2, "f32": 1e-4}[s["dtype"]]
    best = min((m["rel_err"] for m in ok), default=None)
    elig = [m for m in ok if m["rel_err"] <= bound and m["rel_err"] <= 8 * best]
    tm = lambda m: m["time_us_copies"] if m.get("time_us_copies") is not None else m["time_us"]
    want = min(elig, key=lambda m: (tm(m), m["rel_err"]))["tactic"] if elig else None
    if t["source"] != "measured" or t["tactic"] != want:
        bad += 1
        print("  MISMATCH: served %s (%s), results imply %s" % (t["tactic"], t["source"], want))
# A shape nobody tuned (issue 26 item 4): the lookup answers at once while
# the index's builder lists the GPU's tactics (cuDNN's heuristics) off the
# request path, and again at once after; neither waits on cuDNN.
new = {"b": 1, "hq": 8, "hkv": 2, "sq": 777, "skv": 777, "d": 128, "dtype": "bf16", "causal": "false"}
q = "&".join("%s=%s" % kv for kv in new.items())
for i in range(2):
    t0 = time.time()
    a = get("/v1/tactic?device=%s&%s" % (gpu["id"], q))
    dt = time.time() - t0
    print("untuned lookup %d: %s source=%s tuning=%s in %.1f ms" % (
        i + 1, a["tactic"], a["source"], a.get("tuning"), 1000 * dt))
    if dt > 1.0:
        bad += 1
        print("  SLOW: an untuned lookup took %.2f s" % dt)
    time.sleep(3)
sys.exit(1 if bad else 0)
PY
rc=$?
[ $rc -eq 0 ] || { echo "attuned log (tail):"; tail -20 "$dir/attuned.log"; }
exit $rc
