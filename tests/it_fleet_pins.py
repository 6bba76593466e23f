#!/usr/bin/env python3
"""it_fleet_pins.py -- pins in fleet sync (issue 28 item 1) against a real
PostgreSQL (fleetlib.PgServer).

Two stores, a.db and b.db, each with one CPU shape tuned: an exclusion
pinned on a (attune pin --db) reaches b through `attune fleet push` (a)
and `attune fleet pull` (b), and b's in-process lookup then never answers
the excluded tactic; a force pinned on b reaches a the same way and
answers pinned there; `attune unpin` on a reaches b as a removal (a
tombstone: b's older copy of the rule does not bring it back); a rule
written after more than FLEET_PINS_MAX older rows still reaches b; more
rules on the server than PIN_MAX are left out at b, not an error, while
a's new rule and removal still merge; a malformed pin on the server is
refused by the pulling store, which is left unchanged.

Skips (77) when attune lacks libpq or PostgreSQL's server binaries are
absent. Environment: ATTUNE_BIN.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fleetlib  # noqa: E402
from fleetlib import check  # noqa: E402

ATTUNE = os.environ.get("ATTUNE_BIN", "")
A = "b1.hq4.hkv1.sq16.skv64.d32.f32.nc"


def run(pg, *args, ok=(0,)):
    r = subprocess.run([ATTUNE] + list(args), env=pg.env(), capture_output=True, text=True,
                       timeout=120)
    if r.returncode not in ok:
        print("attune %s -> %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


def pins(pg, db):
    return json.loads(run(pg, "pins", "--db", db, "--json").stdout)["pins"]


def cpu_id(pg):
    devs = json.loads(run(pg, "devices", "--json").stdout)["devices"]
    return [d["id"] for d in devs if d["kind"] == "cpu"][0]


def answer(pg, db):
    """The in-process answer for this host's CPU by id: after a pull, `cpu`
    in a file names the pulled model's fleet device, seen last."""
    r = run(pg, "query", "--url", "file:" + db, "--device", cpu_id(pg), "--shape", A, "--json")
    return json.loads(r.stdout)


def sync(pg, src, dst):
    """src pushes, dst pulls (then pushes too: its own pins go up)."""
    ok = run(pg, "fleet", "push", "--db", src, "--fleet", pg.url).returncode == 0
    ok &= run(pg, "fleet", "pull", "--db", dst, "--fleet", pg.url).returncode == 0
    return ok


def test_pins(pg, tmp):
    a, b = os.path.join(tmp, "a.db"), os.path.join(tmp, "b.db")
    for db in (a, b):
        run(pg, "tune", "--db", db, "--device", "cpu", "--shape", A, "--budget-ms", "5",
            "--quiet")
    win = answer(pg, b)["tactic"]
    r = run(pg, "pin", "--db", a, "--exclude", win, "--shape", A, "--reason", "bad on 560",
            "--author", "ops")
    check(r.returncode == 0, "pinned on a")
    check(sync(pg, a, b), "a pushes, b pulls")
    got = pins(pg, b)
    check([(p["action"], p["tactic"], p["reason"]) for p in got] ==
          [("exclude", win, "bad on 560")], "b holds a's exclusion: %s" % got)
    ans = answer(pg, b)
    check(ans["tactic"] != win and ans["source"] == "measured",
          "b's lookup never answers it: %s (was %s)" % (ans["tactic"], win))
    force = "fused/pad=8" if win != "fused/pad=8" else "fused/pad=1"
    r = run(pg, "pin", "--db", b, "--force", force, "--shape", A, "--device", "cpu", "--reason",
            "known good", "--author", "ops")
    check(r.returncode == 0 and sync(pg, b, a), "pinned on b; b pushes, a pulls")
    ans = answer(pg, a)
    check(ans["source"] == "pinned" and ans["tactic"] == force,
          "a answers b's force: %s %s" % (ans["source"], ans["tactic"]))
    pid = [p["id"] for p in pins(pg, a) if p["tactic"] == win][0]
    check(run(pg, "unpin", "--db", a, str(pid)).returncode == 0, "unpinned on a")
    check(sync(pg, a, b), "a pushes, b pulls")
    check([p["tactic"] for p in pins(pg, b)] == [force], "b lost the removed exclusion")
    run(pg, "fleet", "push", "--db", b, "--fleet", pg.url)  # b's older copy goes up
    run(pg, "fleet", "pull", "--db", a, "--fleet", pg.url)
    check(win not in [p["tactic"] for p in pins(pg, a)], "a's removal is not undone by b's push")
    n = pg.sql("SELECT count(*) FROM pins WHERE removed")[0]
    check(n == "1", "the server keeps the tombstone (%s)" % n)
    return a, b


def test_past_the_pull_limit(pg, a, b):
    """The server holds more pins than one pull takes (FLEET_PINS_MAX, 4096:
    tombstones are never deleted): the pull takes the newest, so a rule
    written now still reaches b past 5000 old tombstones."""
    pg.sql("INSERT INTO pins (action, tactic, shape, device, model, reason, author, created_at,"
           " updated_at, removed) SELECT 'exclude', 'split', '', 'GPU-gone-' || i, '', 'r', 'w',"
           " 1, 1000 + i, true FROM generate_series(1, 5000) i")
    r = run(pg, "pin", "--db", a, "--exclude", "split/acc=f32", "--shape", A, "--reason",
            "after the tombstones", "--author", "ops")
    check(r.returncode == 0 and sync(pg, a, b), "pinned on a; a pushes, b pulls")
    check("split/acc=f32" in [p["tactic"] for p in pins(pg, b)],
          "b holds the rule written after 5000 tombstones: %s" % pins(pg, b))


def test_past_the_pin_limit(pg, a, b):
    """More rules on the server than a store keeps in force (PIN_MAX, 1024):
    other hosts' device pins past the limit are left out, not an error that
    fails every push and pull; this host's rules and tombstones still merge."""
    pg.sql("INSERT INTO pins (action, tactic, shape, device, model, reason, author, created_at,"
           " updated_at, removed) SELECT 'exclude', 'split', '', 'GPU-other-' || i, '', 'r', 'w',"
           " 1, 100000 + i, false FROM generate_series(1, 1100) i")
    r = run(pg, "pin", "--db", a, "--exclude", "fused/pad=1", "--shape", A, "--reason",
            "past the limit", "--author", "ops")
    check(r.returncode == 0, "pinned on a")
    r = run(pg, "fleet", "push", "--db", a, "--fleet", pg.url)
    check(r.returncode == 0, "a's push succeeds past the pin limit: " + r.stderr.strip())
    check("fleet pins left out" in r.stderr and "1024 at most" in r.stderr,
          "and says how many pins it left out: " + r.stderr.strip())
    pid = [p["id"] for p in pins(pg, a) if p["tactic"] == "split/acc=f32"][0]
    check(run(pg, "unpin", "--db", a, str(pid)).returncode == 0, "unpinned on a")
    check(run(pg, "fleet", "push", "--db", a, "--fleet", pg.url).returncode == 0, "a pushes")
    r = run(pg, "fleet", "pull", "--db", b, "--fleet", pg.url)
    check(r.returncode == 0, "b's pull succeeds past the pin limit: " + r.stderr.strip())
    check("fleet pins left out" in r.stderr, "and says it left pins out: " + r.stderr.strip())
    got = [p["tactic"] for p in pins(pg, b)]
    check(len(got) == 1024, "b keeps 1024 pins in force (%d)" % len(got))
    check("fused/pad=1" in got, "b holds a's new rule")
    check("split/acc=f32" not in got, "b applied a's removal")


def test_malformed(pg, tmp, a):
    pg.sql("INSERT INTO pins (action, tactic, shape, device, model, reason, author, created_at,"
           " updated_at, removed) VALUES ('exclude', 'bogus/x=1', '', '', '', 'r', 'w', 1, "
           "4000000000, false)")
    before = pins(pg, a)
    r = run(pg, "fleet", "pull", "--db", a, "--fleet", pg.url, ok=(1,))
    check(r.returncode == 1 and "bogus" in r.stderr, "a malformed pin refuses the pull: " +
          r.stderr.strip())
    check(pins(pg, a) == before, "the store is unchanged")


def main():
    pg = fleetlib.start_pg_for(ATTUNE)
    if pg is None:
        return 77
    tmp = tempfile.mkdtemp(prefix="attune-fleet-pins-")
    try:
        a, b = test_pins(pg, tmp)
        test_past_the_pull_limit(pg, a, b)
        test_past_the_pin_limit(pg, a, b)
        test_malformed(pg, tmp, a)
    finally:
        pg.close()
        subprocess.run(["rm", "-rf", tmp])
    return fleetlib.result()


if __name__ == "__main__":
    sys.exit(main())
