#!/usr/bin/env python3
"""tactics_time.py -- every tactic of a shape through libattune, timed with
the L2 warm (one input set, as `attune tune` stores) and cold (input sets
rotated), so that a decode shape whose keys fit in L2 is seen as a model
runs it: each layer's KV cache is a different tensor.

    bench/tactics_time.py KEY [KEY...] [--tactics all|NAME,NAME] [--run-skv N]
                          [--sets N] [--reps 15] [--eager N]

KEY is a shape key (b8.hq32.hkv8.sq1.skv2560.d128.bf16.nc; f16, bf16, f32
and e4m3). Each tactic is planned for KEY on CUDA device 0 and run on
contiguous [b, h, s, d] random inputs; --run-skv runs a plan made for KEY
at a shorter key length (a bucketed decode plan, as attune_auto runs it).
Times: a CUDA graph of back-to-back runs (about 10 ms of them) replayed
between events, median of --reps replays, per run; "warm": every run on
one input set; "cold": runs cycle over --sets input sets (default: enough
sets for 3x the device's L2). Prints us, TB/s of the bytes a run must
move (q, k, v read once, o written once) and TFLOP/s, fastest cold first.
--eager N then runs each tactic N times outside graphs (for ncu; --reps 0
times nothing).
Needs torch with CUDA and libattune (ATTUNE_LIB or the build's).
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

TORCH_DT = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


def parse_key(key):
    f = key.split(".")
    try:
        num = lambda s, p: int(s[len(p):]) if s.startswith(p) else int("x")  # noqa: E731
        dims = (num(f[0], "b"), num(f[1], "hq"), num(f[2], "hkv"), num(f[3], "sq"),
                num(f[4], "skv"), num(f[5], "d"), al.DTYPES[f[6]], int(f[7] == "c"))
        if f[7] not in ("c", "nc") or len(f) != 8:
            raise ValueError
    except (ValueError, KeyError, IndexError):
        raise SystemExit("tactics_time.py: '%s' is not a shape key like "
                         "b8.hq32.hkv8.sq1.skv2560.d128.bf16.nc" % key)
    return dims, f[6]


def make_set(dims, dt, skv):
    b, hq, hkv, sq, _, d, _, _ = dims
    if dt == "e4m3":
        pat = lambda *s: (torch.randint(0, 0x38, s, device="cuda", dtype=torch.uint8)  # noqa: E731
                          | (torch.randint(0, 2, s, device="cuda", dtype=torch.uint8) << 7))
        q, k, v = pat(b, hq, sq, d), pat(b, hkv, skv, d), pat(b, hkv, skv, d)
        o = torch.empty(b, hq, sq, d, device="cuda", dtype=torch.bfloat16)
    else:
        t = TORCH_DT[dt]
        q = torch.randn(b, hq, sq, d, device="cuda", dtype=t)
        k = torch.randn(b, hkv, skv, d, device="cuda", dtype=t)
        v = torch.randn(b, hkv, skv, d, device="cuda", dtype=t)
        o = torch.empty(b, hq, sq, d, device="cuda", dtype=t)
    view = lambda x: (x.data_ptr(), x.stride(0), x.stride(1), x.stride(2))  # noqa: E731
    return (q, k, v, o), (view(q), view(k), view(v), view(o))


def set_bytes(keep):
    return sum(x.numel() * x.element_size() for x in keep)


def time_graph(plan, sets, s, reps, sq, skv, target_us=10000.0):
    """Median us per run: a graph of back-to-back runs cycling over sets."""
    run = lambda i: plan.run(*sets[i % len(sets)][1], sq=sq, skv=skv, stream=s.cuda_stream)  # noqa: E731
    with torch.cuda.stream(s):
        for i in range(len(sets)):
            run(i)
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(s)
        for i in range(len(sets)):
            run(i)
        e1.record(s)
    e1.synchronize()
    est = max(e0.elapsed_time(e1) * 1000.0 / len(sets), 1.0)
    iters = max(len(sets), min(2000, int(target_us / est)))
    return statistics.median(graphtime.replay_us(run, iters, reps, s))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("keys", nargs="+")
    p.add_argument("--tactics", default="all")
    p.add_argument("--run-skv", type=int, default=0)
    p.add_argument("--sets", type=int, default=0)
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--eager", type=int, default=0)
    p.add_argument("--top", type=int, default=0, help="print only the N fastest (cold)")
    a = p.parse_args()
    dev = al.Device("0")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    s = torch.cuda.Stream()
    for key in a.keys:
        dims, dt = parse_key(key)
        b, hq, hkv, sq, skv, d, _, causal = dims
        rskv = a.run_skv or skv
        if rskv > skv:
            raise SystemExit("tactics_time.py: --run-skv %d over the key's skv %d" % (rskv, skv))
        first = make_set(dims, dt, rskv)
        nb = set_bytes(first[0])
        nsets = a.sets or max(2, -(-3 * l2 // nb))
        sets = [first] + [make_set(dims, dt, rskv) for _ in range(nsets - 1)]
        # causal (bottom-right): query i sees rskv - sq + i + 1 keys
        seen = sq * rskv - (sq * (sq - 1) / 2.0 if sq <= rskv else 0.0) if causal else sq * rskv
        flop = 4.0 * b * hq * seen * d
        names = dev.tactics(dims) if a.tactics == "all" else a.tactics.split(",")
        print("%s run at skv %d: %d tactics, %.1f MB a run, %d sets cold (L2 %.0f MB)"
              % (key, rskv, len(names), nb / 1e6, nsets, l2 / 1e6), flush=True)
        res = []
        for t in names:
            plan = None
            try:
                plan = al.Plan(dev, dims, t)
                if dt == "e4m3":
                    dsc = torch.ones(3, device="cuda", dtype=torch.float32)
                    plan.set_descales(dsc.data_ptr(), dsc.data_ptr() + 4, dsc.data_ptr() + 8)
                warm = cold = 0.0
                if a.reps > 0:
                    warm = time_graph(plan, sets[:1], s, a.reps, sq, a.run_skv)
                    cold = time_graph(plan, sets, s, a.reps, sq, a.run_skv)
                with torch.cuda.stream(s):
                    for i in range(a.eager):
                        plan.run(*sets[i % len(sets)][1], sq=sq, skv=a.run_skv,
                                 stream=s.cuda_stream)
                s.synchronize()
            except al.AttuneError as ex:
                print("  %-60s failed: %s" % (t, str(ex)[:120]), flush=True)
                continue
            finally:
                if plan is not None:
                    plan.close()
            res.append((cold, warm, t))
        res.sort()
        for cold, warm, t in (res[:a.top or len(res)] if a.reps > 0 else []):
            print("  %-60s cold %8.1f us %5.2f TB/s %6.1f TFLOP/s | warm %8.1f us %5.2f TB/s"
                  % (t, cold, nb / cold / 1e6, flop / cold / 1e6, warm, nb / warm / 1e6), flush=True)
        del sets, first  # the next key's sets are made without these alive
    dev.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
