#!/usr/bin/env python3
"""cudnn_knobs.py -- every knob setting of one cuDNN engine on one shape,
tuned and checked by the tuner's own protocol, not only the few settings
cuDNN's heuristics propose.

usage: cudnn_knobs.py --attune PATH --shape KEY [--engine 2] [--graph comp] [--max 192]
                      [--confirm 5] [--reps 3] [--device ID] [--out DIR]

1. Reads the engine's knob space: one `attune tune` of the settings
   heuristics propose, with ATTUNE_CUDNN_TRACE=1 (kernels/cuda/
   cuda_cudnn.c prints "knobs eng=E kcfg=C: TYPE:MIN..MAX/STRIDE ..."
   for each plan it builds).
2. Every knob code (a digit per knob, 0 = left to cuDNN, in the order
   printed; when there are more than --max, only the knobs the proposed
   configs set are varied, and the first --max of those taken), in
   batches of 64 (the most ATTUNE_CUDNN_KCFGS takes), each batch a fresh
   database tuned with `attune tune --screen 0` and ATTUNE_CUDNN_KCFGS=
   ENG:CODES: each setting is planned, checked against the float64
   reference and timed like any tactic. A batch whose tune measured other
   configs than those asked for (attune ignores a malformed list) stops
   the sweep. Settings the engine refuses are counted per status and
   note, with their codes.
3. The --confirm fastest ok settings and those heuristics propose, tuned
   again --reps times in fresh processes, in turns (forward, backward),
   so a setting that won by one lucky run does not stand.
Prints Markdown tables; the rows go to DIR/cudnn_knobs.jsonl.
"""
import argparse
import itertools
import json
import os
import re
import statistics
import sys
import tempfile
import time

import ab_env  # bench/ab_env.py: tune_fresh

INT32_MAX = 2 ** 31 - 1
BATCH = 64  # ATTUNE_CUDNN_KCFGS takes at most MAX_CFGS (64) codes



def tune(args, kcfgs, tag, trace=False):
    """A fresh database, the shape tuned with ATTUNE_CUDNN_KCFGS=ENG:kcfgs
    (None: heuristics' own list); (rows of cudnn tactics, stderr)."""
    env = dict(os.environ)
    env.pop("ATTUNE_CUDNN_KCFGS", None)
    if kcfgs is not None:
        env["ATTUNE_CUDNN_KCFGS"] = "%d:%s" % (args.engine, ",".join(str(c) for c in kcfgs))
    if trace:
        env["ATTUNE_CUDNN_TRACE"] = "1"
    t0 = time.time()
    try:
        ms, err = ab_env.tune_fresh(args.attune, args.device, [args.shape], env,
                                    os.path.join(args.out, "knobs-%s.db" % tag))
    except RuntimeError as e:
        raise RuntimeError("%s: %s" % (tag, e))
    pinned = kcfgs is not None
    rows = []
    for _, m in ms:
        t = m.get("tactic", "")
        k = re.search(r"cudnn/eng=(\d+)/graph=%s/kcfg=(\d+)/pad=1$" % args.graph, t)
        if k and int(k.group(1)) == args.engine:
            rows.append({"tag": tag, "kcfg": int(k.group(2)), "tactic": t, "status": m.get("status"),
                         "time_us": m.get("time_us"), "rel_err": m.get("rel_err"), "note": m.get("note") or ""})
    if pinned and sorted(r["kcfg"] for r in rows) != sorted(set(kcfgs)):
        # attune ignores a malformed ATTUNE_CUDNN_KCFGS (heuristics list instead)
        raise RuntimeError("%s: the tune measured kcfg %s, not the %d asked for"
                           % (tag, sorted(r["kcfg"] for r in rows), len(set(kcfgs))))
    print("%s: %d rows in %.1f s" % (tag, len(rows), time.time() - t0), file=sys.stderr, flush=True)
    return rows, err


def trace_lines(stderr, engine, graph=None):
    """(graph form or None, the text after the colon) of each knobs line of
    engine in the trace, graph's only when given (lines of the form before
    the graph was printed have none and are kept)."""
    out = []
    for line in stderr.splitlines():
        m = re.search(r"knobs (?:(\w+) )?eng=%d kcfg=\d+:(.*)$" % engine, line)
        if m and (graph is None or m.group(1) in (None, graph)):
            out.append((m.group(1), m.group(2), line))
    return out


def knob_space(stderr, engine, graph=None):
    """[(type, min, max, stride)] from the trace's first knobs line of
    engine (on graph, when given)."""
    for _, text, line in trace_lines(stderr, engine, graph):
        if text.endswith(" cut"):
            raise RuntimeError("the knobs line was cut at the trace's buffer: %r" % line)
        body = re.split(r" set ?", text)[0].strip()
        if body == "none":
            return []
        space = []
        for f in body.split():
            k = re.match(r"(-?\d+):(-?\d+)\.\.(-?\d+)/(\d+)$", f)
            if not k:
                raise RuntimeError("a knob field that is not TYPE:MIN..MAX/STRIDE: %r in %r" % (f, line))
            space.append(tuple(int(x) for x in k.groups()))
        return space
    raise RuntimeError("no 'knobs eng=%d' line in the trace (is the engine offered for this shape?)" % engine)


def knobs_set(stderr, engine, graph=None):
    """The knob types any traced config of engine sets."""
    used = set()
    for _, text, _ in trace_lines(stderr, engine, graph):
        m = re.search(r" set ?(\S+)$", text)
        if m:
            used |= {int(f.split("=")[0]) for f in m.group(1).split(",")}
    return used


def codes_of(space, only=None):
    """Every code in knob_encode's order: digit 0 leaves a knob unset;
    knobs whose type is not in only (when given) stay unset."""
    sizes = [(hi - lo) // st + 1 for _, lo, hi, st in space]
    out = []
    ranges = [range(n + 1) if only is None or space[i][0] in only else range(1)
              for i, n in enumerate(sizes)]
    for digits in itertools.product(*ranges):
        code, radix = 0, 1
        for d, n in zip(digits, sizes):
            code += d * radix
            radix *= n + 1
        if code <= INT32_MAX:  # knob_encode names no code past it
            out.append(code)
    return sorted(out)


def decode(space, code):
    parts = []
    for t, lo, hi, st in space:
        n = (hi - lo) // st + 1
        d = code % (n + 1)
        code //= n + 1
        if d:
            parts.append("%d=%d" % (t, lo + (d - 1) * st))
    return ",".join(parts) or "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attune", required=True)
    ap.add_argument("--shape", required=True)
    ap.add_argument("--engine", type=int, default=2)
    ap.add_argument("--graph", default="comp", help="the graph form whose rows are read (comp, sdpa)")
    ap.add_argument("--max", type=int, default=192)
    ap.add_argument("--confirm", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--device", default="0")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    a.out = a.out or tempfile.mkdtemp(prefix="cudnn-knobs-")
    os.makedirs(a.out, exist_ok=True)
    jl = open(os.path.join(a.out, "cudnn_knobs.jsonl"), "a")

    heur, err = tune(a, None, "heuristics", trace=True)
    proposed = sorted({r["kcfg"] for r in heur})
    for line in err.splitlines():
        if "knobs " in line and " eng=" in line:
            print("# trace:%s" % line.split("ms:", 1)[-1], flush=True)
    space = knob_space(err, a.engine, a.graph)
    total = 1
    for _, lo, hi, st in space:
        total *= (hi - lo) // st + 2
    only = None
    if total > a.max:
        only = knobs_set(err, a.engine, a.graph)
        print("# %d settings in all: only the knobs heuristics set are varied (%s)"
              % (total, sorted(only)), flush=True)
    codes = codes_of(space, only)
    print("# %s, engine %d: knobs %s (type:min..max/stride); %d settings, heuristics propose %s"
          % (a.shape, a.engine, " ".join("%d:%d..%d/%d" % k for k in space) or "none", len(codes),
             proposed), flush=True)
    if len(codes) > a.max:
        print("# only the first %d codes swept (--max)" % a.max, flush=True)
        codes = codes[:a.max]
    rows = []
    for i in range(0, len(codes), BATCH):
        rs, _ = tune(a, codes[i:i + BATCH], "sweep%d" % (i // BATCH))
        rows += rs
    for r in rows:
        jl.write(json.dumps(r) + "\n")
    ok = sorted((r for r in rows if r["status"] == "ok" and r["time_us"]), key=lambda r: r["time_us"])
    print("\n| kcfg | knobs | status | us | rel err | note |\n|---:|---|---|---:|---:|---|")
    for r in ok + [r for r in rows if r not in ok]:
        if r["status"] == "ok" or r["status"] == "inaccurate":
            print("| %d | %s | %s | %s | %s | %s |" % (
                r["kcfg"], decode(space, r["kcfg"]), r["status"],
                "%.1f" % r["time_us"] if r["time_us"] else "",
                "%.2e" % r["rel_err"] if r["rel_err"] is not None else "", r["note"][:60]))
    bad = {}
    for r in rows:
        if r["status"] not in ("ok", "inaccurate"):
            key = (r["status"], r["note"][:100])
            bad.setdefault(key, []).append(r["kcfg"])
    print("\n# settings not run: %s" % ("" if bad else "none"))
    for (status, note), ks in sorted(bad.items()):
        print("#   %d %s (kcfg %s): %s" % (len(ks), status, ",".join(str(k) for k in sorted(ks)), note))

    pick = [r["kcfg"] for r in ok[:a.confirm]]
    pick += [k for k in proposed if k not in pick]
    if not pick:
        return 0
    conf = {k: [] for k in pick}
    for rep in range(a.reps):
        order = pick if rep % 2 == 0 else list(reversed(pick))
        rs, _ = tune(a, order, "confirm%d" % rep)
        for r in rs:
            jl.write(json.dumps(r) + "\n")
            conf.setdefault(r["kcfg"], []).append(r)
    print("\n| kcfg | knobs | proposed | runs (us or status) | median us | rel err |\n|---:|---|---|---|---:|---:|")
    med = lambda rs: statistics.median([r["time_us"] for r in rs if r["status"] == "ok" and r["time_us"]] or [0])  # noqa: E731
    for k in sorted(conf, key=lambda k: med(conf[k]) or 1e30):
        rs = conf[k]
        cells = " ".join("%.1f" % r["time_us"] if r["status"] == "ok" else "**%s**" % r["status"] for r in rs)
        errs = [r["rel_err"] for r in rs if r["rel_err"] is not None]
        print("| %d | %s | %s | %s | %.1f | %s |" % (k, decode(space, k), "yes" if k in proposed else "",
                                                    cells, med(rs), "%.2e" % statistics.median(errs) if errs else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
