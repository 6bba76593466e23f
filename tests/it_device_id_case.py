#!/usr/bin/env python3
"""it_device_id_case.py -- device ids that differ only in case (issue 15, item 6).

The store keeps ids byte for byte (SQLite's TEXT primary key), so two
imported tables for GPU-aaaa... and GPU-AAAA... are two devices. Every
lookup must agree with that: each id answers with its own rows, never the
other's. Names stay case-insensitive (docs/api.md). Uses the attune CLI to
import and attuned over HTTP to ask.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleetlib  # noqa: E402

LOWER = "GPU-aaaaaaaa-1111-2222-3333-444444444444"
UPPER = "GPU-AAAAAAAA-1111-2222-3333-444444444444"


def table(device_id, name, time_us):
    with open(os.path.join(os.environ["ATTUNE_TEST_INPUTS"], "fleet_good.json")) as f:
        t = json.load(f)
    t["device"]["id"] = device_id
    t["device"]["name"] = name
    for m in t["measurements"]:
        if m["time_us"] is not None:
            m["time_us"] = time_us
            m["time_us_min"] = time_us
            m["time_us_max"] = time_us
            if m["time_us_copies"] is not None:
                m["time_us_copies"] = time_us
    return t


def main():
    attune = os.environ["ATTUNE_BIN"]
    attuned = os.environ.get("ATTUNED_BIN")
    if not attuned:
        print("skip: attuned not built (libmicrohttpd missing)")
        return 77
    with tempfile.TemporaryDirectory(prefix="attune-case-") as tmp:
        db = os.path.join(tmp, "var", "attune.db")
        os.makedirs(os.path.dirname(db))
        # the lower-case table first: a case-insensitive lookup finds it first
        for dev, name, t in ((LOWER, "Card Lower", 11.0), (UPPER, "Card Upper", 77.0)):
            path = os.path.join(tmp, dev + ".json")
            with open(path, "w") as f:
                json.dump(table(dev, name, t), f)
            subprocess.run([attune, "import", "--db", db, path], check=True,
                           stdout=subprocess.DEVNULL)
        d = fleetlib.Daemon(attuned, tmp, db)
        d.start()
        try:
            st, obj = d.get("/v1/devices")
            ids = sorted(x["id"] for x in obj["devices"] if not x["local"])
            fleetlib.check(ids == sorted([LOWER, UPPER]), "both ids are devices: %s" % ids)
            key = "b1.hq8.hkv1.sq50.skv1018.d256.f16.nc"
            for dev, want in ((UPPER, 77.0), (LOWER, 11.0)):
                st, obj = d.get("/v1/results?device=%s&shape=%s" % (dev, key))
                times = sorted({m["time_us"] for m in obj.get("measurements", [])
                                if m["time_us"] is not None})
                fleetlib.check(st == 200 and times == [want],
                               "results of %s are its own (%s, want %s)" % (dev, times, want))
                st, obj = d.get("/v1/tactic?device=%s&shape=%s" % (dev, key))
                fleetlib.check(st == 200 and obj.get("device") == dev,
                               "tactic for %s answers for %s" % (dev, obj.get("device")))
            # an id spelled in a third way is not a device (ids are exact)
            st, _ = d.get("/v1/results?device=%s&shape=%s" % (LOWER.replace("aaaa", "AAaa", 1),
                                                             key))
            fleetlib.check(st == 404, "a mixed-case id is unknown (%d)" % st)
            # names stay case-insensitive
            st, obj = d.get("/v1/tactic?device=card%%20upper&shape=%s" % key)
            fleetlib.check(st == 200 and obj.get("device") == UPPER,
                           "a name in other case still finds its device")
        finally:
            d.stop()
    return fleetlib.result()


if __name__ == "__main__":
    sys.exit(main())
