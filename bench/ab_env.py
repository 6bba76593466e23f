#!/usr/bin/env python3
"""ab_env.py -- an environment switch of the kernels, A against B, by the
tuner's own protocol.

usage: ab_env.py --attune PATH --env NAME=A,B --shape KEY [--shape KEY...]
                 [--filter TEXT] [--reps N] [--device ID] [--out DIR]

Tunes the shapes with `attune tune --screen 0` (every tactic fully timed)
into a fresh database per run, NAME set to A, then B, then B, then A, ...
(ABBA order, so a steady drift of the GPU's clock over the runs weighs on
both sides alike), --reps pairs in all, each run a new process. Then, per
shape and tactic whose name holds TEXT: the stored kernel time of every
run, the median of each side, B / A, and the relative error of each side
(the median of its runs). Prints a Markdown table; the raw rows go to
DIR/ab_env.jsonl. Example (version 3.8's e4m3 row sums against 3.7's):

  bench/ab_env.py --attune build/attune --env ATTUNE_SM90_E4M3_TSUM=0,1 \\
      --shape b2.hq16.hkv16.sq8192.skv8192.d128.e4m3.nc --filter sm90a
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def tune(args, name, value, shapes, run):
    """One run: a fresh database, the shapes tuned with NAME=value; its
    measurement rows per shape."""
    env = dict(os.environ)
    env[name] = value
    db = os.path.join(args.out, "ab-%d-%s.db" % (run, value))
    for ext in ("", "-wal", "-shm"):
        if os.path.exists(db + ext):
            os.remove(db + ext)
    cmd = [args.attune, "tune", "--db", db, "--device", args.device, "--screen", "0", "--quiet"]
    for s in shapes:
        cmd += ["--shape", s]
    t0 = time.time()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s=%s: attune tune exited %d:\n%s" % (name, value, p.returncode, p.stdout[-2000:]))
    rows = {}
    for s in shapes:
        r = subprocess.run([args.attune, "results", "--db", db, "--device", args.device, "--shape", s, "--json"],
                           stdout=subprocess.PIPE, text=True, check=True)
        rows[s] = json.loads(r.stdout).get("measurements", [])
    os.remove(db)
    print("run %d: %s=%s, %.1f s" % (run, name, value, time.time() - t0), file=sys.stderr, flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attune", required=True)
    ap.add_argument("--env", required=True, help="NAME=A,B")
    ap.add_argument("--shape", action="append", required=True)
    ap.add_argument("--filter", default="")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--device", default="0")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if "=" not in args.env or args.env.count(",") != 1:
        ap.error("--env wants NAME=A,B")
    name, vals = args.env.split("=", 1)
    a, b = vals.split(",")
    if args.reps < 1:
        ap.error("--reps wants at least 1")
    args.out = args.out or tempfile.mkdtemp(prefix="ab-env-")
    os.makedirs(args.out, exist_ok=True)
    order = []
    for i in range(args.reps):
        order += [a, b] if i % 2 == 0 else [b, a]
    times = {}  # (shape, tactic) -> {value: [us]}
    errs = {}
    with open(os.path.join(args.out, "ab_env.jsonl"), "w") as log:
        for run, v in enumerate(order):
            rows = tune(args, name, v, args.shape, run)
            for s, ms in rows.items():
                for m in ms:
                    t = m.get("tactic", "")
                    if args.filter not in t or m.get("status") != "ok" or m.get("time_us") is None:
                        continue
                    if "changes no length" in (m.get("note") or ""):
                        continue  # a pad twin's copy of another row
                    times.setdefault((s, t), {}).setdefault(v, []).append(m["time_us"])
                    errs.setdefault((s, t), {}).setdefault(v, []).append(m.get("rel_err"))
                    log.write(json.dumps({"run": run, name: v, "shape": s, "tactic": t, "time_us": m["time_us"],
                                          "rel_err": m.get("rel_err")}) + "\n")
    print("| shape | tactic | %s=%s us | %s=%s us | B / A | rel err A | rel err B |" % (name, a, name, b))
    print("|---|---|---|---|---:|---:|---:|")
    for (s, t), tv in sorted(times.items()):
        if a not in tv or b not in tv:
            continue
        ma, mb = statistics.median(tv[a]), statistics.median(tv[b])
        ea = statistics.median(e for e in errs[(s, t)][a] if e is not None)
        eb = statistics.median(e for e in errs[(s, t)][b] if e is not None)
        print("| %s | `%s` | %s | %s | %.3f | %.2e | %.2e |" % (
            s, t, " ".join("%.1f" % x for x in tv[a]), " ".join("%.1f" % x for x in tv[b]), mb / ma, ea, eb))
    return 0


if __name__ == "__main__":
    sys.exit(main())
