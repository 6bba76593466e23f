#!/usr/bin/env python3
"""it_bench_stall_regions.py -- bench/stall_regions.py, ncu's stall
samples summed by region of a kernel's SASS, on source pages written here
with known samples: the shares of given regions, each one's instructions
and largest reasons, what no region holds, the cut at landmarks (DEPBAR,
BAR, VOTE, the barrier polls, BSYNC), a gzip'd page, and the refusals (a
bad region, a file that is not ncu's page, a missing file), and --tables,
the tables bench/stall_ncu.sh appends to its report."""
import gzip
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
import stall_regions  # noqa: E402

from checklib import captured, cells as row, check, summary  # noqa: E402  (tests/checklib.py)

HEAD = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed",
        "stall_wait", "stall_barrier", "stall_mio", "stall_wait (Not Issued)"]
BASE = 0x7F0000001000
# (offset, source, executed, wait, barrier, mio); the "Not Issued" column
# holds 1000 everywhere, which must be left out
LINES = [
    (0x00, "FFMA R1, R2, R3, R4", 100, 10, 0, 0),
    (0x10, "WARPGROUP.DEPBAR.LE gsb0, 0x0", 10, 0, 50, 0),
    (0x20, "MUFU.EX2 R5, R5", 200, 20, 0, 10),
    (0x30, "@P1 VOTE.ANY P1, P0", 10, 5, 0, 0),
    (0x40, "FADD R6, R6, R7", 300, 5, 0, 0),
]


def page(path, gz=False, lines=LINES, head=HEAD):
    rows = [['"Kernel Name"', '"k"'], head]
    for off, src, ex, w, b, m in lines:
        rows.append([f"0x{BASE + off:x}", src, str(w + b + m), str(ex), str(w), str(b), str(m), "1000"])
    text = "\n".join(",".join(f'"{c}"' for c in r) for r in rows) + "\n"
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        with open(path, "w") as f:
            f.write(text)


def run(args):
    return captured(stall_regions.main, args)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        p = os.path.join(tmp, "s.csv")
        page(p)
        # 100 samples in all: 10, 50, 30, 5, 5
        rc, out, err = run([p, "--region", "0:20:head", "--region", "20:40:exps"])
        check(rc == 0, "two regions read (rc %d, %s)" % (rc, err.strip()))
        r = row(out, "00000-00020 head")
        check(r is not None and r[1] == "60.00%" and r[2] == "110", "head: 60%% of samples, 110 executed (%s)" % r)
        check(r is not None and r[3].startswith("barrier 83%, wait 17%"), "head's reasons, largest first (%s)" % r)
        r = row(out, "00020-00040 exps")
        check(r is not None and r[1] == "35.00%" and r[3].startswith("wait 71%, mio 29%"),
              "exps: 35%%, wait then mio; the Not Issued column left out (%s)" % r)
        r = row(out, "(outside the regions)")
        check(r is not None and r[1] == "5.00%", "the FADD line no region holds: 5%% (%s)" % r)

        rc, out, _ = run([p])
        check(rc == 0 and row(out, "00000-00020 ..WARPGROUP.DEPBAR") is not None,
              "without --region: cut after the DEPBAR")
        r = row(out, "00020-00040 ..VOTE.ANY")
        check(r is not None and r[1] == "35.00%", "a predicated VOTE is a landmark too (%s)" % r)
        r = row(out, "00040-00050 to the end")
        check(r is not None and r[1] == "5.00%", "the rest to the end (%s)" % r)
        check(row(out, "(outside") is None, "landmark regions leave nothing out")

        # --tables: stall_ncu.sh's report tables
        rc, out, err = run([p, "--tables"])
        check(rc == 0 and "## SASS lines by stall samples (5 lines, 100 samples)" in out,
              "--tables: the lines by samples, all five and their 100 samples (%s)" % err.strip())
        check(" 50.00%  0x7f0000001010  WARPGROUP.DEPBAR.LE gsb0, 0x0" in out, "the DEPBAR line first, 50%")
        check("    5000  stall_wait (Not Issued)" in out, "the reasons summed, Not Issued ones too")
        check(" 30.00%  MUFU       wait 67%, mio 33%" in out, "by opcode: MUFU 30%, wait then mio")
        check(" 50.00%  00010  WARPGROUP.DEPBAR.LE" in out, "the top lines by offset from the kernel's start")
        check(" 48.39%  FADD" in out and "(620 in all)" in out, "executed by opcode: FADD 300 of 620")

        g = os.path.join(tmp, "s.csv.gz")
        page(g, gz=True)
        rc, out, _ = run([g, "--region", "0:50:all"])
        check(rc == 0 and row(out, "00000-00050 all")[1] == "100.00%", "a gzip'd page reads the same")

        rc, _, err = run([p, "--region", "40:20:back"])
        check(rc == 1 and "HI must be past LO" in err, "a region ending before it starts is refused")
        rc, _, err = run([p, "--region", "20"])
        check(rc == 1 and "LO:HI:NAME" in err, "a region without its name is refused")
        page(p, head=["Address", "Source", "Instructions Executed"], lines=[])
        rc, _, err = run([p])
        check(rc == 1 and "no stall_" in err, "a page without stall columns is refused (%s)" % err.strip())
        rc, _, err = run([p, "--tables"])
        check(rc == 1 and "Warp Stall Sampling" in err, "--tables without the samples column is refused")
        with open(p, "w") as f:
            f.write("hello\n")
        rc, _, err = run([p])
        check(rc == 1 and "not ncu" in err, "another file is refused")
        rc, _, err = run([os.path.join(tmp, "absent.csv")])
        check(rc == 1 and "absent.csv" in err, "a missing file is refused, named")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
