#!/usr/bin/env python3
"""persist_ab.py -- version 3.28's persistent tactics against the same
tiles unpersisted, from `attune results --csv` files of one build (each
round a fresh `attune tune --force --only ...` process):

    persist_ab.py ROUND1.csv [ROUND2.csv ...]

A file's name is SHAPE-KEY.rN.csv. Prints, per shape and tile, the plain
and persist=1 medians of each round and their ratio (persist / plain:
under 1, persistence wins), then the geometric mean of the ratios. Exit
status 2 when a file cannot be read or holds no pair."""
import csv
import math
import os
import re
import sys


def family(tactic):
    """The tactic without persist=1, and whether it had it."""
    return tactic.replace("/persist=1", ""), "/persist=1" in tactic


def main(paths):
    rows = {}  # (shape, family) -> {round: {persistent: us}}
    for path in paths:
        m = re.match(r"(.+)\.r(\d+)\.csv$", os.path.basename(path))
        if not m:
            print(f"persist_ab.py: {path}: not SHAPE.rN.csv", file=sys.stderr)
            return 2
        shape, rnd = m.group(1), int(m.group(2))
        try:
            with open(path, newline="") as f:
                for r in csv.DictReader(f):
                    if r.get("status") != "ok" or not r.get("time_us"):
                        continue
                    fam, pers = family(r["tactic"])
                    rows.setdefault((shape, fam), {}).setdefault(rnd, {})[pers] = float(r["time_us"])
        except (OSError, KeyError, ValueError) as e:
            print(f"persist_ab.py: {path}: {e}", file=sys.stderr)
            return 2
    logs = []
    print("| shape | tactic (plain) | round | plain us | persist=1 us | persist / plain |")
    print("|---|---|---|---|---|---|")
    for (shape, fam), rounds in sorted(rows.items()):
        for rnd, t in sorted(rounds.items()):
            if False in t and True in t and t[False] > 0:
                q = t[True] / t[False]
                logs.append(math.log(q))
                print(f"| {shape} | {fam} | {rnd} | {t[False]:.1f} | {t[True]:.1f} | {q:.3f} |")
    if not logs:
        print("persist_ab.py: no tactic measured both ways", file=sys.stderr)
        return 2
    print(f"\ngeomean persist / plain over {len(logs)} pairs: {math.exp(sum(logs) / len(logs)):.3f}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) > 1 else 2)
    sys.exit(main(sys.argv[1:]))
