#!/usr/bin/env python3
"""it_import_memory.py -- POST /v1/import's memory is bounded, and given
back (issue 29 item 8).

The daemon used to parse a fleet table into one JSON tree, several times
the table's size, and keep the memory after: a 62 MiB import peaked at
730-770 MB and the daemon stayed at 710 MB (104 MB after a restart). Now
the rows stay text, each parsed when read (db/store_fleet_scan.c), the
body is freed before the index reload, and the allocator's free memory is
trimmed after.

Asserted on one import of --rows rows (30,000: a 14 MiB table): the peak
RSS (VmHWM) grows by under 5x the table, and what stays after by under 3x
(the lookup index holds every row: about 0.65 KB each, 1.3x the table's
text). Before: 9.4x and 8.3x. --long: 125,000 rows (60 MiB), then two such
imports at once, figures only (the sizing of docs/deploy.md's MemoryMax).

Prints `figures:` lines."""
import argparse
import json
import os
import sys
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "reliability"))
import battery  # noqa: E402
import rel  # noqa: E402


def mem_mb(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0]) / 1024.0
    return out


def table_bytes(rows, k):
    t = battery.big_table(rows)
    t["device"]["id"] = t["device"]["id"][:-2] + "%02d" % k
    return json.dumps(t).encode()


def imports(binary, rows, n, f):
    """n imports of rows rows at once into a fresh daemon: figures."""
    d = rel.Daemon(binary)
    try:
        d.start()
        bodies = [table_bytes(rows, k) for k in range(n)]
        mb = len(bodies[0]) / 2.0 ** 20
        before = mem_mb(d.proc.pid)["VmRSS"]
        res = []

        def post(b):
            t0 = time.time()
            st, r = d.authed("POST", "/v1/import", b, timeout=900)
            res.append((st, time.time() - t0))

        ths = [threading.Thread(target=post, args=(b,)) for b in bodies]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        del bodies
        time.sleep(1)
        m = mem_mb(d.proc.pid)
        f.check(all(st == 200 for st, _ in res), "%d import(s) of %d rows: %s" % (
            n, rows, [st for st, _ in res]))
        fig = {"rows": rows, "imports": n, "table_mib": mb, "rss_before_mb": before,
               "peak_mb": m["VmHWM"], "after_mb": m["VmRSS"],
               "seconds": max(t for _, t in res)}
        print("figures: import_memory " + " ".join(
            "%s=%s" % (k, ("%.1f" % v) if isinstance(v, float) else v) for k, v in fig.items()),
            flush=True)
        return fig
    finally:
        if f.items:
            print(d.log_tail())
        d.cleanup()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--long", action="store_true")
    ap.add_argument("--rows", type=int)
    args = ap.parse_args()
    (binary,) = rel.need("ATTUNED_BIN")
    f = rel.Failures()
    try:
        rows = args.rows or (125000 if args.long else 30000)
        fig = imports(binary, rows, 1, f)
        mb = fig["table_mib"] * 1.048576  # MB, as the RSS figures
        grow_peak = fig["peak_mb"] - fig["rss_before_mb"]
        grow_after = fig["after_mb"] - fig["rss_before_mb"]
        f.check(grow_peak < 5 * mb, "peak RSS grew %.0f MB for a %.0f MB table (< 5x; the "
                "whole-tree parser: 9.4x)" % (grow_peak, mb))
        f.check(grow_after < 3 * mb, "RSS after the import grew %.0f MB for a %.0f MB table "
                "(< 3x; the index holds ~1.3x; before: 8.3x)" % (grow_after, mb))
        if args.long:
            imports(binary, rows, 2, f)
    except Exception as e:  # report, then fail
        f.exception(e)
    return f.exit()


if __name__ == "__main__":
    sys.exit(main())
