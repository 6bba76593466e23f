#!/usr/bin/env python3
"""fp8_table.py -- the e4m3 against bf16 table of bench/fp8.sh.

usage: fp8_table.py [--gpu-name NAME] WINNERS.json RESULTS.json...

WINNERS.json is `attune winners --json`, each RESULTS.json one `attune
results --shape KEY --json`. Prints a Markdown table: per bf16 shape, the
bf16 winner and the e4m3 winner (time with copies, TFLOP/s over the visible
(query, key) pairs, relative L2 error; e4m3's also against the float64
reference of the bf16 values its inputs were quantized from, when the store
keeps it), the speed-up, and, where e4m3 has no winner, why (the notes of
its refused tactics). Under it, issue 30's bar for the 8k non-causal e4m3
anchor when the run has it (bench/bars.py)."""
import json
import sys


def parse_key(key):
    f = key.split(".")
    out = {}
    for p in f:
        for name in ("hkv", "hq", "skv", "sq", "b", "d"):
            if p.startswith(name) and p[len(name):].isdigit():
                out[name] = int(p[len(name):])
                break
    out["dtype"] = f[-2]
    out["causal"] = f[-1] == "c"
    return out


def flops(key):
    s = parse_key(key)
    sq, skv = s["sq"], s["skv"]
    if s["causal"]:
        pairs = sum(min(max(i + skv - sq + 1, 0), skv) for i in range(sq))
    else:
        pairs = sq * skv
    return 4.0 * s["b"] * s["hq"] * pairs * s["d"]


def src_err(m):
    for k, v in m.items():
        if ("src" in k or "source" in k) and isinstance(v, (int, float)):
            return v
    return None


def winner_row(res):
    if res is None:
        return None
    for m in res.get("measurements", []):
        if m.get("winner"):
            return m
    w = res.get("winner")
    for m in res.get("measurements", []):
        if m.get("tactic") == w:
            return m
    return None


def why_none(res):
    if res is None:
        return "not tuned"
    notes = {}
    for m in res.get("measurements", []):
        key = "%s: %s" % (m.get("status"), m.get("note") or "")
        notes[key] = notes.get(key, 0) + 1
    return "; ".join("%s (%d)" % (k, n) for k, n in sorted(notes.items())) or "no rows"


def main():
    args = sys.argv[1:]
    gpu = None
    if len(args) >= 2 and args[0] == "--gpu-name":
        gpu, args = args[1], args[2:]
    if len(args) < 1:
        print(__doc__.strip())
        return 2
    results = {}
    for path in args[1:]:
        with open(path) as f:
            r = json.load(f)
        results[r["shape"]] = r
    print("| shape | bf16 winner | us | TFLOP/s | rel err | e4m3 winner | us | TFLOP/s | "
          "rel err | vs bf16 source | e4m3 speed-up |")
    print("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    speedups = []
    for key in sorted((k for k in results if ".bf16." in k), key=lambda k: list(results).index(k)):
        b = winner_row(results.get(key))
        k8 = key.replace(".bf16.", ".e4m3.")
        e = winner_row(results.get(k8))
        fl = flops(key)
        cells = [key.replace(".bf16", "")]
        if b:
            tb = b["time_us_paid"]
            cells += ["`%s`" % b["tactic"], "%.1f" % tb, "%.0f" % (fl / tb / 1e6), "%.1e" % b["rel_err"]]
        else:
            tb = None
            cells += ["none", "", "", ""]
        if e:
            te = e["time_us_paid"]
            se = src_err(e)
            cells += ["`%s`" % e["tactic"], "%.1f" % te, "%.0f" % (fl / te / 1e6), "%.1e" % e["rel_err"],
                      "%.1e" % se if se is not None else "n/a"]
            if tb:
                speedups.append(tb / te)
                cells.append("%.2fx" % (tb / te))
            else:
                cells.append("")
        else:
            cells += ["none: " + why_none(results.get(k8)), "", "", "", "", ""]
        print("| " + " | ".join(cells) + " |")
    if speedups:
        g = 1.0
        for x in speedups:
            g *= x
        g **= 1.0 / len(speedups)
        print("\ne4m3 winners: %d of %d shapes; geomean speed-up over bf16 %.2fx (min %.2fx, max %.2fx)"
              % (len(speedups), sum(1 for k in results if ".bf16." in k), g, min(speedups), max(speedups)))
    from bars import E4M3_KEY, e4m3_lines  # bench/bars.py (it imports flops from here)

    if E4M3_KEY in results:
        w = winner_row(results[E4M3_KEY])
        print("\n" + "\n".join(e4m3_lines(w and w.get("time_us_paid"), w and w.get("tactic"), gpu)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
