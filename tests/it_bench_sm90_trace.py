#!/usr/bin/env python3
"""it_bench_sm90_trace.py -- bench/sm90_trace.py, the reader of an
SM90_TRACE=1 build's cycle trace, on traces written here with known
steps: each step's median, a warpgroup's tile period, the turn handover
and how late the next warpgroup was, the overlapped order's names, and
the refusals (not a trace, short data, no traced block)."""
import os
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
import sm90_trace  # noqa: E402

from checklib import captured, cells, check, summary  # noqa: E402  (tests/checklib.py)

NB, NW, NI, NE = 6, 5, 20, 8


def write(path, blocks, flags=1, grid=1366, short=False, fixed=None):
    """A trace of `blocks` blocks: each a (smid, nact, ntiles, steps) with
    steps the 8 cycle counts added at events 0..7 of each tile, warpgroup
    w's tile i starting at 3000 i + 1000 w after its block's start.
    fixed = (q, epi): the header's second row, Q in q cycles after the
    block's start and the epilogue done epi after its loop's end."""
    v = [0] * (NB * NW * NI * NE)

    def put(b, w, i, e, x):
        v[((b * NW + w) * NI + i) * NE + e] = x

    for b, (smid, nact, nt, d) in enumerate(blocks):
        base = 10_000 + 200_000 * b
        for e, x in enumerate([smid, base, base + 3000 * nt, nt, nact, 192, 128, flags]):
            put(b, NW - 1, 0, e, x)
        if fixed:
            put(b, NW - 1, 1, 1, base + fixed[0])
            put(b, NW - 1, 1, 0, base + 3000 * nt + fixed[1])
        for w in range(nact):
            for i in range(1, nt):
                t = base + 3000 * i + 1000 * w
                for e in range(NE):
                    t += d[e]
                    put(b, w, i, e, t)
    data = struct.pack(f"<{len(v)}Q", *v)
    with open(path, "wb") as f:
        f.write(f"attune-sm90-trace 1 {NB} {NW} {NI} {NE} {grid} fused/arch=sm90a/tile=192x128\n".encode())
        f.write(data[:-8] if short else data)


def run(args):
    return captured(sm90_trace.main, args)


def row(text, name):
    """The numbers of the table row whose first cell is name."""
    c = cells(text, name)
    return [float(x) for x in c[1:]] if c and c[0] == name else None


def main():
    d = [0, 20, 300, 350, 5, 30, 250, 1500]
    with tempfile.TemporaryDirectory() as tmp:
        p = os.path.join(tmp, "t.bin")
        write(p, [(0, 3, 12, d), (1, 3, 12, d)])
        rc, out, err = run([p])
        check(rc == 0, "a trace of two blocks reads (rc %d, %s)" % (rc, err.strip()))
        check("2 blocks traced, order 0" in out, "two blocks, turn order 0 by the header")
        check(row(out, "V in -> turn") == [300, 300, 300], "the turn wait: 300 (%s)" % row(out, "V in -> turn"))
        check(row(out, "S done -> softmax done") == [1500, 1500, 1500], "the softmax: 1500")
        check(row(out, "a warpgroup's tile (start to start)") == [3000, 3000, 3000], "a tile every 3000")
        check(row(out, "the block's tile, per warpgroup") == [1000, 1000, 1000], "3000 over 3 warpgroups")
        # warpgroup w gives its turn at 1000 w + 705 (the steps to S issued),
        # the next takes it at 1000 (w + 1) + 320, having arrived at 1020:
        # a handover of 615, of which 315 the next one's lateness
        check(row(out, "turn given -> next warpgroup's turn taken") == [615, 615, 615], "handover 615")
        check(row(out, "... of it, the next one not yet at its turn") == [315, 315, 315], "late by 315")

        check(row(out, "an SM's gap between blocks") is None and row(out, "key loop's end -> epilogue done") is None,
              "a block on each SM, no second header row: no gap, no fixed-cost rows")

        # two blocks on SM 0, 200000 apart: block 0's loop ends at 36000
        # after its start, its epilogue 900 later, so the launch gap is
        # 200000 - 36900; Q in 1500 after each start; each block's time is
        # its 12 tiles at the steady 3000, so nothing beyond them
        write(p, [(0, 3, 12, d), (0, 3, 12, d)], fixed=(1500, 900))
        rc, out, err = run([p])
        check(rc == 0, "a trace with the second header row reads (rc %d, %s)" % (rc, err.strip()))
        check(row(out, "block start -> Q in (warpgroup 0)") == [1500, 1500, 1500], "Q in after 1500 (%s)"
              % row(out, "block start -> Q in (warpgroup 0)"))
        check(row(out, "key loop's end -> epilogue done") == [900, 900, 900], "the epilogue: 900")
        check(row(out, "epilogue done -> the SM's next block started") == [163100, 163100, 163100],
              "the launch gap from the epilogue's end: 163100 (%s)"
              % row(out, "epilogue done -> the SM's next block started"))
        check(row(out, "a block's start to loop end beyond its tiles at the steady rate") == [0, 0, 0],
              "no fixed cost beyond 12 tiles at 3000")
        check("12.0 key tiles a block on average" in out and "steady block tile 3000 clk" in out,
              "the blocks' tiles and the steady block tile summarised")

        # a persistent grid's trace (flag 512): its rows are items, and the
        # gap is between one item's epilogue and the next item on that SM
        write(p, [(0, 3, 12, d), (0, 3, 12, d)], flags=1 | 512, fixed=(1500, 900))
        rc, out, _ = run([p])
        check(rc == 0 and "2 items of a persistent grid traced, order 0" in out, "flag 512: items, not blocks")
        check(row(out, "epilogue done -> the SM's next item started") == [163100, 163100, 163100],
              "the gap between items (%s)" % row(out, "epilogue done -> the SM's next item started"))

        write(p, [(0, 2, 12, d)], flags=1 | 256)
        rc, out, _ = run([p])
        check(rc == 0 and "order overlapped" in out and row(out, "turn -> issued") == [350, 350, 350],
              "flag 256: the overlapped order's names")
        rc, out, _ = run([p, "--order", "0"])
        check(rc == 0 and row(out, "turn -> PV done") == [350, 350, 350], "--order 0 overrides the header")

        write(p, [(0, 3, 12, d)], short=True)
        rc, _, err = run([p])
        check(rc == 1 and "expected" in err, "a trace one word short is refused (%s)" % err.strip())
        write(p, [])
        rc, _, err = run([p])
        check(rc == 1 and "no traced block" in err, "a trace with no block written is refused")
        with open(p, "wb") as f:
            f.write(b"hello\n")
        rc, _, err = run([p])
        check(rc == 1 and "not an attune sm90 trace" in err, "another file is refused")
        rc, _, err = run([os.path.join(tmp, "absent.bin")])
        check(rc == 1 and "absent.bin" in err, "a missing file is refused, named")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
