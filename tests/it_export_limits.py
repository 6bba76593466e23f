#!/usr/bin/env python3
"""it_export_limits.py -- an export cannot hold its slot, or the WAL, for
as long as its reader likes; the WAL shrinks back after (issue 29 item 4).

1. Total deadline (--export-timeout 8, no minimum rate): four exports that
   stop reading hold the four slots (a fifth: 503) and their snapshots
   while a second table is imported: the WAL grows past what SQLite's own
   checkpoints can copy back. At the deadline the daemon closes all four
   (their bodies end short); a new export then streams the whole table;
   and once none runs the WAL is checkpointed and truncated (under 1 MB;
   before this, it kept its size for good).
2. Minimum rate (the default, 256 KiB/s after 5 s): a reader taking 8 KiB
   every 0.25 s (32 KiB/s, the campaign's 128 KB every 2 s is 64) is cut
   within seconds of its grace, not at the total deadline; a reader that
   keeps up gets the whole table.

Prints a `figures:` line."""
import math
import os
import socket
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "reliability"))
import battery  # noqa: E402
import rel  # noqa: E402

ROWS = 12000
ROWS2 = 30000  # the second import: a WAL past ATTUNED_WAL_SHRINK_BYTES (8 MiB)
DEADLINE = 8


def wal_bytes(d):
    try:
        return os.path.getsize(d.db + "-wal")
    except OSError:
        return 0


def open_export(d, path, rcvbuf=4096):
    """An export whose answer has started (its slot taken); the socket."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", d.port))
    s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (path, d.port)).encode())
    s.settimeout(30)
    first = s.recv(64)
    return s, first


def drain(s, timeout=20):
    """Read s to its end; (bytes, whether the chunked body was complete)."""
    s.settimeout(timeout)
    got = []
    try:
        while True:
            b = s.recv(1 << 16)
            if not b:
                break
            got.append(b)
    except (socket.timeout, ConnectionResetError):
        pass
    data = b"".join(got)
    return len(data), data.endswith(b"0\r\n\r\n")


def cuts(d):
    """The seconds of each export_cut reason=deadline line of the log."""
    out = []
    with open(d.logpath, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if "event=export_cut reason=deadline" in line:
                out.append(float(line.rsplit("seconds=", 1)[1].split()[0]))
    return out


def table_of(dev_suffix, rows):
    t = battery.big_table(rows)
    t["device"]["id"] = t["device"]["id"][:-4] + dev_suffix
    return t


def start_timed(binary, deadline):
    """A daemon with export deadline `deadline` s and table 1 imported; the
    import's seconds."""
    # the idle-connection timeout (30 s by default) must not cut the stalled
    # exports before their deadline does
    d = rel.Daemon(binary, args=["--export-timeout", str(deadline), "--export-min-rate", "0",
                                 "--timeout", str(max(30, deadline + 30))])
    d.start()
    t0 = time.time()
    st, _ = d.authed("POST", "/v1/import", table_of("0001", ROWS), timeout=120)
    return d, st, time.time() - t0


def total_deadline(binary, f):
    # The second import (1-2 s on an idle 2-core box) must end while the
    # four exports run. DEADLINE s fits an idle box; on a loaded one (load
    # 10: 12 s for table 1) the daemon is started again with a deadline
    # fitted to the first import's time (table 2 is 2.5x its rows, with a
    # margin of 3x that), so the premise holds instead of the check failing.
    deadline = DEADLINE
    d, st, took = start_timed(binary, deadline)
    need = math.ceil(2 + 3 * took * ROWS2 / ROWS)
    if need > deadline:
        print("table 1 took %.1f s: export deadline %d s instead of %d" % (took, need, deadline))
        d.cleanup()
        deadline = need
        d, st, took = start_timed(binary, deadline)
    try:
        t1 = table_of("0001", ROWS)
        f.check(st == 200, "import of table 1 (%d rows): %s" % (ROWS, st))
        path = "/v1/export?device=" + t1["device"]["id"]
        wal0 = wal_bytes(d)
        t_open = time.time()
        stalled = [open_export(d, path)[0] for _ in range(4)]
        st, _ = d.request("GET", path, timeout=30)
        f.check(st == 503, "a 5th export while 4 run: 503 (%s)" % st)
        st, _ = d.authed("POST", "/v1/import", table_of("0002", ROWS2), timeout=120)
        f.check(st == 200, "import of table 2 (%d rows) beside 4 stalled exports: %s"
                % (ROWS2, st))
        wal_peak = wal_bytes(d)
        f.check(wal_peak > 8 << 20, "the WAL grows while the exports pin it (%.1f -> %.1f MB)"
                % (wal0 / 1e6, wal_peak / 1e6))
        f.check(not cuts(d), "the exports still ran when the import ended (%.1f s after they "
                "began; the deadline is %d s)" % (time.time() - t_open, deadline))
        # the deadline: `deadline` s after each began (the watchdog ticks every 0.2 s)
        while len(cuts(d)) < 4 and time.time() < t_open + deadline + 22:
            time.sleep(0.2)
        secs = cuts(d)
        last = max(secs) if secs else -1
        f.check(len(secs) == 4 and deadline <= min(secs) and last < deadline + 2,
                "the 4 stalled exports were cut at the %d s deadline (%s s)" % (deadline, secs))
        short = 0
        for s in stalled:  # what was buffered, then the end: a short body
            n, complete = drain(s, timeout=15)
            short += not complete
            s.close()
        f.check(short == 4, "their bodies end short (%d of 4)" % short)
        st, body = d.request("GET", path, timeout=60)
        f.check(st == 200 and isinstance(body, dict) and len(body.get("measurements", [])) == ROWS,
                "then an export that reads streams all %d rows" % ROWS)
        t0 = time.time()
        while wal_bytes(d) > 1 << 20 and time.time() < t0 + 15:
            time.sleep(0.2)
        wal_after = wal_bytes(d)
        f.check(wal_after <= 1 << 20, "the WAL shrinks back once no export runs "
                "(%.1f MB -> %.2f MB in %.1f s)" % (wal_peak / 1e6, wal_after / 1e6,
                                                    time.time() - t0))
        # the log line follows the truncation it reports: wait for it
        t0, log = time.time(), ""
        while "event=wal_truncated" not in log and time.time() < t0 + 10:
            with open(d.logpath, encoding="utf-8", errors="replace") as fh:
                log = fh.read()
            if "event=wal_truncated" not in log:
                time.sleep(0.1)
        f.check("event=wal_truncated" in log, "the daemon logged its checkpoint (wal_truncated)")
        return last, wal_peak, wal_after
    finally:
        if f.items:
            print(d.log_tail())
        d.cleanup()


def min_rate(binary, f):
    d = rel.Daemon(binary)  # defaults: 256 KiB/s after 5 s, 600 s in all
    try:
        d.start()
        t1 = table_of("0003", ROWS)
        st, _ = d.authed("POST", "/v1/import", t1, timeout=120)
        f.check(st == 200, "import (%d rows): %s" % (ROWS, st))
        path = "/v1/export?device=" + t1["device"]["id"]
        s, first = open_export(d, path)
        t0 = time.time()
        n = len(first)
        s.settimeout(1)
        # 8 KiB every 0.25 s until the daemon has cut it (its log says so:
        # the client sees the end only after what the buffers hold)
        while not cuts(d) and time.time() < t0 + 40:
            try:
                b = s.recv(8192)
            except socket.timeout:
                continue
            except ConnectionResetError:
                break
            if not b:
                break
            n += len(b)
            time.sleep(0.25)
        secs = cuts(d)
        closed_at = secs[0] if secs else None
        rest, complete = drain(s)
        s.close()
        # t = 5 + (32t KiB + ~0.5 MiB of socket buffers) / 256 KiB/s: ~8 s
        f.check(closed_at is not None and closed_at < 15 and not complete,
                "a reader at 32 KiB/s is cut by the 256 KiB/s minimum (after %s s, %d KiB "
                "read, the body short)" % ("%.1f" % closed_at if closed_at else "-",
                                           (n + rest) >> 10))
        st, body = d.request("GET", path, timeout=60)
        f.check(st == 200 and len(body.get("measurements", [])) == ROWS,
                "a reader that keeps up gets all %d rows" % ROWS)
        return closed_at
    finally:
        if f.items:
            print(d.log_tail())
        d.cleanup()


def main():
    (binary,) = rel.need("ATTUNED_BIN")
    f = rel.Failures()
    try:
        last, peak, after = total_deadline(binary, f)
        slow = min_rate(binary, f)
        print("figures: export_limits stalled_cut_s=%.1f wal_peak_mb=%.1f wal_after_mb=%.2f "
              "slow_reader_cut_s=%s" % (last, peak / 1e6, after / 1e6,
                                       "%.1f" % slow if slow else "-"), flush=True)
    except Exception as e:  # report, then fail
        f.exception(e)
    return f.exit()


if __name__ == "__main__":
    sys.exit(main())
