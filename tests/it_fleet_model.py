#!/usr/bin/env python3
"""it_fleet_model.py -- a GPU model two hosts agree on, on a real fleet
server (issue 27 item 5).

A server at schema 2 holds the models as they were keyed: by the exact
memory a driver reported, so one H200 is two models (143,771 and 143,155
MiB) with its rows split between them, and one card's re-push under its new
driver sits beside its old row. Connecting (`attune fleet status`) brings
the server to schema 3: one H200 model, keyed and sized by the model's
memory (144 GiB), every device and row moved to it (a key held twice keeps
the newer row), its aggregates dropped and its groups dirty; the A100's
model re-keyed alone. A host whose driver reports either figure pulls the
same FLEET-<id>, the id being FNV-1a of "NVIDIA H200|cuda|9.0|132|144G".
The store side (schema 9 re-keying pulled devices) is in
tests/test_device_model.c. Skips (77) without the PostgreSQL server
binaries.
"""
import os
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleetlib  # noqa: E402
from fleetlib import check  # noqa: E402

ATTUNE = os.environ["ATTUNE_BIN"]
T0 = 1767100000


def fnv(text):
    h = 0xcbf29ce484222325
    for b in text.encode():
        h ^= b
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "FLEET-%016x" % h


def old_uid(name, cc, sm, mem):
    return fnv("%s|cuda|%s|%d|%d" % (name, cc, sm, mem))


def run(pg, *args):
    r = subprocess.run([ATTUNE] + list(args), env=pg.env(), capture_output=True, text=True)
    if r.returncode != 0:
        print("attune %s -> %d\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


def plant_v2(pg):
    """The rows of a schema-2 server, written as its clients wrote them."""
    stk = fleetlib.stack("570.86.10")
    s0, s1 = fleetlib.shape_of(0), fleetlib.shape_of(1)
    sql = ["UPDATE attune_meta SET value = '2' WHERE key = 'schema_version'",
           "INSERT INTO stacks (uid, driver, runtime, blas, attune, kernels) VALUES "
           "('%s', '%s', '%s', '%s', '%s', '%s')" % (stk["id"], stk["driver"], stk["runtime"],
                                                     stk["blas"], stk["attune"], stk["kernels"])]
    for s in (s0, s1):
        sql.append("INSERT INTO shapes (key, b, hq, hkv, sq, skv, d, dtype, causal) VALUES "
                   "('%s', %d, %d, %d, %d, %d, %d, '%s', %s)"
                   % (fleetlib.shape_key(s), s["b"], s["hq"], s["hkv"], s["sq"], s["skv"],
                      s["d"], s["dtype"], "true" if s["causal"] else "false"))
    for t in ("fused/pad=1", "split/acc=f32/pad=1"):
        sql.append("INSERT INTO tactics (text) VALUES ('%s')" % t)
    models = [("h1", "NVIDIA H200", "9.0", 132, 143771), ("h2", "NVIDIA H200", "9.0", 132, 143155),
              ("a", "NVIDIA A100-SXM4-80GB", "8.0", 108, 81920)]
    for tag, name, cc, sm, mem in models:
        sql.append("INSERT INTO models (uid, name, kind, cc_major, cc_minor, sm_count, memory_mb)"
                   " VALUES ('%s', '%s', 'cuda', %s, %s, %d, %d)"
                   % (old_uid(name, cc, sm, mem), name, cc.split(".")[0], cc.split(".")[1], sm,
                      mem))
    # GPU-h1 pushed under h1, then (a new driver's figure) under h2
    for dev, tag in (("GPU-h1", "h2"), ("GPU-h2", "h2"), ("GPU-a", "a")):
        sql.append("INSERT INTO devices (uid, model_id, host) SELECT '%s', id, 'node' FROM "
                   "models WHERE memory_mb = %d" % (dev, {m[0]: m[4] for m in models}[tag]))

    def meas(tag, dev, shape, tactic, us, at):
        mem = {m[0]: m[4] for m in models}[tag]
        return ("INSERT INTO measurements (model_id, stack_id, shape_id, tactic_id, device_id,"
                " status, time_us, time_us_min, time_us_max, n, max_abs_err, rel_err, mode, l2,"
                " rows_checked, note, host, taken_at) SELECT (SELECT id FROM models WHERE"
                " memory_mb = %d), (SELECT id FROM stacks), (SELECT id FROM shapes WHERE key ="
                " '%s'), (SELECT id FROM tactics WHERE text = '%s'), (SELECT id FROM devices"
                " WHERE uid = '%s'), 'ok', %r, %r, %r, 10, 1e-4, 1e-4, 'cuda-graph', 'warm', 64,"
                " '', 'node', %d" % (mem, fleetlib.shape_key(shape), tactic, dev, us, us, us, at))
    sql += [meas("h1", "GPU-h1", s0, "fused/pad=1", 10.0, T0),
            meas("h2", "GPU-h1", s0, "fused/pad=1", 11.0, T0 + 5),  # the same key, newer
            meas("h1", "GPU-h1", s1, "split/acc=f32/pad=1", 20.0, T0),
            meas("h2", "GPU-h2", s0, "fused/pad=1", 12.0, T0 + 1),
            meas("a", "GPU-a", s0, "fused/pad=1", 30.0, T0)]
    sql.append("INSERT INTO aggregates (model_id, stack_id, shape_id, tactic_id, devices,"
               " ok_devices, status, median_us, updated_at) SELECT model_id, stack_id, shape_id,"
               " tactic_id, count(*), count(*), 'ok', min(time_us), %d FROM measurements"
               " GROUP BY 1, 2, 3, 4" % T0)
    for q in sql:
        pg.sql(q)
    return stk


def main():
    pg = fleetlib.start_pg()
    if pg is None:
        return 77
    tmp = tempfile.mkdtemp(prefix="it_fleet_model.")
    try:
        db = os.path.join(tmp, "local.db")
        stk = fleetlib.stack("570.86.10")
        fleetlib.import_table(ATTUNE, db, fleetlib.table("GPU-local-h", [], [stk],
                                                         name="NVIDIA H200", sm=132,
                                                         mem=143771), tmp)
        r = run(pg, "fleet", "status", "--db", db, "--fleet", pg.url)
        check(r.returncode == 0 and "server schema 4" in r.stdout, "a new server is schema 4")
        plant_v2(pg)
        check(int(pg.sql("SELECT count(*) FROM models WHERE name = 'NVIDIA H200'")[0]) == 2,
              "schema 2: one H200, two models")
        r = run(pg, "fleet", "status", "--db", db, "--fleet", pg.url)
        check(r.returncode == 0 and "server schema 4" in r.stdout,
              "connecting migrates it to schema 4 (through 3)")
        new = fnv("NVIDIA H200|cuda|9.0|132|144G")
        h200 = pg.sql("SELECT id, uid, memory_mb FROM models WHERE name = 'NVIDIA H200'")
        check(len(h200) == 1 and h200[0].split("|")[1:] == [new, "147456"],
              "one H200 model, uid %s, memory 144 GiB (%s)" % (new, h200))
        mid = h200[0].split("|")[0] if h200 else "0"
        devs = pg.sql("SELECT uid FROM devices WHERE model_id = %s ORDER BY uid" % mid)
        check(devs == ["GPU-h1", "GPU-h2"], "both H200 devices on it (%s)" % devs)
        rows = pg.sql("SELECT d.uid, s.key, t.text, m.time_us, m.taken_at FROM measurements m"
                      " JOIN devices d ON d.id = m.device_id JOIN shapes s ON s.id = m.shape_id"
                      " JOIN tactics t ON t.id = m.tactic_id WHERE m.model_id = %s ORDER BY 1, 2"
                      % mid)
        k0 = fleetlib.shape_key(fleetlib.shape_of(0))
        k1 = fleetlib.shape_key(fleetlib.shape_of(1))
        want = ["GPU-h1|%s|fused/pad=1|11|%d" % (k0, T0 + 5),
                "GPU-h1|%s|split/acc=f32/pad=1|20|%d" % (k1, T0),
                "GPU-h2|%s|fused/pad=1|12|%d" % (k0, T0 + 1)]
        check(rows == want, "every row on the one model, the newer of a key kept: %s" % rows)
        check(int(pg.sql("SELECT count(*) FROM aggregates WHERE model_id = %s" % mid)[0]) == 0
              and int(pg.sql("SELECT count(*) FROM dirty WHERE model_id = %s" % mid)[0]) == 2,
              "its aggregates dropped, its 2 groups dirty")
        a100 = pg.sql("SELECT uid, memory_mb FROM models WHERE name LIKE 'NVIDIA A100%'")
        check(a100 == ["%s|81920" % fnv("NVIDIA A100-SXM4-80GB|cuda|8.0|108|80G")],
              "the A100 model re-keyed alone (%s)" % a100)
        check(int(pg.sql("SELECT count(*) FROM measurements")[0]) == 4, "4 rows in all")
        # a host reporting either figure pulls the one model
        fleetlib.import_table(ATTUNE, db, fleetlib.table("GPU-local-h2", [], [stk],
                                                         name="NVIDIA H200", sm=132,
                                                         mem=143155), tmp, name="t2.json")
        for dev in ("GPU-local-h", "GPU-local-h2"):
            r = run(pg, "fleet", "pull", "--db", db, "--fleet", pg.url, "--device", dev)
            check(r.returncode == 0, "attune fleet pull --device %s" % dev)
        c = sqlite3.connect(db)
        fleet = c.execute("SELECT id FROM devices WHERE id LIKE 'FLEET-%'").fetchall()
        n = c.execute("SELECT count(*) FROM measurements WHERE device_id = ?", (new,)).fetchone()
        c.close()
        check(fleet == [(new,)] and n[0] == 2,
              "both hosts' pulls land on %s with the model's 2 groups (%s, %s rows)"
              % (new, fleet, n[0]))
        r = run(pg, "fleet", "status", "--db", db, "--fleet", pg.url)
        check(r.returncode == 0 and "models 2" in r.stdout.replace(":", ""),
              "a second connection changes nothing: 2 models (%s)" % r.stdout.strip())
    finally:
        pg.close()
    return fleetlib.result()


if __name__ == "__main__":
    sys.exit(main())
