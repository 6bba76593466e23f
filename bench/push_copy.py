#!/usr/bin/env python3
"""push_copy.py -- a bulk push against a plain binary COPY of the same rows
into the same table, on a private PostgreSQL on this box.

    bench/push_copy.py BUILD_DIR [--rows 2000000] [--runs 3] [--jobs 1] [--no-warmup]
                       [--per-push 1]

Starts a durable server as bench/fleet_bench.py does (tests/fleetlib.py:
initdb in a temp dir, Unix socket only, fsync and synchronous commit on,
shared_buffers 512MB), and pushes the rows once untimed (--no-warmup
skips it: on a fresh server the first push creates every WAL segment it
writes, which the COPYs after it recycle). Each run, on fresh tables:

  push  build/fleet_bench --push-only: attune's push path (fleet_pg_push:
        rows checked, keys resolved, one transaction per device push of
        8,000 rows with its watermark and dirty groups) by --jobs
        pushers (1: one store's bulk push, as attuned or `attune fleet
        push` makes it, a stream on two connections that copies two
        batches at once, one on each, committed in order; 2: two hosts
        at once), rows/s;
  COPY  the same rows, dumped from the pushed table in the order they were
        inserted, emptied, then loaded back with one
        `COPY measurements (...) FROM STDIN (FORMAT binary)` through psql
        (the client-side \\copy: the rows cross the same socket), rows/s;
  COPY in batches  the same, one COPY and commit per device's 8,000 rows
        (the push's transactions without the rest of the push; per device
        whatever --per-push), from one psql session, rows/s;

then prints push/COPY (the goal: >= 0.8) and push/(COPY in batches), per
run and the median of the runs, with the date, machine and commit, the
load average, and for each the CPU time of the server's processes (from
/proc) and of the client (the push's excludes making its synthetic rows):
on a shared machine wall time says as much about the neighbours, CPU time
per row does not. docs/fleet.md records the results.
"""
import resource
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
    ap.add_argument("--jobs", type=int, default=1, help="pushers (each a stream on its own connection and,"
                    " from its second batch on, a second one: fleet_pg_push_stream's lanes)")
    ap.add_argument("--per-push", type=int, default=1,
                    help="devices (8,000 rows each) per push transaction, at most 16")
    ap.add_argument("--no-warmup", dest="warmup", action="store_false",
                    help="skip the untimed push that fills the server's WAL first")
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
    dirty = subprocess.run(["git", "-C", os.path.join(here, ".."), "status", "--porcelain", "--",
                            "db", "bench"],
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
    ratios, ratios_b, cpu_ratios = [], [], []
    try:
        print("server: PostgreSQL %s, fsync on, synchronous_commit on; %d rows = %d devices "
              "of 8,000, %d per push, %d pusher(s)" % (
                  pg.sql("SHOW server_version")[0], devices * 8000, devices, a.per_push, a.jobs),
              flush=True)
        with open(os.path.join(pg.data, "postmaster.pid")) as f:
            spid = int(f.readline().strip())
        if a.warmup:
            # a fresh server has no WAL segments to recycle: the first run's
            # push would create (zero-fill) every one it writes, and the
            # COPYs after it reuse them (perf: XLogFileInit, ~1 s of the
            # backend's CPU per 400k rows); one untimed push first gives
            # every timed run the same recycled WAL
            r = subprocess.run([exe, "--fleet", pg.url, "--reset", "--push-only", "--devices",
                                str(devices), "--jobs", str(a.jobs), "--per-push",
                                str(a.per_push)], env=pg.env(),
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(r.stdout, r.stderr)
                return 1
            pg.sql("CHECKPOINT")
            print("warm-up push (not timed): %s" % r.stdout.strip().splitlines()[-1], flush=True)
        for run in range(a.runs):
            pg.sql("CHECKPOINT")
            l0, c0 = os.getloadavg()[0], server_cpu(spid)
            r = subprocess.run([exe, "--fleet", pg.url, "--reset", "--push-only", "--devices",
                                str(devices), "--jobs", str(a.jobs), "--per-push",
                                str(a.per_push), "--server-pid", str(spid)],
                               env=pg.env(), capture_output=True, text=True)
            push_cpu_all = server_cpu(spid) - c0  # with --reset's drop and the connections
            m = re.search(r"push: (\d+) rows in ([0-9.]+) s", r.stdout)
            mc = re.search(r"push CPU: server ([0-9.]+) s \+ client ([0-9.]+) s", r.stdout)
            if r.returncode != 0 or m is None:
                print(r.stdout, r.stderr)
                return 1
            rows = int(m.group(1))
            push_s = float(m.group(2))  # the pushes alone, without connecting and resetting
            # the server's CPU over the pushes alone, as fleet_bench measures it
            # (from /proc, the same processes): the whole run's, push_cpu_all,
            # also holds --reset's DROP of the last run's 2M rows and the
            # schema check, which the COPYs' figures (TRUNCATE before the
            # clock) do not; until 2026-12-03 15:20 the ratio used it
            push_cpu = float(mc.group(1)) if mc else push_cpu_all
            push_ccpu = float(mc.group(2)) if mc else float("nan")
            # the pushed rows, in the order they went in (the heap's), and
            # per device push, then the table emptied and loaded again by
            # one plain COPY, and again by a COPY per device push
            psql(pg, "-c", "\\copy (SELECT %s FROM measurements) TO '%s' WITH (FORMAT binary)"
                 % (COLUMNS, dump))
            devs = pg.sql("SELECT device_id FROM measurements GROUP BY device_id "
                          "ORDER BY min(ctid)")
            script = os.path.join(pg.dir, "batches.sql")
            with open(os.path.join(pg.dir, "dump.sql"), "w") as f:
                for d in devs:
                    f.write("\\copy (SELECT %s FROM measurements WHERE device_id = %s) TO "
                            "'%s.%s' WITH (FORMAT binary)\n" % (COLUMNS, d, dump, d))
            with open(script, "w") as f:
                for d in devs:
                    f.write("\\copy measurements (%s) FROM '%s.%s' WITH (FORMAT binary)\n"
                            % (COLUMNS, dump, d))
            psql(pg, "-f", os.path.join(pg.dir, "dump.sql"))
            times = []
            for how, arg in (("one COPY", ["-c", "\\copy measurements (%s) FROM '%s' WITH "
                                           "(FORMAT binary)" % (COLUMNS, dump)]),
                             ("COPY in batches", ["-f", script])):
                psql(pg, "-c", "TRUNCATE measurements, dirty")
                pg.sql("CHECKPOINT")
                l1, c1, k1, t1 = (os.getloadavg()[0], server_cpu(spid),
                                  resource.getrusage(resource.RUSAGE_CHILDREN), time.time())
                psql(pg, *arg)
                k2 = resource.getrusage(resource.RUSAGE_CHILDREN)
                times.append((time.time() - t1, server_cpu(spid) - c1,
                              k2.ru_utime - k1.ru_utime + k2.ru_stime - k1.ru_stime, l1))
                n = int(pg.sql("SELECT count(*) FROM measurements")[0])
                if n != rows:
                    print("%s loaded %d rows, the push %d" % (how, n, rows))
                    return 1
            (copy_s, copy_cpu, copy_ccpu, l1), (batch_s, batch_cpu, batch_ccpu, l2) = times
            ratio, ratio_b = copy_s / push_s, batch_s / push_s
            cpu_ratio = (copy_cpu + copy_ccpu) / (push_cpu + push_ccpu)
            ratios.append(ratio)
            ratios_b.append(ratio_b)
            cpu_ratios.append(cpu_ratio)
            print("run %d: push %d rows in %.1f s = %.0f rows/s (CPU server %.1f s + client %.1f s,"
                  " load %.1f); one COPY %.1f s = %.0f rows/s (CPU %.1f + %.1f s, load %.1f); "
                  "COPY in batches %.1f s (CPU %.1f + %.1f s, load %.1f); push/COPY = %.2f, "
                  "push/(COPY in batches) = %.2f, by CPU time push/COPY = %.2f"
                  % (run + 1, rows, push_s, rows / push_s, push_cpu, push_ccpu, l0, copy_s,
                     rows / copy_s, copy_cpu, copy_ccpu, l1, batch_s, batch_cpu, batch_ccpu, l2,
                     ratio, ratio_b, cpu_ratio), flush=True)
        print("push/COPY at %d rows: %s; median %.2f (goal >= 0.8); push/(COPY in batches) "
              "median %.2f; by CPU time median %.2f" % (
                  devices * 8000, ", ".join("%.2f" % x for x in ratios),
                  statistics.median(ratios), statistics.median(ratios_b),
                  statistics.median(cpu_ratios)))
    finally:
        pg.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
