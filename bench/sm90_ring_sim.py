#!/usr/bin/env python3
"""sm90_ring_sim.py -- a cycle model of the sm90a kernel's ring of consumer
warpgroups in turn order 0 (docs/kernels.md, versions 3.11 and 3.18), to
say what a change of the ring's structure can gain before a GPU measures
it. No GPU; prints the steady period of one key tile, in SM cycles, and
how busy the tensor cores are.

Each warpgroup, per key tile: waits for its turn; issues P V and waits for
it (the tensor cores serve products in the order issued, TENS cycles
each, then LAT cycles until the waiting warps see it); issues S and passes
the turn on; waits for S; takes its rows' maxima (LMAX cycles); its
exponentials (E cycles alone: at most CAP warpgroups at a time run them
at full rate, more share CAP's rate); P's pack and O's rescale (LPOST).
--xturn: the exponentials in a second ring (version 3.18), one warpgroup
at a time. --exclusive: the tensor cores make no progress while any
warpgroup takes exponentials (the other reading of the measured period:
the two units taken one after the other, not a slow softmax).

    python3 bench/sm90_ring_sim.py                 # the table of docs/kernels.md 3.18
    python3 bench/sm90_ring_sim.py --e 1100 --cap 1 --xturn
"""
import argparse
import sys


def simulate(nwg=3, tens=256, lat=40, lmax=200, e=512, lpost=120, cap=1.0, xturn=False, exclusive=False, tiles=120):
    """Steady period (cycles a key tile) and the tensor cores' busy share."""
    st = ["turn"] * nwg
    rem = [0.0] * nwg
    done = [0] * nwg
    turn = xt = 0
    queue = []  # [warpgroup, product, cycles left], served in order
    ready = {}  # (warpgroup, product) -> cycle its waiters see it retired
    t = busy = 0
    ends = []
    while min(done) < tiles:
        nexp = sum(1 for s in st if s == "exp")
        if queue and not (exclusive and nexp):
            busy += 1
            queue[0][2] -= 1
            if queue[0][2] <= 0:
                w, k, _ = queue.pop(0)
                ready[(w, k)] = t + lat
        for w in range(nwg):
            s = st[w]
            if s == "turn" and turn == w:
                queue.append([w, "pv", tens])
                st[w] = "pv"
            elif s in ("pv", "s") and ready.get((w, s), t + 1) <= t:
                del ready[(w, s)]
                if s == "pv":
                    queue.append([w, "s", tens])
                    st[w], turn = "s", (w + 1) % nwg
                else:
                    st[w], rem[w] = "max", lmax
            elif s == "max":
                rem[w] -= 1
                if rem[w] <= 0:
                    st[w] = "xwait" if xturn and xt != w else "exp"
                    rem[w] = e
            elif s == "xwait" and xt == w:
                st[w] = "exp"
            elif s == "exp":
                rem[w] -= min(1.0, cap / nexp)
                if rem[w] <= 0:
                    st[w], rem[w] = "post", lpost
                    xt = (w + 1) % nwg if xturn else xt
            elif s == "post":
                rem[w] -= 1
                if rem[w] <= 0:
                    st[w] = "turn"
                    done[w] += 1
                    if w == 0:
                        ends.append(t)
        t += 1
    half = len(ends) // 2
    return (ends[-1] - ends[half]) / (len(ends) - 1 - half), busy / t


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--e", type=float, help="cycles of one warpgroup's exponentials alone")
    ap.add_argument("--cap", type=float, help="warpgroups that take exponentials at full rate at once")
    ap.add_argument("--lmax", type=float, default=200, help="cycles of the rows' maxima (default 200)")
    ap.add_argument("--lpost", type=float, default=120, help="cycles of P's pack and O's rescale (default 120)")
    ap.add_argument("--xturn", action="store_true", help="only the version 3.18 ring (with --e and --cap)")
    ap.add_argument("--exclusive", action="store_true", help="no tensor progress while exponentials run")
    a = ap.parse_args(argv)
    if a.e is not None and a.cap is not None:
        per, tb = simulate(lmax=a.lmax, e=a.e, lpost=a.lpost, cap=a.cap, xturn=a.xturn, exclusive=a.exclusive)
        print(f"period {per:.0f} cycles a key tile, tensor cores {tb:.0%} busy")
        return 0
    print("| E (cycles) | CAP | period | tensor busy | with --xturn | ratio |")
    print("|---:|---:|---:|---:|---:|---:|")
    for cap in (1.0, 1.5, 2.0):
        for e in (512, 800, 1100):
            p0, b0 = simulate(lmax=a.lmax, e=e, lpost=a.lpost, cap=cap)
            p1, _ = simulate(lmax=a.lmax, e=e, lpost=a.lpost, cap=cap, xturn=True)
            print(f"| {e} | {cap:g} | {p0:.0f} | {b0:.0%} | {p1:.0f} | {p1 / p0:.2f} |")
    p0, b0 = simulate(lmax=a.lmax, e=512, lpost=a.lpost, cap=1.0, exclusive=True)
    p1, _ = simulate(lmax=a.lmax, e=512, lpost=a.lpost, cap=1.0, exclusive=True, xturn=True)
    print(f"| 512, --exclusive | 1 | {p0:.0f} | {b0:.0%} | {p1:.0f} | {p1 / p0:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
