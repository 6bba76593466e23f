#!/usr/bin/env python3
"""it_bench_pairstats.py -- bench/pairstats.py, the verdict of
e2e_models.py --pairs (issue 24: is a model slower end to end?), against
values worked out by hand: the interval's order statistics and exact
coverage, the three verdicts, and the few-values case."""
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
import pairstats  # noqa: E402

from checklib import check, summary  # noqa: E402  (tests/checklib.py)


def tail(n, k):
    """P(Bin(n, 1/2) <= k)."""
    return sum(math.comb(n, j) for j in range(k + 1)) / 2.0 ** n


def main():
    # 40 values 1..40: P(Bin(40) <= 13) = 0.0192 <= 0.025 < P(<= 14) = 0.0403,
    # so the 14th smallest and 14th largest (14 and 27), coverage 1 - 2 * 0.0192
    lo, hi, cov = pairstats.median_ci(list(range(40, 0, -1)))
    check((lo, hi) == (14, 27), "n 40: the 14th smallest and largest (%s, %s)" % (lo, hi))
    check(abs(cov - (1 - 2 * tail(40, 13))) < 1e-12 and 0.96 < cov < 0.962,
          "n 40: coverage %.4f exact" % cov)
    # 6 values: P(Bin(6) = 0) = 1/64 <= 0.025: the whole range at 1 - 2/64
    lo, hi, cov = pairstats.median_ci([3, 1, 2, 6, 5, 4])
    check((lo, hi) == (1, 6) and abs(cov - (1 - 2 / 64)) < 1e-12, "n 6: min, max at 0.969")
    # 3 values: too few for 0.95; the range, its coverage 0.75 said
    lo, hi, cov = pairstats.median_ci([1.0, 1.2, 0.9])
    check((lo, hi) == (0.9, 1.2) and abs(cov - 0.75) < 1e-12, "n 3: the range, coverage 0.75")
    v = pairstats.verdict([1.01 + 0.001 * i for i in range(12)])
    check(v.word == "slower" and v.n == 12, "all over 1: slower (%s)" % v.word)
    v = pairstats.verdict([0.99 - 0.001 * i for i in range(12)])
    check(v.word == "faster", "all under 1: faster (%s)" % v.word)
    # 40 pairs, 21 over 1 as in the H200 runs: level
    v = pairstats.verdict([1.002] * 21 + [0.997] * 19)
    check(v.word == "level" and v.lo < 1 < v.hi, "21 of 40 over: level (%s)" % v.word)
    # 30 of 40 over 1: the 14th smallest is over 1: slower
    v = pairstats.verdict([1.001] * 30 + [0.999] * 10)
    check(v.word == "slower", "30 of 40 over: slower (%s)" % v.word)
    try:
        pairstats.median_ci([])
        check(False, "no values: refused")
    except ValueError:
        check(True, "no values: refused")
    # the command over e2e_models.py's JSON lines: a line per model with pairs
    import json
    import subprocess
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write(json.dumps({"model": "llama", "forward_ratio_pairs": [1.01] * 12}) + "\n")
        f.write(json.dumps({"model": "vit"}) + "\n")  # no pairs: no line
    r = subprocess.run([sys.executable, os.path.join(HERE, "..", "bench", "pairstats.py"), f.name],
                       capture_output=True, text=True)
    os.unlink(f.name)
    lines = r.stdout.splitlines()
    check(r.returncode == 0 and len(lines) == 1 and "llama" in lines[0] and
          lines[0].endswith(": slower"), "the command: %r" % r.stdout)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
