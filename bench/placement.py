#!/usr/bin/env python3
"""placement.py -- does a small call's time depend on where its buffers
lie? (issue 24: a few tactics ran 4-8% apart through libattune and in the
tuner, the same rows on every run.)

For each tactic of --tactics on --shape, --placements times: q, k, v
and o carved from one pool at random 256-byte-aligned gaps of up to
--spacer-mb MiB between them, and a fresh libattune plan (its own
buffers after a cudaMalloc'd spacer of up to --plan-spacer-mb MiB),
timed twice the way bench/libattune_store.py times (CUDA graph of
back-to-back runs, median of --reps replays). The two timings of one
placement give the noise; the spread over placements gives what the
placement adds. Prints a line per placement, then one per tactic: the
median, min and max over placements, and the median |a-b|/a within one.

On the GPU machine (bench/placement-h200-20261204.txt holds a run):
    tests/gpu/run.sh --no-tests --exec 'export ATTUNE_LIB=$BUILD/libattune.so.1;
        python3 bench/placement.py --shape b2.hq8.hkv2.sq77.skv300.d128.f16.c
        --tactics folded/acc=f16/pad=1'
"""
import argparse
import ctypes
import os
import random
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "client", "python"))
import attune.lib as al  # noqa: E402
import graphtime  # noqa: E402

CUDART = None  # libcudart, as torch loaded it (main)
DT = {"f16": (0, torch.float16), "bf16": (1, torch.bfloat16), "f32": (2, torch.float32)}


def parse_key(key):
    f = key.split(".")
    num = lambda s, p: int(s[len(p):])  # noqa: E731
    b, hq, hkv, sq, skv, d = (num(f[0], "b"), num(f[1], "hq"), num(f[2], "hkv"), num(f[3], "sq"),
                              num(f[4], "skv"), num(f[5], "d"))
    return (b, hq, hkv, sq, skv, d, f[6], f[7] == "c")


def carve(pool, at, shape, dt):
    """A tensor of shape at byte offset `at` of pool (uint8), filled."""
    n = 1
    for x in shape:
        n *= x
    es = torch.tensor([], dtype=dt).element_size()
    t = pool[at:at + n * es].view(dt).view(*shape)
    t.copy_(torch.randn(*shape, device="cuda", dtype=dt))
    return t, at + n * es


def time_once(dev, dims, dt, tactic, reps, iters, pool, rng, gap, plan_gap):
    b, hq, hkv, sq, skv, d, code, causal = dims
    at = 0
    ts = []
    for shape in ((b, hq, sq, d), (b, hkv, skv, d), (b, hkv, skv, d), (b, hq, sq, d)):
        at += rng.randrange(0, gap // 256 + 1) * 256  # 256-byte aligned, as cudaMalloc
        t, at = carve(pool, at, shape, dt)
        ts.append(t)
    q, k, v, o = ts
    # the plan's own buffers (its copies, split partials, cuBLAS workspace:
    # cudaMalloc'd as it is made) land after a spacer of random size
    spacer = ctypes.c_void_p()
    if plan_gap > 0:
        size = rng.randrange(1, plan_gap // 256 + 2) * 256
        CUDART.cudaMalloc(ctypes.byref(spacer), ctypes.c_size_t(size))
    plan = al.Plan(dev, (b, hq, hkv, sq, skv, d, code, int(causal)), tactic)
    view = lambda t: (t.data_ptr(), t.stride(0), t.stride(1), t.stride(2))  # noqa: E731
    args = (view(q), view(k), view(v), view(o))
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        plan.run(*args, stream=s.cuda_stream)
    s.synchronize()
    out = []
    for _ in range(2):
        out.append(statistics.median(graphtime.replay_us(
            lambda i: plan.run(*args, stream=s.cuda_stream), iters, reps, s)))
    plan.close()
    if spacer.value:
        CUDART.cudaFree(spacer)
    return out, q.data_ptr()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", required=True)
    p.add_argument("--tactics", required=True, help="comma-separated tactic names")
    p.add_argument("--placements", type=int, default=8)
    p.add_argument("--spacer-mb", type=float, default=16.0)
    p.add_argument("--plan-spacer-mb", type=float, default=0.0,
                   help="also cudaMalloc a random 0..N MiB before each plan (moves the plan's own "
                        "buffers); 0: not")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    global CUDART
    torch.cuda.init()
    mapped = [ln.split()[-1] for ln in open("/proc/self/maps") if "libcudart.so" in ln]
    CUDART = ctypes.CDLL(mapped[0] if mapped else "libcudart.so.13")
    dev = al.Device("0")
    b, hq, hkv, sq, skv, d, dts, causal = parse_key(a.shape)
    code, dt = DT[dts]
    rng = random.Random(a.seed)
    gap = int(a.spacer_mb * (1 << 20))
    plan_gap = int(a.plan_spacer_mb * (1 << 20))
    es = torch.tensor([], dtype=dt).element_size()
    pool = torch.empty(4 * gap + 2 * (b * hq * sq * d + 2 * b * hkv * skv * d) * es + 4096,
                       device="cuda", dtype=torch.uint8)
    for tactic in a.tactics.split(","):
        per, within = [], []
        for _ in range(a.placements):
            (t0, t1), addr = time_once(dev, (b, hq, hkv, sq, skv, d, code, causal), dt, tactic,
                                       a.reps, a.iters, pool, rng, gap, plan_gap)
            per.append(t0)
            within.append(abs(t1 - t0) / t0)
            print("  %-60s q at %#x: %.2f, %.2f us" % (tactic, addr, t0, t1), flush=True)
        print("%-60s over %d placements: median %.2f us, min %.2f, max %.2f (spread %.1f%%); "
              "within one placement median %.2f%%" % (
                  tactic, len(per), statistics.median(per), min(per), max(per),
                  100 * (max(per) - min(per)) / min(per), 100 * statistics.median(within)),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
