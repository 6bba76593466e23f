#!/usr/bin/env python3
"""it_fleet_stream.py -- a bulk push's pipelined batches, killed between
them (issue 27).

`attune fleet push` sends its batches through fleet_pg_push_stream: batch
N's COMMIT is sent and not waited for while batch N+1 is read, checked and
keyed, and N is acknowledged locally (its log entries pruned) only once its
COMMIT's answer is read. Against a real PostgreSQL (fleetlib.PgServer),
one store of 600 rows pushed in batches of 3 rows (200 transactions), is
killed with SIGKILL at random moments 25 times (within the time the last
push that ended by itself took), 120 new or newer rows added between the
kills. After every kill:

  - every row the store counts as pushed (no entry left in its log) is on
    the server, with its taken_at and time_us: nothing acknowledged that
    the server did not commit;
  - the server's watermark for the store's source is at or past the
    store's acknowledged mark;
  - every row still logged whose newest log entry is at or below that
    watermark (committed, its acknowledgement cut off by the kill) is on
    the server: the watermark never passes a batch that did not commit
    (the second lane's order, 1d53ea9). Without this a wrong watermark
    would heal at the next push (reconcile forks and re-sends) and pass
    the other checks.

At the end one push runs to completion and the server must equal the
store: per key exactly one row, the store's. Skips (77) only when attune
lacks libpq or PostgreSQL's server binaries are absent.

    it_fleet_stream.py [--kills 25] [--seed S]
"""
import argparse
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleetlib  # noqa: E402
from fleetlib import check  # noqa: E402

ATTUNE = os.environ["ATTUNE_BIN"]
DEV = "GPU-stream-1"
T0 = 1769000000


def has_table(c, name):
    return c.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                     (name,)).fetchone() is not None


def local_rows(db):
    """{(device, shape key, tactic): (taken_at, time_us, logged)}: logged
    when the row still has a fleet_log entry (not acknowledged). Before the
    first push made the store's fleet tables (a kill can come first),
    nothing is acknowledged: every row counts as logged."""
    c = sqlite3.connect(db)
    try:
        out = {}
        if not has_table(c, "fleet_log"):
            for dev, key, tac, taken, t in c.execute(
                    "SELECT m.device_id, s.key, m.tactic, m.taken_at, m.time_us"
                    " FROM measurements m JOIN shapes s ON s.id = m.shape_id"
                    " WHERE m.device_id = ?", (DEV,)):
                out[(dev, key, tac)] = (taken, t, 1)
            return out
        for dev, key, tac, taken, t, logged in c.execute(
                "SELECT m.device_id, s.key, m.tactic, m.taken_at, m.time_us,"
                " EXISTS (SELECT 1 FROM fleet_log l WHERE l.device_id = m.device_id AND"
                "  l.stack_id = m.stack_id AND l.shape_id = m.shape_id AND l.tactic = m.tactic)"
                " FROM measurements m JOIN shapes s ON s.id = m.shape_id"
                " WHERE m.device_id = ?", (DEV,)):
            out[(dev, key, tac)] = (taken, t, logged)
        return out
    finally:
        c.close()


def logged_through(db, w):
    """{(device, shape key, tactic): (taken_at, time_us)} of the rows still
    logged (not acknowledged) whose newest fleet_log entry is at or below
    seq w: the server's watermark says a committed batch holds each."""
    c = sqlite3.connect(db)
    try:
        if not has_table(c, "fleet_log"):
            return {}
        return {(dev, key, tac): (taken, t) for dev, key, tac, taken, t in c.execute(
            "SELECT m.device_id, s.key, m.tactic, m.taken_at, m.time_us"
            " FROM measurements m JOIN shapes s ON s.id = m.shape_id"
            " JOIN (SELECT device_id, stack_id, shape_id, tactic, max(seq) AS seq"
            "  FROM fleet_log GROUP BY device_id, stack_id, shape_id, tactic) l"
            " ON l.device_id = m.device_id AND l.stack_id = m.stack_id AND"
            "  l.shape_id = m.shape_id AND l.tactic = m.tactic"
            " WHERE m.device_id = ? AND l.seq <= ?", (DEV, w))}
    finally:
        c.close()


def local_state(db):
    c = sqlite3.connect(db)
    try:
        if not has_table(c, "fleet_state"):
            return {}
        return dict(c.execute("SELECT key, value FROM fleet_state"))
    finally:
        c.close()


def server_has_tables(pg):
    """The server's schema is made by the first push (a kill can come first)."""
    return pg.sql("SELECT to_regclass('measurements') IS NOT NULL AND"
                  " to_regclass('sources') IS NOT NULL")[0] == "t"


def server_rows(pg):
    got = {}
    if not server_has_tables(pg):
        return got
    for line in pg.sql(
            "SELECT d.uid, s.key, t.text, m.taken_at, m.time_us FROM measurements m"
            " JOIN devices d ON d.id = m.device_id JOIN shapes s ON s.id = m.shape_id"
            " JOIN tactics t ON t.id = m.tactic_id WHERE d.uid = '%s'" % DEV):
        dev, key, tac, taken, t = line.split("|")
        got[(dev, key, tac)] = None if (dev, key, tac) in got else (int(taken), float(t))
    return got


def tune(db, tmp, stk, rng, clock, nshapes, first_shape):
    """Rows of nshapes shapes x 8 tactics, newer than any before."""
    rows = []
    for i in range(nshapes):
        for t in range(len(fleetlib.TACTICS)):
            clock += 1
            rows.append(fleetlib.row(fleetlib.shape_of(first_shape + i), fleetlib.TACTICS[t],
                                     stk, 10.0 + rng.random(), clock))
    fleetlib.import_table(ATTUNE, db, fleetlib.table(DEV, rows, [stk]), tmp)
    return clock


def test_kills(pg, tmp, kills, seed):
    rng = random.Random(seed)
    db = os.path.join(tmp, "s.db")
    stk = fleetlib.stack("560.35.03")
    clock = tune(db, tmp, stk, rng, T0, 75, 0)  # 600 rows
    argv = [ATTUNE, "fleet", "push", "--db", db, "--fleet", pg.url, "--batch", "3"]
    mid, bad, behind = 0, [], 0
    # Each kill comes at a random moment within the time the last push
    # that ended by itself took (est), so that the kills land mid-push on
    # a fast machine or a loaded one alike: a fixed 0.02-0.25 s window let
    # most pushes end first when they were quick (8 of 25 mid-push at
    # ctest -j2, 2026-12-07).
    est = 0.25
    for k in range(kills):
        p = subprocess.Popen(argv, env=pg.env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        t0 = time.monotonic()
        try:
            p.wait(timeout=rng.uniform(0.1, 0.9) * est)
            est = max(time.monotonic() - t0, 0.02)  # it ended first: the next estimate
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
        mid += p.wait() == -signal.SIGKILL
        local, server = local_rows(db), server_rows(pg)
        for key, (taken, t, logged) in local.items():
            if not logged and server.get(key) != (taken, t):
                bad.append("kill %d: %s acknowledged, server has %s" % (k, key, server.get(key)))
        st = local_state(db)
        w = pg.sql("SELECT pushed_seq FROM sources WHERE id = '%s'" % st.get("source", "")) \
            if server_has_tables(pg) else []
        if int(st.get("acked", "0")) > (int(w[0]) if w else 0):
            bad.append("kill %d: acknowledged mark %s past the server's watermark %s"
                       % (k, st.get("acked"), w))
        # the watermark never passes a batch that did not commit: every row
        # logged at or below it is on the server, acknowledged or not (a
        # kill between a commit and its acknowledgement leaves such rows)
        through = logged_through(db, int(w[0])) if w else {}
        behind += len(through)
        for key, val in through.items():
            if server.get(key) != val:
                bad.append("kill %d: %s logged at or below the watermark %s, server has %s"
                           % (k, key, w[0], server.get(key)))
        # newer rows of 15 shapes seen before, or new ones (shapes of their own)
        clock = tune(db, tmp, stk, rng, clock, 15,
                     rng.choice([75 + 15 * k, rng.randrange(60)]))
    check(not bad, "%d kills (%d mid-push): every acknowledged row, and every row logged at or below "
          "the server's watermark, is on the server; the watermark at or past the mark (%s)" % (kills, mid, "; ".join(bad[:3]) or "ok"))
    check(mid >= kills // 2, "the kills landed mid-push (%d of %d)" % (mid, kills))
    print("     (%d rows committed but not yet acknowledged were found across the kills)"
          % behind)
    r = subprocess.run(argv, env=pg.env(), capture_output=True, text=True)
    check(r.returncode == 0, "a last push completes (%s)" % (r.stderr.strip() or "ok"))
    local, server = local_rows(db), server_rows(pg)
    want = {k: (v[0], v[1]) for k, v in local.items()}
    missing = [k for k in want if k not in server]
    wrong = [k for k in want if k in server and server[k] != want[k]]
    extra = [k for k in server if k not in want]
    check(not missing and not wrong and not extra and all(not v[2] for v in local.values()),
          "then the server equals the store: %d rows (%d missing, %d differ, %d extra)"
          % (len(want), len(missing), len(wrong), len(extra)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kills", type=int, default=25)
    ap.add_argument("--seed", type=int, default=None)
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    pg = fleetlib.start_pg_for(ATTUNE)
    if pg is None:
        return 77
    tmp = tempfile.mkdtemp(prefix="attune-fleet-stream-")
    print("seed %d" % seed)
    try:
        test_kills(pg, tmp, a.kills, seed)
    finally:
        pg.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return fleetlib.result()


if __name__ == "__main__":
    sys.exit(main())
