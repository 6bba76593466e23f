#!/usr/bin/env python3
"""fp8_parts.py -- one e4m3 tactic through libattune, timed whole, so that
`ncu` can split it into its kernels (issue 30: how much of cuDNN's FP8
tactic is cuDNN's kernel and how much attune's bf16 output step).

    bench/fp8_parts.py [--shape KEY] [--tactic NAME] [--reps 20] [--eager N]

Plans --tactic for --shape (an e4m3 key) on CUDA device 0 through
attune.lib.Plan, on contiguous [b, h, s, d] inputs (random e4m3 patterns
of values in [-1, 1], descales 1 in device memory), and times it as the tuner does: a
CUDA graph of back-to-back runs (about 20 ms of them) replayed between two
events, median of --reps replays; prints us and TFLOP/s. Then runs the
plan --eager times outside any graph, which is what to profile:

    ncu --clock-control none --metrics gpu__time_duration.sum \\
        python3 bench/fp8_parts.py --reps 0 --eager 3

(tests/gpu/run.sh --exec runs such a command on the GPU machine). Needs
torch with CUDA and libattune (ATTUNE_LIB or the build's, as attune.lib
finds it).
"""
import argparse
import os
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "client", "python"))
import attune.lib as al  # noqa: E402
import graphtime  # noqa: E402  (bench/graphtime.py)


def parse_key(key):
    f = key.split(".")
    num = lambda s, p: int(s[len(p):])  # noqa: E731
    b, hq, hkv = num(f[0], "b"), num(f[1], "hq"), num(f[2], "hkv")
    sq, skv, d = num(f[3], "sq"), num(f[4], "skv"), num(f[5], "d")
    if f[6] != "e4m3" or f[7] not in ("c", "nc"):
        raise SystemExit("fp8_parts.py: %s is not an e4m3 shape key" % key)
    return (b, hq, hkv, sq, skv, d, al.DTYPES["e4m3"], int(f[7] == "c"))


def inputs(dims):
    """Random e4m3 patterns of values in [-1, 1) for q, k, v (0x00-0x37 and
    0x80-0xb7), a bf16 out, and descales 1 in device memory (a GPU plan
    reads them there): (tensors to keep alive, the run's views, the
    descales' three addresses)."""
    b, hq, hkv, sq, skv, d, _, _ = dims
    pat = lambda *s: (torch.randint(0, 0x38, s, device="cuda", dtype=torch.uint8)  # noqa: E731
                      | (torch.randint(0, 2, s, device="cuda", dtype=torch.uint8) << 7))
    q, k, v = pat(b, hq, sq, d), pat(b, hkv, skv, d), pat(b, hkv, skv, d)
    o = torch.empty(b, hq, sq, d, device="cuda", dtype=torch.bfloat16)
    dsc = torch.ones(3, device="cuda", dtype=torch.float32)
    view = lambda t: (t.data_ptr(), t.stride(0), t.stride(1), t.stride(2))  # noqa: E731
    return ((q, k, v, o, dsc), (view(q), view(k), view(v), view(o)),
            (dsc.data_ptr(), dsc.data_ptr() + 4, dsc.data_ptr() + 8))


def flops(dims):
    b, hq, _, sq, skv, d, _, causal = dims
    return 4.0 * b * hq * sq * skv * d * (0.5 if causal else 1.0)


def time_graph(plan, args, s, reps, target_us=20000.0):
    """us per run of plan over reps replays of a CUDA graph of back-to-back
    runs lasting about target_us, events around each replay: (the reps
    times, runs per replay)."""
    with torch.cuda.stream(s):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(s)
        plan.run(*args, stream=s.cuda_stream)
        e1.record(s)
    e1.synchronize()
    est = max(e0.elapsed_time(e1) * 1000.0, 1.0)
    iters = max(1, min(1000, int(target_us / est)))
    return graphtime.replay_us(lambda i: plan.run(*args, stream=s.cuda_stream), iters, reps, s), iters


def sweep(a):
    dims = parse_key(a.shape)
    _keep, args, dsc = inputs(dims)
    flop = flops(dims)
    lo, hi = (int(x) for x in a.sweep.split("-"))
    head = a.tactic.split("/kcfg=")[0]
    tail = a.tactic.split("/kcfg=")[1].split("/", 1)[1]
    dev, s, res = al.Device("0"), torch.cuda.Stream(), []
    for kc in range(lo, hi + 1):
        t = "%s/kcfg=%d/%s" % (head, kc, tail)
        try:
            plan = al.Plan(dev, dims, t)
        except al.AttuneError as ex:
            print("kcfg %d: not planned (%s)" % (kc, str(ex)[:100]), flush=True)
            continue
        plan.set_descales(*dsc)
        try:
            times, _ = time_graph(plan, args, s, max(a.reps, 3), 5000.0)
        except al.AttuneError as ex:
            print("kcfg %d: run failed (%s)" % (kc, ex), flush=True)
            continue
        finally:
            plan.close()
        med, mn = statistics.median(times), min(times)
        res.append((med, mn, kc))
        print("kcfg %d: %.1f us (min %.1f), %.0f TFLOP/s" % (kc, med, mn, flop / med / 1e6),
              flush=True)
    for med, mn, kc in sorted(res):
        print("sorted kcfg %d: %.1f us (min %.1f), %.0f TFLOP/s" % (kc, med, mn, flop / med / 1e6))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="b2.hq16.hkv16.sq8192.skv8192.d128.e4m3.nc")
    p.add_argument("--tactic", default="cudnn/eng=2/graph=comp/kcfg=33/pad=1")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--eager", type=int, default=0)
    p.add_argument("--sweep", default="",
                   help="A-B: plan and time cudnn kcfg A..B of --tactic's engine instead "
                        "(those cuDNN refuses are listed with the reason), fastest first")
    a = p.parse_args()
    if a.sweep:
        return sweep(a)
    dims = parse_key(a.shape)
    _keep, args, dsc = inputs(dims)
    plan = al.Plan(al.Device("0"), dims, a.tactic)
    plan.set_descales(*dsc)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        plan.run(*args, stream=s.cuda_stream)
    s.synchronize()
    if a.reps > 0:
        times, iters = time_graph(plan, args, s, a.reps)
        us = statistics.median(times)
        print("%s %s: %.1f us (min %.1f, max %.1f; %d runs a replay, %d replays), %.0f TFLOP/s"
              % (a.shape, a.tactic, us, min(times), max(times), iters, a.reps,
                 flops(dims) / us / 1e6))
    with torch.cuda.stream(s):
        for _ in range(a.eager):
            plan.run(*args, stream=s.cuda_stream)
    s.synchronize()
    plan.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
