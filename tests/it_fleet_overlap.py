#!/usr/bin/env python3
"""it_fleet_overlap.py -- a bulk push's two lanes against rows of the same
keys (issue 27): nothing hangs, nothing is lost or doubled.

`attune fleet push` sends its batches through fleet_pg_push_stream, which
copies two batches at once, one per lane, each committing on its own; the
server keeps their commit order (the later batch's last statements wait
for the earlier one's order lock, an advisory lock; docs/fleet.md). A
wait the client makes while the server waits on the other lane's
transaction is a deadlock PostgreSQL cannot see: a first attempt hung
where two consecutive batches of one stream held the same key. So,
against a real PostgreSQL (fleetlib.PgServer), with a small key space
(2 devices x 6 shapes x the test tactics) so that batches keep sharing
keys:

  1. one store whose log names the same keys in consecutive batches (each
     import is followed by a re-measure of the same keys), pushed in
     batches of 1-7 rows: every push ends within its time limit, and the
     server then equals the store;
  2. that store cloned (a copy holding its source id) and both copies
     re-measuring overlapping keys, then pushed at the same moment, in
     small batches, 12 rounds: every push ends within its time limit
     (success, or giving up busy after rounds without progress, which
     leaves the rows pending), and after a final push of each the server
     holds per key exactly the newest row any copy holds, nothing pending.

A push that outlives its limit (60 s; the pushes take well under a
second) fails the test with the server's view of its sessions
(pg_stat_activity: who waits on what) and is killed.

    it_fleet_overlap.py [--rounds 12] [--seed S]

Skips (77) only when attune lacks libpq or PostgreSQL's server binaries
are absent.
"""
import argparse
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleetlib  # noqa: E402
from fleetlib import check  # noqa: E402

ATTUNE = os.environ["ATTUNE_BIN"]
T0 = 1770000000
LIMIT_S = 60
DEVICES, SHAPES = 2, 6


def copy_db(src, dst):
    """A consistent copy of a store (SQLite's backup API)."""
    a = sqlite3.connect(src)
    b = sqlite3.connect(dst)
    try:
        a.backup(b)
    finally:
        b.close()
        a.close()


class Fleet:
    def __init__(self, pg, tmp, seed):
        self.pg = pg
        self.tmp = tmp
        self.rng = random.Random(seed)
        self.clock = T0
        self.stk = fleetlib.stack("560.35.03")
        self.hung = 0
        self.busy = 0

    def device(self, i):
        return "GPU-overlap-d%d" % i

    def tune(self, db, keys, dev):
        """Rows of (shape, tactic) keys of one device into db, newer than
        any before (a re-measure where db holds the key)."""
        rows = []
        for sh, t in keys:
            self.clock += 1
            rows.append(fleetlib.row(fleetlib.shape_of(sh), fleetlib.TACTICS[t], self.stk,
                                     float(self.clock - T0), self.clock))
        fleetlib.import_table(ATTUNE, db, fleetlib.table(self.device(dev), rows, [self.stk]),
                              self.tmp)

    def some_keys(self, n):
        keys = set()
        while len(keys) < n:
            keys.add((self.rng.randrange(SHAPES), self.rng.randrange(len(fleetlib.TACTICS))))
        return sorted(keys)

    def diagnose(self):
        try:
            for line in self.pg.sql("SELECT pid, state, wait_event_type, wait_event,"
                                    " left(query, 80) FROM pg_stat_activity"
                                    " WHERE datname = 'attune' AND pid <> pg_backend_pid()"):
                print("    session: " + line)
        except Exception as e:  # noqa: BLE001 -- diagnostics only
            print("    (pg_stat_activity: %s)" % e)

    def push_argv(self, db, batch):
        return [ATTUNE, "fleet", "push", "--db", db, "--fleet", self.pg.url, "--batch",
                str(batch)]

    def finish(self, procs, what):
        """Wait for the pushes in procs, LIMIT_S at most; a hung one is
        killed and counted. Returns [(returncode, stderr)]."""
        outs = []
        for p in procs:
            try:
                _, err = p.communicate(timeout=LIMIT_S)
            except subprocess.TimeoutExpired:
                self.hung += 1
                print("HUNG: %s did not end within %d s" % (what, LIMIT_S))
                self.diagnose()
                p.kill()
                _, err = p.communicate()
            outs.append((p.returncode, err))
        return outs

    def push(self, db, batch):
        p = subprocess.Popen(self.push_argv(db, batch), env=self.pg.env(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        (rc, err), = self.finish([p], "push of %s" % os.path.basename(db))
        return rc, err

    def push_together(self, dbs, batch):
        ps = [subprocess.Popen(self.push_argv(db, batch), env=self.pg.env(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
              for db in dbs]
        outs = self.finish(ps, "pushes of %s together" % ", ".join(os.path.basename(d)
                                                                    for d in dbs))
        ok = True
        for rc, err in outs:
            if rc != 0 and "keeps pushing under" in err:
                self.busy += 1  # allowed: rows stay pending for the next push
            elif rc != 0:
                print("concurrent push failed (%d): %s" % (rc, err.strip()))
                ok = False
        return ok

    def expected(self, dbs):
        """Per key the newest row of any store: {(dev, shape, tactic): (taken_at, time_us)}."""
        want = {}
        for db in dbs:
            c = sqlite3.connect(db)
            try:
                for dev, key, tac, taken, t in c.execute(
                        "SELECT m.device_id, s.key, m.tactic, m.taken_at, m.time_us"
                        " FROM measurements m JOIN shapes s ON s.id = m.shape_id"
                        " WHERE m.device_id LIKE 'GPU-overlap-%'"):
                    k = (dev, key, tac)
                    if k not in want or want[k][0] < taken:
                        want[k] = (taken, t)
            finally:
                c.close()
        return want

    def server(self):
        got, doubled = {}, 0
        for line in self.pg.sql(
                "SELECT d.uid, s.key, t.text, m.taken_at, m.time_us FROM measurements m"
                " JOIN devices d ON d.id = m.device_id JOIN shapes s ON s.id = m.shape_id"
                " JOIN tactics t ON t.id = m.tactic_id WHERE d.uid LIKE 'GPU-overlap-%'"):
            dev, key, tac, taken, t = line.split("|")
            k = (dev, key, tac)
            doubled += k in got
            got[k] = (int(taken), float(t))
        return got, doubled

    def pending(self, db):
        r = subprocess.run([ATTUNE, "fleet", "status", "--db", db], env=self.pg.env(),
                           capture_output=True, text=True)
        for line in r.stdout.splitlines():
            k, _, v = line.rpartition(" ")
            if k == "pending rows":
                return int(v)
        return -1

    def agrees(self, dbs, what):
        want = self.expected(dbs)
        got, doubled = self.server()
        lost = sorted(k for k in want if k not in got)
        extra = sorted(k for k in got if k not in want)
        wrong = sorted(k for k in want if k in got and got[k] != want[k])
        pend = [os.path.basename(d) for d in dbs if self.pending(d) != 0]
        check(not lost and not extra and not wrong and not doubled and not pend,
              "%s: the server holds per key the newest row of the stores (%d keys; lost %d, "
              "not in any store %d, not the newest %d, doubled %d; stores with rows pending: "
              "%s)" % (what, len(want), len(lost), len(extra), len(wrong), doubled,
                       pend or "none"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--seed", type=int, default=None)
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    pg = fleetlib.start_pg_for(ATTUNE)
    if pg is None:
        return 77
    tmp = tempfile.mkdtemp(prefix="attune-fleet-overlap-")
    print("seed %d" % seed, flush=True)
    try:
        f = Fleet(pg, tmp, seed)
        a_db = os.path.join(tmp, "a.db")
        # 1. consecutive batches of one stream holding the same keys
        failed = 0
        for rnd in range(6):
            for _ in range(4):
                dev = f.rng.randrange(DEVICES)
                keys = f.some_keys(f.rng.randint(1, 7))
                f.tune(a_db, keys, dev)
                f.tune(a_db, keys, dev)  # the same keys again, newer: the next batch's
            batch = f.rng.randint(1, 7)
            rc, err = f.push(a_db, batch)
            if rc != 0:
                failed += 1
                print("push round %d (batch %d) -> %d: %s" % (rnd, batch, rc, err.strip()))
        check(failed == 0 and f.hung == 0,
              "one store whose consecutive batches share keys: 6 pushes in batches of 1-7 "
              "rows ended, none hung (%d failed, %d hung)" % (failed, f.hung))
        f.agrees([a_db], "one store")

        # 2. two copies of the store (one source id) pushing overlapping keys at once
        b_db = os.path.join(tmp, "b.db")
        copy_db(a_db, b_db)
        failed = 0
        for rnd in range(a.rounds):
            for db in (a_db, b_db):
                for _ in range(f.rng.randint(1, 3)):
                    dev = f.rng.randrange(DEVICES)
                    keys = f.some_keys(f.rng.randint(3, 12))
                    f.tune(db, keys, dev)
                    if f.rng.random() < 0.5:
                        f.tune(db, keys, dev)
            if not f.push_together([a_db, b_db], f.rng.choice((2, 3, 5))):
                failed += 1
        for db in (a_db, b_db):
            rc, err = f.push(db, 500)
            if rc != 0:
                failed += 1
                print("final push of %s -> %d: %s" % (os.path.basename(db), rc, err.strip()))
        check(failed == 0 and f.hung == 0,
              "two copies of one store pushing overlapping keys at once, %d rounds: every push "
              "ended (%d failed, %d hung, %d gave up busy and were pushed later)"
              % (a.rounds, failed, f.hung, f.busy))
        f.agrees([a_db, b_db], "two copies")
    finally:
        pg.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return fleetlib.result()


if __name__ == "__main__":
    sys.exit(main())
