#!/usr/bin/env python3
"""it_bench_cudnn_knobs.py -- bench/cudnn_knobs.py's reading of the knob
trace and its knob codes, against the pairs cuDNN 9.19 printed on an H100
(2026-12-05: engine 2's one knob, type 24 = KERNEL_CFG over 0..36;
kcfg 33 sets it to 32, kcfg 8 to 7, kcfg 0 leaves it unset) and against
knob_encode's mixed radix (kernels/cuda/cuda_cudnn.c) worked by hand."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
import cudnn_knobs as ck  # noqa: E402

from checklib import check, summary  # noqa: E402  (tests/checklib.py)


def main():
    trace = "\n".join([
        "attune-cudnn       6.5 ms: knobs eng=2 kcfg=33: 24:0..36/1 set 24=32",
        "attune-cudnn      17.9 ms: knobs eng=2 kcfg=8: 24:0..36/1 set24=7",  # the first build's form
        "attune-cudnn      18.0 ms: knobs eng=2 kcfg=0: 24:0..36/1",
        "attune-cudnn      19.0 ms: knobs eng=9 kcfg=8: 24:0..36/1 set 24=7",
    ])
    space = ck.knob_space(trace, 2)
    check(space == [(24, 0, 36, 1)], "engine 2's space read: %s" % space)
    check(ck.knobs_set(trace, 2) == {24}, "the knobs heuristics set: %s" % ck.knobs_set(trace, 2))
    codes = ck.codes_of(space)
    check(codes == list(range(38)), "38 codes, 0 (unset) to 37")
    for code, want in ((33, "24=32"), (8, "24=7"), (0, "-"), (1, "24=0"), (37, "24=36")):
        check(ck.decode(space, code) == want, "kcfg %d decodes to %s (got %s)" % (code, want, ck.decode(space, code)))
    # two knobs, knob_encode's order: digit of the first (0..3: unset, 4, 6, 8)
    # plus 4 x the digit of the second (0..2: unset, 0, 1)
    two = [(5, 4, 8, 2), (7, 0, 1, 1)]
    codes = ck.codes_of(two)
    check(codes == list(range(12)), "two knobs: 4 x 3 = 12 codes")
    check(ck.decode(two, 1 + 4 * 2) == "5=4,7=1", "code 9: 5=4, 7=1 (%s)" % ck.decode(two, 9))
    check(ck.decode(two, 3 + 4 * 0) == "5=8", "code 3: 5=8 alone (%s)" % ck.decode(two, 3))
    only = ck.codes_of(two, only={7})
    check(only == [0, 4, 8], "only knob 7 varied: codes 0, 4, 8 (%s)" % only)
    check(ck.knob_space("x ms: knobs eng=3 kcfg=0: none", 3) == [], "an engine without knobs")
    # the graph form, printed since 2026-12-05 18:20: the asked form's line read
    forms = "\n".join(["x ms: knobs sdpa eng=2 kcfg=0: 24:0..3/1",
                        "x ms: knobs comp eng=2 kcfg=9: 24:0..36/1 set 24=8"])
    check(ck.knob_space(forms, 2, "comp") == [(24, 0, 36, 1)], "the comp graph's line, not the sdpa one's")
    check(ck.knob_space(forms, 2, "sdpa") == [(24, 0, 3, 1)], "the sdpa graph's line")
    check(ck.knobs_set(forms, 2, "sdpa") == set(), "no knob set on the sdpa line")
    # knob_encode names no code past 2^31 - 1: a wide space is cut there
    wide = [(1, 0, 999, 1), (2, 0, 999, 1), (3, 0, 999, 1), (4, 0, 2, 1)]
    codes = ck.codes_of(wide, only={4})
    check(all(c <= 2 ** 31 - 1 for c in codes) and len(codes) == 3, "codes past INT32_MAX left out: %s" % codes)
    for bad, what in (("x ms: knobs eng=2 kcfg=0: 24:0..3", "a field cut short"),
                      ("x ms: knobs comp eng=2 kcfg=0: 24:0..3/1 25:0..1/1 cut", "a line cut at the buffer"),
                      ("x ms: knobs eng=4 kcfg=0: 24:0..3/1", "no line of the engine asked")):
        try:
            ck.knob_space(bad, 2)
            check(False, what + " refused")
        except RuntimeError:
            check(True, what + " refused")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
