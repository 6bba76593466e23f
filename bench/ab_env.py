#!/usr/bin/env python3
"""ab_env.py -- an environment switch of the kernels, A against B (and C...),
by the tuner's own protocol.

usage: ab_env.py --attune PATH --env NAME=A,B[,C...] --shape KEY [--shape KEY...]
                 [--filter TEXT] [--only TEXT[,TEXT...]] [--reps N] [--device ID]
                 [--out DIR]

Tunes the shapes with `attune tune --screen 0` (every tactic fully timed)
into a fresh database per run, NAME set to each value in turn, forward
then backward (A B, B A, A B, ...; A B C, C B A, ... for three: a steady
drift of the GPU's clock over the runs weighs on every side alike),
--reps rounds in all, each run a new process. The value `-` leaves NAME
unset (the default). Then, per shape and tactic whose name holds TEXT, per
value: every run's stored kernel time, or its status where the tuner did
not store it ok (inaccurate, failed: a switch that breaks accuracy, or a
tactic right in some runs only, is seen, not dropped); the median of its
ok runs; each later value's median over the first's (B / A); and the
relative error of each value (the median of its runs). Rows a pad twin
copies (notes "changes no length") are left out. Prints a Markdown
table; the raw rows go to DIR/ab_env.jsonl. --only passes `attune tune
--only` on: only the tactics so named are tuned (a shorter run; the
others' rows are absent, not timed). Examples: an e4m3 kernel
switch on the 8k anchor; cuDNN's workspace unset, poisoned and zeroed:

  bench/ab_env.py --attune build/attune --env ATTUNE_SOME_SWITCH=0,1 \\
      --shape b2.hq16.hkv16.sq8192.skv8192.d128.e4m3.nc --filter sm90a
  bench/ab_env.py --attune build/attune --env ATTUNE_CUDNN_WS_FILL=-,nan,zero \\
      --reps 3 --shape b2.hq16.hkv16.sq8192.skv8192.d128.e4m3.nc --filter cudnn
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

UNSET = "-"


def run_order(values, reps):
    """The order of the runs: the values forward, then backward, ... (reps
    rounds)."""
    out = []
    for i in range(reps):
        out += list(values) if i % 2 == 0 else list(reversed(values))
    return out


def drop_db(db):
    for ext in ("", "-wal", "-shm"):
        if os.path.exists(db + ext):
            os.remove(db + ext)


def tune_fresh(attune, device, shapes, env, db, only=None):
    """`attune tune --screen 0` of shapes into a fresh database db under
    env (every tactic fully timed; only: `--only only`, those tactics
    alone), then the db removed; ([(shape,
    measurement dict of `attune results --json`)], tune's stderr).
    Raises RuntimeError when the tune fails. Also bench/cudnn_knobs.py's."""
    drop_db(db)
    cmd = [attune, "tune", "--db", db, "--device", device, "--screen", "0", "--quiet"]
    if only:
        cmd += ["--only", only]
    for s in shapes:
        cmd += ["--shape", s]
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        drop_db(db)
        raise RuntimeError("attune tune exited %d:\n%s" % (p.returncode, (p.stdout + p.stderr)[-2000:]))
    out = []
    try:
        for s in shapes:
            r = subprocess.run([attune, "results", "--db", db, "--device", device, "--shape", s, "--json"],
                               stdout=subprocess.PIPE, text=True, check=True)
            out += [(s, m) for m in json.loads(r.stdout).get("measurements", [])]
    finally:
        drop_db(db)
    return out, p.stderr


def tune(args, name, value, run):
    """One run: a fresh database, the shapes tuned with NAME=value (unset
    for UNSET); its measurement rows as dicts (run, value, shape, tactic,
    status, time_us, rel_err, note)."""
    env = dict(os.environ)
    env.pop(name, None)
    if value != UNSET:
        env[name] = value
    t0 = time.time()
    try:
        ms, _ = tune_fresh(args.attune, args.device, args.shape, env, os.path.join(args.out, "ab-%d.db" % run),
                            args.only)
    except RuntimeError as e:
        raise RuntimeError("%s=%s: %s" % (name, value, e))
    rows = [{"run": run, "value": value, "shape": s, "tactic": m.get("tactic", ""), "status": m.get("status"),
             "time_us": m.get("time_us"), "rel_err": m.get("rel_err"), "note": m.get("note") or ""}
            for s, m in ms]
    print("run %d: %s=%s, %.1f s" % (run, name, value, time.time() - t0), file=sys.stderr, flush=True)
    return rows


def median_or_none(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def is_ok(r):
    return r["status"] == "ok" and r["time_us"] is not None


def side_cell(rs):
    """One value's cell: each run's time, or its status where it was not
    stored ok (bold), in run order; and the median of its ok runs."""
    if not rs:
        return "not run", None
    cells = ["%.1f" % r["time_us"] if is_ok(r) else "**%s**" % (r["status"] or "?")
             for r in sorted(rs, key=lambda r: r["run"])]
    return " ".join(cells), median_or_none(r["time_us"] for r in rs if is_ok(r))


def table(rows, name, values, filt=""):
    """The Markdown lines of the table from tune()'s rows: per (shape,
    tactic), each value's cell, each later value's median over the first
    value's, and each value's median error."""
    by = {}
    for r in rows:
        if filt not in r["tactic"] or "changes no length" in r["note"]:
            continue
        by.setdefault((r["shape"], r["tactic"]), {}).setdefault(r["value"], []).append(r)
    a = values[0]
    head = ["shape", "tactic"] + ["%s=%s us" % (name, v) for v in values]
    head += ["%s / %s" % (v, a) for v in values[1:]] + ["rel err %s" % v for v in values]
    out = ["| " + " | ".join(head) + " |",
           "|---|---|" + "---|" * len(values) + "---:|" * (len(values) - 1) + "---:|" * len(values)]
    for (s, t), sides in sorted(by.items()):
        cells, meds = [], []
        for v in values:
            c, m = side_cell(sides.get(v, []))
            cells.append(c)
            meds.append(m)
        ratios = ["%.3f" % (m / meds[0]) if m and meds[0] else "" for m in meds[1:]]
        errs = []
        for v in values:
            e = median_or_none(r["rel_err"] for r in sides.get(v, []))
            errs.append("%.2e" % e if e is not None else "")
        out.append("| " + " | ".join([s, "`%s`" % t] + cells + ratios + errs) + " |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attune", required=True)
    ap.add_argument("--env", required=True, help="NAME=A,B[,C...] (- leaves NAME unset)")
    ap.add_argument("--shape", action="append", required=True)
    ap.add_argument("--filter", default="")
    ap.add_argument("--only", default=None, help="tune only these tactics (attune tune --only)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--device", default="0")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if "=" not in args.env:
        ap.error("--env wants NAME=A,B[,C...]")
    name, vals = args.env.split("=", 1)
    values = vals.split(",")
    if not name or len(values) < 2 or len(set(values)) != len(values):
        ap.error("--env wants a name and two or more different values")
    if args.reps < 1:
        ap.error("--reps wants at least 1")
    args.out = args.out or tempfile.mkdtemp(prefix="ab-env-")
    os.makedirs(args.out, exist_ok=True)
    rows = []
    with open(os.path.join(args.out, "ab_env.jsonl"), "w") as log:
        for run, v in enumerate(run_order(values, args.reps)):
            got = tune(args, name, v, run)
            for r in got:
                log.write(json.dumps(r) + "\n")
            rows += got
    print("\n".join(table(rows, name, values, args.filter)))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
        print("ab_env.py: %s" % e, file=sys.stderr)
        sys.exit(1)
