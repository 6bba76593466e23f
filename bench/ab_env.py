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
(the median of its runs). A tactic refused on a side (inaccurate, failed,
unsupported) shows that status and its error instead of times, so a switch
that breaks accuracy is seen, not dropped; rows a pad twin copies (notes
"changes no length") are left out. Prints a Markdown table; the raw rows
go to DIR/ab_env.jsonl. Example (an e4m3 kernel switch on the 8k anchor):

  bench/ab_env.py --attune build/attune --env ATTUNE_SOME_SWITCH=0,1 \\
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


def abba(a, b, reps):
    """The order of the runs: A B, B A, A B, ... (reps pairs)."""
    out = []
    for i in range(reps):
        out += [a, b] if i % 2 == 0 else [b, a]
    return out


def tune(args, name, value, run):
    """One run: a fresh database, the shapes tuned with NAME=value; its
    measurement rows as dicts (run, value, shape, tactic, status, time_us,
    rel_err, note)."""
    env = dict(os.environ)
    env[name] = value
    db = os.path.join(args.out, "ab-%d-%s.db" % (run, value))
    for ext in ("", "-wal", "-shm"):
        if os.path.exists(db + ext):
            os.remove(db + ext)
    cmd = [args.attune, "tune", "--db", db, "--device", args.device, "--screen", "0", "--quiet"]
    for s in args.shape:
        cmd += ["--shape", s]
    t0 = time.time()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s=%s: attune tune exited %d:\n%s" % (name, value, p.returncode, p.stdout[-2000:]))
    rows = []
    for s in args.shape:
        r = subprocess.run([args.attune, "results", "--db", db, "--device", args.device, "--shape", s, "--json"],
                           stdout=subprocess.PIPE, text=True, check=True)
        for m in json.loads(r.stdout).get("measurements", []):
            rows.append({"run": run, "value": value, "shape": s, "tactic": m.get("tactic", ""),
                         "status": m.get("status"), "time_us": m.get("time_us"), "rel_err": m.get("rel_err"),
                         "note": m.get("note") or ""})
    os.remove(db)
    print("run %d: %s=%s, %.1f s" % (run, name, value, time.time() - t0), file=sys.stderr, flush=True)
    return rows


def median_or_none(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def side_cell(rs):
    """One side's cell: its times, or the statuses of a refused side."""
    if rs and all(r["status"] == "ok" and r["time_us"] is not None for r in rs):
        return " ".join("%.1f" % r["time_us"] for r in rs), median_or_none(r["time_us"] for r in rs)
    bad = sorted({r["status"] or "?" for r in rs if r["status"] != "ok"}) or ["not run"]
    return "**" + ", ".join(bad) + "**", None


def table(rows, name, a, b, filt=""):
    """The Markdown lines of the A/B table from tune()'s rows."""
    by = {}
    for r in rows:
        if filt not in r["tactic"] or "changes no length" in r["note"]:
            continue
        by.setdefault((r["shape"], r["tactic"]), {}).setdefault(r["value"], []).append(r)
    out = ["| shape | tactic | %s=%s us | %s=%s us | B / A | rel err A | rel err B |" % (name, a, name, b),
           "|---|---|---|---|---:|---:|---:|"]
    for (s, t), sides in sorted(by.items()):
        ca, ma = side_cell(sides.get(a, []))
        cb, mb = side_cell(sides.get(b, []))
        ea = median_or_none(r["rel_err"] for r in sides.get(a, []))
        eb = median_or_none(r["rel_err"] for r in sides.get(b, []))
        out.append("| %s | `%s` | %s | %s | %s | %s | %s |" % (
            s, t, ca, cb, "%.3f" % (mb / ma) if ma and mb else "", "%.2e" % ea if ea is not None else "",
            "%.2e" % eb if eb is not None else ""))
    return out


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
    if not name or a == b:
        ap.error("--env wants a name and two different values")
    if args.reps < 1:
        ap.error("--reps wants at least 1")
    args.out = args.out or tempfile.mkdtemp(prefix="ab-env-")
    os.makedirs(args.out, exist_ok=True)
    rows = []
    with open(os.path.join(args.out, "ab_env.jsonl"), "w") as log:
        for run, v in enumerate(abba(a, b, args.reps)):
            got = tune(args, name, v, run)
            for r in got:
                log.write(json.dumps(r) + "\n")
            rows += got
    print("\n".join(table(rows, name, a, b, args.filter)))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
        print("ab_env.py: %s" % e, file=sys.stderr)
        sys.exit(1)
