#!/usr/bin/env python3
"""bars.py -- the bars of issues 25 and 30, judged from a run's own rows, so
that a peers or FP8 table ends with what it means (bench/peers.py and
bench/fp8_table.py print these lines under their tables).

Issue 25: every anchor at >= 1.00x PyTorch's best path (FlexAttention
among them), their geomean >= 1.20, and the 8k d128 anchors at >= 740
(non-causal) and >= 700 (causal) TFLOP/s. Issue 30: the 8k d128
non-causal anchor in e4m3 at >= 1000 TFLOP/s with its best tactic. The
bars are an H200's: a line says so when the run's device is another.

TFLOP/s count the visible (query, key) pairs (bench/fp8_table.py's flops:
4 b hq pairs d), causal bottom-right as everywhere in attune; judged as
printed, to 0.1 TFLOP/s.

    python3 bench/bars.py peers.json        # the bars of a peers.py run
"""
import json
import math
import sys

from fp8_table import flops

ANCHOR_8K = "b2.hq16.hkv16.sq8192.skv8192.d128"
RATIO_BAR, GEOMEAN_BAR = 1.00, 1.20
TFLOPS_BARS = {ANCHOR_8K + ".bf16.nc": 740.0, ANCHOR_8K + ".bf16.c": 700.0}
E4M3_KEY, E4M3_BAR = ANCHOR_8K + ".e4m3.nc", 1000.0


def verdict(ok):
    return "met" if ok else "missed"


def device_line(device):
    if device and "H200" not in device:
        return [f"(the bars are an H200's; this run's device is {device})"]
    return []


def peers_lines(rows, device=None):
    """Lines judging peers.py's rows (its peers.json "rows"): each with
    "shape", "attune": {"time_us"}, "torch_best": {"time_us", "path"}."""
    ratios = []
    for e in rows:
        a, t = e.get("attune") or {}, e.get("torch_best") or {}
        if a.get("time_us") and t.get("time_us"):
            ratios.append((t["time_us"] / a["time_us"], e["shape"], t.get("path", "?")))
    out = []
    if ratios:
        g = math.exp(sum(math.log(r) for r, _, _ in ratios) / len(ratios))
        low = min(ratios)
        out.append(f"geomean of PyTorch's best time over attune's, {len(ratios)} shapes: {g:.3f} "
                   f"(bar {GEOMEAN_BAR:.2f}: {verdict(g >= GEOMEAN_BAR)})")
        out.append(f"lowest: {low[0]:.3f} on {low[1]} against {low[2]} "
                   f"(bar: every shape >= {RATIO_BAR:.2f}: {verdict(low[0] >= RATIO_BAR)})")
    missing = [e["shape"] for e in rows if not ((e.get("attune") or {}).get("time_us") and
                                                (e.get("torch_best") or {}).get("time_us"))]
    if missing:
        out.append("no ratio (a side has no time): " + ", ".join(missing) + " (the bars are missed)")
    for e in rows:
        bar = TFLOPS_BARS.get(e["shape"])
        us = (e.get("attune") or {}).get("time_us")
        if bar and us:
            tf = round(flops(e["shape"]) / us / 1e6, 1)
            out.append(f"{e['shape']}: {tf:.1f} TFLOP/s (bar {bar:.0f}: {verdict(tf >= bar)})")
    return out + (device_line(device) if out else [])


def e4m3_lines(time_us, tactic, device=None):
    """The issue 30 line for the 8k non-causal e4m3 anchor's best tactic."""
    if not time_us:
        return [f"{E4M3_KEY}: no e4m3 winner (bar {E4M3_BAR:.0f} TFLOP/s: missed)"]
    tf = round(flops(E4M3_KEY) / time_us / 1e6, 1)
    return [f"{E4M3_KEY}: {tf:.1f} TFLOP/s with `{tactic}` "
            f"(bar {E4M3_BAR:.0f}: {verdict(tf >= E4M3_BAR)})"] + device_line(device)


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) == 2 else 2
    try:
        with open(sys.argv[1]) as f:
            run = json.load(f)
        rows = run["rows"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"bars.py: {sys.argv[1]}: not a peers.json ({e})", file=sys.stderr)
        return 1
    for line in peers_lines(rows, run.get("device")):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
