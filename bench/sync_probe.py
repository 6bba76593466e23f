#!/usr/bin/env python3
"""sync_probe.py -- does a call wait for the GPU? The host time of 32
attention calls of a Llama-3-8B prefill layer (b8, 32 query / 8 KV heads,
2048 tokens, d 128, bf16, causal; q a [b, s, h, d] view as transformers
hands it, out [b, s, h, d]) issued while 30 products of 8192 x 8192
matrices are queued ahead of them on the same stream (150 ms on the H200;
the script prints it): a call that synchronizes (a cudaStreamSynchronize,
a cudaMalloc/cudaFree, a device-to-host copy) makes the host wait for the
queue, so the 32 calls take most of that in host time instead of their
launch cost. Then the GPU time of the 32 calls
alone (events, eagerly launched, the queue empty). For: torch's SDPA,
attune's Plan.run of --tactic (what the e2e Llama prefill ran), and
attune.torch.run_bshd (attune_auto: the daemon at ATTUNE_URL, or the
default tactic when none answers).

    ATTUNE_LIB=build/libattune.so.1 python3 bench/sync_probe.py [--tactic T]
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "client", "python"))
import attune.lib as al  # noqa: E402
import attune.torch as at  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tactic", default="cudnn/eng=2/graph=comp/kcfg=0/pad=1")
    p.add_argument("--calls", type=int, default=32)
    a = p.parse_args()
    b, hq, hkv, s, d = 8, 32, 8, 2048, 128
    bf = torch.bfloat16
    q = torch.randn(b, s, hq, d, device="cuda", dtype=bf).transpose(1, 2)
    k = torch.randn(b, hkv, s, d, device="cuda", dtype=bf)
    v = torch.randn(b, hkv, s, d, device="cuda", dtype=bf)
    out = torch.empty(b, s, hq, d, device="cuda", dtype=bf)
    stream = torch.cuda.current_stream().cuda_stream
    view = lambda x: (x.data_ptr(), x.stride(0), x.stride(1), x.stride(2))  # noqa: E731
    ov = (out.data_ptr(), out.stride(0), out.stride(2), out.stride(1))
    dims = (b, hq, hkv, s, s, d, al.DTYPES["bf16"], 1)
    plan = al.Plan(al.Device("0"), dims, a.tactic)
    plan.set_views(view(q), view(k), view(v), ov, stream)
    fns = {
        "torch sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
        "attune Plan.run %s" % a.tactic: lambda: plan.run(view(q), view(k), view(v), ov, stream=stream),
        "attune.torch.run_bshd (auto)": lambda: at.run_bshd(q, k, v, True),
    }
    big = torch.randn(8192, 8192, device="cuda", dtype=bf)
    for fn in fns.values():  # warm-up: plans, graphs, handles
        fn()
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(30):
        big @ big
    torch.cuda.synchronize()
    queue_ms = (time.perf_counter() - t0) * 1e3
    print("# %s, torch %s; %d calls; queue ahead: %.1f ms of matrix products" % (
        torch.cuda.get_device_name(), torch.__version__, a.calls, queue_ms))
    for name, fn in fns.items():
        host = []
        for _ in range(5):
            torch.cuda.synchronize()
            for _ in range(30):
                big @ big
            t = time.perf_counter()
            for _ in range(a.calls):
                fn()
            host.append((time.perf_counter() - t) * 1e3)
            torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        gpu = []
        for _ in range(5):
            torch.cuda.synchronize()
            e0.record()
            for _ in range(a.calls):
                fn()
            e1.record()
            e1.synchronize()
            gpu.append(e0.elapsed_time(e1))
        print("%-60s host %8.2f ms (%s)   GPU %8.2f ms" % (
            name, statistics.median(host), "waits for the GPU" if statistics.median(host) > queue_ms / 2
            else "no wait", statistics.median(gpu)))


if __name__ == "__main__":
    main()
