#!/usr/bin/env python3
"""it_partial_tune.py -- a shape that another process is tuning is never
answered `measured` from its partial rows; once its tune completed, it is
(issue 15 item 5).

A real tune of one CPU shape by `attune tune` into a scratch database gives
the rows a tune commits and the winner mark it sets as its last step. This
test process (another process than attuned) then writes them into a running
attuned's database in two steps: first the winner's row and some others,
without the mark -- what a tune in flight has committed so far -- then the
rest with the mark, in one transaction. attuned follows other processes'
writes by itself (daemon/sync.h); the test waits until GET /v1/results
holds the rows written (the daemon's state, not a delay), then checks:
- partial: GET /v1/tactic is not `measured` (before the fix it answered the
  partial rows' winner as measured); GET /v1/winners and `attune winners`
  list the shape without a winner; a SIGHUP reload changes none of it;
- complete: `measured`, with the winner the tuner marked, in /v1/tactic,
  /v1/winners and `attune winners` alike; still so after a SIGHUP.
Tune on miss is off, so the daemon never tunes the shape itself.

Environment: ATTUNED_BIN and ATTUNE_BIN (required, else skip: 77).
"""

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib  # noqa: E402

SKIP = 77
failures = []
KEY = daemonlib.key_of(1, 4, 2, 24, 40, 16)


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
    return cond


def wait_rows(d, n, timeout=60.0):
    """Poll until the daemon holds n rows of KEY; the rows it holds."""
    deadline = time.time() + timeout
    while True:
        st, res = d.get("/v1/results?device=cpu&shape=" + KEY)
        rows = res.get("measurements", []) if st == 200 else []
        if len(rows) == n or time.time() > deadline:
            return rows
        time.sleep(0.05)


def sighup(d, timeout=60.0):
    """SIGHUP, then wait for the reload it causes to be logged."""
    needle = "event=index_reloaded reason=sighup"
    before = d.log_text().count(needle)
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + timeout
    while d.log_text().count(needle) == before:
        if time.time() > deadline:
            return False
        time.sleep(0.05)
    return True


def copy_rows(db, src, tactics, mark=None):
    """Write the rows of KEY with these tactics from src into db unmarked,
    then, with mark (a tactic), move the winner mark to that row as
    store_winner_mark does: all in one transaction."""
    con = sqlite3.connect(db, timeout=30)
    try:
        con.execute("ATTACH DATABASE ? AS src", (src,))
        cols = [r[1] for r in con.execute("PRAGMA main.table_info(measurements)")
                if r[1] != "shape_id"]
        sel = ", ".join("m." + c if c != "incumbent" else "0" for c in cols)
        with con:
            con.execute("INSERT OR IGNORE INTO main.shapes (key, b, hq, hkv, sq, skv, d, dtype, "
                        "causal) SELECT key, b, hq, hkv, sq, skv, d, dtype, causal "
                        "FROM src.shapes WHERE key = ?", (KEY,))
            con.execute("INSERT INTO main.measurements (%s, shape_id) SELECT %s, "
                        "(SELECT id FROM main.shapes WHERE key = ?1) FROM src.measurements m "
                        "JOIN src.shapes s ON s.id = m.shape_id WHERE s.key = ?1 AND m.tactic "
                        "IN (SELECT value FROM json_each(?2))" % (", ".join(cols), sel),
                        (KEY, json.dumps(tactics)))
            if mark is not None:
                con.execute("UPDATE main.measurements SET incumbent = (tactic = ?1) WHERE "
                            "shape_id = (SELECT id FROM main.shapes WHERE key = ?2)", (mark, KEY))
    finally:
        con.close()


def winners_of(d, attune):
    """(GET /v1/winners row of KEY, `attune winners --json` row of KEY)."""
    st, w = d.get("/v1/winners?device=cpu")
    api = {r["shape"]: r for r in w.get("winners", [])}.get(KEY) if st == 200 else None
    out = subprocess.run([attune, "winners", "--db", d.db, "--device", "cpu", "--json"],
                         capture_output=True, text=True, timeout=60)
    cli = {r["shape"]: r for r in json.loads(out.stdout).get("winners", [])}.get(KEY) \
        if out.returncode == 0 else None
    return api, cli


def run(d, attune, src, tactics, winner):
    rest = [t for t in tactics if t != winner]
    partial = [winner] + rest[:len(rest) // 2]
    later = [t for t in tactics if t not in partial]

    copy_rows(d.db, src, partial)
    rows = wait_rows(d, len(partial))
    check(sorted(r["tactic"] for r in rows) == sorted(partial),
          "attuned holds the %d partial rows written by another process" % len(partial))
    st, a = d.get("/v1/tactic?device=cpu&shape=" + KEY)
    check(st == 200 and a["source"] != "measured",
          "a tune in flight (%d of %d rows, no mark) is not answered measured (%s %s)"
          % (len(partial), len(tactics), a.get("source"), a.get("tactic")))
    check("tuning" not in a, "tune on miss is off: the daemon does not tune it itself")
    api, cli = winners_of(d, attune)
    check(api is not None and api["winner"] is None,
          "GET /v1/winners lists the shape in flight without a winner")
    check(cli == api, "attune winners --json agrees with GET /v1/winners")
    check(sighup(d), "SIGHUP during the tune: the reload is logged")
    st, a = d.get("/v1/tactic?device=cpu&shape=" + KEY)
    check(st == 200 and a["source"] != "measured",
          "after SIGHUP the partial rows still do not answer measured (%s)" % a.get("source"))

    copy_rows(d.db, src, later, mark=winner)
    rows = wait_rows(d, len(tactics))
    check(len(rows) == len(tactics), "attuned holds every row once the tune completed")
    st, a = d.get("/v1/tactic?device=cpu&shape=" + KEY)
    check(st == 200 and a["source"] == "measured" and a["tactic"] == winner,
          "the completed tune answers measured with the winner it marked (%s %s, want %s)"
          % (a.get("source"), a.get("tactic"), winner))
    api, cli = winners_of(d, attune)
    check(api is not None and (api["winner"] or {}).get("tactic") == winner,
          "GET /v1/winners names the marked winner")
    check(cli == api, "attune winners --json agrees with GET /v1/winners")
    check(sighup(d), "SIGHUP after the tune: the reload is logged")
    st, a = d.get("/v1/tactic?device=cpu&shape=" + KEY)
    check(st == 200 and a["source"] == "measured" and a["tactic"] == winner,
          "after SIGHUP still measured with the same winner")


def main():
    attuned, attune = os.environ.get("ATTUNED_BIN"), os.environ.get("ATTUNE_BIN")
    if not attuned or not attune:
        print("skip: ATTUNED_BIN and ATTUNE_BIN are needed (attuned not built?)")
        return SKIP
    work = tempfile.mkdtemp(prefix="it_partial_tune.")
    d = None
    try:
        src = os.path.join(work, "src", "attune.db")
        os.makedirs(os.path.dirname(src))
        subprocess.run([attune, "tune", "--db", src, "--device", "cpu", "--shape", KEY,
                        "--budget-ms", "5", "--quiet"], check=True, timeout=300)
        con = sqlite3.connect(src)
        tactics = [r[0] for r in con.execute("SELECT tactic FROM measurements ORDER BY tactic")]
        marked = [r[0] for r in con.execute("SELECT tactic FROM measurements WHERE incumbent")]
        src_stack = con.execute("SELECT latest_stack FROM devices").fetchone()[0]
        con.close()
        if not check(len(tactics) >= 3 and len(marked) == 1,
                     "the scratch tune committed %d rows and marked one winner" % len(tactics)):
            return 1
        d = daemonlib.Daemon(attuned, work, ["--no-tune-on-miss"])
        st, devs = d.get("/v1/devices")
        cpu = [v for v in devs["devices"] if v["kind"] == "cpu" and v["local"]]
        check(cpu and cpu[0]["stack"]["id"] == src_stack,
              "attuned's CPU stack is the scratch tune's (same build, same host)")
        run(d, attune, src, tactics, marked[0])
    finally:
        if d is not None:
            d.stop()
        if failures:
            print("attuned log kept in %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
