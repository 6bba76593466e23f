#!/usr/bin/env python3
"""noise_spread.py -- how noisy the stored timings of fleet tables are.

For every fully timed row (status ok, 5 samples or more, not screened out)
of each table given (attune export output, .json or .json.gz): the spread
median / min - 1 that tuner/noise.h judges (noisy over 0.5), and the tail
max / median, with percentiles, and the rows flagged noisy. docs/tuning.md
("Noisy timings") quotes its output:

    bench/noise_spread.py bench/realmodels-h200.json.gz \
        bench/realmodels-holdout-h200.json.gz
"""

import gzip
import json
import sys


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * len(v)))]


def main(paths):
    if not paths:
        print(__doc__)
        return 2
    for path in paths:
        with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
            t = json.load(f)
        spread, tail, flagged = [], [], 0
        for m in t["measurements"]:
            flagged += bool(m.get("noisy"))
            if (m["status"] != "ok" or m["n"] < 5 or m["time_us"] is None
                    or not m["time_us_min"] or m["note"].startswith("screened out")):
                continue
            spread.append(m["time_us"] / m["time_us_min"] - 1)
            tail.append(m["time_us_max"] / m["time_us"])
        if not spread:
            print("%s: no fully timed ok rows" % path)
            continue
        print("%s (%s): %d rows; spread p50 %.4f p99 %.4f max %.4f, over 0.5: %d; "
              "tail p50 %.3f p99 %.3f max %.3f; flagged noisy: %d"
              % (path, t["device"]["name"], len(spread), pct(spread, .5), pct(spread, .99),
                 max(spread), sum(s > 0.5 for s in spread), pct(tail, .5), pct(tail, .99),
                 max(tail), flagged))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
