"""page_fixture.py -- a small tuned database and a running attuned for the
winners/dashboard tests (it_winners.py, it_page_browser.py).

The database: grids/cpu-small.json tuned on the CPU by `attune tune` (a few
seconds), then edited the way a stack change leaves it: the rows of one
shape moved to an older stack (its winner is stale), and the rows of another
copied to that stack, slower (it has a previous winner); both with their
winner marks, as a completed tune on the old stack would have left them. Nothing measured is
hard-coded: the tests compare the API, the CLI and the page with each other.
"""

import http.client
import json
import os
import sqlite3
import subprocess
import time

from daemonlib import free_port, stop_process  # noqa: E402 (same folder)

OLD_STACK = "0ld0000000000000"
STALE_SHAPE = "b1.hq8.hkv8.sq64.skv64.d32.f16.nc"
CHANGED_SHAPE = "b1.hq8.hkv2.sq1.skv256.d64.bf16.nc"


def grid_keys(source_dir):
    with open(os.path.join(source_dir, "grids", "cpu-small.json")) as f:
        shapes = json.load(f)["shapes"]
    return ["b%d.hq%d.hkv%d.sq%d.skv%d.d%d.%s.%s" % (s["b"], s["hq"], s["hkv"], s["sq"], s["skv"],
            s["d"], s["dtype"], "c" if s["causal"] else "nc") for s in shapes]


def make_db(attune, source_dir, workdir):
    """Tune the CPU grid into workdir/var/attune.db; return its path."""
    os.makedirs(os.path.join(workdir, "var"), exist_ok=True)
    db = os.path.join(workdir, "var", "attune.db")
    subprocess.run([attune, "tune", "--db", db, "--device", "cpu", "--grid",
                    os.path.join(source_dir, "grids", "cpu-small.json"), "--budget-ms", "10",
                    "--quiet"], check=True, timeout=300)
    con = sqlite3.connect(db)
    with con:
        cur_stack = con.execute("SELECT latest_stack FROM devices").fetchone()[0]
        con.execute("INSERT INTO stacks (id, driver, runtime, blas, attune, kernels, first_seen) "
                    "SELECT ?, driver, runtime, blas, '0.0.1', kernels, "
                    "first_seen - 86400 FROM stacks WHERE id = ?", (OLD_STACK, cur_stack))
        # Each edit models a whole tune on the old stack, so it keeps the
        # winner mark the tuner sets as a tune's last step: without it the
        # rows would be a tune still in flight, which attuned never answers
        # from (select_complete, issue 15 item 5).
        con.execute("UPDATE measurements SET stack_id = ?, taken_at = taken_at - 86400 "
                    "WHERE shape_id = (SELECT id FROM shapes WHERE key = ?)",
                    (OLD_STACK, STALE_SHAPE))
        cols = [r[1] for r in con.execute("PRAGMA table_info(measurements)")]
        sel = ", ".join({"stack_id": "?", "taken_at": "taken_at - 86400",
                         "time_us": "time_us * 1.5", "time_us_min": "time_us_min * 1.5",
                         "time_us_max": "time_us_max * 1.5",
                         "time_us_copies": "time_us_copies * 1.5"}.get(c, c) for c in cols)
        con.execute("INSERT INTO measurements (%s) SELECT %s FROM measurements WHERE "
                    "shape_id = (SELECT id FROM shapes WHERE key = ?)" % (", ".join(cols), sel),
                    (OLD_STACK, CHANGED_SHAPE))
    con.close()
    return db


class Daemon:
    def __init__(self, binary, workdir, db, budget_ms="10", extra=()):
        self.binary, self.workdir, self.db = binary, workdir, db
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.log = open(os.path.join(workdir, "attuned.log"), "ab")
        self.proc = subprocess.Popen(
            [binary, "--db", db, "--port", str(self.port), "--no-default-grid",
             "--tune-budget-ms", budget_ms] + list(extra), cwd=workdir, stdout=self.log,
            stderr=self.log)
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("attuned exited with %d at start" % self.proc.returncode)
            try:
                if self.get("/v1/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("attuned did not answer within 20 s")

    @property
    def token(self):
        with open(os.path.join(os.path.dirname(self.db), "token")) as f:
            return f.read().strip()

    def request(self, method, path, body=None, headers=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            h = dict(headers or {})
            if body is not None:
                body = json.dumps(body).encode()
                h["Content-Type"] = "application/json"
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            raw = r.read()
            try:
                obj = json.loads(raw.decode())
            except ValueError:
                obj = raw.decode("utf-8", "replace")
            return r.status, obj, dict(r.getheaders())
        finally:
            c.close()

    def get(self, path, headers=None):
        st, obj, _ = self.request("GET", path, headers=headers)
        return st, obj

    def stop(self):
        return stop_process(self.proc, self.log)
