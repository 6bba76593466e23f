#!/usr/bin/env python3
"""it_bench_bars.py -- bench/bars.py, the issues' bars judged from a run's
rows: the geomean and the lowest ratio, a shape with no ratio, the 8k
anchors' TFLOP/s at and just under their bars, the device line, the e4m3
bar, and the lines bench/fp8_table.py and bars.py's command line print."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "bench")
sys.path.insert(0, BENCH)
import bars  # noqa: E402
from fp8_table import flops  # noqa: E402

from checklib import check, summary  # noqa: E402  (tests/checklib.py)

NC, C = bars.ANCHOR_8K + ".bf16.nc", bars.ANCHOR_8K + ".bf16.c"


def row(shape, ours, theirs, path="sdpa_cudnn"):
    return {"shape": shape, "attune": {"time_us": ours}, "torch_best": {"time_us": theirs, "path": path}}


def at(shape, tflops):
    """attune's time on shape at tflops TFLOP/s."""
    return flops(shape) / tflops / 1e6


def main():
    # 8k d128: 2 x 16 heads x 8192^2 pairs x 128 x 4 flops; causal 8192 x 8193 / 2 pairs
    check(abs(flops(NC) - 4 * 32 * 8192 * 8192 * 128) < 1, "non-causal flops")
    check(abs(flops(C) - 4 * 32 * 8192 * 8193 / 2 * 128) < 1, "causal flops: bottom-right, the diagonal in")

    t_nc, t_c = at(NC, 740.0), at(C, 699.0)
    rows = [row(NC, t_nc, t_nc * 1.44), row(C, t_c, t_c * 1.0), row("b1.hq8.hkv8.sq900.skv900.d32.f16.nc", 10.0, 9.9)]
    lines = bars.peers_lines(rows, "NVIDIA H200")
    text = "\n".join(lines)
    check("3 shapes: 1.125 (bar 1.20: missed)" in text, "geomean (1.44 x 1 x 0.99)^(1/3) = 1.125: missed (%s)" % text)
    check("lowest: 0.990 on b1.hq8.hkv8.sq900.skv900.d32.f16.nc against sdpa_cudnn" in text and
          "every shape >= 1.00: missed" in text, "the lowest ratio named, under 1.00: missed")
    check(f"{NC}: 740.0 TFLOP/s (bar 740: met)" in text, "740 TFLOP/s meets 740")
    check(f"{C}: 699.0 TFLOP/s (bar 700: missed)" in text, "699 misses 700")
    check("device" not in text, "an H200: no device line")

    rows = [row(NC, 100.0, 130.0), row(C, 100.0, 125.0), {"shape": "b1.hq8.hkv1.sq50.skv1018.d256.f16.nc",
                                                         "attune": {"time_us": 5.0}, "torch_best": {}}]
    text = "\n".join(bars.peers_lines(rows, "NVIDIA H100 80GB HBM3"))
    check("2 shapes: 1.275 (bar 1.20: met)" in text and "every shape >= 1.00: met" in text, "geomean met (%s)" % text)
    check("no ratio (a side has no time): b1.hq8.hkv1.sq50.skv1018.d256.f16.nc (the bars are missed)" in text,
          "a shape with no PyTorch time is named, not dropped")
    check("this run's device is NVIDIA H100 80GB HBM3" in text, "another device: said")
    check(bars.peers_lines([], "x") == [], "no rows: no lines")

    t8 = at(bars.E4M3_KEY, 1000.0)
    check("1000.0 TFLOP/s with `t` (bar 1000: met)" in bars.e4m3_lines(t8, "t")[0], "e4m3 at the bar: met")
    check("(bar 1000: missed)" in bars.e4m3_lines(t8 * 1.01, "t")[0], "e4m3 1% slower: missed")
    check("999.9 TFLOP/s with `t` (bar 1000: missed)" in bars.e4m3_lines(at(bars.E4M3_KEY, 999.9), "t")[0],
          "999.9 misses 1000, as printed")
    check("no e4m3 winner" in bars.e4m3_lines(None, None)[0], "no e4m3 winner: missed")

    with tempfile.TemporaryDirectory() as d:
        def dump(name, obj):
            p = os.path.join(d, name)
            with open(p, "w") as f:
                json.dump(obj, f)
            return p

        def res(shape, us, tactic):
            return {"shape": shape, "measurements": [{"winner": True, "tactic": tactic, "time_us_paid": us,
                                                      "rel_err": 1e-3}]}
        paths = [dump("w.json", {}), dump("b.json", res(NC, 1451.0, "fused/a")),
                 dump("e.json", res(bars.E4M3_KEY, at(bars.E4M3_KEY, 976.0), "fused/e"))]
        r = subprocess.run([sys.executable, os.path.join(BENCH, "fp8_table.py")] + paths, capture_output=True,
                           text=True)
        check(r.returncode == 0 and "976.0 TFLOP/s with `fused/e` (bar 1000: missed)" in r.stdout and
              "device is" not in r.stdout, "fp8_table.py ends with the e4m3 bar (%s)" % (r.stdout + r.stderr).strip()[-200:])
        r = subprocess.run([sys.executable, os.path.join(BENCH, "fp8_table.py"), "--gpu-name", "NVIDIA H100"] + paths,
                           capture_output=True, text=True)
        check(r.returncode == 0 and "this run's device is NVIDIA H100" in r.stdout, "--gpu-name: an H100's run says so")
        peers = dump("peers.json", {"device": "NVIDIA H200", "rows": [row(NC, 100.0, 130.0)]})
        r = subprocess.run([sys.executable, os.path.join(BENCH, "bars.py"), peers], capture_output=True, text=True)
        check(r.returncode == 0 and "1 shapes: 1.300 (bar 1.20: met)" in r.stdout, "bars.py PEERS.json (%s)" % r.stdout)
        bad = dump("bad.json", {"no": "rows"})
        r = subprocess.run([sys.executable, os.path.join(BENCH, "bars.py"), bad], capture_output=True, text=True)
        check(r.returncode == 1 and "not a peers.json" in r.stderr, "a file without rows is refused")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
