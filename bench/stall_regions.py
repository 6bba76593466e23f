#!/usr/bin/env python3
"""stall_regions.py -- where a kernel's warps spend their time, by region
of its SASS: ncu's stall samples (bench/stall_ncu.sh's stall-NAME.csv.gz,
every SASS line with its samples) summed over address ranges.

Stall samples are taken at a steady rate per warp, so a region's share of
them is its share of the warps' time. Offsets are from the kernel's first
instruction, as cuobjdump --dump-sass prints them (bench/owed.sh sass), so
the ranges can be read off a listing:

  python3 bench/stall_regions.py stall-e4m3-192.csv.gz \\
      --region 4870:4950:turn --region 5630:62b0:exps

Each region prints its share of all samples, the instructions executed in
it and its three largest stall reasons (ncu's "Not Issued" duplicates left
out). Without --region, the whole kernel is cut at its landmarks: every
WARPGROUP.DEPBAR, BAR, VOTE, SYNCS.PHASECHK and BSYNC line ends a region.

--tables prints instead the tables bench/stall_ncu.sh appends to its
report: the SASS lines with the most samples, the stall reasons summed,
the samples by opcode with each one's largest reasons, the top lines by
offset, and the instructions executed by opcode.
"""
import argparse
import csv
import gzip
import io
import sys

LANDMARKS = ("WARPGROUP.DEPBAR", "BAR.", "VOTE.", "SYNCS.PHASECHK", "BSYNC")


class Page:
    """ncu's source page: its header, the rows that fit it, and num(row,
    column) (0 where a cell is empty or not a number). ValueError when
    the file is not such a page."""

    def __init__(self, path):
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", newline="") as f:
            rows = list(csv.reader(io.StringIO(f.read())))
        # ncu prints a kernel header line or two before the table
        h = next((i for i, r in enumerate(rows) if "Source" in r and "Address" in r), None)
        if h is None:
            raise ValueError(f"{path}: no Address and Source columns (not ncu's --page source --csv)")
        self.head = rows[h]
        self.body = [r for r in rows[h + 1:] if len(r) == len(self.head)]
        self.col = {n: i for i, n in enumerate(self.head)}

    def num(self, r, n):
        try:
            return float(r[self.col[n]].replace(",", ""))
        except (ValueError, KeyError, IndexError):
            return 0.0

    def first(self, prefix):
        """The first column whose name starts with prefix, or None."""
        return next((n for n in self.head if n.startswith(prefix)), None)


def load(path):
    """(offset, source, executed, {reason: samples}) per SASS line, sorted by
    offset; ValueError when the file is not ncu's source page."""
    pg = Page(path)
    col, num = pg.col, pg.num
    reasons = [n for n in pg.head if n.startswith("stall_") and "Not Issued" not in n]
    if not reasons:
        raise ValueError(f"{path}: no stall_* columns")
    ex = pg.first("Instructions Executed")
    lines = []
    for r in pg.body:
        try:
            addr = int(r[col["Address"]], 16)
        except ValueError:
            continue
        st = {n[6:]: num(r, n) for n in reasons}
        lines.append((addr, r[col["Source"]].strip(), num(r, ex) if ex else 0.0, st))
    if not lines:
        raise ValueError(f"{path}: no SASS lines")
    base = min(a for a, _, _, _ in lines)
    return sorted((a - base, s, e, st) for a, s, e, st in lines)


def parse_region(text):
    """LO:HI:NAME (hex offsets, HI excluded) -> (lo, hi, name)."""
    parts = text.split(":", 2)
    if len(parts) != 3 or not parts[2]:
        raise ValueError(f"region '{text}': LO:HI:NAME, offsets in hex")
    lo, hi = int(parts[0], 16), int(parts[1], 16)
    if hi <= lo:
        raise ValueError(f"region '{text}': HI must be past LO")
    return lo, hi, parts[2]


def landmark_regions(lines):
    """Regions ending at each landmark line (the landmark included)."""
    out, lo = [], 0
    for off, src, _, _ in lines:
        op = mnemonic(src)
        if op.startswith(LANDMARKS):
            out.append((lo, off + 0x10, f"..{op}"))
            lo = off + 0x10
    out.append((lo, lines[-1][0] + 0x10, "to the end"))
    return [r for r in out if r[1] > r[0]]


def table(lines, regions):
    """The printed rows: one per region, then what no region holds."""
    total = sum(sum(st.values()) for _, _, _, st in lines) or 1.0
    rows, seen = [], set()
    for lo, hi, name in regions:
        samp, inst, why = 0.0, 0.0, {}
        for off, _, e, st in lines:
            if lo <= off < hi:
                seen.add(off)
                samp += sum(st.values())
                inst += e
                for k, v in st.items():
                    why[k] = why.get(k, 0.0) + v
        top = sorted(why.items(), key=lambda x: -x[1])[:3]
        rows.append((f"{lo:05x}-{hi:05x} {name}", 100 * samp / total, inst,
                     ", ".join(f"{k} {100 * v / samp:.0f}%" for k, v in top if v > 0)))
    rest = sum(sum(st.values()) for off, _, _, st in lines if off not in seen)
    if rest > 0:
        rows.append(("(outside the regions)", 100 * rest / total, 0.0, ""))
    return rows


def mnemonic(src):
    """A SASS line's instruction with its modifiers (WARPGROUP.DEPBAR.LE),
    its predicate (@P1) left off; "?" for an empty line."""
    w = src.split()
    return w[1] if w and w[0].startswith("@") and len(w) > 1 else (w[0] if w else "?")


def opcode(src):
    """The opcode of a SASS line, its predicate and modifiers left off."""
    return mnemonic(src).split(".")[0]


def print_tables(path):
    """stall_ncu.sh's tables of the page at path (see the module's help)."""
    pg = Page(path)
    col, num, body = pg.col, pg.num, pg.body
    samp = pg.first("Warp Stall Sampling (All")
    if samp is None:
        raise ValueError(f"{path}: no 'Warp Stall Sampling (All Samples)' column")
    total = sum(num(r, samp) for r in body) or 1.0
    print("\n## SASS lines by stall samples (%d lines, %d samples)" % (len(body), total))
    for r in sorted(body, key=lambda r: -num(r, samp))[:45]:
        print("%6.2f%%  %s  %s" % (100 * num(r, samp) / total, r[col["Address"]], r[col["Source"]]))
    # per-reason columns, where this ncu prints them (stall_* metrics)
    reasons = [n for n in pg.head if n.lower().startswith("stall") or "smsp__pcsamp" in n]
    if reasons:
        print("\n## stall reasons summed over the kernel")
        for n, v in sorted(((n, sum(num(r, n) for r in body)) for n in reasons), key=lambda x: -x[1])[:20]:
            print("%8.0f  %s" % (v, n))
        print_by_opcode(pg, samp, total, [n for n in reasons if "Not Issued" not in n and n.startswith("stall_")])
    ex = pg.first("Instructions Executed")
    if ex:
        ops = {}
        for r in body:
            op = opcode(r[col["Source"]])
            ops[op] = ops.get(op, 0) + num(r, ex)
        tot = sum(ops.values()) or 1.0
        print("\n## executed instructions by opcode (%d in all)" % tot)
        for op, v in sorted(ops.items(), key=lambda x: -x[1])[:25]:
            print("%6.2f%%  %s" % (100 * v / tot, op))


def print_by_opcode(pg, samp, total, own):
    """Stall samples by opcode with each one's three largest reasons (own:
    the reason columns, "Not Issued" duplicates left out), then the top
    lines by offset from the kernel's first instruction."""
    col, num, body = pg.col, pg.num, pg.body
    base = min(int(r[col["Address"]], 16) for r in body)
    byop = {}
    for r in body:
        d = byop.setdefault(opcode(r[col["Source"]]), {})
        for n in own:
            d[n[6:]] = d.get(n[6:], 0.0) + num(r, n)
    alls = sum(sum(d.values()) for d in byop.values()) or 1.0
    print("\n## stall samples by opcode (%d samples), each with its largest reasons" % alls)
    for op, d in sorted(byop.items(), key=lambda x: -sum(x[1].values()))[:16]:
        s = sum(d.values()) or 1.0
        top = ", ".join("%s %.0f%%" % (k, 100 * v / s) for k, v in sorted(d.items(), key=lambda x: -x[1])[:3])
        print("%6.2f%%  %-10s %s" % (100 * s / alls, op, top))
    print("\n## the 30 lines with the most samples, by offset from the kernel's start")
    for r in sorted(body, key=lambda r: -num(r, samp))[:30]:
        top = sorted(((n[6:], num(r, n)) for n in own), key=lambda x: -x[1])[:2]
        print("%6.2f%%  %05x  %-50s %s" % (100 * num(r, samp) / total, int(r[col["Address"]], 16) - base,
                                         r[col["Source"]].strip()[:50], ", ".join("%s %d" % t for t in top)))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", help="stall_ncu.sh's stall-NAME.csv.gz (or the plain CSV)")
    ap.add_argument("--region", action="append", default=[], metavar="LO:HI:NAME",
                    help="an address range (hex offsets from the kernel's start, HI excluded); repeatable")
    ap.add_argument("--tables", action="store_true",
                    help="print stall_ncu.sh's tables instead of the regions")
    a = ap.parse_args(argv)
    if a.tables:
        try:
            print_tables(a.csv)
        except (OSError, ValueError, EOFError) as e:
            print(f"stall_regions: {e}", file=sys.stderr)
            return 1
        return 0
    try:
        lines = load(a.csv)
        regions = [parse_region(r) for r in a.region] or landmark_regions(lines)
    except (OSError, ValueError, EOFError) as e:
        print(f"stall_regions: {e}", file=sys.stderr)
        return 1
    print("| region | samples | instructions executed | largest stall reasons |")
    print("|---|---:|---:|---|")
    for name, share, inst, why in table(lines, regions):
        print(f"| {name} | {share:.2f}% | {inst:.0f} | {why} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
