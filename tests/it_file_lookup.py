#!/usr/bin/env python3
"""it_file_lookup.py -- lookups without a daemon (issue 24 item 3).

On the small tuned CPU database of page_fixture.py (a stale and a changed
shape included) and its exported table (plain and gzip-compressed), the
in-process answers equal attuned's: for every grid shape (measured), shapes
never tuned (nearest / predicted), a bound nothing meets (default), sets of
variants (item 4, 404s included) and an unknown device, the JSON of
libattune_lookup (attune_table_tactic) is attuned's GET /v1/tactic answer
field for field, and the C client ("file:PATH" through libattune_client),
the Python client (Client(table=PATH)) and `attune query --url file:PATH`
answer what the daemon's clients answer. A database holding two devices
(the CPU and an imported one): each answers by its id as attuned answers
it. Bad files fall back with the reason.

attuned runs with --no-tune-on-miss, so that its answers stay put while
they are compared (tune on miss would measure the untuned shapes).

Environment: ATTUNED_BIN, ATTUNE_BIN (required, else skip: 77),
ATTUNE_LOOKUP_LIB (required, else skip), ATTUNE_CLIENT_LIB,
ATTUNE_SOURCE_DIR.
"""

import ctypes
import gzip
import json
import math
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import page_fixture as fx  # noqa: E402
import clientlib  # noqa: E402

SKIP = 77
failures = []
UNTUNED = ["b2.hq8.hkv2.sq40.skv100.d64.f16.nc", "b1.hq8.hkv1.sq50.skv160.d64.f16.nc",
           "b4.hq16.hkv4.sq128.skv512.d128.bf16.c", "b1.hq4.hkv4.sq1.skv1000.d64.f32.nc",
           "b3.hq8.hkv8.sq64.skv64.d32.f16.nc"]


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
    return cond


def parse_key(k):
    f = k.split(".")
    return ([int(f[0][1:]), int(f[1][2:]), int(f[2][3:]), int(f[3][2:]), int(f[4][3:]),
             int(f[5][1:])], f[6], 1 if f[7] == "c" else 0)


class Lookup:
    """libattune_lookup through ctypes: (status, JSON) per question."""

    def __init__(self, path):
        lib = ctypes.CDLL(os.environ["ATTUNE_LOOKUP_LIB"])
        lib.attune_table_open.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p),
                                          ctypes.c_char_p, ctypes.c_size_t]
        lib.attune_table_tactic.argtypes = [
            ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_longlong),
            ctypes.c_char_p, ctypes.c_int, ctypes.c_double, ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_void_p)]
        lib.attune_table_free.argtypes = [ctypes.c_void_p]
        lib.attune_table_close.argtypes = [ctypes.c_void_p]
        self.lib, self.t = lib, ctypes.c_void_p()
        err = ctypes.create_string_buffer(256)
        self.rc = lib.attune_table_open(path.encode(), ctypes.byref(self.t), err, 256)
        self.err = err.value.decode()

    def ask(self, device, key, mre=0.0, variants=None):
        dims, dtype, causal = parse_key(key)
        out = ctypes.c_void_p()
        st = self.lib.attune_table_tactic(self.t, device.encode(),
                                          (ctypes.c_longlong * 6)(*dims), dtype.encode(),
                                          causal, mre, variants.encode() if variants else None,
                                          ctypes.byref(out))
        obj = json.loads(ctypes.string_at(out.value).decode())
        self.lib.attune_table_free(out)
        return st, obj

    def close(self):
        self.lib.attune_table_close(self.t)


def questions(keys):
    """(device, key, max_rel_err, variants) to compare."""
    qs = [("cpu", k, 0.0, None) for k in keys + UNTUNED]
    qs += [("cpu", k, 1e-9, None) for k in keys[:2] + UNTUNED[:2]]      # default
    qs += [("cpu", k, 0.01, None) for k in keys[:3]]
    for vs in ("split", "folded", "split_repeat,folded", "cudnn", "fused,split"):
        qs += [("cpu", k, 0.0, vs) for k in keys[:4] + UNTUNED[:3]]
    qs += [("cpu", keys[0], 1e-9, "split"), ("no-such-device", keys[0], 0.0, None)]
    return qs


def daemon_answer(d, dev, key, mre, vs):
    p = {"device": dev, "shape": key}
    if mre:
        p["max_rel_err"] = repr(mre)
    if vs:
        p["variants"] = vs
    return d.get("/v1/tactic?" + urllib.parse.urlencode(p))


def same_answer(a, b):
    """The daemon's JSON and the in-process one: equal, numbers to 1e-12
    relative (both print 17 digits of the same double)."""
    if set(a) != set(b):
        return False
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, float) and isinstance(y, (int, float)):
            if not math.isclose(x, y, rel_tol=1e-12):
                return False
        elif k != "error" and x != y:
            return False
    return True


def compare_lib(d, files, qs, cover=True):
    """libattune_lookup's JSON = attuned's, for every question and file."""
    want = {q: daemon_answer(d, *q) for q in qs}
    sources = {w[1].get("source") for w in want.values()}
    check(not cover or {"measured", "default"} <= sources and sources & {"nearest", "predicted"}
          and any(w[0] == 404 for w in want.values()),
          "the questions cover measured, nearest/predicted, default and 404 (%s)" % sources)
    for name, path in files:
        lk = Lookup(path)
        if not check(lk.rc == 0, "%s: attune_table_open (%s)" % (name, lk.err)):
            continue
        bad = [q for q in qs if lk.ask(*q)[0] != want[q][0] or
               (want[q][0] == 200 and not same_answer(want[q][1], lk.ask(*q)[1]))]
        for q in bad[:5]:
            print("     %s: daemon %s\n     in process %s" % (q, want[q], lk.ask(*q)))
        check(not bad, "%s: %d answers = attuned's JSON (%d differ)" % (name, len(qs), len(bad)))
        lk.close()
    return want


def compare_clients(want, files, src):
    sys.path.insert(0, os.path.join(src, "client", "python"))
    import attune_client as ac
    lib = clientlib.load()
    for name, path in files:
        pc = ac.Client(table=path)
        c = lib.attune_client_new(("file:" + path).encode(), 1000) if lib else None
        bad = []
        for q, (st, obj) in want.items():
            dev, key, mre, vs = q
            a = pc.lookup_shape(key, device=dev, max_rel_err=mre, variants=vs)
            exp = obj.get("tactic") if st == 200 else a.tactic
            if not (a.code == (ac.OK if st == 200 else ac.REJECTED) and a.tactic == exp and
                    (st != 200 or a.source == obj["source"])):
                bad.append(("python", q, a.tactic, a.code))
            if lib:
                rc, ca = clientlib.lookup(lib, c, key, dev.encode(), mre, vs)
                if not (rc == (0 if st == 200 else 2) and ca.tactic.decode() == exp and
                        (st != 200 or (ca.source.decode() == obj["source"] and
                                       ca.stack.decode() == obj["stack"]))):
                    bad.append(("C", q, ca.tactic, rc))
        print("\n".join("     %s" % (b,) for b in bad[:5]))
        check(not bad, "%s: Python Client(table=) and C file: client = attuned (%d differ)"
              % (name, len(bad)))
        # choose_dtype needs a daemon: refused as INVALID, and the table
        # client is not marked down for it (lookups go on answering)
        dc = pc.choose_dtype(device="cpu", b=1, hq=2, hkv=1, sq=8, skv=8, d=16, max_err=0.1)
        dev, key, mre, vs = next(iter(want))
        a = pc.lookup_shape(key, device=dev, max_rel_err=mre, variants=vs)
        check(dc.code == ac.INVALID and dc.dtype is None and "unreachable" not in a.error,
              "%s: choose_dtype on a table is INVALID; lookups still answer (%s)"
              % (name, a.error or a.tactic))
        # a malformed shape falls back within the asked variants
        a = pc.lookup_shape("b1.bogus", device="cpu", variants="split")
        check(a.code == ac.INVALID and a.tactic == "" and a.source == "none",
              "%s: a bad key under variants=split falls back to no tactic (%r)"
              % (name, a.tactic))
        if lib:
            lib.attune_client_free(c)


def check_cli_and_errors(attune, files, want, keys, src, work):
    sys.path.insert(0, os.path.join(src, "client", "python"))
    import attune_client as ac
    path = files[-1][1]
    out = subprocess.run([attune, "query", "--url", "file:" + path, "--device", "cpu",
                          "--shape", keys[0], "--json"], capture_output=True, text=True,
                         timeout=60)
    j = json.loads(out.stdout) if out.returncode == 0 else {}
    check(j.get("tactic") == want[("cpu", keys[0], 0.0, None)][1]["tactic"],
          "attune query --url file:%s = attuned" % os.path.basename(path))
    junk = os.path.join(work, "junk.json")
    with open(junk, "w") as f:
        f.write('{"format": "something else"}')
    for bad, why in [(os.path.join(work, "missing.db"), "cannot read"), (junk, "neither")]:
        lk = Lookup(bad)
        check(lk.rc != 0 and why in lk.err, "attune_table_open(%s): %s" % (bad, lk.err))
        a = ac.Client(table=bad).lookup_shape(keys[0], device="cpu")
        check(a.code == ac.FALLBACK and a.tactic == ac.DEFAULT_TACTIC and why in a.error,
              "python Client(table=%s): falls back saying %r" % (os.path.basename(bad), a.error))
        out = subprocess.run([attune, "query", "--url", "file:" + bad, "--device", "cpu",
                              "--shape", keys[0]], capture_output=True, text=True, timeout=60)
        check(out.returncode == 1 and why in out.stderr,
              "attune query --url file:%s: exit 1, says why" % os.path.basename(bad))


def two_devices(attuned, attune, db, table, keys, work):
    """A database of two devices: each answers by its id as attuned answers."""
    t = json.load(open(table))
    t["device"]["id"], t["device"]["name"] = "CPU-00000000fleet001", "Fleet CPU"
    for m in t["measurements"]:
        for k in ("time_us", "time_us_min", "time_us_max", "time_us_copies"):
            if m[k] is not None:
                m[k] *= 2 if "split" in m["tactic"] else 1
    other = os.path.join(work, "other.json")
    json.dump(t, open(other, "w"))
    db2 = os.path.join(work, "var", "two.db")
    shutil.copy(db, db2)
    subprocess.run([attune, "import", "--db", db2, other], check=True, timeout=60,
                   capture_output=True)
    d2 = fx.Daemon(attuned, work, db2, extra=["--no-tune-on-miss"])
    try:
        st, devs = d2.get("/v1/devices")
        ids = [x["id"] for x in devs["devices"]]
        check(len(ids) == 2, "two devices in the database: %s" % ids)
        qs = [(i, k, 0.0, vs) for i in ids for k in keys[:4] + UNTUNED[:2]
              for vs in (None, "split")]
        compare_lib(d2, [("two.db", db2)], qs, cover=False)
        lk = Lookup(db2)
        st, a = lk.ask("cpu", keys[0])
        check(st == 200 and a["device"] in ids, "file mode: 'cpu' names a CPU of the file")
        st, a = lk.ask("Fleet CPU", keys[0])
        check(st == 200 and a["device"] == "CPU-00000000fleet001", "file mode: a device by name")
        lk.close()
    finally:
        d2.stop()


def rename_old_stack(db, attune, work):
    """The fixture's old stack ("0ld...", not hex) renamed to the id its
    fields hash to: a table's stack ids are checked against their fields
    on import. The id is what import says it expected (the hash is
    attune's, not this test's)."""
    def rename(new):
        con = sqlite3.connect(db)
        with con:
            for sql in ("UPDATE stacks SET id = ? WHERE id = ?",
                        "UPDATE measurements SET stack_id = ? WHERE stack_id = ?"):
                con.execute(sql, (new, fx.OLD_STACK))
        con.close()
    rename("0" * 16)
    fx.OLD_STACK = "0" * 16
    probe = os.path.join(work, "probe.json")
    subprocess.run([attune, "export", "--db", db, "--device", "cpu", "-o", probe], check=True,
                   timeout=60)
    out = subprocess.run([attune, "import", "--db", os.path.join(work, "probe.db"), probe],
                         capture_output=True, text=True, timeout=60)
    m = re.search(r"expected ([0-9a-f]{16})", out.stderr)
    if m:
        rename(m.group(1))
        fx.OLD_STACK = m.group(1)


def main():
    attuned, attune = os.environ.get("ATTUNED_BIN"), os.environ.get("ATTUNE_BIN")
    src = os.environ.get("ATTUNE_SOURCE_DIR", os.path.dirname(HERE))
    if not attuned or not attune or not os.environ.get("ATTUNE_LOOKUP_LIB"):
        print("skip: ATTUNED_BIN, ATTUNE_BIN and ATTUNE_LOOKUP_LIB are needed")
        return SKIP
    work = tempfile.mkdtemp(prefix="it_file_lookup.")
    d = None
    try:
        db = fx.make_db(attune, src, work)
        rename_old_stack(db, attune, work)
        table = os.path.join(work, "table.json")
        subprocess.run([attune, "export", "--db", db, "--device", "cpu", "-o", table],
                       check=True, timeout=60)
        with open(table, "rb") as f, gzip.open(table + ".gz", "wb") as g:
            g.write(f.read())
        d = fx.Daemon(attuned, work, db, extra=["--no-tune-on-miss"])
        keys = fx.grid_keys(src)
        files = [("database", db), ("table", table), ("table.json.gz", table + ".gz")]
        want = compare_lib(d, files, questions(keys))
        compare_clients(want, files, src)
        check_cli_and_errors(attune, files, want, keys, src, work)
        d.stop()
        d = None
        two_devices(attuned, attune, db, table, keys, work)
    finally:
        if d:
            d.stop()
        if failures:
            log = os.path.join(work, "attuned.log")
            if os.path.exists(log):
                print(open(log).read()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
