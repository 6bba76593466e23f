"""pairstats.py -- what adjacent pairs of two implementations' timings can
say (bench/e2e_models.py --pairs): the median of the ratios within the
pairs, a distribution-free confidence interval for it (order statistics
against the binomial: nothing assumed about how the ratios spread), and
the verdict the interval supports: "slower" when all of it is over 1,
"faster" when all of it is under 1, else "level" (the pairs cannot tell
the two apart at that confidence).

    import pairstats
    v = pairstats.verdict([a / b for a, b in pairs])
    v.word, v.median, v.lo, v.hi, v.coverage

As a command, the verdicts of e2e_models.py's JSON lines (their
forward_ratio_pairs), e.g. of a committed run:
    python3 bench/pairstats.py bench/e2e-h200-e8015e9-pairs.jsonl
"""
import collections
import json
import math
import statistics
import sys

Verdict = collections.namedtuple("Verdict", "word median lo hi coverage n")


def median_ci(xs, conf=0.95):
    """(lo, hi, coverage): the k-th smallest and k-th largest of xs for the
    largest k whose interval still covers the median with probability at
    least conf (coverage: that probability, exactly). With too few values
    for conf (under 6 at 0.95) the interval is the whole range and its
    coverage, 1 - 2^(1-n), says how much less it is."""
    s = sorted(xs)
    n = len(s)
    if n == 0:
        raise ValueError("median_ci of no values")
    tail, k = 0.0, 0  # tail = P(Bin(n, 1/2) <= k - 1)
    while k < n // 2:
        p = math.comb(n, k) / 2.0 ** n
        if tail + p > (1.0 - conf) / 2.0:
            break
        tail += p
        k += 1
    if k == 0:  # too few: the whole range
        k, tail = 1, 0.5 ** n
    return s[k - 1], s[n - k], 1.0 - 2.0 * tail


def verdict(ratios, conf=0.95):
    """The Verdict of ratios (A/B per pair): word "slower" (A slower: the
    interval over 1), "faster", or "level"."""
    lo, hi, cov = median_ci(ratios, conf)
    word = "slower" if lo > 1.0 else "faster" if hi < 1.0 else "level"
    return Verdict(word, statistics.median(ratios), lo, hi, cov, len(ratios))


def main(paths):
    if not paths:
        print("usage: pairstats.py E2E.jsonl ...", file=sys.stderr)
        return 2
    for path in paths:
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                if not r.get("forward_ratio_pairs"):
                    continue
                v = verdict(r["forward_ratio_pairs"])
                print("%s %-6s attune/sdpa forward in %d pairs: median %.4f, %.1f%% interval "
                      "%.4f-%.4f: %s" % (path, r["model"], v.n, v.median, 100 * v.coverage, v.lo,
                                          v.hi, v.word))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
