#!/usr/bin/env python3
"""cudnn_tune_time.py -- wall time of `attune tune` per shape, cold and warm.

Issue 8 asks that tuning an anchor shape with the cudnn tactics included
stays under 5 s on the H200, plan building counted. What a first tune pays
for is cuDNN compiling its runtime engines' kernels; the CUDA driver keeps
what it compiles in its JIT cache (CUDA_CACHE_PATH, ~/.nv/ComputeCache by
default), so a second process finds them. For each shape of the grid this
tunes the shape in a new process with a new database:

  cold  CUDA_CACHE_PATH = CACHE/<shape>, emptied first: nothing compiled
  warm  the same folder as the cold run left it

and prints, per run: wall seconds, the winner and its time, the rows by
status, the cudnn rows that ran, the longest cudnn plan build reported in
the notes and how many plans builder threads built ahead, and where the
tuner's time went (attune tune's per-shape breakdown: prepare, plan, check,
screen, full timing, store; tactics screened and screened out). Every
failed or inaccurate row is listed (plans built while other variants are
timed must not disturb them). One JSON object per run is appended to --out.
--tune-args passes options to `attune tune` (e.g. "--screen 0": every
tactic fully timed, the protocol before screening).

usage: cudnn_tune_time.py --attune BUILD/attune --grid grids/anchors.json
           --cache DIR --out FILE [--mode cold|warm] [--only 0,3]
           [--env NAME=VALUE ...] [--label TEXT] [--log FILE] [--device ID]
           [--tune-args "ARGS"]
"""

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

DEVICE = "0"
TUNE_ARGS = []
PHASES = re.compile(r"(\d+) screened \((\d+) screened out\), (\d+) fully timed; seconds in "
                    r"prepare ([\d.]+), plan ([\d.]+), check ([\d.]+), screen ([\d.]+), "
                    r"time ([\d.]+), store ([\d.]+)")


def phases(stderr):
    """attune tune's breakdown line of the shape, as a dict ({} if none)."""
    m = PHASES.search(stderr)
    if not m:
        return {}
    keys = ["screened", "screened_out", "full", "prepare_s", "plan_s", "check_s", "screen_s",
            "time_s", "store_s"]
    return {k: (int(v) if i < 3 else float(v)) for i, (k, v) in enumerate(zip(keys, m.groups()))}


def shape_keys(grid):
    with open(grid) as f:
        g = json.load(f)
    return ["b%d.hq%d.hkv%d.sq%d.skv%d.d%d.%s.%s" % (
        x["b"], x["hq"], x["hkv"], x["sq"], x["skv"], x["d"], x["dtype"],
        "c" if x["causal"] else "nc") for x in g["shapes"]]


def tune_once(attune, key, env, log):
    """One `attune tune` of key in a new database: (wall s, results dict)."""
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "t.db")
        t0 = time.monotonic()
        p = subprocess.run([attune, "tune", "--db", db, "--device", DEVICE, "--shape", key]
                           + TUNE_ARGS, env=env, capture_output=True, text=True)
        wall = time.monotonic() - t0
        if log:
            log.write(p.stderr)
        if p.returncode != 0:
            return wall, {"error": "tune exit %d: %s" % (p.returncode, p.stderr[-500:])}
        r = subprocess.run([attune, "results", "--db", db, "--device", DEVICE, "--shape", key,
                            "--json"], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            return wall, {"error": "results exit %d" % r.returncode}
        res = json.loads(r.stdout)
        res["phases"] = phases(p.stderr)
        return wall, res


def summarize(res):
    if "error" in res:
        return {"error": res["error"]}
    ms = res["measurements"]
    by = {}
    for m in ms:
        by[m["status"]] = by.get(m["status"], 0) + 1
    win = next((m for m in ms if m.get("winner")), None)
    builds = [float(x) for m in ms for x in re.findall(r"plan built in (\d+) ms", m["note"] or "")]
    return {
        "winner": win["tactic"] if win else None,
        "winner_us": win["time_us_paid"] if win else None,
        "status": by,
        "cudnn_ok": sum(1 for m in ms if m["variant"] == "cudnn" and m["status"] == "ok"),
        "cudnn_rows": sum(1 for m in ms if m["variant"] == "cudnn"),
        "max_build_ms": max(builds) if builds else 0,
        "built_ahead": sum(1 for m in ms if "builder thread" in (m["note"] or "")),
        "bad": [(m["tactic"], m["status"], m["note"]) for m in ms
                if m["status"] in ("failed", "inaccurate")],
        "best_per_variant": best_per_variant(ms),
        "screened_out": sum(1 for m in ms if (m["note"] or "").startswith("screened out")),
        "phases": res.get("phases", {}),
    }


def best_per_variant(ms):
    best = {}
    for m in ms:
        if m["status"] != "ok" or m["time_us_paid"] is None:
            continue
        v = m["variant"] + ("/sm90a" if "arch=sm90a" in m["tactic"] else "")
        if v not in best or m["time_us_paid"] < best[v]:
            best[v] = round(m["time_us_paid"], 2)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attune", required=True)
    ap.add_argument("--grid", required=True)
    ap.add_argument("--cache", required=True, help="folder of per-shape CUDA JIT caches")
    ap.add_argument("--out", required=True, help="JSON lines, appended")
    ap.add_argument("--mode", choices=["cold", "warm"], default="cold")
    ap.add_argument("--only", help="comma-separated shape indices")
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for attune")
    ap.add_argument("--label", default="")
    ap.add_argument("--log", help="append attune's stderr here")
    ap.add_argument("--device", default="0", help="attune's device (default 0)")
    ap.add_argument("--tune-args", default="", help="options for attune tune, e.g. '--screen 0'")
    a = ap.parse_args()
    global DEVICE, TUNE_ARGS
    DEVICE = a.device
    TUNE_ARGS = shlex.split(a.tune_args)
    keys = shape_keys(a.grid)
    idx = [int(i) for i in a.only.split(",")] if a.only else range(len(keys))
    log = open(a.log, "a") if a.log else None
    with open(a.out, "a") as out:
        for i in idx:
            key = keys[i]
            cache = os.path.join(a.cache, key)
            if a.mode == "cold":
                shutil.rmtree(cache, ignore_errors=True)
            os.makedirs(cache, exist_ok=True)
            env = dict(os.environ, CUDA_CACHE_PATH=cache)
            for kv in a.env:
                k, v = kv.split("=", 1)
                env[k] = v
            if log:
                log.write("==== %s %s %s %s\n" % (a.label, a.mode, key, " ".join(a.env)))
                log.flush()
            wall, res = tune_once(a.attune, key, env, log)
            s = summarize(res)
            s.update({"shape": key, "mode": a.mode, "label": a.label, "env": a.env,
                      "tune_args": a.tune_args,
                      "wall_s": round(wall, 2)})
            out.write(json.dumps(s) + "\n")
            out.flush()
            print("%-8s %-5s %-42s %5.2f s  %s %s us  cudnn %s/%s ok  build max %s ms, %s ahead  %s"
                  % (a.label, a.mode, key, wall, s.get("winner"), s.get("winner_us") and
                     round(s["winner_us"], 1), s.get("cudnn_ok"), s.get("cudnn_rows"),
                     s.get("max_build_ms"), s.get("built_ahead"),
                     s.get("status", s.get("error"))), flush=True)
            ph = s.get("phases") or {}
            if ph:
                print("    %d screened (%d out), %d fully timed; s: prepare %.2f plan %.2f "
                      "check %.2f screen %.2f time %.2f store %.2f"
                      % tuple(ph[k] for k in ("screened", "screened_out", "full", "prepare_s",
                                              "plan_s", "check_s", "screen_s", "time_s",
                                              "store_s")), flush=True)
            for b in s.get("bad", []):
                print("    %s %s: %s" % b, flush=True)
    if log:
        log.close()


if __name__ == "__main__":
    sys.exit(main())
