#!/usr/bin/env python3
"""it_pragma_after_else.py -- no `#pragma` directly after a bare `else` in
the CUDA sources (kernels/, bench/: .cu and .cuh).

Why: in version 3.26 of the sm90a kernel (docs/kernels.md, 2026-12-07) a
loop under `#pragma unroll` followed a bare `else` across an `#endif`:

        } else
    #endif
    #pragma unroll
        for (...) { ... }
    #pragma unroll
        for (...) ps[t] += ps[t + w];   /* meant for both branches */

and nvcc compiled the second loop into the `else`: half of each row's sum
was lost, silently (the GPU test's planted-error check caught it). A bare
`else` whose statement starts with a preprocessor directive is where that
can happen, so this test refuses it: write `else {` ... `}`.

Checks the rule on planted sources first (the form above must be caught,
with #if lines between or not; the braced form and an `else` followed by
an ordinary statement must pass), then on the tree. Prints each finding
as FILE:LINE.
"""
import os
import re
import sys

# lines that only steer the preprocessor: skipped between the else and
# what follows it
COND = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b")
PRAGMA = re.compile(r"^\s*#\s*pragma\b")


def strip_comment(line, in_block):
    """Line without its comments; in_block: inside a /* */ at its start."""
    out, i = [], 0
    while i < len(line):
        if in_block:
            end = line.find("*/", i)
            if end < 0:
                return "".join(out), True
            i, in_block = end + 2, False
        elif line.startswith("/*", i):
            in_block, i = True, i + 2
        elif line.startswith("//", i):
            break
        else:
            out.append(line[i])
            i += 1
    return "".join(out), in_block


def findings(text):
    """Line numbers (1-based) of bare elses followed by a #pragma."""
    lines, in_block, code = text.split("\n"), False, []
    for line in lines:
        s, in_block = strip_comment(line, in_block)
        code.append(s)
    out = []
    for n, s in enumerate(code):
        if not re.search(r"(^|[\s}])else\s*$", s):
            continue
        k = n + 1
        while k < len(code) and (COND.match(code[k]) or not code[k].strip()):
            k += 1
        if k < len(code) and PRAGMA.match(code[k]):
            out.append(n + 1)
    return out


def self_test():
    bad = "    if (a) {\n        x();\n    } else\n#endif\n#pragma unroll\n    for (;;) {}\n"
    bad2 = "if (a) b(); else\n#pragma unroll\nfor (;;) {}\n"
    good = "    if (a) {\n        x();\n    } else {\n#endif\n#pragma unroll\n        for (;;) {}\n    }\n"
    good2 = "if (a) b(); else\n    c();\n#pragma unroll\nfor (;;) {}\n"
    comment = "/* a word: else\n#pragma unroll */ int x;\n"
    cases = [(bad, [3]), (bad2, [1]), (good, []), (good2, []), (comment, [])]
    for i, (src, want) in enumerate(cases):
        got = findings(src)
        if got != want:
            print(f"FAIL planted case {i}: found {got}, expected {want}")
            return False
    print("ok   planted: a bare else before #pragma is caught, braces and comments pass")
    return True


def main():
    root = os.environ.get("ATTUNE_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..")
    if not self_test():
        return 1
    bad, n = [], 0
    for top in ("kernels", "bench"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith((".cu", ".cuh")):
                    continue
                path = os.path.join(dirpath, f)
                n += 1
                with open(path, encoding="utf-8", errors="replace") as fh:
                    for line in findings(fh.read()):
                        bad.append(f"{os.path.relpath(path, root)}:{line}")
    for b in bad:
        print(f"FAIL {b}: a bare else followed by #pragma (write else {{ ... }})")
    if bad:
        return 1
    print(f"ok   {n} CUDA sources: no bare else before a #pragma")
    return 0


if __name__ == "__main__":
    sys.exit(main())
