#!/usr/bin/env python3
"""it_reads_off_writer.py -- heavy reads never hold up a write (issue 29
item 3).

GET /v1/winners and /v1/drift read every row of a device: seconds on a big
store. They run on the read pool (read-only connections of their own), not
on the DB worker that runs POST /v1/tune, DELETE /v1/jobs/ID and imports.

On a store of --rows imported rows (30,000; --long: 120,000, near the
campaign's 146k and as many as one 64 MiB import takes):

1. the mechanism, not a timing: while this test holds SQLite's write lock,
   a POST /v1/tune sits on the DB worker (in its busy timeout); winners
   and drift must answer before the lock is released. Queued behind the
   writer (the code before), they answered only after it.
2. the bound: 16 clients loop on winners and drift (8 each, keep-alive)
   while POST /v1/tune is timed several times (each job then canceled).
   The goal is under 100 ms; asserted with margin for a loaded 2-core
   machine: the median under 250 ms and every one under 1.5 s. Before the
   fix, each waited behind the queued reports (0.5 s each at 30k rows).
3. the stop: SIGTERM while one POST /v1/tune waits on the DB worker for
   the lock this test holds and a second is queued behind it. The second
   is answered 503 and never run (it used to be run by the stop's drain:
   a job created while the daemon stopped). An order of events: the lock
   is released only once GET /v1/health, on a connection opened before,
   says "stopping".

Prints a `figures:` line (make reliability collects it)."""
import argparse
import http.client
import json
import os
import signal
import sqlite3
import statistics
import sys
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "reliability"))
import battery  # noqa: E402
import rel  # noqa: E402

TINY = {"b": 1, "hq": 1, "hkv": 1, "sq": 1, "skv": 16, "d": 16, "dtype": "f32",
        "causal": False}


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def mechanism(d, dev, f):
    """Reads answer while a write waits on the DB worker for a lock this
    test holds: an order of events, not a timing."""
    con = sqlite3.connect(d.db, timeout=10, isolation_level=None)
    con.execute("BEGIN IMMEDIATE")  # SQLite's write lock, held here
    tune = {}

    def post():
        t, (st, j) = timed(lambda: d.authed("POST", "/v1/tune",
                                           {"device": "cpu", "shapes": [TINY]}, timeout=60))
        tune.update(t=t, st=st, j=j)

    reads = {}

    def get(name, path):
        t, (st, _) = timed(lambda: d.request("GET", path, timeout=60))
        reads[name] = (st, t, "st" in tune)  # was the tune answered yet?

    th = threading.Thread(target=post)
    th.start()
    time.sleep(0.5)  # the tune reaches the DB worker and waits on the lock
    rd = [threading.Thread(target=get, args=(name, "/v1/%s?device=%s" % (name, dev)))
          for name in ("winners", "drift")]
    for t in rd:
        t.start()
    for t in rd:
        t.join(60)
    con.execute("ROLLBACK")  # before the writer's busy timeout (5 s) runs out
    con.close()
    th.join(60)
    for name in ("winners", "drift"):
        st, t, tune_done = reads.get(name, (None, -1, True))
        f.check(st in (200, 404) and not tune_done,
                "GET /v1/%s answered (%s, %.3f s) while the POST /v1/tune before it still "
                "waited on the DB worker for the write lock" % (name, st, t))
    f.check(tune.get("st") == 202,
            "the POST /v1/tune that waited on the lock was accepted after its release (%s, "
            "%.2f s)" % (tune.get("st"), tune.get("t", -1)))
    if tune.get("st") == 202:
        d.authed("DELETE", "/v1/jobs/%d" % tune["j"]["job"])


def stop_with_a_queued_write(d, f):
    """SIGTERM with a POST /v1/tune queued on the DB worker behind one that
    waits for the write lock: the queued one is answered 503, not run."""
    second = dict(TINY, sq=3, skv=48)
    health = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)
    health.request("GET", "/v1/health")  # kept alive: still served after the stop began
    health.getresponse().read()
    con = sqlite3.connect(d.db, timeout=10, isolation_level=None)
    con.execute("BEGIN IMMEDIATE")  # SQLite's write lock, held here
    res = {}

    def post(name, shape):
        try:
            res[name] = d.authed("POST", "/v1/tune", {"device": "cpu", "shapes": [shape]},
                                 timeout=60)[0]
        except (OSError, http.client.HTTPException):
            res[name] = 0  # closed without an answer
    first = threading.Thread(target=post, args=("first", TINY))
    first.start()
    time.sleep(0.5)  # the first reaches the DB worker and waits on the lock
    queued = threading.Thread(target=post, args=("second", second))
    queued.start()
    time.sleep(0.5)  # the second queued behind it (if not yet, it is refused anyway)
    d.proc.send_signal(signal.SIGTERM)
    stopping = False
    for _ in range(600):
        health.request("GET", "/v1/health")
        stopping = json.loads(health.getresponse().read()).get("status") == "stopping"
        if stopping:
            break
        time.sleep(0.01)
    health.close()
    con.execute("ROLLBACK")
    con.close()
    first.join(60)
    queued.join(60)
    rc = d.proc.wait(30)
    con = sqlite3.connect(d.db, timeout=10)
    n = con.execute("SELECT count(*) FROM jobs j JOIN job_shapes js ON js.job_id = j.id "
                    "JOIN shapes s ON s.id = js.shape_id WHERE s.sq = 3 AND s.skv = 48 "
                    "AND s.d = 16").fetchone()[0]
    con.close()
    f.check(stopping, "GET /v1/health said stopping after SIGTERM")
    f.check(res.get("second") in (503, 0) and n == 0,
            "the POST /v1/tune queued on the DB worker when the stop began: answered %s, "
            "%d job created (503 or no answer, none)" % (res.get("second"), n))
    f.check(rc == 0, "SIGTERM: clean exit (%s)" % rc)


def reader(port, path, stop, counts, i):
    c = None
    while not stop.is_set():
        try:
            if c is None:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            c.request("GET", path)
            r = c.getresponse()
            r.read()
            counts[i] += 1
        except (OSError, http.client.HTTPException):
            if c is not None:
                c.close()
            c = None
            time.sleep(0.05)
    if c is not None:
        c.close()


def bound(d, dev, f, ntunes):
    stop = threading.Event()
    counts = [0] * 16
    threads = []
    for i in range(16):
        path = ("/v1/winners?device=" if i % 2 == 0 else "/v1/drift?device=") + dev
        t = threading.Thread(target=reader, args=(d.port, path, stop, counts, i))
        t.start()
        threads.append(t)
    try:
        time.sleep(1.5)  # the read pool busy, its queue full of reports
        tunes, dels = [], []
        for _ in range(ntunes):
            t, (st, j) = timed(lambda: d.authed("POST", "/v1/tune",
                                               {"device": "cpu", "shapes": [TINY]},
                                               timeout=60))
            f.check(st == 202, "POST /v1/tune accepted beside 16 readers (%s)" % st)
            tunes.append(t)
            if st == 202:
                t, _ = timed(lambda: d.authed("DELETE", "/v1/jobs/%d" % j["job"], timeout=60))
                dels.append(t)
            time.sleep(0.3)
        reads_during = sum(counts)
    finally:
        stop.set()
        for t in threads:
            t.join(180)
    return tunes, dels, reads_during


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--long", action="store_true", help="120,000 rows, 20 tunes")
    ap.add_argument("--rows", type=int)
    args = ap.parse_args()
    rows = args.rows or (120000 if args.long else 30000)
    ntunes = 20 if args.long else 8
    (binary,) = rel.need("ATTUNED_BIN")
    f = rel.Failures()
    d = rel.Daemon(binary)
    try:
        d.start()
        table = battery.big_table(rows)
        dev = table["device"]["id"]
        st, r = d.authed("POST", "/v1/import", table, timeout=600)
        if not f.check(st == 200, "import of a %d-row table (%s)" % (rows, st)):
            return f.exit()
        del table
        t_w, _ = timed(lambda: d.request("GET", "/v1/winners?device=" + dev, timeout=120))
        t_d, _ = timed(lambda: d.request("GET", "/v1/drift?device=" + dev, timeout=120))
        mechanism(d, dev, f)
        tunes, dels, reads = bound(d, dev, f, ntunes)
        med = statistics.median(tunes)
        print("figures: reads_off_writer rows=%d winners_s=%.3f drift_s=%.3f readers=16 "
              "reads_answered=%d tunes=%d tune_p50_ms=%.1f tune_max_ms=%.1f "
              "delete_p50_ms=%.1f delete_max_ms=%.1f load=%s" % (
                  rows, t_w, t_d, reads, len(tunes), med * 1e3, max(tunes) * 1e3,
                  statistics.median(dels) * 1e3 if dels else -1,
                  max(dels) * 1e3 if dels else -1,
                  open("/proc/loadavg").read().split()[0]), flush=True)
        # the pool was busy all along (16 clients, 2 threads); at 120,000
        # rows on a loaded machine a report takes 5 s, so only a few end
        # while the tunes are timed
        f.check(reads >= 1, "the 16 readers were answered meanwhile (%d reports)" % reads)
        f.check(med < 0.25, "POST /v1/tune beside 16 readers: median %.1f ms (goal 100 ms; "
                "asserted < 250 ms for a loaded machine)" % (med * 1e3))
        f.check(max(tunes) < 1.5, "POST /v1/tune beside 16 readers: every one under 1.5 s "
                "(max %.1f ms)" % (max(tunes) * 1e3))
        f.check(not dels or max(dels) < 1.5, "DELETE /v1/jobs/ID beside 16 readers: under 1.5 s "
                "(max %.1f ms)" % (max(dels) * 1e3 if dels else -1))
        stop_with_a_queued_write(d, f)
    except Exception as e:  # report, then fail
        f.exception(e)
    finally:
        if f.items:
            print(d.log_tail())
        d.cleanup()
    return f.exit()


if __name__ == "__main__":
    sys.exit(main())
