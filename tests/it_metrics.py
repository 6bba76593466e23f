#!/usr/bin/env python3
"""it_metrics.py -- GET /metrics over real HTTP: what operators alert on.

Starts attuned (tune on miss off, so every count below is exact) on a
temporary database and checks:
- the exposition format: every sample belongs to a family announced by
  one HELP and one TYPE line before it, names and labels are well formed,
  values parse, no series appears twice;
- at start: attune_build_info{version,commit,kernels_hash,cuda} 1 with this
  build's version, and every counter present at zero: lookups by source,
  stale lookups, index reload failures, requests of every route and status,
  the CPU's queue depths (jobs, miss);
- the counters move: a default answer, a measured one after a tune, and a
  stale one (an imported fleet table whose latest stack lacks the shape)
  each add exactly one to their source; requests of /v1/tactic count 200s;
  queued jobs show in the CPU's queue depth and leave it when canceled; a
  SIGHUP reload leaves the reload failures at zero.

Environment: ATTUNED_BIN (required, else skip: 77), ATTUNE_TEST_INPUTS.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib  # noqa: E402

SKIP = 77
failures = []

SOURCES = ("measured", "nearest", "default", "predicted", "fleet")
NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
SAMPLE = re.compile(r"^(%s)(\{(.*)\})? (\S+)$" % NAME)
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
    return cond


def parse(text):
    """Validate the text format; return {(name, frozenset(labels)): value}
    and the list of format errors."""
    errors, series, helps, types = [], {}, {}, {}
    for no, line in enumerate(text.split("\n"), 1):
        if line == "":
            continue
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            kind, rest = line[2:6], line[7:]
            name = rest.split(" ", 1)[0]
            seen = helps if kind == "HELP" else types
            if not re.fullmatch(NAME, name) or " " not in rest:
                errors.append("line %d: bad %s: %s" % (no, kind, line))
            if name in seen:
                errors.append("line %d: second %s for %s" % (no, kind, name))
            if kind == "TYPE" and rest.split(" ", 1)[1] not in (
                    "counter", "gauge", "histogram", "summary", "untyped"):
                errors.append("line %d: bad type %s" % (no, line))
            seen[name] = no
            continue
        if line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            errors.append("line %d: not a sample: %s" % (no, line))
            continue
        name, labels, value = m.group(1), m.group(3) or "", m.group(4)
        family = name
        if family not in types:
            family = re.sub(r"_(bucket|sum|count)$", "", name)
        if family not in types or family not in helps:
            errors.append("line %d: %s has no HELP/TYPE before it" % (no, name))
        pairs, pos = [], 0
        while pos < len(labels):
            lm = LABEL.match(labels, pos)
            if not lm:
                errors.append("line %d: bad labels {%s}" % (no, labels))
                break
            pairs.append((lm.group(1), lm.group(2)))
            pos = lm.end()
        try:
            v = float(value)
        except ValueError:
            errors.append("line %d: bad value %s" % (no, value))
            continue
        key = (name, frozenset(pairs))
        if key in series:
            errors.append("line %d: duplicate series %s{%s}" % (no, name, labels))
        series[key] = v
    return series, errors


def metrics(d):
    st, data = d.request("GET", "/metrics")
    series, errors = parse(data.decode())
    check(st == 200 and not errors, "exposition format valid (%d series)%s"
          % (len(series), "" if not errors else ": " + "; ".join(errors[:5])))
    return series


def val(series, name, **labels):
    return series.get((name, frozenset(labels.items())))


def lookups(series):
    return {s: val(series, "attune_lookups_total", source=s) for s in SOURCES}


def wait_job(d, job, timeout=120):
    deadline = time.time() + timeout
    j = {}
    while time.time() < deadline:
        st, j = d.json("GET", "/v1/jobs/%d" % job)
        if j["state"] in ("done", "failed", "canceled"):
            break
        time.sleep(0.1)
    return j


def shape(sq, skv, hq=4, hkv=1, d=32):
    return dict(b=1, hq=hq, hkv=hkv, sq=sq, skv=skv, d=d, dtype="f32", causal=False)


def key(s):
    return "b%d.hq%d.hkv%d.sq%d.skv%d.d%d.f32.nc" % (s["b"], s["hq"], s["hkv"], s["sq"],
                                                     s["skv"], s["d"])


def main():
    binary = os.environ.get("ATTUNED_BIN")
    if not binary or not os.path.exists(binary):
        print("skip: ATTUNED_BIN not set")
        return SKIP
    version = subprocess.run([binary, "--version"], capture_output=True,
                             text=True).stdout.split()[-1]
    work = tempfile.mkdtemp(prefix="attune-it-metrics-")
    d = daemonlib.Daemon(binary, work, ["--no-tune-on-miss"])
    try:
        st, devs = d.json("GET", "/v1/devices")
        cpu = [x["id"] for x in devs["devices"] if x["kind"] == "cpu" and x["local"]][0]
        # ---- at start: everything present, at zero
        m0 = metrics(d)
        info = [(k, v) for k, v in m0.items() if k[0] == "attune_build_info"]
        labels = dict(info[0][0][1]) if len(info) == 1 else {}
        check(len(info) == 1 and info[0][1] == 1 and labels.get("version") == version
              and set(labels) == {"version", "commit", "kernels_hash", "cuda"}
              and re.fullmatch(r"[0-9a-f]{16}", labels.get("kernels_hash", ""))
              and labels.get("commit") and labels.get("cuda"),
              "attune_build_info %s = 1" % labels)
        check(lookups(m0) == {s: 0 for s in SOURCES}, "lookups by source at zero: %s"
              % lookups(m0))
        check(val(m0, "attune_lookups_stale_total") == 0, "stale lookups at zero")
        check(val(m0, "attune_index_reload_failures_total") == 0, "reload failures at zero")
        check(val(m0, "attune_http_deadline_closes_total") == 0, "deadline closes at zero")
        check(1 <= val(m0, "attune_http_connections_open") <= 3,
              "open connections: the scrape's own (plus start-up probes not yet closed): %s"
              % val(m0, "attune_http_connections_open"))
        req = [v for k, v in m0.items() if k[0] == "attune_http_requests_total"
               and dict(k[1]).get("route") == "/v1/tactic"]
        check(len(req) >= 10 and all(v == 0 for v in req),
              "requests of /v1/tactic: every status present at zero (%d)" % len(req))
        check(val(m0, "attune_queue_depth", device=cpu, queue="jobs") == 0
              and val(m0, "attune_queue_depth", device=cpu, queue="miss") == 0,
              "queue depths of the CPU at zero")
        check(val(m0, "attune_miss_tuning", device=cpu) == 0, "no missed shape being tuned")

        # ---- a default answer, then a measured one
        s1 = shape(16, 64)
        st, a = d.json("GET", "/v1/tactic?device=cpu&shape=" + key(s1))
        check(st == 200 and a["source"] == "default", "an untuned shape: default")
        m1 = metrics(d)
        check(lookups(m1) == dict(lookups(m0), default=1), "default counted once: %s"
              % lookups(m1))
        check(val(m1, "attune_http_requests_total", method="GET", route="/v1/tactic",
                  status="200") == 1, "one 200 of /v1/tactic counted")
        st, r = d.json("POST", "/v1/tune", {"device": "cpu", "shapes": [s1]})
        check(st == 202 and wait_job(d, r["job"])["state"] == "done", "a shape tuned")
        st, a = d.json("GET", "/v1/tactic?device=cpu&shape=" + key(s1))
        check(st == 200 and a["source"] == "measured" and not a["stale"], "now measured")
        m2 = metrics(d)
        check(lookups(m2) == dict(lookups(m1), measured=1), "measured counted once: %s"
              % lookups(m2))
        check(val(m2, "attune_lookups_stale_total") == 0, "a fresh answer is not stale")

        # ---- stale: a fleet device whose latest stack lacks the shape
        inputs = os.environ.get("ATTUNE_TEST_INPUTS",
                                os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                             "inputs"))
        with open(os.path.join(inputs, "fleet_good.json")) as f:
            t = json.load(f)
        latest = t["device"]["latest_stack"]
        old = [m for m in t["measurements"] if m["stack"] != latest]
        skey = old[0]["shape_key"]
        t["measurements"] = [m for m in t["measurements"]
                             if m["stack"] != latest or m["shape_key"] != skey]
        st, _ = d.json("POST", "/v1/import", t)
        check(st == 200, "fleet table imported (%d)" % st)
        st, a = d.json("GET", "/v1/tactic?device=%s&shape=%s" % (t["device"]["id"], skey))
        check(st == 200 and a["source"] == "measured" and a["stale"],
              "an old stack's winner: measured, stale (%s)" % (a and a.get("stale")))
        m3 = metrics(d)
        check(lookups(m3) == dict(lookups(m2), measured=2), "measured counted: %s"
              % lookups(m3))
        check(val(m3, "attune_lookups_stale_total") == 1, "stale counted once")

        # ---- queue depth: a long job runs, two more wait, then are canceled
        grid = [shape(8 + 8 * i, 256, hq=8) for i in range(24)]
        jobs = []
        for _ in range(3):
            st, r = d.json("POST", "/v1/tune", {"device": "cpu", "shapes": grid})
            if st == 202:
                jobs.append(r["job"])
        check(len(jobs) == 3, "three jobs accepted")
        m4 = metrics(d)
        queued = val(m4, "attune_jobs", state="queued")
        depth = val(m4, "attune_queue_depth", device=cpu, queue="jobs")
        check(depth is not None and depth >= 2, "queue depth of the CPU: %s (jobs queued: %s)"
              % (depth, queued))
        for job in reversed(jobs):  # the waiting ones first
            d.json("DELETE", "/v1/jobs/%d" % job)
        m5 = metrics(d)
        check(val(m5, "attune_queue_depth", device=cpu, queue="jobs") == 0,
              "canceled jobs leave the queue")
        for job in jobs:
            wait_job(d, job)

        # ---- a SIGHUP reload that works is not a failure
        d.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 20
        reloaded = False
        while time.time() < deadline and not reloaded:
            time.sleep(0.1)
            with open(os.path.join(work, "attuned.log"), "rb") as f:
                reloaded = b"reason=sighup" in f.read()
        m6 = metrics(d)
        check(reloaded and val(m6, "attune_index_reload_failures_total") == 0,
              "SIGHUP reloaded, reload failures still zero")
    finally:
        d.stop()
        if failures:
            with open(os.path.join(work, "attuned.log"), "rb") as f:
                sys.stdout.write(f.read().decode(errors="replace")[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
