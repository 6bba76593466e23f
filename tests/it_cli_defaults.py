#!/usr/bin/env python3
"""it_cli_defaults.py -- defaults that fit (issue 28 item 4).

- Clients without a device ask for the first local GPU the daemon reports,
  else its CPU (never "0" on a CPU-only host): the Python client, the C
  client (ctypes) and `attune query`, against a real attuned; from a table
  file, its GPU 0, else its CPU.
- Offline commands take their database from ATTUNE_DB: the same output as
  with --db; without either (and no installed service database) a usage
  error that names ATTUNE_DB.
- Every listing command (devices, tactics, results, winners, pins, loo,
  jobs) prints --csv and --json with the same rows, and a table that fits
  $COLUMNS (80 and 100 here); piped without COLUMNS nothing is cut.
- `attune import` of a bad table into a database that does not exist
  leaves no file; into one that exists, the database unchanged.
- A token file that does not exist is named as missing (--token-file,
  ATTUNE_TOKEN_FILE), with no hint to give the option just given.

Environment: ATTUNE_BIN (required, else skip: 77); ATTUNED_BIN,
ATTUNE_CLIENT_LIB and ATTUNE_LOOKUP_LIB for the client parts (each skipped
when missing).
"""

import csv
import io
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SKIP = 77
K1 = "b1.hq4.hkv1.sq16.skv64.d32.f32.nc"
K2 = "b1.hq2.hkv2.sq8.skv8.d16.f32.c"
from checklib import check, summary  # noqa: E402  (tests/checklib.py)


def run(args, env=None, **kw):
    e = dict(os.environ)
    e.pop("COLUMNS", None)
    e.pop("ATTUNE_DB", None)
    e.update(env or {})
    p = subprocess.run([os.environ["ATTUNE_BIN"]] + list(args), capture_output=True, text=True,
                       env=e, timeout=120, **kw)
    return p.returncode, p.stdout, p.stderr


def csv_rows(text):
    return list(csv.DictReader(io.StringIO(text)))


def check_db_default(db, work):
    rc, want, _ = run(["results", "--db", db, "--device", "cpu", "--shape", K1, "--json"])
    rc2, got, err = run(["results", "--shape", K1, "--json"], {"ATTUNE_DB": db})
    check(rc == 0 and rc2 == 0 and got == want,
          "ATTUNE_DB: attune results = with --db (and --device defaults to cpu here)")
    rc, want, _ = run(["winners", "--db", db, "--device", "cpu", "--json"])
    rc2, got, _ = run(["winners", "--json"], {"ATTUNE_DB": db})
    check(rc == 0 and rc2 == 0 and got == want, "ATTUNE_DB: attune winners = with --db")
    other = os.path.join(work, "env.db")
    rc, _, err = run(["tune", "--shape", K2, "--quiet"], {"ATTUNE_DB": other})
    rc2, out, _ = run(["results", "--db", other, "--device", "cpu", "--shape", K2, "--json"])
    check(rc == 0 and rc2 == 0 and len(json.loads(out)["measurements"]) > 0,
          "ATTUNE_DB: attune tune writes into it")
    rc, out, _ = run(["export", "--device", "cpu"], {"ATTUNE_DB": other})
    check(rc == 0 and json.loads(out)["format"] == "attune-fleet",
          "ATTUNE_DB: attune export reads it")
    if os.path.exists("/var/lib/attune/attune.db"):
        print("note: an installed service database exists; the no-database error is not "
              "checked")
        return
    for cmd in (["results", "--shape", K1], ["winners"], ["export"], ["tune", "--shape", K1],
                ["loo"]):
        rc, _, err = run(cmd)
        check(rc == 2 and "ATTUNE_DB" in err and "--db" in err,
              "attune %s without a database: a usage error naming --db and ATTUNE_DB (%s)"
              % (cmd[0], err.strip()))


def listings(db):
    """(name, argv) of every listing command this test can run offline."""
    return [("devices", ["devices"]),
            ("tactics", ["tactics", "--device", "cpu", "--shape", K1]),
            ("results", ["results", "--db", db, "--device", "cpu", "--shape", K1]),
            ("winners", ["winners", "--db", db, "--device", "cpu"]),
            ("pins", ["pins", "--db", db]),
            ("loo", ["loo", "--db", db, "--device", "cpu"])]


def json_rows(name, obj):
    return {"devices": lambda o: o["devices"], "tactics": lambda o: o["tactics"],
            "results": lambda o: o["measurements"], "winners": lambda o: o["winners"],
            "pins": lambda o: o["pins"], "loo": lambda o: o["rows"],
            "jobs": lambda o: o["jobs"]}[name](obj)


def check_formats(db):
    for name, argv in listings(db):
        rc, j, err = run(argv + ["--json"])
        rc2, c, err2 = run(argv + ["--csv"])
        ok = rc in (0, 1) and rc2 == rc  # loo exits 1 over its bounds: still printed
        rows = csv_rows(c) if ok else []
        jr = json_rows(name, json.loads(j)) if ok and j.strip() else None
        check(ok and jr is not None and len(rows) == len(jr) and (len(rows) > 0 or name == "pins"),
              "attune %s: --csv has the rows of --json (%d, %s)"
              % (name, len(rows), err.strip() or err2.strip() or "exit %d" % rc))
        if name == "results" and rows:
            check([r["tactic"] for r in rows] == [m["tactic"] for m in jr] and
                  sum(r["mark"] == "winner" for r in rows) == 1 and
                  all(abs(float(r["rel_err"]) - m["rel_err"]) <= 1e-12 * m["rel_err"]
                      for r, m in zip(rows, jr) if r["rel_err"]),
                  "attune results --csv: the same tactics, errors to the last digit, one winner")
        if name == "winners" and rows:
            check([r["shape"] for r in rows] == [w["shape"] for w in jr],
                  "attune winners --csv: the same shapes in the same order")
        rc3, _, err3 = run(argv + ["--csv", "--json"])
        check(rc3 == 2 and "exclusive" in err3, "attune %s --csv --json: a usage error" % name)
    for width in (80, 100):
        for name, argv in listings(db):
            rc, out, _ = run(argv, {"COLUMNS": str(width)})
            long = [ln for ln in out.splitlines() if len(ln) > width]
            check(rc in (0, 1) and out and not long,
                  "COLUMNS=%d: every line of attune %s fits (%s)"
                  % (width, name, long[0] if long else "%d lines" % len(out.splitlines())))
    rc, out, _ = run(listings(db)[2][1])
    check(rc == 0 and "screened out: " in out and "over 1.25x the best screened" in out,
          "piped without COLUMNS, attune results cuts nothing (a whole note)")
    rc, out, _ = run(listings(db)[2][1], {"COLUMNS": "80"})
    check(rc == 0 and "not shown at 80 columns" in out and "--csv and --json show all" in out,
          "COLUMNS=80: attune results says which columns it left out")


def check_import(db, work):
    bad = os.path.join(work, "bad.json")
    with open(bad, "w") as f:
        f.write('{"format": "attune-fleet", "version": 1, "device": 7}')
    fresh = os.path.join(work, "never.db")
    rc, _, err = run(["import", "--db", fresh, bad])
    check(rc == 1 and not os.path.exists(fresh) and "no database created" in err
          and not any(os.path.exists(fresh + x) for x in ("-wal", "-shm", "-journal")),
          "import of a bad table into a new path creates no file (%s)" % err.strip())
    before = os.path.getsize(db)
    rc, _, err = run(["import", "--db", db, bad])
    check(rc == 1 and "database unchanged" in err and os.path.getsize(db) == before,
          "import of a bad table into a database: unchanged, and says so")


def check_token_file():
    argv = ["jobs", "--url", "http://127.0.0.1:9", "--cancel", "--token-file", "/nonexistent",
            "1"]
    rc, _, err = run(argv)
    check(rc == 1 and "/nonexistent" in err and "does not exist" in err
          and "use --token-file" not in err, "--token-file /nonexistent: missing (%s)"
          % err.strip())
    rc, _, err = run(argv[:4] + ["1"], {"ATTUNE_TOKEN_FILE": "/nonexistent"})
    check(rc == 1 and "/nonexistent" in err and "ATTUNE_TOKEN_FILE" in err
          and "does not exist" in err, "ATTUNE_TOKEN_FILE=/nonexistent: missing, and from "
          "where (%s)" % err.strip())


def expected_default(devices):
    local = [d for d in devices if d.get("local")]
    gpus = [d for d in local if d["kind"] == "cuda"]
    return (gpus or local)[0]["id"]


def check_clients(db, work):
    attuned = os.environ.get("ATTUNED_BIN")
    src = os.environ.get("ATTUNE_SOURCE_DIR", os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    sys.path.insert(0, os.path.join(src, "client", "python"))
    import attune_client as ac
    import clientlib
    lib = clientlib.load()
    fields = dict(zip(("b", "hq", "hkv", "sq", "skv", "d"),
                      (int(x[len(p):]) for x, p in zip(K1.split(".")[:6],
                                                       ("b", "hq", "hkv", "sq", "skv", "d")))))
    if os.environ.get("ATTUNE_LOOKUP_LIB"):
        pc = ac.Client(table=db)
        a = pc.lookup_shape(K1)
        cpu = pc.lookup_shape(K1, device="cpu")
        check(a.code == ac.OK and a.source == "measured" and a.device == cpu.device,
              "python client, table without a device: its GPU 0, else its CPU (%s, %s)"
              % (a.device, a.error))
        if lib is not None:
            c = lib.attune_client_new(("file:" + db).encode(), 2000)
            rc, ca = clientlib.lookup(lib, c, K1, None)
            lib.attune_client_free(c)
            check(rc == 0 and ca.device.decode() == cpu.device and ca.tactic.decode() == a.tactic,
                  "C client, table without a device: the same (%s)" % ca.error.decode())
    if not attuned:
        print("skip: ATTUNED_BIN unset: no daemon defaults checked")
        return
    import daemonlib
    d = daemonlib.Daemon(attuned, work, db=db)
    try:
        want = expected_default(d.get("/v1/devices")[1]["devices"])
        pc = ac.Client("http://127.0.0.1:%d" % d.port, timeout=5.0)
        a = pc.lookup(**fields, dtype="f32")
        check(a.code == ac.OK and a.device == want and a.source != "default",
              "python client without a device: the daemon's first local GPU, else its CPU "
              "(%s, %s %s)" % (a.device, a.source, a.error))
        if lib is not None:
            c = lib.attune_client_new(("http://127.0.0.1:%d" % d.port).encode(), 5000)
            rc, ca = clientlib.lookup(lib, c, K1, None)
            lib.attune_client_free(c)
            check(rc == 0 and ca.device.decode() == want and ca.tactic.decode() == a.tactic,
                  "C client without a device: the same (%s)" % ca.error.decode())
        rc, out, err = run(["query", "--url", "http://127.0.0.1:%d" % d.port, "--shape", K1])
        check(rc == 0 and ("device         %s" % want) in out,
              "attune query without --device: %s (%s)" % (want, err.strip()))
        rc, j, _ = run(["jobs", "--url", "http://127.0.0.1:%d" % d.port, "--json"])
        rc2, c, _ = run(["jobs", "--url", "http://127.0.0.1:%d" % d.port, "--csv"])
        check(rc == 0 and rc2 == 0 and len(csv_rows(c)) == len(json.loads(j)["jobs"]),
              "attune jobs: --csv has the rows of --json")
    finally:
        d.stop()


def main():
    if not os.environ.get("ATTUNE_BIN"):
        print("skip: ATTUNE_BIN is needed")
        return SKIP
    with tempfile.TemporaryDirectory() as work:
        db = os.path.join(work, "t.db")
        for k in (K1, K2):
            rc, _, err = run(["tune", "--db", db, "--device", "cpu", "--shape", k, "--quiet",
                              "--budget-ms", "20"])
            if not check(rc == 0, "tune %s (%s)" % (k, err.strip())):
                return 1
        rc, _, err = run(["pin", "--db", db, "--exclude", "split_repeat", "--reason",
                          "a long reason, to be cut on a narrow terminal, says why",
                          "--author", "it_cli_defaults"])
        check(rc == 0, "a pin to list (%s)" % err.strip())
        check_db_default(db, work)
        check_formats(db)
        check_import(db, work)
        check_token_file()
        check_clients(db, work)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
