#!/usr/bin/env python3
"""it_pins.py -- pins (issue 28 item 1) through the CLI and a real attuned.

A CPU database with one shape tuned (A), a fleet table of the same CPU
model with another (C) imported, and a shape nobody tuned (D). Checks:
a pin written by `attune pin` changes the next lookup's answer (source
pinned, with its reason); the pin travels in GET /v1/export, through
`attune import` into another database, and answers in process (`attune
query --url file:`); `attune unpin` restores the answer; an excluded
tactic (exact, or a variant prefix, or for the model) is never answered
by any source (measured: the next best measured; fleet; predicted), an
exclusion beats a force of the same tactic, and with variants= it can
leave nothing (404); bad input is refused with messages naming what is
wrong; the pin routes without a token are 401.

Environment: ATTUNED_BIN and ATTUNE_BIN (required, else skip: 77).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from daemonlib import Daemon  # noqa: E402

SKIP = 77
A = "b1.hq4.hkv1.sq16.skv64.d32.f32.nc"
C = "b1.hq4.hkv1.sq24.skv64.d32.f32.nc"
D = "b2.hq4.hkv1.sq48.skv96.d32.f32.nc"
MHA = "b1.hq4.hkv4.sq16.skv64.d32.f32.nc"
FLEET_ID = "CPU-00000000000000f1"
from checklib import check, summary  # noqa: E402  (tests/checklib.py)


def run(args, env, check_rc=None):
    p = subprocess.run([os.environ["ATTUNE_BIN"]] + args, env=env, capture_output=True,
                       text=True, timeout=60)
    if check_rc is not None and p.returncode != check_rc:
        print("  %s -> %d\n  stdout: %s\n  stderr: %s" % (args, p.returncode, p.stdout, p.stderr))
    return p


def tactic(d, key, **kw):
    st, a = d.get("/v1/tactic?" + urllib.parse.urlencode(dict(device="cpu", shape=key, **kw)))
    return st, a


def make_dbs(work, env):
    """var/attune.db with A tuned; fleet.json: C tuned, as another CPU of the model."""
    os.makedirs(os.path.join(work, "var"))
    for db, key in ((os.path.join(work, "var", "attune.db"), A), (os.path.join(work, "b.db"), C)):
        run(["tune", "--db", db, "--device", "cpu", "--shape", key, "--budget-ms", "5",
             "--quiet"], env, 0)
    run(["export", "--db", os.path.join(work, "b.db"), "--device", "cpu", "-o",
         os.path.join(work, "b.json")], env, 0)
    with open(os.path.join(work, "b.json")) as f:
        t = json.load(f)
    t["device"]["id"] = FLEET_ID
    return json.dumps(t).encode()


def pin(env, *args):
    return run(["pin"] + list(args) + ["--reason", "it_pins", "--author", "tester", "--json"],
               env)


def pin_id(p):
    try:
        return json.loads(p.stdout)["pins"][0]["id"]
    except (ValueError, KeyError, IndexError):
        return None


def check_force(d, env, work, base_a):
    """A force from the CLI answers, travels in tables, and unpins."""
    st, res = d.get("/v1/results?device=cpu&shape=" + A)
    other = [m["tactic"] for m in res["measurements"]
             if m["status"] == "ok" and m["tactic"] != base_a]
    x = other[0]
    p = pin(env, "--force", x, "--shape", A, "--device", "cpu")
    check(p.returncode == 0 and pin_id(p), "attune pin --force exits 0 and prints the pin")
    st, a = tactic(d, A)
    check(a["source"] == "pinned" and a["tactic"] == x and a["pin_reason"] == "it_pins",
          "the next lookup answers the forced tactic, source pinned (%s)" % a.get("tactic"))
    st, text = d.request("GET", "/v1/export?device=cpu")
    exp = os.path.join(work, "export.json")
    with open(exp, "wb") as f:
        f.write(text)
    check(any(q["tactic"] == x for q in json.loads(text).get("pins", [])), "export carries it")
    fresh = os.path.join(work, "fresh.db")
    run(["tune", "--db", fresh, "--device", "cpu", "--shape", MHA, "--budget-ms", "2",
         "--quiet"], env, 0)
    p = run(["import", "--db", fresh, exp], env, 0)
    check(p.returncode == 0 and "1 pin\n" in p.stdout, "attune import merges it: " + p.stdout)
    p = run(["pins", "--db", fresh, "--json"], env, 0)
    check([q["tactic"] for q in json.loads(p.stdout)["pins"]] == [x], "attune pins --db lists it")
    for src in (exp, fresh):
        p = run(["query", "--url", "file:" + src, "--device", "cpu", "--shape", A, "--json"],
                env, 0)
        ans = json.loads(p.stdout)
        check(ans["source"] == "pinned" and ans["tactic"] == x,
              "in process from %s: pinned %s" % (os.path.basename(src), ans.get("tactic")))
    p = run(["unpin", str(pin_id_of(d, x))], env, 0)
    st, a = tactic(d, A)
    check(p.returncode == 0 and a["source"] == "measured" and a["tactic"] == base_a,
          "attune unpin restores the measured answer")


def pin_id_of(d, tactic_text):
    st, ps = d.get("/v1/pins")
    return [q["id"] for q in ps["pins"] if q["tactic"] == tactic_text][0]


def check_exclusions(d, env, base_a, base_c, cpu_name):
    """Excluded tactics never answer, whatever the source."""
    fam = base_a.split("/")[0]
    p = pin(env, "--exclude", base_a, "--shape", A, "--device", "cpu")
    st, a = tactic(d, A)
    check(p.returncode == 0 and a["source"] == "measured" and a["tactic"] != base_a,
          "exact exclusion: the next best measured (%s)" % a.get("tactic"))
    p = pin(env, "--exclude", base_c, "--model", cpu_name.lower())
    st, c = tactic(d, C)
    check(p.returncode == 0 and c["source"] == "fleet" and c["tactic"] != base_c,
          "model exclusion: the fleet's next best (%s)" % c.get("tactic"))
    p = pin(env, "--exclude", fam, "--shape", "b*.hq4.hkv1.sq*.skv*.d32.f32.*")
    for key in (A, C, D):
        st, a = tactic(d, key)
        check(st == 200 and not a["tactic"].startswith(fam + "/"),
              "prefix %s excluded for %s: %s answers %s" % (fam, key, a.get("source"),
                                                          a.get("tactic")))
    st, a = tactic(d, D)
    check(a["source"] in ("predicted", "nearest", "default"), "D is predicted: " + a["source"])
    p = pin(env, "--force", base_a, "--shape", A, "--device", "cpu")
    st, a = tactic(d, A)
    check(a["source"] != "pinned" and a["tactic"] != base_a,
          "an exclusion beats a force of the same tactic")
    st, a = tactic(d, A, variants=fam)
    check(st == 404 and "exclusion pin" in a.get("error", ""),
          "variants=%s with %s excluded: 404 (%s)" % (fam, fam, a.get("error")))
    st, ps = d.get("/v1/pins?device=cpu")
    for q in ps["pins"]:
        run(["unpin", str(q["id"])], env, 0)
    st, a = tactic(d, A)
    st, c = tactic(d, C)
    check(a["tactic"] == base_a and c["tactic"] == base_c and d.get("/v1/pins")[1]["pins"] == [],
          "every pin removed: the answers are back")


def check_refusals(d, env):
    # a pin's form (its tactic, its shape pattern) is checked before any
    # call: a usage error (2); what only the daemon or store can tell
    # (listing, devices) is an error (1)
    for args, rc, words in ((["--force", "fusd/pad=1"], 2, "unknown variant"),
                            (["--force", "fused"], 2, "complete"),
                            (["--exclude", "split", "--shape", "b*.hq4"], 2, "pattern"),
                            (["--force", "folded/acc=f32/pad=1", "--shape", MHA, "--device",
                              "cpu"], 1, "does not list"),
                            (["--exclude", "split", "--device", "nosuch"], 1, "unknown device"),
                            (["--exclude", "split", "--device", "cpu", "--model", "x"], 2,
                             "not both")):
        p = pin(env, *args)
        check(p.returncode == rc and words in p.stderr,
              "attune pin %s: exit %d, says '%s' (%s)" % (" ".join(args), p.returncode, words,
                                                          p.stderr.strip()))
    p = run(["pin", "--exclude", "split"], env)
    check(p.returncode == 2 and "--reason" in p.stderr, "no --reason: usage error")
    p = run(["pin", "--db", os.path.join(os.path.dirname(d.db), "attune.db"), "--force",
             "folded/acc=f32/pad=1", "--shape", MHA, "--device", "cpu", "--reason", "r"], env)
    check(p.returncode == 1 and "does not list" in p.stderr,
          "attune pin --db refuses an unlisted force too: " + p.stderr.strip())
    p = run(["unpin", "999"], env)
    check(p.returncode == 1 and "no pin 999" in p.stderr, "unpin of no pin: " + p.stderr.strip())
    body = json.dumps({"action": "exclude", "tactic": "split", "reason": "r", "author": "a"})
    st, _ = d.request("POST", "/v1/pins", body.encode())
    check(st == 401, "POST /v1/pins without a token: 401")
    st, _ = d.request("DELETE", "/v1/pins/1")
    check(st == 401, "DELETE /v1/pins/1 without a token: 401")
    st, a = d.post("/v1/pins", {"action": "pin", "tactic": "split", "reason": "r", "author": "a"})
    check(st == 400 and "action" in a["error"], "a bad action: 400 " + a["error"])
    st, a = d.post("/v1/pins", {"action": "exclude", "tactic": "split", "reason": "r",
                                "author": "a", "color": "red"})
    check(st == 400 and "color" in a["error"], "an unknown key: 400 " + a["error"])


def main():
    for var in ("ATTUNED_BIN", "ATTUNE_BIN"):
        if not os.environ.get(var):
            print("skip: %s not set" % var)
            return SKIP
    work = tempfile.mkdtemp(prefix="attune-it-pins-")
    env = dict(os.environ)
    d = None
    try:
        table = make_dbs(work, env)
        d = Daemon(os.environ["ATTUNED_BIN"], work, db=os.path.join(work, "var", "attune.db"),
                   extra=["--no-tune-on-miss"])
        env.update(ATTUNE_URL="http://127.0.0.1:%d" % d.port, ATTUNE_TOKEN=d.token)
        st, _ = d.request("POST", "/v1/import", table, auth=True)
        check(st == 200, "fleet table of the same model imported")
        st, a = tactic(d, A)
        st, c = tactic(d, C)
        check(a["source"] == "measured" and c["source"] == "fleet", "A measured, C from the fleet")
        st, devs = d.get("/v1/devices")
        cpu_name = [x["name"] for x in devs["devices"] if x["id"] == a["device"]][0]
        st, page = d.request("GET", "/")
        st2, js = d.request("GET", "/ui/app.js")
        check(b'id="pins"' in page and b"/v1/pins" in js, "the page has a pins section")
        check_force(d, env, work, a["tactic"])
        check_exclusions(d, env, a["tactic"], c["tactic"], cpu_name)
        check_refusals(d, env)
    finally:
        if d is not None:
            d.stop()
        shutil.rmtree(work, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
