#!/usr/bin/env python3
"""sm90_trace.py -- where a Hopper kernel's key tile goes, cycle by cycle.

Reads the file an SM90_TRACE=1 build of attune writes (ATTUNE_SM90_TRACE=
FILE names it; cuda_fused_sm90a.cu's sm90_trace_dump) and prints, over the
traced blocks' consumer warpgroups and their steady key tiles (the first
and the last two of each block left out), the median and 10th/90th
percentiles of each step of a tile's turn in SM clock cycles, the period
of a warpgroup's tile and of the block's, and how long each turn waited
for the warpgroup whose turn it was.

On the GPU machine (a trace build is slower than the default: compare
its steps with each other, not its times with another build's):

  tests/gpu/run.sh --no-tests --exec 'bash bench/sm90_trace.sh'

or by hand, with a tree configured with -DCMAKE_CUDA_FLAGS=-DSM90_TRACE=1:

  ATTUNE_SM90_TRACE=/tmp/t.bin attune tune --db /tmp/t.db --device 0 \\
      --shape b2.hq16.hkv16.sq8192.skv8192.d128.e4m3.nc \\
      --only pad=1/stages=2/tile=192x128
  python3 bench/sm90_trace.py /tmp/t.bin

The last launch outside a CUDA graph capture wins the file: name one
tactic in --only.
"""
import argparse
import statistics
import struct
import sys

# Events of a tile, as the kernel's comment above sm90_trace lists them.
ORDER0 = ["start", "V in", "turn", "PV done", "K in", "S issued", "S done", "softmax done"]
OVL = ["start", "K in", "turn", "issued", "S done", "softmax done", "PV done", "rescaled"]


def load(path):
    """The header fields and a flat tuple of u64, or an exception."""
    with open(path, "rb") as f:
        line = f.readline().decode("ascii", "replace").split()
        if len(line) < 8 or line[0] != "attune-sm90-trace" or line[1] != "1":
            raise ValueError(f"{path}: not an attune sm90 trace (version 1)")
        nb, nw, ni, ne, grid = (int(x) for x in line[2:7])
        tactic = line[7]
        raw = f.read()
    n = nb * nw * ni * ne
    if len(raw) != 8 * n:
        raise ValueError(f"{path}: {len(raw)} bytes of data, {8 * n} expected")
    return (nb, nw, ni, ne, grid, tactic), struct.unpack(f"<{n}Q", raw)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", help="the file ATTUNE_SM90_TRACE named")
    ap.add_argument("--order", choices=["auto", "0", "ovl"], default="auto",
                    help="the events' meaning: turn order 0 (the d128 192-row tiles) or the "
                         "overlapped order (the others); auto: as the trace's header says")
    a = ap.parse_args(argv)
    try:
        (nb, nw, ni, ne, grid, tactic), v = load(a.trace)
    except (OSError, ValueError, struct.error) as e:
        print(f"sm90_trace: {e}", file=sys.stderr)
        return 1

    def at(b, w, i, e):
        return v[((b * nw + w) * ni + i) * ne + e]

    steps, period, blockper, turnwait, dur, gaps = {}, [], [], [], [], []
    persistent = False
    persm = {}
    # per block: (start, Q in, loop end, epilogue done, ntiles, nact), for
    # the block's fixed costs
    fixed = []
    names = None
    used = 0
    for b in range(min(nb, grid)):
        h = [at(b, nw - 1, 0, e) for e in range(ne)]
        smid, t0, t1, ntiles, nact, br = h[0], h[1], h[2], h[3], h[4], h[5]
        if t0 == 0 or nact == 0:
            continue
        if names is None:
            order0 = not (h[7] & 256) if a.order == "auto" else a.order == "0"
            names = ORDER0 if order0 else OVL
            persistent = bool(h[7] & 512)
        used += 1
        h1 = [at(b, nw - 1, 1, e) for e in range(ne)]
        if t1 > t0:
            dur.append((t1 - t0) / max(1, ntiles))
            # an SM's blocks from start to epilogue done where the trace
            # has it (then gaps are the launch's), else to the loop's end
            persm.setdefault(smid, []).append((t0, h1[0] if h1[0] > t1 else t1))
            fixed.append((t0, h1[1], t1, h1[0], ntiles, nact))
        last = min(ntiles, ni) - 2
        for w in range(nact):
            for i in range(2, last):
                ev = [at(b, w, i, e) for e in range(ne)]
                if 0 in ev or any(ev[k + 1] < ev[k] for k in range(ne - 1)):
                    continue
                for k in range(ne - 1):
                    steps.setdefault(k, []).append(ev[k + 1] - ev[k])
                nxt = at(b, w, i + 1, 0)
                if nxt >= ev[0]:
                    period.append(nxt - ev[0])
        # each turn's handover: from the turn given (order 0: S issued, event
        # 5; overlapped: event 3) by warpgroup w in tile i to the turn taken
        # (event 2) by the next, and whether that one was late
        give = 5 if names is ORDER0 else 3
        for i in range(2, last):
            for w in range(nact):
                w2, i2 = (w + 1, i) if w + 1 < nact else (0, i + 1)
                g, t = at(b, w, i, give), at(b, w2, i2, 2)
                ready = at(b, w2, i2, 1)
                if g and t and ready and t >= g:
                    turnwait.append((t - g, max(0, ready - g)))
        if nact > 0:
            bp = [at(b, 0, i + 1, 0) - at(b, 0, i, 0) for i in range(2, last) if at(b, 0, i, 0)]
            blockper.extend(x / nact for x in bp if x > 0)
    if not used or names is None:
        print("sm90_trace: no traced block in the file (was the launch captured?)", file=sys.stderr)
        return 1
    for sm, bl in persm.items():
        bl.sort()
        gaps.extend(bl[k + 1][0] - bl[k][1] for k in range(len(bl) - 1) if bl[k + 1][0] > bl[k][1])

    what = "items of a persistent grid" if persistent else "blocks"
    print(f"# {tactic}: grid {grid}, {used} {what} traced, order {'0' if names is ORDER0 else 'overlapped'}")
    print("| step | median clk | p10 | p90 |")
    print("|---|---:|---:|---:|")
    for k in sorted(steps):
        xs = steps[k]
        print(f"| {names[k]} -> {names[k + 1]} | {statistics.median(xs):.0f} | {pct(xs, 0.1):.0f} | {pct(xs, 0.9):.0f} |")
    if period:
        print(f"| a warpgroup's tile (start to start) | {statistics.median(period):.0f} | {pct(period, 0.1):.0f} | {pct(period, 0.9):.0f} |")
    if blockper:
        print(f"| the block's tile, per warpgroup | {statistics.median(blockper):.0f} | {pct(blockper, 0.1):.0f} | {pct(blockper, 0.9):.0f} |")
    if turnwait:
        tw = [x for x, _ in turnwait]
        late = [y for _, y in turnwait]
        print(f"| turn given -> next warpgroup's turn taken | {statistics.median(tw):.0f} | {pct(tw, 0.1):.0f} | {pct(tw, 0.9):.0f} |")
        print(f"| ... of it, the next one not yet at its turn | {statistics.median(late):.0f} | {pct(late, 0.1):.0f} | {pct(late, 0.9):.0f} |")
    if dur:
        print(f"| block start to end, per tile | {statistics.median(dur):.0f} | {pct(dur, 0.1):.0f} | {pct(dur, 0.9):.0f} |")
    if gaps:
        unit = "item" if persistent else "block"
        what = f"epilogue done -> the SM's next {unit} started" if any(f[3] for f in fixed) else \
            f"an SM's gap between {unit}s"
        print(f"| {what} | {statistics.median(gaps):.0f} | {pct(gaps, 0.1):.0f} | {pct(gaps, 0.9):.0f} |")
    # A block's fixed costs (traces with the header's second row): Q's
    # latency, the epilogue, and the block's time beyond its tiles at the
    # steady rate (the pipeline's fill and drain), in cycles and in tiles.
    rows = []
    qin = [f[1] - f[0] for f in fixed if f[1] > f[0]]
    if qin:
        rows.append(("block start -> Q in (warpgroup 0)", qin))
    epi = [f[3] - f[2] for f in fixed if f[3] > f[2]]
    if epi:
        rows.append(("key loop's end -> epilogue done", epi))
    if blockper:
        bt = statistics.median(blockper)
        over = [(f[2] - f[0]) - f[4] * f[5] * bt for f in fixed if f[2] > f[0] and f[4] > 2]
        if over:
            rows.append(("a block's start to loop end beyond its tiles at the steady rate", over))
    for name, xs in rows:
        print(f"| {name} | {statistics.median(xs):.0f} | {pct(xs, 0.1):.0f} | {pct(xs, 0.9):.0f} |")
    if blockper and fixed:
        bt = statistics.median(blockper)
        nt = [f[4] for f in fixed]
        print(f"\n{len(fixed)} blocks: {statistics.mean(nt):.1f} key tiles a block on average "
              f"(min {min(nt)}, max {max(nt)}); the steady block tile {bt * max(f[5] for f in fixed):.0f} clk")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
