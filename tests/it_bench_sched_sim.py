#!/usr/bin/env python3
"""it_bench_sched_sim.py -- bench/sched_sim.py, the schedule model of causal
sm90a grids (docs/kernels.md, version 3.31): its copy of the merge rule
against the worked cases test_fused_arch checks on cuda_fused_configs.h's
sm90_causal_clast, its order as a permutation of the grid's items, the
list scheduling against a case worked by hand, the anchor's modelled
efficiencies, and the command line."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
import sched_sim as ss  # noqa: E402

from checklib import check, summary  # noqa: E402  (tests/checklib.py)

MB = 1 << 20
ANCHOR = (2, 16, 16, 8192, 8192, 128)


def main():
    # the rule: the same cases as tests/test_fused_arch.c
    for args, want in (((32, 43, 2, 4 * MB, 0), 15), ((32, 43, 2, 4 * MB, 24 * MB), 13),
                       ((32, 64, 2, 4 * MB, 24 * MB), 13), ((40, 16, 8, 1 * MB, 24 * MB), 2),
                       ((64, 16, 32, MB // 4, 24 * MB), 1), ((32, 64, 1, 4 * MB, 0), 31),
                       ((32, 43, 2, 4 * MB, 32 * MB), 12), ((24, 16, 13, 640000, 24 * MB), 0),
                       ((34, 132, 32, 1, 24 * MB), 1), ((34, 131, 32, 1, 24 * MB), 0),
                       ((5, 4, 8, 1, 24 * MB), 0),
                       ((0, 4, 1, 1, 24 * MB), 0)):
        got = ss.clast_of(*args)
        check(got == want, "clast_of%s = %d (%d)" % (args, want, got))

    # the order: every row block of every unit once, each chunk longest first
    units, nrb, chunk, per, tiles = ss.grid(ANCHOR, 192)
    check((units, nrb, chunk, per) == (32, 43, 2, 4 * MB), "the anchor's grid (%s)" % ((units, nrb, chunk, per),))
    want = sorted(tiles(mb) for mb in range(nrb) for _ in range(units))
    for cap in (0, 24 * MB, 32 * MB):
        cl = ss.clast_of(units, nrb, chunk, per, cap)
        items = ss.order(units, nrb, chunk, cl, tiles)
        check(sorted(items) == want, "cap %d MB: the grid's items' tile counts, each once" % (cap // MB))
        last = items[chunk * nrb * cl:]
        check(last == sorted(last, reverse=True), "cap %d MB: the last chunk longest first" % (cap // MB))
    check(ss.grid(ANCHOR + (1,), 192)[3] == 2 * MB, "e4m3: a head's K and V^T at a byte an element")

    # list scheduling by hand: 3 SMs, items 3 3 2 2 2 -> loads 3 3 2, then
    # 2 on the third (4), 2 on the first (5); ideal 12 / 3
    mk, ideal = ss.makespan([3, 3, 2, 2, 2], 1.0, 0.0, sms=3)
    check((mk, ideal) == (5.0, 4.0), "makespan 5, ideal 4 (%s, %s)" % (mk, ideal))
    mk, ideal = ss.makespan([1, 1], 2.0, 0.5, sms=4)
    check((mk, ideal) == (2.5, 1.25), "fixed costs count (%s, %s)" % (mk, ideal))

    # the anchor's 192-row tiles: a last chunk of 86 items, merged to 258
    old = ss.model(ANCHOR, 192, "persist", 0)
    new = ss.model(ANCHOR, 192, "persist", 24 * MB)
    eo, en = old["ideal"] / old["makespan"], new["ideal"] / new["makespan"]
    check(0.925 < eo < 0.945 and en > eo + 0.02, "merged: %.3f -> %.3f of the ideal" % (eo, en))
    check(abs(old["ideal"] - new["ideal"]) < 1e-6, "the same work either way")

    # version 1.2's order (--form v1): the rule on other slot counts, as
    # test_fused_arch checks fused_causal_clast
    for args, want in (((8, 32, 1, MB, 4 * ((4 * MB) // 6), 32), 6), ((8, 32, 1, MB, 8 * MB, 264), 0),
                       ((8, 32, 1, MB, 8 * MB, 32), 6)):
        got = ss.clast_of(*args)
        check(got == want, "clast_of%s = %d (%d)" % (args, want, got))
    # b1.hq8 sq4096 d128, 64x64 tiles on 264 slots: 512 items in chunks of
    # 4 heads, merged into one: the long blocks of every head first
    m = ss.model_v1((1, 8, 8, 4096, 4096, 128), 64, 64, 264, 50)
    r = m["new"][0] / m["old"][0]
    check(m["items"] == 512 and m["clast"] == 0 and 0.6 < r < 0.7, "v1 64x64, 264 slots: new / old %.3f" % r)
    check(abs(m["new"][1] - m["old"][1]) < 1e-9, "v1: the same work either way")
    # 256 items on 264 slots: all resident at once, the order changes nothing
    m = ss.model_v1((1, 8, 8, 4096, 4096, 128), 128, 64, 264, 50)
    check(m["new"][0] == m["old"][0], "v1 128x64: a grid that fits at once, the same makespan")
    # no budget: one head a chunk, none merged, the old order itself
    m = ss.model_v1((4, 32, 8, 2048, 2048, 128), 64, 64, 264, 50, budget_mb=0)
    check(m["chunk"] == 1 and m["new"] == m["old"], "v1, budget 0: version 1's own order")

    prog = os.path.join(HERE, "..", "bench", "sched_sim.py")
    r = subprocess.run([sys.executable, prog, "--check"], capture_output=True, text=True)
    check(r.returncode == 0 and r.stdout.count("\n| ") == 3 and "| 1.055 | 1.046 |" in r.stdout,
          "--check: the model against three measured ratios (%s)" % r.stdout.strip()[-120:])
    r = subprocess.run([sys.executable, prog, "--shape", "b2.hq16.hkv16.sq8192.skv8192.d128.bf16.c",
                        "--tile", "192x128", "--cap", "32"], capture_output=True, text=True)
    check(r.returncode == 0 and "| 15 -> 12 |" in r.stdout and "1 shape-tiles" in r.stdout,
          "--cap 32: the anchor's last chunk from 15 to 12 (%s)" % r.stdout.strip()[-160:])
    r = subprocess.run([sys.executable, prog, "--form", "v1", "--tile", "64x64", "--shape",
                        "b1.hq8.hkv8.sq4096.skv4096.d128.bf16.c"], capture_output=True, text=True)
    check(r.returncode == 0 and "| 64x64 | 512 | 4 | 0 |" in r.stdout and "v1, 264 slots, 50 MB" in r.stdout,
          "--form v1: the table (%s)" % r.stdout.strip()[-160:])
    r = subprocess.run([sys.executable, prog, "--form", "v1", "--tile", "64", "--shape",
                        "b1.hq8.hkv8.sq4096.skv4096.d128.bf16.c"], capture_output=True, text=True)
    check(r.returncode != 0 and "BRxBC" in r.stderr, "--form v1: a tile without its keys is refused")
    r = subprocess.run([sys.executable, prog, "--shape", "b2.hq16"], capture_output=True, text=True)
    check(r.returncode != 0 and "not a shape key" in r.stderr, "a bad key is refused (%s)" % r.stderr.strip())
    r = subprocess.run([sys.executable, prog, "--grid", "/nonexistent/*.json"], capture_output=True, text=True)
    check(r.returncode != 0 and "no grid file" in r.stderr, "a missing grid is refused (%s)" % r.stderr.strip())
    r = subprocess.run([sys.executable, prog], capture_output=True, text=True)
    check(r.returncode == 2 and "--shape" in r.stderr, "no shape: usage, exit 2")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
