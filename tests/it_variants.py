#!/usr/bin/env python3
"""it_variants.py -- "ask for what you can run" (issue 24 item 4) over real HTTP.

On the small tuned CPU database of page_fixture.py (the CPU lists fused,
split and, for hkv < hq, split_repeat and folded): for every grid shape and
several sets of variants, GET /v1/tactic?variants= answers a tactic of the
set, and a measured answer is the best allowed measured row (recomputed
here from /v1/results: the fastest eligible row of the set, the bounds
taken among the set's rows, or an incumbent the fastest does not beat
beyond the noise); GET /v1/winners?variants= names the same winners, and
`attune winners --variants --json` prints the same rows; an untuned shape
gets a predicted answer of the set; a set the backend lists nothing of is a
404 naming what it lists; an unknown name is a 400; `attune query
--variants`, the Python client (variants=) and the C client
(attune_lookup_in) answer as the daemon does.

Environment: ATTUNED_BIN and ATTUNE_BIN (required, else skip: 77),
ATTUNE_SOURCE_DIR, ATTUNE_CLIENT_LIB (the C client part).
"""

import ctypes
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import page_fixture as fx  # noqa: E402
import clientlib  # noqa: E402

SKIP = 77
failures = []
SETS = ["split", "folded", "split_repeat,folded", "fused", "fused,split", "fused_splitkv",
        "cudnn"]


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
    return cond


def q(**kw):
    return urllib.parse.urlencode(kw)


def total(m):
    return m["time_us_copies"] if m.get("time_us_copies") is not None else m["time_us"]


def low_spread(m):
    s = (m["time_us"] - m["time_us_min"]) / m["time_us"] if m["time_us"] else 0
    return s if s > 0 and math.isfinite(s) else 0


def best_allowed(rows, allowed, bound):
    """(eligible rows of the set, the fastest of them): select_winner's
    rule among the allowed rows alone (tuner/select.c)."""
    ok = [m for m in rows if m["variant"] in allowed and m["status"] == "ok"
          and m["time_us"] is not None and m["rel_err"] is not None and m["rel_err"] >= 0
          and not m.get("noisy")]  # a noisy timing is no answer (tuner/noise.h)
    if not ok:
        return [], None
    best_err = min(m["rel_err"] for m in ok)
    rel_bound = 8 * best_err if best_err > 0 else math.inf
    elig = [m for m in ok if m["rel_err"] <= bound and m["rel_err"] <= rel_bound]
    if not elig:
        return [], None
    return elig, min(elig, key=lambda m: (total(m), m["rel_err"]))


def check_measured(d, key, vs, t, bounds):
    """A measured answer limited to vs is the best allowed row of its stack."""
    st, res = d.get("/v1/results?" + q(device="cpu", shape=key))
    rows = [m for m in res["measurements"] if m["stack"] == t["measured_stack"]]
    elig, fastest = best_allowed(rows, vs.split(","), bounds[key.split(".")[6]])
    mine = [m for m in elig if m["tactic"] == t["tactic"]]
    if not check(mine and fastest, "%s [%s]: %s is an eligible row of the set" %
                 (key, vs, t["tactic"])):
        return
    if fastest["tactic"] != t["tactic"]:
        # hysteresis: the incumbent stays within the noise
        noise = max(low_spread(fastest), low_spread(mine[0]))
        check(total(fastest) >= total(mine[0]) * (1 - noise),
              "%s [%s]: %s kept within the noise of the fastest %s" %
              (key, vs, t["tactic"], fastest["tactic"]))
    else:
        check(True, "%s [%s]: %s is the fastest allowed row" % (key, vs, t["tactic"]))


def lookups(d, keys, bounds):
    """Every grid shape x every set: the answers, checked; {(key, vs): answer}."""
    got = {}
    for key in keys:
        st, listed = d.get("/v1/tactic?" + q(device="cpu", shape=key))
        for vs in SETS:
            st, t = d.get("/v1/tactic?" + q(device="cpu", shape=key, variants=vs))
            got[(key, vs)] = (st, t)
            if st == 404:
                check("error" in t and "variants=" in t["error"],
                      "%s [%s]: 404 says why: %s" % (key, vs, t.get("error")))
                continue
            if not check(st == 200 and t.get("variant") in vs.split(","),
                         "%s [%s]: 200, variant %s in the set" % (key, vs, t.get("variant"))):
                continue
            check(t.get("variants") == vs, "%s [%s]: the answer names its set" % (key, vs))
            if t["source"] == "measured":
                check_measured(d, key, vs, t, bounds)
            if listed.get("variant") in vs.split(",") and listed["source"] == "measured":
                check(t["tactic"] == listed["tactic"],
                      "%s [%s]: the unrestricted winner stays when the set allows it" %
                      (key, vs))
    return got


def check_sets(got, keys):
    """What the CPU backend lists decides the 404s."""
    for key in keys:
        mha = key.split(".")[1][2:] == key.split(".")[2][3:]
        for vs in ("fused_splitkv", "cudnn"):
            check(got[(key, vs)][0] == 404, "%s [%s]: the CPU lists none: 404" % (key, vs))
        check(got[(key, "fused")][0] == 200 and got[(key, "split")][0] == 200,
              "%s: fused and split always answer" % key)
        if mha:
            st, e = got[(key, "folded")]
            check(st == 404 and "lists only fused,split" in e.get("error", ""),
                  "%s [folded]: MHA has no folded tactic: 404 naming what is listed" % key)


def check_winners(d, attune, db, got, keys):
    for vs in ("split", "split_repeat,folded"):
        st, w = d.get("/v1/winners?" + q(device="cpu", variants=vs))
        check(st == 200 and w.get("variants") == vs, "GET /v1/winners?variants=%s" % vs)
        for r in w.get("winners", []):
            st_t, t = got[(r["shape"], vs)]
            if r["winner"] is None:
                check(st_t == 404 or t["source"] != "measured",
                      "winners [%s]: %s has no winner of the set, nor a measured answer" %
                      (vs, r["shape"]))
                continue
            check(r["winner"]["variant"] in vs.split(",") and st_t == 200
                  and t["tactic"] == r["winner"]["tactic"],
                  "winners [%s]: %s's winner %s is /v1/tactic's" %
                  (vs, r["shape"], r["winner"]["tactic"]))
            ru = r["runner_up"]
            check(ru is None or ru["variant"] in vs.split(","),
                  "winners [%s]: %s's runner-up is of the set" % (vs, r["shape"]))
        out = subprocess.run([attune, "winners", "--db", db, "--device", "cpu", "--json",
                              "--variants", vs], capture_output=True, text=True, timeout=60)
        cli = json.loads(out.stdout) if out.returncode == 0 else {}
        check(cli.get("winners") == w.get("winners") and cli.get("variants") == vs,
              "attune winners --variants %s --json == GET /v1/winners" % vs)
    for args in ({"variants": "nope"}, {"variants": "split,"}):
        st, e = d.get("/v1/winners?" + q(device="cpu", **args))
        check(st == 400 and "variants" in e.get("error", ""), "winners %s -> 400" % args)
    out = subprocess.run([attune, "winners", "--db", db, "--device", "cpu", "--variants", "x"],
                         capture_output=True, text=True, timeout=60)
    check(out.returncode == 2 and "unknown variant 'x'" in out.stderr,
          "attune winners --variants x: usage error naming it")


def check_misc(d, keys):
    for vs, code in [("nope", 400), ("split,,fused", 400), ("Split", 400), ("split, fused", 200)]:
        st, e = d.get("/v1/tactic?" + q(device="cpu", shape=keys[0], variants=vs))
        check(st == code, "/v1/tactic variants=%r -> %d (%s)" % (vs, code, st))
        if code == 400:
            check("variants=" in e.get("error", "") and "known: fused" in e.get("error", "")
                  or "empty name" in e.get("error", ""), "  the error names the problem: %s"
                  % e.get("error"))
    # an untuned shape: predicted (or nearest) among the set
    new = "b2.hq8.hkv2.sq40.skv100.d64.f16.nc"
    for vs in ("split", "folded", "split_repeat"):
        st, t = d.get("/v1/tactic?" + q(device="cpu", shape=new, variants=vs))
        check(st == 200 and t["variant"] == vs and t["source"] in ("predicted", "nearest"),
              "untuned %s [%s]: %s answer %s" % (new, vs, t.get("source"), t.get("tactic")))
    # client bytes that are not UTF-8: the error still names the parameter
    for arg, want in (("variants=%ff", "variants='?'"), ("device=%ff", "unknown device '?'")):
        st, t = d.get("/v1/tactic?shape=%s&%s%s" % (new, arg, "" if "device" in arg
                                                       else "&device=cpu"))
        check(st in (400, 404) and want in t.get("error", ""),
              "%s: the error names it (%d %s)" % (arg, st, t.get("error")))
    # nothing qualifies (a bound nothing meets): the default is a pad=8
    # tactic of the set (aligned rows, docs/api.md), not its first listed
    for vs in ("split", "split,folded"):
        st, t = d.get("/v1/tactic?" + q(device="cpu", shape=new, variants=vs,
                                        max_rel_err="1e-12"))
        check(st == 200 and t["source"] == "default" and "/pad=8" in t["tactic"] and
              t["variant"] in vs.split(","),
              "default among [%s]: a pad=8 tactic (%s %s)" % (vs, t.get("source"),
                                                              t.get("tactic")))


def check_clients(d, attune, got, keys, src):
    sys.path.insert(0, os.path.join(src, "client", "python"))
    import attune_client as ac
    pc = ac.Client(d.url, timeout=5.0)
    lib = clientlib.load()
    c = lib.attune_client_new(d.url.encode(), 5000) if lib else None
    for key in keys:
        for vs in SETS:
            st, t = got[(key, vs)]
            a = pc.lookup_shape(key, device="cpu", variants=vs)
            if st == 200:
                check(a.code == ac.OK and a.tactic == t["tactic"],
                      "python [%s] %s = daemon" % (vs, key))
            else:
                check(a.code == ac.REJECTED and
                      (a.tactic, a.source) == (("fused/pad=8", "default") if "fused" in vs.split(",")
                                               else ("", "none")),
                      "python [%s] %s: refused, fallback %r" % (vs, key, a.tactic))
            if lib:
                rc, ca = clientlib.lookup(lib, c, key, variants=vs)
                check(rc == (0 if st == 200 else 2) and
                      ca.tactic.decode() == (t["tactic"] if st == 200 else a.tactic),
                      "C attune_lookup_in [%s] %s = daemon" % (vs, key))
    a = pc.lookup_shape(keys[0], device="cpu", variants=["folded", "split", "split"])
    check(a.code == ac.OK and a.variant in ("folded", "split"), "python: variants as a list")
    a = pc.lookup_shape(keys[0], device="cpu", variants="split;fused")
    check(a.code == ac.INVALID and a.source == "none", "python: a malformed list is INVALID")
    if lib:
        lib.attune_client_free(c)
    out = subprocess.run([attune, "query", "--url", d.url, "--device", "cpu", "--shape",
                          keys[0], "--variants", "split", "--json"],
                         capture_output=True, text=True, timeout=60)
    j = json.loads(out.stdout) if out.returncode == 0 else {}
    check(j.get("tactic") == got[(keys[0], "split")][1]["tactic"],
          "attune query --variants split = daemon")
    out = subprocess.run([attune, "query", "--url", d.url, "--device", "cpu", "--shape",
                          keys[0], "--variants", "cudnn"], capture_output=True, text=True,
                         timeout=60)
    check(out.returncode == 3 and "variants=cudnn" in out.stderr and "none" in out.stdout,
          "attune query --variants cudnn on the CPU: refused (3), no tactic, says why")
    out = subprocess.run([attune, "query", "--help"], capture_output=True, text=True)
    check("--variants LIST" in out.stdout, "attune query --help documents --variants")


def main():
    attuned, attune = os.environ.get("ATTUNED_BIN"), os.environ.get("ATTUNE_BIN")
    src = os.environ.get("ATTUNE_SOURCE_DIR", os.path.dirname(HERE))
    if not attuned or not attune:
        print("skip: ATTUNED_BIN and ATTUNE_BIN are needed (attuned not built?)")
        return SKIP
    work = tempfile.mkdtemp(prefix="it_variants.")
    d = None
    try:
        db = fx.make_db(attune, src, work)
        d = fx.Daemon(attuned, work, db)
        keys = fx.grid_keys(src)
        st, w = d.get("/v1/winners?" + q(device="cpu"))
        got = lookups(d, keys, w["max_rel_err"])
        check_sets(got, keys)
        check_winners(d, attune, db, got, keys)
        check_misc(d, keys)
        check_clients(d, attune, got, keys, src)
    finally:
        rc = d.stop() if d else 0
        if d:
            check(rc == 0, "attuned exits cleanly on SIGTERM (%s)" % rc)
        if failures:
            log = os.path.join(work, "attuned.log")
            if os.path.exists(log):
                print(open(log).read()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
