#!/usr/bin/env python3
"""ncu_times.py -- kernel durations out of `ncu --csv --metrics
gpu__time_duration.sum` output: per kernel name (first 100 characters),
the launches, median and min in us, in order of first launch.

    ncu --clock-control none --metrics gpu__time_duration.sum --csv CMD > ncu.csv
    bench/ncu_times.py ncu.csv
"""
import csv
import statistics
import sys


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) == 2 else 2
    with open(sys.argv[1], errors="replace") as f:
        rows = list(csv.DictReader(line for line in f if line.startswith('"')))
    times = {}
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "")
        us = v / 1000.0 if unit in ("nsecond", "ns") else v * 1000.0 if unit in ("msecond", "ms") else v
        times.setdefault(r["Kernel Name"][:100], []).append(us)
    if not times:
        print("ncu_times.py: no gpu__time_duration.sum rows in %s" % sys.argv[1], file=sys.stderr)
        return 1
    for name, ts in times.items():
        print("%4d x %10.1f us (min %10.1f)  %s" % (len(ts), statistics.median(ts), min(ts), name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
