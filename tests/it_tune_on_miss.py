#!/usr/bin/env python3
"""it_tune_on_miss.py -- answers for shapes nobody tuned, over real HTTP (CPU).

Starts attuned (tune on miss on, its default) on a temporary database,
tunes three small CPU shapes through POST /v1/tune, then:
- an untuned shape gets a predicted (or nearest) answer: a complete tactic
  that `attune tactics` lists for it, with a predicted time, the shapes it
  leaned on, and "tuning": "queued" or "running";
- a later lookup is `measured` once the whole tune has completed (the
  quick pass of the top predicted tactics writes rows but no winner mark,
  issue 29 item 2; polled, the time it took is printed), and then every
  listed tactic is stored;
- the Python client, asked for another untuned shape, gets the predicted
  answer, and after its short cache TTL the measured one;
- a fleet table of another CPU of the same model (name, SM count, memory)
  answers a shape this CPU never tuned with source fleet, naming the device
  and host;
- with --no-tune-on-miss, a miss is not queued (no "tuning").

Environment: ATTUNED_BIN (required, else skip: 77), ATTUNE_BIN (for the
tactic listing), ATTUNE_SOURCE_DIR (client/python), ATTUNE_TEST_INPUTS.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib  # noqa: E402

SKIP = 77
from checklib import check, failures  # noqa: E402  (tests/checklib.py)


key_of = daemonlib.key_of
shape = daemonlib.shape


def q(key, device="cpu"):
    return "/v1/tactic?device=%s&shape=%s" % (device, key)


def listed(key):
    binary = os.environ.get("ATTUNE_BIN")
    if not binary:
        return None
    p = subprocess.run([binary, "tactics", "--device", "cpu", "--shape", key],
                       capture_output=True, text=True, timeout=60)
    return p.stdout.split() if p.returncode == 0 else []


def main():
    binary = os.environ.get("ATTUNED_BIN")
    if not binary or not os.path.exists(binary):
        print("skip: ATTUNED_BIN not set")
        return SKIP
    work = tempfile.mkdtemp(prefix="attune-it-miss-")
    d = daemonlib.Daemon(binary, work)
    try:
        tuned = [shape(1, 4, 1, 16, 64, 32), shape(1, 4, 1, 32, 128, 32),
                 shape(1, 4, 4, 16, 64, 32)]
        st, r = d.post("/v1/tune", {"device": "cpu", "shapes": tuned})
        check(st == 202, "tune job accepted")
        deadline = time.time() + 120
        while time.time() < deadline:
            st, j = d.get("/v1/jobs/%d" % r["job"])
            if j["state"] in ("done", "failed", "canceled"):
                break
            time.sleep(0.1)
        check(j["state"] == "done", "three shapes tuned (%s)" % j["state"])

        # an untuned shape: predicted now, measured once the quick pass is done
        miss = key_of(1, 4, 1, 24, 96, 32)
        t0 = time.time()
        st, a = d.get(q(miss))
        lst = listed(miss)
        check(st == 200 and a["source"] in ("predicted", "nearest")
              and a.get("tuning") in ("queued", "running") and a["time_us"] is not None
              and a["predicted_us"] == a["time_us"] and a["from_shapes"]
              and (lst is None or a["tactic"] in lst),
              "a miss: a listed predicted tactic, tuning queued (%s)" % json.dumps(a))
        # the full pass's completion (its winner mark), waited for as a
        # state: how soon it comes is a figure, not a check (2 shared cores)
        deadline = time.time() + 60
        while True:
            st, b = d.get(q(miss))
            if (st == 200 and b["source"] == "measured") or time.time() > deadline:
                break
            time.sleep(0.1)
        check(st == 200 and b["source"] == "measured" and "tuning" not in b,
              "a later lookup is measured once the tune completed (%s, after %.1f s)"
              % (b.get("source"), time.time() - t0))
        st, res = d.get("/v1/results?device=cpu&shape=" + miss)
        check(st == 200 and (lst is None or len(res["measurements"]) >= len(lst)),
              "measured only with every listed tactic stored (%d of %s)"
              % (len(res["measurements"]), lst and len(lst)))
        # the quick pass times its top tactics fully, with no screening pass
        # in front (one that, at 80 ms a call, put it past 3 s on the H200)
        qe = re.search(r"miss_quick_end device=\S+ shape=%s measured=(\d+) screened=(\d+)"
                       % re.escape(miss), d.log_text())
        check(qe is not None and int(qe.group(1)) >= 2 and int(qe.group(2)) == 0,
              "the quick pass timed its tactics without screening (%s)"
              % (qe and qe.group(0)))
        # the full tune follows the quick pass: every listed tactic in time
        deadline = time.time() + 60
        while time.time() < deadline and lst is not None:
            st, res = d.get("/v1/results?device=cpu&shape=" + miss)
            if len(res["measurements"]) >= len(lst):
                break
            time.sleep(0.2)
        check(lst is None or len(res["measurements"]) >= len(lst),
              "then the full tune measures every listed tactic (%d of %s)"
              % (len(res["measurements"]), lst and len(lst)))

        # the Python client re-asks after its short TTL
        src = os.environ.get("ATTUNE_SOURCE_DIR",
                             os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
        sys.path.insert(0, os.path.join(src, "client", "python"))
        import attune_client as ac
        pc = ac.Client("http://127.0.0.1:%d" % d.port, timeout=5.0, cache_ttl=60.0)
        p1 = pc.lookup_shape(key_of(1, 4, 1, 20, 80, 32), device="cpu")
        check(p1.code == ac.OK and p1.source in ("predicted", "nearest")
              and p1.tuning in ("queued", "running"),
              "python client: predicted answer, tuning %s" % p1.tuning)
        time.sleep(3.0)
        p2 = pc.lookup_shape(key_of(1, 4, 1, 20, 80, 32), device="cpu")
        check(p2.code == ac.OK and p2.source == "measured" and p2.tuning == "",
              "python client: after its short TTL, the measured answer (%s)" % p2.source)

        # fleet: another CPU of this model measured a shape this one never did
        st, devs = d.get("/v1/devices")
        me = [x for x in devs["devices"] if x["kind"] == "cpu" and x["local"]][0]
        inputs = os.environ.get("ATTUNE_TEST_INPUTS",
                                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                             "inputs"))
        with open(os.path.join(inputs, "fleet_good.json")) as f:
            t = json.load(f)
        stack = t["device"]["latest_stack"]
        t["device"].update(id="CPU-00000000000000fe", name=me["name"], kind="cpu", cc="0.0",
                           sm_count=me["sm_count"], memory_mb=me["memory_mb"])
        base = next(m for m in t["measurements"] if m["stack"] == stack)
        fkey = key_of(1, 8, 2, 8, 48, 16)
        sh = shape(1, 8, 2, 8, 48, 16)

        def row(tactic, us, at):
            m = dict(base)
            m.update(shape=sh, shape_key=fkey, tactic=tactic, status="ok", time_us=us,
                     time_us_min=us, time_us_max=us, time_us_copies=None, rel_err=1e-7,
                     max_abs_err=1e-7, note="", host="fleet-host-9", taken_at=at)
            return m
        t["measurements"] = [row("split/acc=f32/pad=1", 9.0, 1767225600),
                             row("fused/pad=1", 12.0, 1767225660)]
        st, r = d.post("/v1/import", t)
        check(st == 200, "fleet table of the same model imported (%s)" % r)
        st, a = d.get(q(fkey))
        check(st == 200 and a["source"] == "fleet" and a["tactic"] == "split/acc=f32/pad=1"
              and a["fleet_device"] == "CPU-00000000000000fe"
              and a["fleet_host"] == "fleet-host-9" and a.get("tuning") in ("queued", "running"),
              "a shape only the fleet measured: source fleet, naming device and host (%s)"
              % json.dumps(a))
    finally:
        d.stop()

    # off: nothing is queued
    work2 = tempfile.mkdtemp(prefix="attune-it-miss-")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(d.db + suffix):
            shutil.copy(d.db + suffix, os.path.join(work2, "attune.db" + suffix))
    d2 = daemonlib.Daemon(binary, work2, ["--no-tune-on-miss"])
    try:
        st, a = d2.get(q(key_of(1, 4, 1, 40, 72, 32)))
        check(st == 200 and a["source"] in ("predicted", "nearest") and "tuning" not in a,
              "--no-tune-on-miss: a miss is answered and not queued (%s %s)" % (st, a))
    finally:
        d2.stop()
    if not failures:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(work2, ignore_errors=True)
    print("%d FAILED: %s" % (len(failures), "; ".join(failures)) if failures else "all ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
