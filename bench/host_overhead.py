#!/usr/bin/env python3
"""host_overhead.py -- what one attention call costs the host (CPU), per
path: a decode loop of a model that is not captured in a CUDA graph waits
for the host, not the GPU, at small batch (bench/e2e_models.py's token
times), so these microseconds are the model's.

    ATTUNE_LIB=.../libattune.so.1 bench/host_overhead.py [--calls 3000] [--profile]

On a small decode shape (GPU time a few us, so the loop is bound by the
host): torch's SDPA; attune.torch.attention; attune.hf.attention_forward
(what attn_implementation="attune" calls); and the layers below them
(the checks, run_bshd, Auto.run, the bare ctypes call), and a Plan of
--tactic run directly (Plan.run, and its bare ctypes call). Each: --calls
calls after a warm-up, wall time of the loop (perf_counter) divided by
the calls, median of 5 loops; the GPU is synchronized after each loop, and
its time for the same calls is printed beside (CUDA events) so a host-bound
loop can be told from a GPU-bound one. --profile: cProfile of the hf path.
Needs torch with CUDA, transformers and libattune.
"""
import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "client", "python"))
import attune.hf as ah  # noqa: E402
import attune.lib as al  # noqa: E402
import attune.torch as at  # noqa: E402


class _Module:
    """What transformers passes as `module`: is_causal is all it reads."""
    is_causal = True


def per_call_us(fn, calls):
    host, dev = [], []
    for _ in range(5):
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        host.append((time.perf_counter() - t) * 1e6 / calls)
        b.record()
        b.synchronize()
        dev.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(host), statistics.median(dev)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--skv", type=int, default=129)
    p.add_argument("--tactic", default="fused_splitkv/pad=1/splits=2/tile=16x64/warps=4",
                   help="the tactic the Plan rows run (the e2e models' decode winner)")
    a = p.parse_args()
    b, hq, hkv, d, skv = 1, 8, 2, 128, a.skv
    dt = torch.bfloat16
    # as transformers hands them over: q a transposed view of [b, s, h, d]
    q = torch.randn(b, 1, hq, d, device="cuda", dtype=dt).transpose(1, 2)
    k = torch.randn(b, hkv, skv, d, device="cuda", dtype=dt)
    v = torch.randn(b, hkv, skv, d, device="cuda", dtype=dt)
    mod = _Module()
    auto = al.auto_for("0")
    dims = (b, hq, hkv, 1, skv, d, 1, 0)
    o = torch.empty(b, 1, hq, d, device="cuda", dtype=dt)
    views = (at._view(q), at._view(k), at._view(v), (o.data_ptr(), o.stride(0), o.stride(2), o.stride(1)))
    stream = torch.cuda.current_stream().cuda_stream
    lib, h = auto._lib, auto._auto
    t = auto._bufs()
    auto.run(dims, *views, stream)  # plans the shape; fills t
    tac, src, planned = auto.prepare(dims, stream)
    plan = al.Plan(al.Device("0"), dims, a.tactic)
    pt = plan._t
    plan.run(*views, 0, 0, stream)
    paths = [
        ("torch sdpa (enable_gqa)", lambda: torch.nn.functional.scaled_dot_product_attention(
            q, k, v, enable_gqa=True)),
        ("attune.torch.attention", lambda: at.attention(q, k, v, enable_gqa=True)),
        ("attune.hf.attention_forward", lambda: ah.attention_forward(mod, q, k, v, None, scaling=None)),
        ("  checks (_why_not)", lambda: at._why_not(q, k, v, None, 0.0, None)),
        ("  run_bshd", lambda: at.run_bshd(q, k, v, False)),
        ("  Auto.run", lambda: auto.run(dims, *views, stream)),
        ("  attune_auto_run (ctypes)", lambda: lib.attune_auto_run(h, t.dims, t.q, t.k, t.v, t.o, stream,
                                                                  t.err, 256)),
        ("  Plan.run (%s)" % a.tactic, lambda: plan.run(*views, 0, 0, stream)),
        ("  attune_plan_run (ctypes)", lambda: lib.attune_plan_run(plan.handle, *pt, 0, 0, stream)),
        ("  torch.empty", lambda: torch.empty((b, 1, hq, d), dtype=dt, device=q.device)),
        ("  current_stream", lambda: torch.cuda.current_stream(q.device).cuda_stream),
    ]
    print("# host_overhead.py: %s, torch %s, b%d.hq%d.hkv%d.sq1.skv%d.d%d bf16, %d calls a loop"
          % (torch.cuda.get_device_name(0), torch.__version__, b, hq, hkv, skv, d, a.calls))
    print("# attune_auto runs %s (%s, planned %s)" % (tac, src, planned))
    for name, fn in paths:
        fn()
        hu, du = per_call_us(fn, a.calls)
        print("%-30s host %7.2f us/call   (loop on the GPU %7.2f us/call)" % (name, hu, du))
    if a.profile:
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(a.calls):
            ah.attention_forward(mod, q, k, v, None, scaling=None)
        pr.disable()
        torch.cuda.synchronize()
        pstats.Stats(pr).sort_stats("tottime").print_stats(18)
    return 0


if __name__ == "__main__":
    sys.exit(main())
