#!/usr/bin/env python3
"""it_bench_sm90_ring_sim.py -- bench/sm90_ring_sim.py, the cycle model of
the sm90a ring, against periods worked out by hand: a ring bound by the
tensor cores (three turns of two products and the wait's latency), one
bound by a serial exponential phase (three of them), the second ring of
version 3.18 serialising softmaxes that could overlap, tensor cores and
exponentials taken one after the other, and the command line."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
import sm90_ring_sim as rs  # noqa: E402

from checklib import check, summary  # noqa: E402  (tests/checklib.py)


def near(x, want, tol=2.0):
    return abs(x - want) <= tol


def main():
    # Short softmaxes: each turn is the previous S and this P V (2 x 256
    # cycles of tensor work) plus the wait's latency before S is issued.
    per, busy = rs.simulate(tens=256, lat=40, lmax=100, e=300, lpost=60, cap=1.0, tiles=40)
    check(near(per, 3 * (2 * 256 + 40)), "tensor-bound ring: 3 turns of 552 cycles (%.1f)" % per)
    check(near(busy, 512 / 552, 0.02), "tensor cores busy 512 of 552 cycles (%.3f)" % busy)
    # One warpgroup's exponentials at a time, 1100 cycles each: the ring
    # turns once per three of them.
    per, busy = rs.simulate(e=1100, cap=1.0, tiles=120)
    check(near(per, 3 * 1100, 3300 * 0.005), "serial exponentials: 3 x 1100 cycles (%.1f)" % per)
    # Softmaxes that overlap at full rate (cap 2): the plain ring is
    # shorter than three of them; in turns they are serial again.
    plain, _ = rs.simulate(e=800, cap=2.0, tiles=40)
    xturn, _ = rs.simulate(e=800, cap=2.0, xturn=True, tiles=40)
    check(near(xturn, 3 * 800, 3), "--xturn: 3 x 800 cycles (%.1f)" % xturn)
    check(plain < 0.8 * xturn, "the plain ring overlaps them (%.1f < 0.8 x %.1f)" % (plain, xturn))
    # Tensor cores and exponentials one after the other (--exclusive):
    # each turn's two products, the wait's latency and one warpgroup's
    # exponentials.
    per, busy = rs.simulate(e=512, cap=1.0, exclusive=True, tiles=60)
    check(near(per, 3 * (2 * 256 + 40 + 512), 3), "--exclusive: 3 x 1064 cycles (%.1f)" % per)
    check(near(busy, 1536 / 3192, 0.02), "--exclusive: tensor cores busy 1536 of 3192 (%.3f)" % busy)
    # Where the tensor cores bound the ring, the second ring costs nothing.
    a, _ = rs.simulate(e=300, cap=1.0, tiles=40)
    b, _ = rs.simulate(e=300, cap=1.0, xturn=True, tiles=40)
    check(near(a, b), "tensor-bound: the same period in turns (%.1f, %.1f)" % (a, b))

    prog = os.path.join(HERE, "..", "bench", "sm90_ring_sim.py")
    r = subprocess.run([sys.executable, prog, "--e", "1100", "--cap", "1"], capture_output=True, text=True)
    check(r.returncode == 0 and "period 3301 cycles" in r.stdout, "the command line's one case (%s)" % r.stdout.strip())
    r = subprocess.run([sys.executable, prog, "--e", "x"], capture_output=True, text=True)
    check(r.returncode == 2 and "invalid float" in r.stderr, "a bad --e is refused")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
