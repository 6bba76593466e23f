#!/usr/bin/env python3
"""it_power_mode.py -- a measurement tuned in one power mode is not served as
`measured` in another (issue 14, DESIGN.md "Identity").

The Orin fixture tree (tests/inputs/jetson-orin/) is copied to a scratch
root and attune/attuned read it through ATTUNE_SYSFS_ROOT, so the CPU device
sees a Jetson in nvpmodel mode 0 (MAXN), then mode 1 (15W). The CPU backend
stands in for the GPU: on a Jetson nvpmodel sets the CPU's cores and clocks
too, and the rule is the same code path (the stack's power key).

  1. tune a shape in MAXN; attuned in MAXN serves it `measured`;
  2. attuned in 15W: the same query is `default` (neither measured nor
     nearest: the MAXN rows are not this mode's), /v1/devices names the
     mode, /v1/results still lists the MAXN row with its mode;
  3. `attune tune` in 15W measures the shape again (nothing skipped);
  4. back in MAXN the MAXN row is served again, unchanged.
"""
import http.client
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

SHAPE = "b1.hq4.hkv1.sq8.skv32.d16.f32.nc"
QUERY = "/v1/tactic?device=cpu&b=1&hq=4&hkv=1&sq=8&skv=32&d=16&dtype=f32&causal=0"
NEAR = "/v1/tactic?device=cpu&b=1&hq=4&hkv=1&sq=16&skv=32&d=16&dtype=f32&causal=0"

from checklib import check, failures  # noqa: E402  (tests/checklib.py)


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, json.loads(r.read().decode())
    finally:
        c.close()


def rows_per_stack(db):
    c = sqlite3.connect(db)
    try:
        return dict(c.execute("SELECT stack_id, count(*) FROM measurements GROUP BY 1"))
    finally:
        c.close()


def set_mode(root, mode):
    with open(os.path.join(root, "var/lib/nvpmodel/status"), "w") as f:
        f.write("pmode:%04d fmode:quiet\n" % mode)


def serve(attuned, db, env, fn):
    """Start attuned on db under env, call fn(port), stop it."""
    port = free_port()
    log = open(db + ".log", "ab")
    # no tune on miss: the rows per stack below are the CLI's alone
    p = subprocess.Popen([attuned, "--db", db, "--port", str(port), "--no-default-grid",
                          "--no-tune-on-miss"],
                         env=env, stdout=log, stderr=log)
    try:
        deadline = time.time() + 20
        while True:
            if p.poll() is not None:
                raise RuntimeError("attuned exited with %d" % p.returncode)
            try:
                if get(port, "/v1/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("attuned did not start")
            time.sleep(0.05)
        return fn(port)
    finally:
        p.terminate()
        p.wait(timeout=20)
        log.close()


def main():
    attune = os.environ.get("ATTUNE_BIN")
    attuned = os.environ.get("ATTUNED_BIN")
    inputs = os.environ.get("ATTUNE_TEST_INPUTS", "tests/inputs")
    if not attune or not attuned:
        print("attune or attuned not built: skipped")
        return 77
    work = tempfile.mkdtemp(prefix="attune-power-")
    try:
        root = os.path.join(work, "root")
        shutil.copytree(os.path.join(inputs, "jetson-orin"), root)
        env = dict(os.environ, ATTUNE_SYSFS_ROOT=root)
        db = os.path.join(work, "attune.db")

        set_mode(root, 0)
        tune = [attune, "tune", "--db", db, "--device", "cpu", "--budget-ms", "20", "--quiet",
                "--shape", SHAPE]
        subprocess.run(tune, env=env, check=True)
        out = subprocess.run([attune, "devices", "--json"], env=env, check=True,
                             capture_output=True, text=True).stdout
        cpu = [d for d in json.loads(out)["devices"] if d["kind"] == "cpu"][0]
        check(cpu["stack"]["power"] == "nvpmodel-0-MAXN",
              "attune devices: CPU stack power %r" % cpu["stack"]["power"])

        def in_maxn(port):
            st, a = get(port, QUERY)
            check(st == 200 and a["source"] == "measured" and not a["stale"],
                  "MAXN: tuned shape served measured (%s)" % a.get("source"))
            st, n = get(port, NEAR)
            check(n["source"] in ("nearest", "predicted"),
                  "MAXN: neighbour served from the tuned shape (%s)" % n["source"])
            return a
        first = serve(attuned, db, env, in_maxn)

        set_mode(root, 1)

        def in_15w(port):
            st, a = get(port, QUERY)
            check(st == 200 and a["source"] == "default",
                  "15W: MAXN row not served (source %s, stale %s)" % (a["source"], a["stale"]))
            st, n = get(port, NEAR)
            check(n["source"] == "default", "15W: no nearest from MAXN rows (%s)" % n["source"])
            st, devs = get(port, "/v1/devices")
            cpu = [d for d in devs["devices"] if d["kind"] == "cpu"][0]
            check(cpu["stack"]["power"] == "nvpmodel-1-15W",
                  "15W: /v1/devices power %r" % cpu["stack"]["power"])
            st, res = get(port, QUERY.replace("/v1/tactic", "/v1/results"))
            rows = res.get("measurements", [])
            check(len(rows) > 0 and all(r["power"] == "nvpmodel-0-MAXN" and r["stale"]
                                        for r in rows),
                  "15W: /v1/results lists the %d MAXN rows as another mode's" % len(rows))
        serve(attuned, db, env, in_15w)

        before = rows_per_stack(db)
        subprocess.run(tune, env=env, check=True)
        after = rows_per_stack(db)
        check(len(before) == 1 and len(after) == 2 and
              sorted(after.values()) == [before[list(before)[0]]] * 2,
              "15W: tune measured the shape again under a second stack (%s -> %s)" %
              (before, after))

        set_mode(root, 0)

        def back(port):
            st, a = get(port, QUERY)
            check(a["source"] == "measured" and a["tactic"] == first["tactic"] and
                  a["time_us"] == first["time_us"],
                  "MAXN again: the MAXN row served unchanged (%s %s)" % (a["tactic"],
                                                                         a["time_us"]))
        serve(attuned, db, env, back)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
