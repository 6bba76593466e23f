#!/usr/bin/env python3
"""fleet_bench.py -- run bench/fleet_bench.c against a private PostgreSQL.

    bench/fleet_bench.py BUILD_DIR [fleet_bench options...]

Starts a server like the tests do (tests/fleetlib.py: initdb in a temp dir,
Unix socket only, password from a passfile) but durable (fsync on, the
Debian defaults otherwise, shared_buffers raised to 512MB as any fleet
server would be), runs build/fleet_bench with its defaults (1,000 devices x
10 models x 200 shapes x 40 tactics = 8M rows) and prints its figures with
the date, machine and commit. Needs ~3 GB in $TMPDIR. docs/fleet.md
records the results.
"""
import os
import platform
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests"))
import fleetlib  # noqa: E402


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    exe = os.path.join(sys.argv[1], "fleet_bench")
    b = fleetlib.pg_bindir()
    if b is None:
        print("PostgreSQL server binaries not found (scripts/deps.sh installs them)")
        return 1
    commit = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    print("date %s, host %s, %d CPUs (%s), commit %s, load average %.1f" % (
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), platform.node(),
        os.cpu_count(), cpu, commit, os.getloadavg()[0]), flush=True)
    pg = fleetlib.PgServer(b, durable=True, extra_opts="-c shared_buffers=512MB "
                           "-c max_wal_size=4GB -c checkpoint_timeout=15min")
    try:
        print("server: PostgreSQL %s, fsync on, synchronous_commit on" %
              pg.sql("SHOW server_version")[0], flush=True)
        with open(os.path.join(pg.data, "postmaster.pid")) as f:
            spid = f.readline().strip()
        r = subprocess.run([exe, "--fleet", pg.url, "--server-pid", spid, "--db",
                            os.path.join(pg.dir, "pull.db")] + sys.argv[2:], env=pg.env())
        size = pg.sql("SELECT pg_size_pretty(pg_database_size('attune'))")[0]
        print("database size: %s; load average at the end %.1f" % (size, os.getloadavg()[0]))
        return r.returncode
    finally:
        pg.close()


if __name__ == "__main__":
    sys.exit(main())
