#!/usr/bin/env python3
"""miss_flood.py -- a flood of distinct misses leaves the tuner's queue, the
database and RSS bounded by the miss quota (issue 29's done-when).

attuned with --miss-quota Q; T threads ask GET /v1/tactic for a new shape
each time (no token), for S seconds (short: 10; --long: 150, the issue's
campaign). Checked: the miss queue never exceeds its 32 slots; at most Q
miss jobs exist and at most Q shapes have rows (each at most the backend's
listing of 16 CPU tactics); the rest of the lookups were answered at once
with "refused: daily quota"; RSS after the flood within 64 MB of before.
Figures: lookups, their rate, refusals, rows, RSS.

  miss_flood.py [--seconds S] [--long] [--quota Q] [--threads T]"""
import argparse
import os
import re
import sqlite3
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rel  # noqa: E402


def flood(d, stop, counts, base):
    i = 0
    while not stop.is_set():
        i += 1
        sq, skv = 8 + (base + i) % 997, 16 + (base + i) // 997 % 4000
        st, a = d.request("GET", "/v1/tactic?device=cpu&b=1&hq=2&hkv=1&sq=%d&skv=%d&d=16"
                          "&dtype=f32&causal=0" % (sq, skv), timeout=30)
        t = a.get("tuning", "") if st == 200 else "error %s" % st
        key = "queued" if t in ("queued", "running") else t.split(":")[0] + (
            ": quota" if "quota" in t else "") if t else "none"
        counts[key] = counts.get(key, 0) + 1


def metric(text, name):
    m = re.search(r"^%s\{[^}]*\} (\d+)" % re.escape(name), text, re.M)
    return int(m.group(1)) if m else -1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--long", action="store_true")
    ap.add_argument("--quota", type=int, default=20)
    ap.add_argument("--threads", type=int, default=4)
    a = ap.parse_args()
    seconds = 150 if a.long else a.seconds
    (binary,) = rel.need("ATTUNED_BIN")
    f = rel.Failures()
    d = rel.Daemon(binary, args=["--miss-quota", str(a.quota)]).start()
    try:
        rss0 = d.rss_kb()
        stop = threading.Event()
        counts = [dict() for _ in range(a.threads)]
        th = [threading.Thread(target=flood, args=(d, stop, counts[k], k * 10 ** 7))
              for k in range(a.threads)]
        for t in th:
            t.start()
        t0, maxq = time.time(), 0
        while time.time() - t0 < seconds:
            time.sleep(1)
            text = d.request("GET", "/metrics")[1]
            text = text.decode() if isinstance(text, bytes) else str(text)
            maxq = max(maxq, metric(text, "attune_queue_depth"))
            m = re.search(r'queue="miss"\} (\d+)', text)
            maxq = max(maxq, int(m.group(1)) if m else 0)
        stop.set()
        for t in th:
            t.join()
        total = {}
        for c in counts:
            for k, v in c.items():
                total[k] = total.get(k, 0) + v
        n = sum(total.values())
        rss1 = d.rss_kb()
        st, jobs = d.request("GET", "/v1/jobs?kind=miss&limit=10000")
        db = sqlite3.connect("file:%s?mode=ro" % d.db, uri=True, timeout=30)
        shapes = db.execute("SELECT count(DISTINCT shape_id) FROM measurements").fetchone()[0]
        rows = db.execute("SELECT count(*) FROM measurements").fetchone()[0]
        db.close()
        f.check(total.get("queued", 0) <= a.quota,
                "at most the quota admitted (%d of %d lookups)" % (total.get("queued", 0), n))
        f.check(total.get("refused: quota", 0) >= n - a.quota - total.get("none", 0),
                "the rest refused by the quota (%s)" % total)
        f.check(maxq <= 32, "the miss queue stayed within its 32 slots (max %d)" % maxq)
        f.check(len(jobs["jobs"]) <= a.quota and shapes <= a.quota and rows <= 16 * a.quota,
                "miss jobs %d, shapes with rows %d, rows %d: within the quota"
                % (len(jobs["jobs"]), shapes, rows))
        f.check(rss1 - rss0 < 64 * 1024, "RSS %d -> %d kB" % (rss0, rss1))
        print("figures: miss flood %.0f s, %d lookups (%.0f/s), %s, %d rows, RSS %d -> %d kB"
              % (seconds, n, n / seconds, total, rows, rss0, rss1))
    finally:
        d.cleanup()
    return f.exit()


if __name__ == "__main__":
    sys.exit(main())
