#!/usr/bin/env python3
"""it_fleet_pg.py -- the fleet store against a real PostgreSQL (issue 11).

Starts a private server (fleetlib.PgServer: initdb into a temp dir, a Unix
socket in it, password from a libpq passfile), then: credentials refused in
URLs; push, re-push and merge from several stores; pull of a model's
aggregates (median, spread, outlier flags) as fleet rows; malformed rows
refused on both sides; attuned --fleet syncing, killed with SIGKILL 20
times mid-push, and riding out a server stopped and restarted mid-sync;
drift reports with a planted accuracy regression as line 1.
Skips (77) only when the PostgreSQL server binaries are absent.
"""
import json
import os
import random
import re
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleetlib  # noqa: E402
import loglib  # noqa: E402
from fleetlib import check  # noqa: E402

ATTUNE = os.environ["ATTUNE_BIN"]
ATTUNED = os.environ.get("ATTUNED_BIN")
T0 = 1767000000  # taken_at base of planted rows


def run(pg, *args, ok=(0,)):
    r = subprocess.run([ATTUNE] + list(args), env=pg.env(), capture_output=True, text=True)
    if r.returncode not in ok:
        print("attune %s -> %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


def server_rows(pg, device=None):
    q = "SELECT count(*) FROM measurements"
    if device:
        q += " m JOIN devices d ON d.id = m.device_id WHERE d.uid = '%s'" % device
    return int(pg.sql(q)[0])


def local_rows(db, device):
    c = sqlite3.connect(db)
    try:
        return c.execute("SELECT count(*) FROM measurements WHERE device_id = ?",
                         (device,)).fetchone()[0]
    finally:
        c.close()


def metrics(d):
    st, text = d.get("/metrics")
    out = {}
    for line in text.splitlines() if isinstance(text, str) else []:
        m = re.match(r"^(attune_fleet_\w+) (\S+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def wait_for(cond, timeout, step=0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(step)
    return cond()


def test_credentials(pg, tmp):
    db = os.path.join(tmp, "cred.db")
    fleetlib.import_table(ATTUNE, db, fleetlib.table("GPU-cred-0", [], [fleetlib.stack("1")]),
                          tmp)
    bad = "postgresql://attune:hunter2secret@/attune?host=%s" % pg.sock
    r = run(pg, "fleet", "push", "--db", db, "--fleet", bad, ok=(2,))
    check(r.returncode == 2 and "hunter2secret" not in r.stdout + r.stderr
          and "password" in r.stderr, "a password in the URL is refused, not echoed")
    r = run(pg, "fleet", "push", "--db", db, "--fleet", pg.url + "&password=hunter2secret",
            ok=(2,))
    check(r.returncode == 2 and "hunter2secret" not in r.stderr,
          "password= in the query string is refused too")
    if ATTUNED:
        r = subprocess.run([ATTUNED, "--db", db, "--port", "0", "--fleet", bad],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode != 0 and "hunter2secret" not in r.stdout + r.stderr,
              "attuned --fleet with a password exits without logging it")
    env = dict(os.environ)
    env["PGPASSFILE"] = os.path.join(tmp, "nonexistent")
    r = subprocess.run([ATTUNE, "fleet", "status", "--db", db, "--fleet", pg.url],
                       env=env, capture_output=True, text=True)
    check(r.returncode == 1 and "password" in r.stderr,
          "without the passfile the server refuses (scram auth is on)")
    r = run(pg, "fleet", "status", "--db", db, "--fleet", pg.url)
    check(r.returncode == 0 and "server schema 4" in r.stdout,
          "the passfile's credentials connect and create the schema")


def test_push_pull_merge(pg, tmp):
    s1 = fleetlib.stack("560.35.03")
    times = {"GPU-m-1": 10.0, "GPU-m-2": 11.0, "GPU-m-3": 30.0}  # m-3: a slow card
    dbs = {}
    for dev, t in times.items():
        db = os.path.join(tmp, dev + ".db")
        rows = fleetlib.grid_rows(s1, 10, 4, lambda i, k, t=t: t * (1 + k), T0)
        fleetlib.import_table(ATTUNE, db, fleetlib.table(dev, rows, [s1], host=dev), tmp)
        dbs[dev] = db
        r = run(pg, "fleet", "push", "--db", db, "--fleet", pg.url)
        check(r.returncode == 0 and "pushed 40 rows" in r.stdout,
              "push of %s sends its 40 rows (%s)" % (dev, r.stdout.strip()))
    check(server_rows(pg) >= 120, "the server holds the 3 x 40 rows")
    before = server_rows(pg)
    r = run(pg, "fleet", "push", "--db", dbs["GPU-m-1"], "--fleet", pg.url)
    check(r.returncode == 0 and "pushed 0 rows" in r.stdout, "a re-push sends nothing")
    # a copy of the same store (new source, same rows): sent again, changes nothing
    checksum = "SELECT sum(time_us), count(*) FROM measurements"
    sum_before = pg.sql(checksum)
    copy = os.path.join(tmp, "copy.db")
    rows = fleetlib.grid_rows(s1, 10, 4, lambda i, k: 10.0 * (1 + k), T0)
    fleetlib.import_table(ATTUNE, copy, fleetlib.table("GPU-m-1", rows, [s1], host="GPU-m-1"),
                          tmp)
    r = run(pg, "fleet", "push", "--db", copy, "--fleet", pg.url)
    check("pushed 40 rows" in r.stdout and pg.sql(checksum) == sum_before
          and server_rows(pg) == before,
          "the same rows from another store are idempotent (%s)" % pg.sql(checksum))
    # a lost local watermark: the server's watermark is then ahead of the
    # local one, which the push takes for a copy of the store (issue 27):
    # a new source id, and the log after the local mark sent again
    c = sqlite3.connect(dbs["GPU-m-2"])
    c.execute("UPDATE fleet_state SET value = '0' WHERE key = 'acked'")
    c.execute("INSERT INTO fleet_log (device_id, stack_id, shape_id, tactic) "
              "SELECT device_id, stack_id, shape_id, tactic FROM measurements")
    c.commit()
    c.close()
    r = run(pg, "fleet", "push", "--db", dbs["GPU-m-2"], "--fleet", pg.url)
    check(r.returncode == 0 and server_rows(pg) == before and pg.sql(checksum) == sum_before,
          "re-sent log entries leave the server unchanged (%s)" % r.stdout.strip())

    # pull: a fourth card of the model gets the aggregates
    me = os.path.join(tmp, "me.db")
    fleetlib.import_table(ATTUNE, me, fleetlib.table(
        "GPU-m-4", [fleetlib.row(fleetlib.shape_of(900), fleetlib.TACTICS[0], s1, 5.0, T0)],
        [s1]), tmp)
    r = run(pg, "fleet", "pull", "--db", me, "--fleet", pg.url, "--device", "GPU-m-4")
    check(r.returncode == 0 and "pulled 40 aggregate rows" in r.stdout,
          "pull brings the model's 40 aggregate rows (%s)" % r.stdout.strip())
    c = sqlite3.connect(me)
    fleet = c.execute("SELECT id, idx, name FROM devices WHERE id LIKE 'FLEET-%'").fetchall()
    got = dict(c.execute(
        "SELECT m.tactic, m.time_us FROM measurements m JOIN shapes s ON s.id = m.shape_id "
        "WHERE m.device_id LIKE 'FLEET-%%' AND s.key = '%s'"
        % fleetlib.shape_key(fleetlib.shape_of(0))).fetchall())
    note = c.execute("SELECT note, host, time_us_min, time_us_max FROM measurements "
                     "WHERE device_id LIKE 'FLEET-%%' AND tactic = '%s' LIMIT 1"
                     % fleetlib.TACTICS[0]).fetchone()
    c.close()
    check(len(fleet) == 1 and fleet[0][1] == -1 and fleet[0][2] == "Test GPU",
          "one fleet device for the model, not attached (%s)" % fleet)
    check(got.get(fleetlib.TACTICS[0]) == 11.0 and got.get(fleetlib.TACTICS[1]) == 22.0,
          "fleet time is the median over devices (%s)" % got)
    check(note[0].startswith("fleet: 3 devices") and note[1] == "fleet"
          and note[2] == 10.0 and note[3] == 30.0,
          "fleet rows say how many devices, min and max of them (%s)" % (note,))
    outl = pg.sql("SELECT DISTINCT d.uid FROM outliers o JOIN devices d ON d.id = o.device_id")
    check(outl == ["GPU-m-3"], "the slow card is flagged as the outlier (%s)" % outl)
    spread = pg.sql("SELECT min(spread), max(spread) FROM aggregates WHERE devices = 3")
    check(spread and spread[0] != "", "aggregates carry a spread (%s)" % spread)
    r = run(pg, "fleet", "push", "--db", me, "--fleet", pg.url)
    check("pushed 1 rows" in r.stdout,
          "pulled fleet rows are never pushed back (%s)" % r.stdout.strip())
    # merge: card 1 re-measures one tactic (newer), the server takes it
    newer = [fleetlib.row(fleetlib.shape_of(0), fleetlib.TACTICS[0], s1, 12.5, T0 + 100)]
    fleetlib.import_table(ATTUNE, dbs["GPU-m-1"], fleetlib.table("GPU-m-1", newer, [s1]), tmp)
    r = run(pg, "fleet", "push", "--db", dbs["GPU-m-1"], "--fleet", pg.url)
    v = pg.sql("SELECT m.time_us FROM measurements m JOIN devices d ON d.id = m.device_id "
               "JOIN tactics t ON t.id = m.tactic_id JOIN shapes s ON s.id = m.shape_id "
               "WHERE d.uid = 'GPU-m-1' AND t.text = '%s' AND s.key = '%s'"
               % (fleetlib.TACTICS[0], fleetlib.shape_key(fleetlib.shape_of(0))))
    check("pushed 1 rows" in r.stdout and v == ["12.5"] and server_rows(pg) == before + 1,
          "a newer row replaces the server's, nothing added (%s)" % v)
    # an older row from elsewhere does not override it
    older = [fleetlib.row(fleetlib.shape_of(0), fleetlib.TACTICS[0], s1, 99.0, T0 + 50)]
    stale = os.path.join(tmp, "stale.db")
    fleetlib.import_table(ATTUNE, stale, fleetlib.table("GPU-m-1", older, [s1]), tmp)
    run(pg, "fleet", "push", "--db", stale, "--fleet", pg.url)
    v2 = pg.sql("SELECT max(time_us) FROM measurements m JOIN devices d ON d.id = m.device_id "
                "WHERE d.uid = 'GPU-m-1' AND m.taken_at > %d" % T0)
    check(v2 == ["12.5"], "an older row does not override a newer one (%s)" % v2)
    r = run(pg, "fleet", "pull", "--db", me, "--fleet", pg.url, "--device", "GPU-m-4")
    c = sqlite3.connect(me)
    t = c.execute("SELECT m.time_us FROM measurements m JOIN shapes s ON s.id = m.shape_id "
                  "WHERE m.device_id LIKE 'FLEET-%%' AND s.key = '%s' AND m.tactic = '%s'"
                  % (fleetlib.shape_key(fleetlib.shape_of(0)), fleetlib.TACTICS[0])).fetchall()
    c.close()
    check(t == [(12.5,)], "a second pull updates the fleet row (median now %s)" % t)
    return dbs


def test_new_and_known(pg, tmp):
    """A push whose rows are mostly new with one the server already has:
    the new ones go by COPY straight into measurements, and the known row,
    missed by the sampled probe, makes that COPY fail and roll back to its
    savepoint; then every row is probed and sent once."""
    s1 = fleetlib.stack("560.35.03")
    db = os.path.join(tmp, "mixed.db")
    known = fleetlib.row(fleetlib.shape_of(0, sq=2040), fleetlib.TACTICS[5], s1, 10.0, T0)
    fleetlib.import_table(ATTUNE, db, fleetlib.table("GPU-mix-1", [known], [s1],
                                                     name="Mixed GPU"), tmp)
    run(pg, "fleet", "push", "--db", db, "--fleet", pg.url)
    check(server_rows(pg, "GPU-mix-1") == 1, "the known row is on the server")
    rows = [fleetlib.row(fleetlib.shape_of(0, sq=2000 + i), fleetlib.TACTICS[t], s1, 20.0,
                         T0 + 10) for i in range(75) for t in range(8)]
    fleetlib.import_table(ATTUNE, db, fleetlib.table("GPU-mix-1", rows, [s1],
                                                     name="Mixed GPU"), tmp, name="mix.json")
    r = run(pg, "fleet", "push", "--db", db, "--fleet", pg.url)
    got = pg.sql("SELECT count(*), count(DISTINCT (m.shape_id, m.tactic_id)), min(m.time_us),"
                 " max(m.time_us) FROM measurements m JOIN devices d ON d.id = m.device_id"
                 " WHERE d.uid = 'GPU-mix-1'")
    check(r.returncode == 0 and "pushed 600 rows" in r.stdout and got == ["600|600|20|20"],
          "599 new rows and one newer known row arrive once each (%s; %s)"
          % (r.stdout.strip(), got))
    r = run(pg, "fleet", "push", "--db", db, "--fleet", pg.url)
    check(server_rows(pg, "GPU-mix-1") == 600, "a re-push changes nothing")


def test_pull_in_chunks(pg, tmp):
    """A pull writes whole shapes in chunks of a few thousand rows, each
    its own transaction (a tune committing meanwhile never waits on the
    network): a row the store refuses near the end leaves the chunks
    before it, and the model's latest stack moves only with the last."""
    s1 = fleetlib.stack("560.35.04")
    shapes = [dict(fleetlib.shape_of(i), skv=777) for i in range(300)]
    rows = [fleetlib.row(sh, t, s1, 10.0 + k, T0) for sh in shapes
            for k, t in enumerate(fleetlib.TACTICS)]
    src = os.path.join(tmp, "chunk-src.db")
    fleetlib.import_table(ATTUNE, src, fleetlib.table("GPU-k-1", rows, [s1], name="Chunk GPU"),
                          tmp, name="chunk.json")
    r = run(pg, "fleet", "push", "--db", src, "--fleet", pg.url)
    check(r.returncode == 0 and "pushed 2400 rows" in r.stdout,
          "2400 rows of a new model pushed (%s)" % r.stdout.strip())
    one = [fleetlib.row(fleetlib.shape_of(901), fleetlib.TACTICS[0], s1, 5.0, T0)]

    def puller(name):
        db = os.path.join(tmp, name)
        fleetlib.import_table(ATTUNE, db, fleetlib.table("GPU-k-2", one, [s1], name="Chunk GPU"),
                              tmp, name=name + ".json")
        return db

    def fleet_state(db):
        c = sqlite3.connect(db)
        try:
            n = c.execute("SELECT count(*) FROM measurements WHERE device_id LIKE 'FLEET-%'"
                          ).fetchone()[0]
            dev = c.execute("SELECT latest_stack FROM devices WHERE id LIKE 'FLEET-%'").fetchall()
            whole = c.execute("SELECT count(*) FROM (SELECT shape_id FROM measurements"
                              " WHERE device_id LIKE 'FLEET-%' GROUP BY shape_id"
                              " HAVING count(*) <> 8)").fetchone()[0]
            return n, dev, whole
        finally:
            c.close()

    a = puller("chunk-a.db") # the first pull computes the model's aggregates
    r = run(pg, "fleet", "pull", "--db", a, "--fleet", pg.url, "--device", "GPU-k-2")
    check(r.returncode == 0 and "pulled 2400 aggregate rows" in r.stdout and
          fleet_state(a) == (2400, [(s1["id"],)], 0),
          "a pull of 2400 rows stores them all (%s; %s)" % (r.stdout.strip(), fleet_state(a)))
    last = ("(SELECT a.shape_id FROM aggregates a JOIN shapes s ON s.id = a.shape_id"
            " WHERE s.key LIKE '%.skv777.%' ORDER BY a.shape_id DESC LIMIT 1)")
    pg.sql("UPDATE aggregates SET status = 'bogus' WHERE shape_id = %s AND tactic_id ="
           " (SELECT min(tactic_id) FROM aggregates WHERE shape_id = %s)" % (last, last))
    b = puller("chunk-b.db")
    r = run(pg, "fleet", "pull", "--db", b, "--fleet", pg.url, "--device", "GPU-k-2", ok=(1,))
    got = fleet_state(b)
    check(r.returncode == 1 and "status" in r.stderr and got == (2048, [(None,)], 0) and
          "2048 aggregate rows stored before it" in r.stderr,
          "a row refused after 2048 leaves the first chunk, 256 whole shapes, and no latest "
          "stack (%d: %s; %s)" % (r.returncode, r.stderr.strip(), got))
    pg.sql("UPDATE aggregates SET status = 'ok' WHERE status = 'bogus'")
    r = run(pg, "fleet", "pull", "--db", b, "--fleet", pg.url, "--device", "GPU-k-2")
    check(r.returncode == 0 and fleet_state(b) == (2400, [(s1["id"],)], 0),
          "the next pull completes it (%s; %s)" % (r.stdout.strip(), fleet_state(b)))


def test_tunes_in_flight(pg, tmp):
    """A device tuned here (a row marked incumbent: the tuner's winner mark)
    pushes only the (stack, shape)s whose tune completed; the rest, a tune
    in flight or canceled, stays home until its first mark, which logs the
    whole shape again. A mark that moves within a completed shape sends
    nothing."""
    s1 = fleetlib.stack("560.35.05")
    shapes = [fleetlib.shape_of(i, sq=3000 + i) for i in range(3)]
    rows = [fleetlib.row(sh, t, s1, 10.0 + k, T0) for sh in shapes
            for k, t in enumerate(fleetlib.TACTICS[:2])]
    db = os.path.join(tmp, "inflight.db")
    fleetlib.import_table(ATTUNE, db, fleetlib.table("GPU-i-1", rows, [s1], name="Flight GPU"),
                          tmp, name="inflight.json")

    def mark(sq, tactic, value):
        c = sqlite3.connect(db)
        c.execute("UPDATE measurements SET incumbent = ? WHERE tactic = ? AND shape_id ="
                  " (SELECT id FROM shapes WHERE sq = ?)", (value, tactic, sq))
        c.commit()
        c.close()

    # the import marked every shape it brought (imports are whole tunes):
    # clear those marks to stand for tunes run here, 1 and 2 still in flight
    c = sqlite3.connect(db)
    c.execute("UPDATE measurements SET incumbent = 0")
    c.commit()
    c.close()
    mark(3000, fleetlib.TACTICS[0], 1) # shape 0's tune completed; 1 and 2 in flight
    r = run(pg, "fleet", "push", "--db", db, "--fleet", pg.url)
    check(r.returncode == 0 and "pushed 2 rows" in r.stdout and server_rows(pg, "GPU-i-1") == 2,
          "only the completed shape's 2 rows are pushed (%s; server %d)"
          % (r.stdout.strip(), server_rows(pg, "GPU-i-1")))
    mark(3001, fleetlib.TACTICS[1], 1) # shape 1's tune ends: both its rows go
    r = run(pg, "fleet", "push", "--db", db, "--fleet", pg.url)
    check(r.returncode == 0 and "pushed 2 rows" in r.stdout and server_rows(pg, "GPU-i-1") == 4,
          "a tune's first mark sends its shape's rows (%s; server %d)"
          % (r.stdout.strip(), server_rows(pg, "GPU-i-1")))
    r = run(pg, "export", "--db", db, "--device", "GPU-i-1")
    check(r.returncode == 0 and r.stdout.count('"tactic"') == 4 and
          "2 rows of tunes not completed" in r.stderr,
          "attune export leaves the shape in flight out and says so (%s)" % r.stderr.strip())
    mark(3000, fleetlib.TACTICS[1], 1) # the winner moves, as store_winner_mark does it:
    mark(3000, fleetlib.TACTICS[0], 0) # the new mark first, then the old one cleared
    r = run(pg, "fleet", "push", "--db", db, "--fleet", pg.url)
    check(r.returncode == 0 and "pushed 0 rows" in r.stdout and server_rows(pg, "GPU-i-1") == 4,
          "a mark moving within a completed shape sends nothing; the shape in flight stays "
          "home (%s; server %d)" % (r.stdout.strip(), server_rows(pg, "GPU-i-1")))


def test_malformed(pg, tmp, dbs):
    db = dbs["GPU-m-2"]
    c = sqlite3.connect(db)
    c.execute("UPDATE measurements SET time_us = -5, time_us_min = -5 WHERE rowid = "
              "(SELECT min(rowid) FROM measurements)")
    c.execute("UPDATE measurements SET tactic = 'magic/pad=3', taken_at = taken_at + 1 "
              "WHERE rowid = (SELECT max(rowid) FROM measurements)")
    c.execute("UPDATE measurements SET time_us = 11.5, time_us_min = 11.5, time_us_max = 11.5,"
              " taken_at = taken_at + 1 WHERE rowid = (SELECT min(rowid) + 1 FROM measurements)")
    c.commit()
    c.close()
    n = server_rows(pg)
    r = run(pg, "fleet", "push", "--db", db, "--fleet", pg.url, ok=(1,))
    check(r.returncode == 1 and "2 malformed rows refused" in r.stderr and
          "pushed 1 rows" in r.stdout,
          "malformed local rows are refused, the good one pushed (%s | %s)"
          % (r.stdout.strip(), r.stderr.strip()))
    check(server_rows(pg) == n and pg.sql("SELECT count(*) FROM measurements WHERE "
                                             "time_us < 0 OR time_us = 11.5") == ["1"],
          "only the good re-measure reached the server")
    r = run(pg, "fleet", "push", "--db", db, "--fleet", pg.url)
    check(r.returncode == 0 and "pushed 0 rows" in r.stdout,
          "refused rows are not retried forever")
    bads = ("status = 'bogus'", "time_us = -1", "time_us_min = 50", "rel_err = 'NaN'",
            "status = 'ok', time_us = NULL")
    # one psql, one statement per bad value; each must fail on its own
    r = pg._run(["psql", "-X", "-q", "-d", "attune"] + sum(
        (["-c", "UPDATE measurements SET %s WHERE ctid = (SELECT min(ctid) FROM "
                "measurements)" % b] for b in bads), []), client=True, check=False)
    check(r.stderr.count("violates check constraint") == len(bads),
          "the server refuses rows with %s (%d refusals)"
          % ("; ".join(bads), r.stderr.count("violates check constraint")))


def test_server_lost_commits(pg, tmp, dbs):
    """A server that lost acknowledged commits (restored from a backup): the
    next push notices its watermark went back and sends every row again."""
    db = dbs["GPU-m-3"]
    pg.sql("DELETE FROM measurements WHERE device_id = (SELECT id FROM devices "
           "WHERE uid = 'GPU-m-3')")
    pg.sql("UPDATE sources SET pushed_seq = 0")
    r = run(pg, "fleet", "push", "--db", db, "--fleet", pg.url)
    check(r.returncode == 0 and server_rows(pg, "GPU-m-3") == local_rows(db, "GPU-m-3"),
          "rows the server lost are pushed again (%s)" % r.stdout.strip())


def test_drift(pg, tmp):
    old, new = fleetlib.stack("550.54.15"), fleetlib.stack("560.35.03")
    rows = []
    for i in range(6):
        for k in range(4):
            rows.append(fleetlib.row(fleetlib.shape_of(i), fleetlib.TACTICS[k], old,
                                     10.0 + k, T0))
            t, err, status = 10.0 + k, 1e-4, "ok"
            if i == 2 and k == 0:
                t = 15.0  # winner now k=1 at 11 us: a winner change
            if i == 4 and k == 2:
                err = 2e-2  # 200x error, beyond the f16 bound 5e-3: THE regression
            if i == 5 and k == 3:
                err = 3e-4  # 3x error, still within the bound
            rows.append(fleetlib.row(fleetlib.shape_of(i), fleetlib.TACTICS[k], new, t,
                                     T0 + 1000, rel_err=err, status=status))
    db = os.path.join(tmp, "drift.db")
    fleetlib.import_table(ATTUNE, db, fleetlib.table("GPU-drift-1", rows, [old, new],
                                                     name="Drift GPU"), tmp)
    r = run(pg, "drift", "--db", db, "--device", "GPU-drift-1", ok=(4,))
    lines = r.stdout.splitlines()
    print("\n".join("   | " + l for l in lines[:4]))
    check(r.returncode == 4, "drift exits 4 on an accuracy regression (%d)" % r.returncode)
    want = fleetlib.shape_key(fleetlib.shape_of(4))
    check(lines and lines[0].startswith("ACCURACY REGRESSION %s %s" % (want, fleetlib.TACTICS[2]))
          and "bound" in lines[0],
          "the planted accuracy regression is line 1")
    check(len(lines) > 1 and lines[1].startswith("ACCURACY REGRESSION")
          and fleetlib.shape_key(fleetlib.shape_of(5)) in lines[1] and "error>2x" in lines[1],
          "the 3x error growth (within bound) follows")
    wl = [l for l in lines if l.startswith("winner changed")]
    check(len(wl) == 1 and fleetlib.shape_key(fleetlib.shape_of(2)) in wl[0]
          and "%s -> %s" % (fleetlib.TACTICS[0], fleetlib.TACTICS[1]) in wl[0],
          "the winner change is reported (%s)" % wl)
    check(lines[-1].startswith("drift of device GPU-drift-1") and "%s -> %s" % (
        old["id"], new["id"]) in lines[-1] and "6 shapes compared" in lines[-1],
        "the summary names the two latest stacks, oldest first")
    r = run(pg, "drift", "--db", db, "--device", "GPU-drift-1", "--from", new["id"], "--to",
            old["id"], "--json", ok=(0, 4))
    j = json.loads(r.stdout)
    check(j["stack_from"]["id"] == new["id"] and j["stack_from"]["driver"] == "560.35.03"
          and j["accuracy"][0]["regression"] is False,
          "--from/--to reverse the comparison: an improvement, not a regression")
    # the model view: a second card of the model with the same drift
    fleetlib.import_table(ATTUNE, db, fleetlib.table("GPU-drift-2", rows, [old, new],
                                                     name="Drift GPU"), tmp)
    r = run(pg, "drift", "--db", db, "--device", "GPU-drift-1", "--model", ok=(4,))
    check(r.stdout.startswith("ACCURACY REGRESSION %s" % want)
          and "model FLEET-" in r.stdout.splitlines()[-1] and "2 devices" in r.stdout,
          "drift of the model across its devices")
    # the fleet's view from a host that has measured nothing of it yet
    run(pg, "fleet", "push", "--db", db, "--fleet", pg.url)
    fresh = os.path.join(tmp, "drift-fresh.db")
    fleetlib.import_table(ATTUNE, fresh, fleetlib.table("GPU-drift-9", [], [new],
                                                        name="Drift GPU"), tmp)
    r = run(pg, "drift", "--db", fresh, "--device", "GPU-drift-9", "--fleet", pg.url, ok=(4,))
    check(r.returncode == 4 and r.stdout.startswith("ACCURACY REGRESSION %s %s"
                                                    % (want, fleetlib.TACTICS[2]))
          and "model FLEET-" in r.stdout.splitlines()[-1],
          "drift --fleet: the fleet's aggregates show the regression first (%s)"
          % r.stdout.splitlines()[-1:])
    return db


def test_daemon(pg, tmp, drift_db):
    if not ATTUNED:
        print("skip: attuned not built, daemon checks skipped")
        return
    # drift over HTTP, on the store with the planted regression
    work = tempfile.mkdtemp(dir=tmp)
    d = fleetlib.Daemon(ATTUNED, work, drift_db, env=pg.env())
    d.start()
    try:
        st, j = d.get("/v1/drift?device=GPU-drift-1")
        check(st == 200 and j["accuracy"][0]["shape"] == fleetlib.shape_key(
            fleetlib.shape_of(4)) and j["accuracy"][0]["regression"] is True
            and "bound" in j["accuracy"][0]["changes"],
            "GET /v1/drift lists the planted regression first")
        st, j = d.get("/v1/drift?device=GPU-drift-1&from=abc&to=def")
        check(st == 400, "bad stack ids are a 400 (%d)" % st)
        st, j = d.get("/v1/drift?device=cpu")
        check(st == 404, "a device without two stacks is a 404 (%d)" % st)
    finally:
        d.stop()

    # kill -9 mid-push, 20 times, rows added between kills. Small batches
    # with a pause make a push long enough to be caught in the middle: each
    # kill waits for the pending gauge to drop (a batch committed), then
    # strikes while batches remain.
    s1 = fleetlib.stack("560.35.03")
    db = os.path.join(tmp, "kill.db")
    dev = "GPU-kill-1"
    fleetlib.import_table(ATTUNE, db, fleetlib.table(
        dev, fleetlib.grid_rows(s1, 100, 8, lambda i, k: 1.0 + i + k, T0), [s1]), tmp)
    killed_mid = 0
    next_shape = 100
    random.seed(11)
    for loop in range(20):
        # more committed rows while attuned is down: new shapes and a re-measure
        rows = [fleetlib.row(fleetlib.shape_of(next_shape + i), fleetlib.TACTICS[0], s1, 3.0,
                             T0 + loop + 1) for i in range(150)]
        rows += [fleetlib.row(fleetlib.shape_of(loop), fleetlib.TACTICS[1], s1, 7.0 + loop,
                              T0 + loop + 1)]
        next_shape += 150
        fleetlib.import_table(ATTUNE, db, fleetlib.table(dev, rows, [s1]), tmp)
        work = tempfile.mkdtemp(dir=tmp)
        d = fleetlib.Daemon(ATTUNED, work, db, ["--fleet", pg.url, "--fleet-period", "1",
                                                "--fleet-batch", "10", "--fleet-pause-ms",
                                                "20"], env=pg.env())
        d.start()
        start = metrics(d).get("attune_fleet_pending_rows", 0)
        wait_for(lambda: 0 < metrics(d).get("attune_fleet_pending_rows", 0) < start, 20,
                 step=random.uniform(0.01, 0.05))
        d.kill9()
        if 0 < server_rows(pg, dev) < local_rows(db, dev):
            killed_mid += 1
    work = tempfile.mkdtemp(dir=tmp)
    d = fleetlib.Daemon(ATTUNED, work, db, ["--fleet", pg.url, "--fleet-period", "1"],
                        env=pg.env())
    d.start()
    try:
        ok = wait_for(lambda: metrics(d).get("attune_fleet_pending_rows") == 0, 60)
        total = local_rows(db, dev)
        check(ok and server_rows(pg, dev) == total,
              "after 20 kill -9 (%d mid-push): server %d rows = local %d rows"
              % (killed_mid, server_rows(pg, dev), total))
        check(killed_mid >= 18, "the kills landed mid-push (%d of 20)" % killed_mid)
        c = sqlite3.connect(db)
        local_sum = c.execute("SELECT sum(time_us), max(taken_at) FROM measurements "
                              "WHERE device_id = ?", (dev,)).fetchone()
        c.close()
        srv = pg.sql("SELECT sum(m.time_us), max(m.taken_at) FROM measurements m JOIN devices "
                     "d ON d.id = m.device_id WHERE d.uid = '%s'" % dev)[0].split("|")
        check(abs(float(srv[0]) - local_sum[0]) < 1e-6 and int(srv[1]) == local_sum[1],
              "server values equal the local ones (re-measures included): %s vs %s"
              % (srv, local_sum))
        m = metrics(d)
        check(m.get("attune_fleet_up") == 1 and m.get("attune_fleet_enabled") == 1,
              "/metrics: fleet enabled and up")

        # server stopped mid-sync: attuned keeps serving, shows the lag, catches up
        pg.stop()
        more = [fleetlib.row(fleetlib.shape_of(next_shape + i), fleetlib.TACTICS[2], s1, 4.0,
                             T0 + 500) for i in range(300)]
        fleetlib.import_table(ATTUNE, db, fleetlib.table(dev, more, [s1]), tmp)
        lagging = wait_for(lambda: metrics(d).get("attune_fleet_pending_rows", 0) >= 300
                           and metrics(d).get("attune_fleet_up") == 0, 20)
        m = metrics(d)
        check(lagging and m.get("attune_fleet_errors_total", 0) >= 1,
              "server down: /metrics shows pending rows and the connection down (%s)"
              % {k: v for k, v in m.items() if "pending" in k or "up" in k or "err" in k})
        st, _ = d.get("/v1/health")
        st2, ans = d.get("/v1/tactic?device=%s&shape=%s" % (
            dev, fleetlib.shape_key(fleetlib.shape_of(3))))
        check(st == 200 and st2 == 200 and ans.get("source") == "measured",
              "server down: attuned still answers (%d, %d)" % (st, st2))
        pg.start()
        caught = wait_for(lambda: metrics(d).get("attune_fleet_pending_rows") == 0, 90)
        check(caught and server_rows(pg, dev) == local_rows(db, dev),
              "server back: the backlog is pushed (%d = %d)"
              % (server_rows(pg, dev), local_rows(db, dev)))
        log = d.logtext()
        check("fleet_unreachable" in log or "fleet_push_failed" in log,
              "the outage is logged")
        check(pg.password not in log and "PGPASS" not in log, "no credentials in the log")
        # libpq's errors span lines and quote names: each one stays in its
        # field (daemon/log.c's log_quote; tests/it_log_escape.py)
        events, bad = loglib.parse_lines(log.splitlines(True))
        errs = [e["error"] for e in events
                if e["event"] in ("fleet_unreachable", "fleet_push_failed", "fleet_pull_failed")]
        check(not bad and errs, "every log line parses, libpq's errors included (%d lines; "
              "%r; not: %r)" % (len(events), errs[:2], bad[:2]))
    finally:
        d.stop()

    # server killed while a big push is in flight
    db2 = os.path.join(tmp, "restart.db")
    dev2 = "GPU-restart-1"
    fleetlib.import_table(ATTUNE, db2, fleetlib.table(
        dev2, fleetlib.grid_rows(s1, 500, 8, lambda i, k: 2.0 + i, T0), [s1]), tmp)
    work = tempfile.mkdtemp(dir=tmp)
    d = fleetlib.Daemon(ATTUNED, work, db2, ["--fleet", pg.url, "--fleet-period", "1",
                                             "--fleet-batch", "50"], env=pg.env())
    d.start()
    try:
        wait_for(lambda: server_rows(pg, dev2) > 0, 20, step=0.02)
        pg.stop("immediate")
        mid = metrics(d).get("attune_fleet_pending_rows", 0)
        pg.start()
        caught = wait_for(lambda: metrics(d).get("attune_fleet_pending_rows") == 0, 90)
        check(caught and server_rows(pg, dev2) == 4000,
              "server killed mid-push (%d pending then): all 4000 rows arrive once (%d)"
              % (mid, server_rows(pg, dev2)))
    finally:
        d.stop()


def test_fleet_answers(pg, tmp):
    """Siblings of this host's CPU model push; attuned --fleet pulls their
    aggregates and answers a shape it never measured from them."""
    if not ATTUNED:
        return
    me = json.loads(subprocess.run([ATTUNE, "devices", "--json"], capture_output=True,
                                   text=True, check=True).stdout)["devices"][0]
    stk = dict(me["stack"])
    stk.pop("power", None)
    if me["stack"].get("power"):
        stk["power"] = me["stack"]["power"]
    shape = fleetlib.shape_of(0, sq=77)
    tactics = ["split/acc=f32/pad=1", "fused/pad=1"]
    for i, t_split in enumerate((30.0, 31.0, 29.0)):
        rows = [fleetlib.row(shape, tactics[0], stk, t_split, T0),
                fleetlib.row(shape, tactics[1], stk, 50.0, T0)]
        tbl = fleetlib.table("CPU-sibling-%d" % i, rows, [stk], name=me["name"],
                             sm=me["sm_count"], mem=me["memory_mb"])
        tbl["device"]["kind"] = "cpu"
        tbl["device"]["cc"] = "0.0"
        db = os.path.join(tmp, "sib%d.db" % i)
        fleetlib.import_table(ATTUNE, db, tbl, tmp)
        run(pg, "fleet", "push", "--db", db, "--fleet", pg.url)
    work = tempfile.mkdtemp(dir=tmp)
    db = os.path.join(work, "fresh.db")
    d = fleetlib.Daemon(ATTUNED, work, db, ["--fleet", pg.url, "--fleet-period", "1",
                                            "--no-tune-on-miss"], env=pg.env())
    d.start()
    try:
        key = fleetlib.shape_key(shape)
        ans = {}

        def fleet_answer():
            st, a = d.get("/v1/tactic?device=cpu&shape=%s" % key)
            ans.update(a if isinstance(a, dict) else {})
            return st == 200 and ans.get("source") == "fleet"
        ok = wait_for(fleet_answer, 30, step=0.3)
        check(ok and ans.get("tactic") == tactics[0] and ans.get("time_us") == 30.0,
              "a shape measured only by the fleet is answered source fleet with the "
              "siblings' median (%s)" % {k: ans.get(k) for k in ("source", "tactic",
                                                                 "time_us")})
    finally:
        d.stop()


def test_e4m3(pg, tmp):
    """FP8 rows (issue 30): e4m3 shapes and their error against the bf16
    source (src_rel_err) travel to the server and come back in a model's
    aggregates as the largest of the ok devices', like rel_err."""
    s1 = fleetlib.stack("560.35.03")
    shape = dict(fleetlib.shape_of(0, sq=33), dtype="e4m3")
    src = {"GPU-f-1": 0.031, "GPU-f-2": 0.052, "GPU-f-3": 0.044}
    for i, (dev, e) in enumerate(sorted(src.items())):
        r8 = fleetlib.row(shape, "fused/pad=1", s1, 5.0 + i, T0, rel_err=0.01 + i * 1e-3)
        r8["src_rel_err"] = e
        b16 = fleetlib.row(fleetlib.shape_of(0, sq=33), "fused/pad=1", s1, 9.0, T0)
        db = os.path.join(tmp, dev + ".db")
        fleetlib.import_table(ATTUNE, db, fleetlib.table(dev, [r8, b16], [s1], name="FP8 GPU"),
                              tmp)
        r = run(pg, "fleet", "push", "--db", db, "--fleet", pg.url)
        check(r.returncode == 0 and "pushed 2 rows" in r.stdout,
              "%s pushes its e4m3 and its f16 row (%s)" % (dev, r.stdout.strip()))
    got = pg.sql("SELECT d.uid, m.src_rel_err FROM measurements m JOIN devices d ON"
                 " d.id = m.device_id JOIN shapes s ON s.id = m.shape_id WHERE s.dtype = 'e4m3'"
                 " ORDER BY 1")
    check(got == ["%s|%s" % (d, src[d]) for d in sorted(src)],
          "the server holds each device's source error (%s)" % got)
    nulls = pg.sql("SELECT count(*) FROM measurements m JOIN shapes s ON s.id = m.shape_id"
                   " JOIN devices d ON d.id = m.device_id WHERE s.dtype = 'f16'"
                   " AND d.uid LIKE 'GPU-f-%' AND m.src_rel_err IS NULL")
    check(nulls == ["3"], "f16 rows carry none (%s)" % nulls)
    me = os.path.join(tmp, "fp8-me.db")
    fleetlib.import_table(ATTUNE, me, fleetlib.table(
        "GPU-f-4", [fleetlib.row(fleetlib.shape_of(900), "fused/pad=1", s1, 5.0, T0)], [s1],
        name="FP8 GPU"), tmp)
    r = run(pg, "fleet", "pull", "--db", me, "--fleet", pg.url, "--device", "GPU-f-4")
    c = sqlite3.connect(me)
    rows = c.execute("SELECT s.dtype, m.time_us, m.rel_err, m.src_rel_err FROM measurements m"
                     " JOIN shapes s ON s.id = m.shape_id WHERE m.device_id LIKE 'FLEET-%'"
                     " ORDER BY s.dtype").fetchall()
    c.close()
    check(r.returncode == 0 and rows == [("e4m3", 6.0, 0.012, 0.052), ("f16", 9.0, 1e-4, None)],
          "the pulled e4m3 row: median time, largest rel_err and src_rel_err; the f16 row "
          "none (%s)" % rows)


def main():
    pg = fleetlib.start_pg_for(ATTUNE)
    if pg is None:
        return 77
    tmp = tempfile.mkdtemp(prefix="attune-fleet-")
    try:
        test_credentials(pg, tmp)
        dbs = test_push_pull_merge(pg, tmp)
        test_new_and_known(pg, tmp)
        test_pull_in_chunks(pg, tmp)
        test_tunes_in_flight(pg, tmp)
        test_malformed(pg, tmp, dbs)
        test_server_lost_commits(pg, tmp, dbs)
        drift_db = test_drift(pg, tmp)
        test_daemon(pg, tmp, drift_db)
        test_fleet_answers(pg, tmp)
        test_e4m3(pg, tmp)
    finally:
        pg.close()
        subprocess.run(["rm", "-rf", tmp])
    return fleetlib.result()


if __name__ == "__main__":
    sys.exit(main())
