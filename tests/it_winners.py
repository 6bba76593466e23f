#!/usr/bin/env python3
"""it_winners.py -- GET /v1/winners, `attune winners` and GET / over real HTTP.

On a small tuned CPU database with a stale shape and a stack change
(page_fixture.py): every grid shape is listed; each winner is what
GET /v1/tactic answers for that shape, with the margin over a runner-up that
is no faster (unless kept as incumbent) and eligible; the stale shape is
stale and the changed shape names its previous winner; the filters keep
exactly the matching rows; `attune winners --json` on the same file prints
the same rows; the table names each winner; bad filters are 400s. The page:
served with a CSP at GET / with its assets, no token, same Host check, no
method but GET, no path outside web/.

Environment: ATTUNED_BIN and ATTUNE_BIN (required, else skip: 77),
ATTUNE_SOURCE_DIR.
"""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import page_fixture as fx  # noqa: E402

SKIP = 77
from checklib import check, failures  # noqa: E402  (tests/checklib.py)


def q(**kw):
    return urllib.parse.urlencode(kw)


def main():
    attuned, attune = os.environ.get("ATTUNED_BIN"), os.environ.get("ATTUNE_BIN")
    src = os.environ.get("ATTUNE_SOURCE_DIR", os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    if not attuned or not attune:
        print("skip: ATTUNED_BIN and ATTUNE_BIN are needed (attuned not built?)")
        return SKIP
    work = tempfile.mkdtemp(prefix="it_winners.")
    d = None
    try:
        db = fx.make_db(attune, src, work)
        d = fx.Daemon(attuned, work, db)
        keys = fx.grid_keys(src)

        st, w = d.get("/v1/winners?" + q(device="cpu"))
        check(st == 200, "GET /v1/winners answers 200 (%s)" % st)
        rows = {r["shape"]: r for r in w.get("winners", [])}
        check(sorted(rows) == sorted(keys), "every grid shape is listed once")
        check(w.get("device", "").startswith("CPU-") and w.get("stack"), "device and stack named")
        for key in keys:
            r = rows.get(key)
            if r is None:
                continue
            st, t = d.get("/v1/tactic?" + q(device="cpu", shape=key))
            win = r["winner"]
            if not check(win is not None, "%s has a winner" % key):
                continue
            check(t.get("source") == "measured" and t.get("tactic") == win["tactic"],
                  "%s: winner %s is /v1/tactic's (%s)" % (key, win["tactic"], t.get("tactic")))
            check(r["stale"] == t.get("stale") == (key == fx.STALE_SHAPE),
                  "%s: stale %s agrees with /v1/tactic" % (key, r["stale"]))
            total = win["time_us_copies"] if win["time_us_copies"] is not None else win["time_us"]
            check(math.isclose(win["time_us_total"], total), "%s: time_us_total" % key)
            bound = w["max_rel_err"][r["dtype"]]
            check(win["rel_err"] <= bound, "%s: winner within the bound %g" % (key, bound))
            ru = r["runner_up"]
            if ru is not None:
                check(math.isclose(r["margin"], ru["time_us_total"] / win["time_us_total"]),
                      "%s: margin = runner-up time / winner time" % key)
                check(ru["rel_err"] <= bound and ru["tactic"] != win["tactic"],
                      "%s: runner-up %s is another eligible tactic" % (key, ru["tactic"]))
                # a faster runner-up only when the winner was kept as incumbent
                st, res = d.get("/v1/results?" + q(device="cpu", shape=key))
                mine = [m for m in res["measurements"] if m["stack"] == r["stack"]]
                check(r["tactics"] == len(mine), "%s: tactics counts the stack's rows" % key)
                if r["margin"] < 1:
                    print("     (%s: incumbent kept within the noise)" % key)
            else:
                check(r["margin"] is None, "%s: no runner-up, no margin" % key)

        stale = rows.get(fx.STALE_SHAPE, {})
        check(stale.get("stack") == fx.OLD_STACK, "stale shape's winner comes from the old stack")
        changed = rows.get(fx.CHANGED_SHAPE, {})
        prev = changed.get("previous") or {}
        check(prev.get("stack") == fx.OLD_STACK and not changed.get("stale"),
              "changed shape: fresh winner, previous winner from the old stack")
        check(all(r["previous"] is None for k, r in rows.items()
                  if k not in (fx.CHANGED_SHAPE,)), "no previous winner elsewhere")

        # filters keep exactly the matching rows
        all_rows = w["winners"]
        for args, pred in [({"dtype": "bf16"}, lambda r: r["dtype"] == "bf16"),
                           ({"d": "64"}, lambda r: r["d"] == 64),
                           ({"causal": "true"}, lambda r: r["causal"]),
                           ({"stale": "true"}, lambda r: r["stale"]),
                           ({"stale": "false", "dtype": "f16"},
                            lambda r: not r["stale"] and r["dtype"] == "f16")]:
            st, f = d.get("/v1/winners?" + q(device="cpu", **args))
            want = [r["shape"] for r in all_rows if pred(r)]
            got = [r["shape"] for r in f.get("winners", [])]
            check(st == 200 and got == want and want, "filter %s keeps %d rows" % (args, len(want)))
        for args, code in [({"dtype": "f8"}, 400), ({"d": "0"}, 400), ({"causal": "yes"}, 400),
                           ({"stale": "2"}, 400), ({"shape": "x"}, 400), ({}, 400)]:
            params = dict(args)
            if "device" not in params and args:
                params["device"] = "cpu"
            st, e = d.get("/v1/winners?" + q(**params))
            check(st == code and "error" in e, "winners %s -> %d" % (args, code))
        st, e = d.get("/v1/winners?" + q(device="no-such-gpu"))
        check(st == 404, "unknown device -> 404")

        # the CLI on the same file prints the same rows
        out = subprocess.run([attune, "winners", "--db", db, "--device", "cpu", "--json"],
                             capture_output=True, text=True, timeout=60)
        cli = json.loads(out.stdout) if out.returncode == 0 else {}
        check(cli.get("winners") == all_rows, "attune winners --json == GET /v1/winners")
        check(cli.get("stack") == w["stack"], "same current stack")
        out = subprocess.run([attune, "winners", "--db", db, "--device", "cpu", "--dtype", "f32"],
                             capture_output=True, text=True, timeout=60)
        lines = out.stdout.splitlines()
        want = [r for r in all_rows if r["dtype"] == "f32"]
        check(out.returncode == 0 and len(lines) == 2 + len(want) and all(
            r["shape"] in "\n".join(lines) and r["winner"]["tactic"] in "\n".join(lines)
            for r in want), "attune winners table names each f32 winner")
        out = subprocess.run([attune, "winners", "--db", db, "--device", "cpu", "--causal", "x"],
                             capture_output=True, text=True, timeout=60)
        check(out.returncode == 2, "attune winners with a bad filter: usage error")

        # the page: GET only, no token, the same Host check
        st, body, h = d.request("GET", "/")
        check(st == 200 and "<html" in body.lower(), "GET / serves the page")
        check("text/html" in h.get("Content-Type", ""), "as text/html")
        check("default-src 'none'" in h.get("Content-Security-Policy", ""), "with a strict CSP")
        for asset, ctype in [("/ui/app.js", "javascript"), ("/ui/style.css", "text/css")]:
            st, body, h = d.request("GET", asset)
            check(st == 200 and ctype in h.get("Content-Type", ""), "GET %s" % asset)
        for path in ["/ui/index.html", "/ui/", "/ui/../CMakeLists.txt", "/ui/x/app.js",
                     "/ui/embed.cmake", "/index.html"]:
            st, _ = d.get(path)
            check(st == 404, "GET %s -> 404" % path)
        st, _ = d.get("/", headers={"Host": "evil.example:7373"})
        check(st == 403, "a foreign Host is refused (403)")
        st, _, h = d.request("POST", "/", body={})
        check(st == 405, "POST / -> 405")
        st, _, _ = d.request("DELETE", "/ui/app.js")
        check(st == 405, "DELETE /ui/app.js -> 405")
        check(d.get("/v1/health")[0] == 200, "attuned still answers")
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
