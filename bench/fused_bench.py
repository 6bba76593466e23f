#!/usr/bin/env python3
"""fused_bench.py -- PyTorch SDPA on the shapes of bench/fused_bench.cu, and
the device's two ceilings (bf16 GEMM rate, device-to-device copy bandwidth),
for comparison in the same run.

Time: CUDA graph of N back-to-back calls, replayed; each replay timed with
CUDA events; median / N per call. Each SDPA backend is forced in turn
(flash, efficient, cudnn) and also left to PyTorch's own dispatch ("auto").
Causal uses is_causal=True, which PyTorch aligns top-left: equal to attune's
bottom-right alignment where sq == skv; elsewhere the mask is
torch.nn.attention.bias.causal_lower_right (backends that refuse it are
reported unsupported).
"""
import statistics
import sys

import torch
import torch.nn.functional as F

import graphtime  # bench/graphtime.py (this script's directory is on sys.path)
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right

SHAPES = [  # b, hq, hkv, sq, skv, d, dtype, causal
    (2, 16, 16, 8192, 8192, 128, torch.bfloat16, False),
    (2, 16, 16, 8192, 8192, 128, torch.bfloat16, True),
    (1, 8, 1, 968, 968, 256, torch.float16, False),
    (16, 32, 8, 1, 4096, 128, torch.bfloat16, False),
    (1, 8, 1, 50, 1018, 256, torch.float16, False),
    (4, 32, 32, 2048, 2048, 64, torch.float16, True),
    (4, 32, 32, 2048, 2048, 64, torch.float16, False),
    (2, 8, 1, 2048, 2048, 256, torch.bfloat16, True),
    (2, 16, 16, 4096, 4096, 256, torch.bfloat16, False),
    (2, 16, 16, 4096, 4096, 256, torch.bfloat16, True),
    (4, 32, 8, 2048, 2048, 128, torch.bfloat16, True),
    (1, 32, 8, 16, 4096, 128, torch.bfloat16, False),
    (1, 32, 8, 16, 4096, 128, torch.bfloat16, True),
    (8, 8, 1, 64, 2048, 128, torch.bfloat16, False),
    (8, 8, 1, 64, 2048, 128, torch.bfloat16, True),
]


def time_graph(fn, target_ms=2.0, reps=15):
    """Median per-call time (us) of fn via CUDA graph replays."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(3):
        fn()
    e1.record()
    torch.cuda.synchronize()
    n = max(1, min(200, int(target_ms / (e0.elapsed_time(e1) / 3))))
    return statistics.median(graphtime.replay_us(lambda i: fn(), n, reps, warm=3))


def flops(b, hq, hkv, sq, skv, d, causal):
    if not causal:
        pairs = sq * skv
    else:
        off = skv - sq
        pairs = sum(min(skv, max(0, i + off + 1)) for i in range(sq))
    return 4.0 * b * hq * pairs * d


def main():
    filt = sys.argv[1] if len(sys.argv) > 1 else ""
    print("device", torch.cuda.get_device_name(), "torch", torch.__version__)
    # Ceilings.
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    bm = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(8192, 8192, device="cuda", dtype=torch.bfloat16)
    us = time_graph(lambda: torch.matmul(a, bm, out=c))
    print(f"CEILING bf16 GEMM 8192^3: {2 * 8192**3 / us / 1e6:.0f} TFLOP/s")
    del a, bm, c
    x = torch.empty(1 << 30, device="cuda", dtype=torch.uint8)
    y = torch.empty_like(x)
    us = time_graph(lambda: y.copy_(x))
    print(f"CEILING D2D copy 1 GiB: {2 * (1 << 30) / us / 1e3:.0f} GB/s (read + write)")
    del x, y
    torch.cuda.empty_cache()

    for (b, hq, hkv, sq, skv, d, dt, causal) in SHAPES:
        key = f"b{b}.hq{hq}.hkv{hkv}.sq{sq}.skv{skv}.d{d}.{'bf16' if dt == torch.bfloat16 else 'f16'}.{'c' if causal else 'nc'}"
        if filt and not any(f in key for f in filt.split("|")):
            continue
        q = torch.randn(b, hq, sq, d, device="cuda", dtype=dt)
        k = torch.randn(b, hkv, skv, d, device="cuda", dtype=dt)
        v = torch.randn(b, hkv, skv, d, device="cuda", dtype=dt)
        fl = flops(b, hq, hkv, sq, skv, d, causal)
        nbytes = 2 * (2 * q.numel() + 2 * k.numel())
        print(f"\n{key}  {fl / 1e9:.3g} GFLOP")
        best = None
        for name, be in [("auto", None), ("flash", SDPBackend.FLASH_ATTENTION),
                         ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                         ("cudnn", SDPBackend.CUDNN_ATTENTION)]:
            if causal and sq != skv:
                mask = causal_lower_right(sq, skv)
                fn = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=hkv != hq)
            else:
                fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hkv != hq)
            try:
                if be is None:
                    us = time_graph(fn)
                else:
                    with sdpa_kernel([be]):
                        us = time_graph(fn)
            except Exception as e:  # backend refuses the shape
                print(f"  torch {name:10s} unsupported ({str(e).splitlines()[0][:60]})")
                continue
            print(f"  torch {name:10s} {us:9.2f} us  {fl / us / 1e6:6.1f} TFLOP/s  {nbytes / us / 1e3:6.0f} GB/s")
            if best is None or us < best[1]:
                best = (name, us)
        if best:
            print(f"TORCHBEST {key} {best[0]} {best[1]:.2f} us {fl / best[1] / 1e6:.1f} TFLOP/s")


if __name__ == "__main__":
    main()
