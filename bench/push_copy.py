#!/usr/bin/env python3
"""push_copy.py -- a bulk push against a plain binary COPY of the same rows
into the same table, on a private PostgreSQL on this box.

    bench/push_copy.py BUILD_DIR [--rows 2000000] [--runs 3] [--jobs 1]

Starts a durable server as bench/fleet_bench.py does (tests/fleetlib.py:
initdb in a temp dir, Unix socket only, fsync and synchronous commit on,
shared_buffers 512MB). Each run, on fresh tables:

  push  build/fleet_bench --push-only: attune's push path (fleet_pg_push:
        rows checked, keys resolved, one transaction per device push of
        8,000 rows with its watermark and dirty groups) over --jobs
        connections (1: one store's bulk push, as attuned or `attune fleet
        push` makes it; 2: two hosts at once), rows/s;
  COPY  the same rows, dumped from the pushed table in the order they were
        inserted, emptied, then loaded back with one
        `COPY measurements (...) FROM STDIN (FORMAT binary)` through psql
        (the client-side \\copy: the rows cross the same socket), rows/s;

then prints the ratio push/COPY (the goal: >= 0.8), per run and the median
of the runs, with the date, machine and commit, the load average, and the
server's CPU time for each (from /proc: on a shared machine wall time says
as much about the neighbours). docs/fleet.md records the results.
"""
import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests"))
import fleetlib  # noqa: E402

COLUMNS = ("model_id, stack_id, shape_id, tactic_id, device_id, status, time_us, time_us_min,"
           " time_us_max, time_us_copies, n, max_abs_err, rel_err, mode, l2, rows_checked,"
           " note, host, taken_at")
TICK = os.sysconf("SC_CLK_TCK")


def server_cpu(pid):
    """CPU seconds of the postmaster (with reaped children) and its live children."""
    total = 0.0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        w = st[st.rindex(")") + 2:].split()
        ppid, ut, stt, cut, cst = int(w[1]), int(w[11]), int(w[12]), int(w[13]), int(w[14])
        if int(d) == pid:
            total += (ut + stt + cut + cst) / TICK
        elif ppid == pid:
            total += (ut + stt) / TICK
    return total


def psql(pg, *args):
    return pg._run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", "attune"] + list(args),
                   client=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--rows", type=int, default=2000000, help="rows pushed (8,000 per device)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=1, help="push connections")
    a = ap.parse_args()
    exe = os.path.join(a.build, "fleet_bench")
    if not os.access(exe, os.X_OK):
        print("%s not built (needs libpq)" % exe)
        return 1
    b = fleetlib.pg_bindir()
    if b is None:
        print("PostgreSQL server binaries not found (scripts/deps.sh installs them)")
        return 1
    devices = max(1, a.rows // 8000)
    commit = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--", "db", "bench"],
                           capture_output=True, text=True).stdout.strip()
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    print("date %s, host %s, %d CPUs (%s), commit %s%s, load average %.1f" % (
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), platform.node(), os.cpu_count(),
        cpu, commit, " (db/ or bench/ modified)" if dirty else "", os.getloadavg()[0]),
        flush=True)
    pg = fleetlib.PgServer(b, durable=True, extra_opts="-c shared_buffers=512MB "
                           "-c max_wal_size=4GB -c checkpoint_timeout=15min")
    dump = os.path.join(pg.dir, "rows.bin")
    open(dump, "w").close()
    os.chmod(dump, 0o666)
    ratios = []
    try:
        print("server: PostgreSQL %s, fsync on, synchronous_commit on; %d rows = %d device "
              "pushes of 8,000 over %d connections" % (
                  pg.sql("SHOW server_version")[0], devices * 8000, devices, a.jobs),
              flush=True)
        with open(os.path.join(pg.data, "postmaster.pid")) as f:
            spid = int(f.readline().strip())
        for run in range(a.runs):
            pg.sql("CHECKPOINT")
            l0, c0, t0 = os.getloadavg()[0], server_cpu(spid), time.time()
            r = subprocess.run([exe, "--fleet", pg.url, "--reset", "--push-only", "--devices",
                                str(devices), "--jobs", str(a.jobs)], env=pg.env(),
                               capture_output=True, text=True)
            push_s, push_cpu = time.time() - t0, server_cpu(spid) - c0
            m = re.search(r"push: (\d+) rows in ([0-9.]+) s", r.stdout)
            if r.returncode != 0 or m is None:
                print(r.stdout, r.stderr)
                return 1
            rows = int(m.group(1))
            push_s = float(m.group(2))  # the pushes alone, without connecting and resetting
            # the pushed rows, in the order they went in (the heap's), then
            # the table emptied, and loaded again by one plain COPY
            psql(pg, "-c", "\\copy (SELECT %s FROM measurements) TO '%s' WITH (FORMAT binary)"
                 % (COLUMNS, dump))
            psql(pg, "-c", "TRUNCATE measurements, dirty")
            pg.sql("CHECKPOINT")
            l1, c1, t1 = os.getloadavg()[0], server_cpu(spid), time.time()
            psql(pg, "-c", "\\copy measurements (%s) FROM '%s' WITH (FORMAT binary)"
                 % (COLUMNS, dump))
            copy_s, copy_cpu = time.time() - t1, server_cpu(spid) - c1
            n = int(pg.sql("SELECT count(*) FROM measurements")[0])
            if n != rows:
                print("COPY loaded %d rows, the push %d" % (n, rows))
                return 1
            ratio = (rows / push_s) / (rows / copy_s)
            ratios.append(ratio)
            print("run %d: push %d rows in %.1f s = %.0f rows/s (server CPU %.1f s, load %.1f); "
                  "COPY %.1f s = %.0f rows/s (server CPU %.1f s, load %.1f); push/COPY = %.2f"
                  % (run + 1, rows, push_s, rows / push_s, push_cpu, l0, copy_s, rows / copy_s,
                     copy_cpu, l1, ratio), flush=True)
        print("push/COPY at %d rows: %s; median %.2f (goal >= 0.8)" % (
            devices * 8000, ", ".join("%.2f" % x for x in ratios), statistics.median(ratios)))
    finally:
        pg.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
