#!/usr/bin/env python3
"""it_bench_persist_ab.py -- bench/persist_ab.py, the table of persist=1
tactics against the same tiles plain from `attune results --csv` files
(bench/owed.sh persist): each round's pair and its ratio, rows that are
not ok or lack a partner left out, the geomean over the pairs; a file
named otherwise, an unreadable one or no pair at all refused."""
import math
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
import persist_ab  # noqa: E402

from checklib import captured, check, summary  # noqa: E402  (tests/checklib.py)

HEAD = "mark,tactic,status,paid_us,time_us,min_us,max_us,copies_us,n,rel_err,max_abs_err,err_ratio,note\n"
PLAIN = "fused/arch=sm90a/pad=1/stages=2/tile=128x128/warps=12"
PERS = "fused/arch=sm90a/pad=1/persist=1/stages=2/tile=128x128/warps=12"
WIDE = "fused/arch=sm90a/pad=1/stages=2/tile=192x128/warps=16"


def write(path, rows):
    with open(path, "w") as f:
        f.write(HEAD)
        for tactic, status, us in rows:
            f.write(f",{tactic},{status},{us},{us},{us},{us},0,10,1e-4,1e-3,1,\n")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        key = "b4.hq32.hkv8.sq2048.skv2048.d128.bf16.c"
        r1, r2 = os.path.join(tmp, key + ".r1.csv"), os.path.join(tmp, key + ".r2.csv")
        # round 1: 200 -> 180 (0.9); the wide tile has no persistent row
        write(r1, [(PLAIN, "ok", 200.0), (PERS, "ok", 180.0), (WIDE, "ok", 150.0)])
        # round 2: 100 -> 110 (1.1); a failed row is no measurement
        write(r2, [(PLAIN, "ok", 100.0), (PERS, "ok", 110.0), (PLAIN.replace("pad=1", "pad=8"), "failed", 5.0)])
        rc, out, err = captured(persist_ab.main, [r1, r2])
        check(rc == 0, "two rounds tabled: exit 0 (%s)" % err.strip())
        rows = [l for l in out.splitlines() if l.startswith("| " + key)]
        check(len(rows) == 2, "one row a round for the one tile with both forms (%d)" % len(rows))
        row1 = [c.strip() for c in rows[0].strip("|").split("|")]
        check(row1[2:] == ["1", "200.0", "180.0", "0.900"], "round 1: 200.0, 180.0, 0.900")
        row2 = [c.strip() for c in rows[1].strip("|").split("|")]
        check(row2[2:] == ["2", "100.0", "110.0", "1.100"], "round 2: 100.0, 110.0, 1.100")
        g = math.sqrt(0.9 * 1.1)
        check(f"geomean persist / plain over 2 pairs: {g:.3f}" in out, "the geomean of 0.9 and 1.1 (%.3f)" % g)
        check(WIDE not in out and "pad=8" not in out, "a tile without its pair and a failed row are left out")
        # refused: a name without the round, a missing file, no pair
        bad = os.path.join(tmp, key + ".csv")
        write(bad, [(PLAIN, "ok", 1.0)])
        rc, _, err = captured(persist_ab.main, [bad])
        check(rc == 2 and "SHAPE.rN.csv" in err, "a file named otherwise is refused (%s)" % err.strip())
        rc, _, err = captured(persist_ab.main, [os.path.join(tmp, key + ".r9.csv")])
        check(rc == 2 and "r9.csv" in err, "a missing file is refused, named")
        lone = os.path.join(tmp, key + ".r3.csv")
        write(lone, [(PLAIN, "ok", 1.0)])
        rc, _, err = captured(persist_ab.main, [lone])
        check(rc == 2 and "no tactic measured both ways" in err, "no pair: refused")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
