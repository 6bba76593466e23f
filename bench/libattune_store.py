#!/usr/bin/env python3
"""libattune_store.py -- does libattune run each tactic as fast as the tuner
measured it? (issue 24: within 3% of the stored time.)

For every shape of --grid, `attune results --json` gives the rows the tuner
stored on --db for CUDA device 0 (tune them first: `attune tune --db DB
--device 0 --grid GRID --screen 0`, so every tactic is timed fully). Each
`ok` row's tactic is then planned through libattune.so (attune.lib.Plan,
ctypes) and run on contiguous [b, h, s, d] torch tensors the way the tuner
times: a CUDA graph of back-to-back runs (about 2 ms of them) replayed
between two events, median of --reps replays. A tactic the tuner timed
in several placements (stored under 50 us: the tuner's placement_us, and
its note says "mean of N placements") is timed here the same way: on
--placements fresh plans with fresh tensors, after a spacer tensor of a
pseudo-random size and with the earlier ones still held so that the
addresses move, and the means compared; the same code can take two times
some 5% apart depending on where its buffers land (bench/placement.py), so
one placement on each side would compare two draws of that, and the median
of a few flips between the two. The ratio of the first placement alone is
summarized too. The stored time compared is time_us_copies when the row
has one (a padded tactic run through libattune does its copies), else
time_us. Prints a line per tactic and the distribution of the ratio
libattune / stored; exit 1 when a tactic cannot be planned or run.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "client", "python"))
import attune.lib as al  # noqa: E402
import graphtime  # noqa: E402  (bench/graphtime.py)

DT = {"f16": (0, torch.float16), "bf16": (1, torch.bfloat16), "f32": (2, torch.float32)}


def time_plan(plan, dims, reps, est_us, keep):
    """Median replay time of plan on fresh tensors; the tensors are
    appended to keep so that the next placement's land elsewhere."""
    b, hq, hkv, sq, skv, d, dtype, causal = dims
    tdt = [v[1] for v in DT.values() if v[0] == dtype][0]
    q = torch.randn(b, hq, sq, d, device="cuda", dtype=tdt)
    k = torch.randn(b, hkv, skv, d, device="cuda", dtype=tdt)
    v = torch.randn(b, hkv, skv, d, device="cuda", dtype=tdt)
    o = torch.empty_like(q)
    keep.extend((q, k, v, o, plan))
    view = lambda t: (t.data_ptr(), t.stride(0), t.stride(1), t.stride(2))  # noqa: E731
    args = (view(q), view(k), view(v), view(o))
    iters = max(1, min(1000, int(2000.0 / max(est_us, 1e-3))))
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        plan.run(*args, stream=s.cuda_stream)  # warm-up outside the capture
    s.synchronize()
    return statistics.median(graphtime.replay_us(lambda i: plan.run(*args, stream=s.cuda_stream),
                                                 iters, reps, s))


def loaded_libs():
    """The cuBLAS and cuDNN files mapped into this process (torch's, which
    libattune shares: it opens them by soname)."""
    libs = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if "libcublas" in path or "libcudnn.so" in path:
                    libs.add(os.path.realpath(path))
    except OSError:
        pass
    return sorted(libs) or ["(none found)"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--db", required=True)
    p.add_argument("--grid", required=True)
    p.add_argument("--attune", default=os.environ.get("ATTUNE_BIN", "attune"))
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--placements", type=int, default=7,
                   help="fresh plans and tensors a tactic the tuner timed in several places "
                        "is timed on (default 7)")
    p.add_argument("--seed", type=int, default=1, help="of the spacers' sizes")
    p.add_argument("--out", default="libattune-store.jsonl")
    a = p.parse_args()
    dev = al.Device("0")
    print("# libraries in this process (the tuner's are its stack): %s" % " ".join(loaded_libs()))
    ratios, firsts, failed = [], [], 0
    rng = random.Random(a.seed)
    with open(a.out, "w") as out:
        for sh in json.load(open(a.grid))["shapes"]:
            key = "b%d.hq%d.hkv%d.sq%d.skv%d.d%d.%s.%s" % (
                sh["b"], sh["hq"], sh["hkv"], sh["sq"], sh["skv"], sh["d"], sh["dtype"],
                "c" if sh["causal"] else "nc")
            r = subprocess.run([a.attune, "results", "--db", a.db, "--device", "0", "--shape", key,
                                "--json"], capture_output=True, text=True)
            if r.returncode != 0:
                print("FAIL %s: attune results: %s" % (key, r.stderr.strip()))
                failed += 1
                continue
            rows = json.loads(r.stdout)["measurements"]
            dims = (sh["b"], sh["hq"], sh["hkv"], sh["sq"], sh["skv"], sh["d"], DT[sh["dtype"]][0],
                    int(sh["causal"]))
            for row in rows:
                if row.get("status") != "ok":
                    continue
                stored = row.get("time_us_copies") or row["time_us"]
                places = a.placements if "placements" in row.get("note", "") else 1
                try:
                    keep, times = [], []
                    for _ in range(max(1, places)):
                        if places > 1:  # moves what follows: 256 B to 2 MiB
                            keep.append(torch.empty(256 * rng.randint(1, 8192), device="cuda",
                                                    dtype=torch.uint8))
                        plan = al.Plan(dev, dims, row["tactic"])
                        times.append(time_plan(plan, dims, a.reps, stored, keep))
                    for x in keep:
                        if isinstance(x, al.Plan):
                            x.close()
                    del keep
                    us = statistics.fmean(times)
                except Exception as ex:
                    print("FAIL %s %s: %s" % (key, row["tactic"], ex))
                    failed += 1
                    continue
                ratios.append(us / stored)
                firsts.append(times[0] / stored)
                rec = {"shape": key, "tactic": row["tactic"], "stored_us": stored, "libattune_us": us,
                       "libattune_places_us": times,
                       "ratio": us / stored, "kernels_us": row["time_us"], "n": row.get("n"),
                       "note": row.get("note", "")}
                out.write(json.dumps(rec) + "\n")
                # a padded row's stored figure is its kernels' median plus
                # its copies' (tuner.c, time_copies): both shown
                extra = ("  (kernels %.2f + copies %.2f, n %s)" % (
                    row["time_us"], stored - row["time_us"], row.get("n"))
                    if row.get("time_us_copies") else "")
                if len(times) > 1:
                    extra += "  [places %s]" % ", ".join("%.2f" % t for t in times)
                print("%-40s %-52s stored %9.2f us  libattune %9.2f us  %.3f%s"
                      % (key, row["tactic"], stored, us, us / stored, extra), flush=True)
    if ratios:
        rs = sorted(ratios)
        within = sum(1 for x in rs if 0.97 <= x <= 1.03)
        over, under = sum(1 for x in rs if x > 1.03), sum(1 for x in rs if x < 0.97)
        print("\n%d tactics: ratio libattune/stored median %.3f, p90 %.3f, max %.3f, min %.3f; "
              "%d within 3%% either way (%.1f%%), %d over 1.03, %d under 0.97"
              % (len(rs), statistics.median(rs), rs[int(0.9 * (len(rs) - 1))], rs[-1], rs[0],
                 within, 100.0 * within / len(rs), over, under))
        fw = sum(1 for x in firsts if 0.97 <= x <= 1.03)
        print("first placement alone: %d within 3%% either way, max %.3f, min %.3f"
              % (fw, max(firsts), min(firsts)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
