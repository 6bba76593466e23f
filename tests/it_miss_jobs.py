#!/usr/bin/env python3
"""it_miss_jobs.py -- tune on miss bounded and made of jobs (issue 29 items
1-2, issue 28 item 2), over real HTTP on the CPU.

- Admission: the lookup b1.hq1.hkv1.sq1048576.skv16384.d64.f16 answers at
  once with "tuning": "refused: predicted ..."; POST /v1/tune of it is a
  400 naming "force"; with "force": true it is queued, and SIGTERM while
  that tune runs (one kernel call is hours) exits within 10 s; at the next
  start the job resumes and DELETE stops it within seconds.
- Every tune is a job: a miss is listed in GET /v1/jobs with kind "miss"
  and in `attune jobs`; it ends done.
- Only a completed tune answers `measured`: while a miss tune runs, no
  answer is `measured` unless every listed tactic is stored; kill -9 during
  the quick pass and during the full pass, then a restart: the same job
  resumes and completes, and the shape answers `measured` only then.
- Quota: a flood of distinct misses admits --miss-quota shapes; the rest
  are refused with the reason; /metrics shows the quota and its use.
- Retention: of two shapes tuned on miss, the one no lookup asks for again
  within --miss-retain-s is forgotten (rows and job), the other kept.

Environment: ATTUNED_BIN (required, else skip: 77), ATTUNE_BIN.
"""

import json
import os
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
key_of = daemonlib.key_of
shape = daemonlib.shape
HUGE = "b=1&hq=1&hkv=1&sq=1048576&skv=16384&d=64&dtype=f16&causal=false"


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
    return cond


def q(key):
    return "/v1/tactic?device=cpu&shape=" + key


def wait_for(fn, timeout=60, step=0.02):
    """Poll fn() until it returns something true; that value, or None."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(step)
    return None


def job_state(d, job):
    return d.get("/v1/jobs/%d" % job)[1]


def listed(key):
    binary = os.environ.get("ATTUNE_BIN")
    p = subprocess.run([binary, "tactics", "--device", "cpu", "--shape", key],
                       capture_output=True, text=True, timeout=60)
    return len(p.stdout.split())


def stored(d, key):
    return len(d.get("/v1/results?device=cpu&shape=" + key)[1]["measurements"])


def seed(d):
    """Two small shapes tuned by a job: the model the admission reads."""
    st, r = d.post("/v1/tune", {"device": "cpu", "shapes": [shape(1, 4, 1, 16, 64, 32),
                                                            shape(1, 4, 4, 16, 64, 32)]})
    j = wait_for(lambda: job_state(d, r["job"])["state"] in ("done", "failed") and
                 job_state(d, r["job"]))
    check(j and j["state"] == "done" and j["kind"] == "tune", "seed job done, kind tune")


def test_admission(binary, work):
    d = daemonlib.Daemon(binary, work)
    try:
        seed(d)
        t0 = time.time()
        st, a = d.get("/v1/tactic?device=cpu&" + HUGE)
        dt = time.time() - t0
        check(st == 200 and a["source"] != "measured" and
              a.get("tuning", "").startswith("refused: predicted") and dt < 1.0,
              "the huge lookup answers at once (%.3f s), tuning %r" % (dt, a.get("tuning")))
        r = subprocess.run([os.environ["ATTUNE_BIN"], "query", "--url",
                            "http://127.0.0.1:%d" % d.port, "--device", "cpu", "--shape",
                            key_of(1, 1, 1, 1048576, 16384, 64, "f16")],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 0 and any(ln.split() == ["tuning", "refused"]
                                        for ln in r.stdout.splitlines()),
              "attune query (the C client) says tuning refused (%r)" % r.stdout[-200:])
        huge = shape(1, 1, 1, 1048576, 16384, 64, "f16")
        st, r = d.post("/v1/tune", {"device": "cpu", "shapes": [huge]})
        check(st == 400 and "force" in r["error"] and "predicted" in r["error"],
              "an explicit job for it is refused without force (%s %s)" % (st, r))
        st, r = d.post("/v1/tune", {"device": "cpu", "shapes": [huge], "force": True})
        check(st == 202 and "over the job budget" in r.get("warning", ""),
              "with force it is queued, with a warning (%s %s)" % (st, r))
        job = r["job"]
        wait_for(lambda: job_state(d, job)["state"] == "running", 20)
        time.sleep(1.0)  # into its first kernel call (hours long)
        t0 = time.time()
        d.proc.send_signal(signal.SIGTERM)
        try:
            rc = d.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            rc = None
        dt = time.time() - t0
        check(rc == 0 and dt < 10, "SIGTERM during the tune: exit %s in %.2f s" % (rc, dt))
    finally:
        d.stop()
    d = daemonlib.Daemon(binary, work)
    try:
        j = wait_for(lambda: job_state(d, job)["state"] == "running" and job_state(d, job), 20)
        check(j is not None, "the forced job resumes at the next start")
        time.sleep(0.5)
        t0 = time.time()
        d.json("DELETE", "/v1/jobs/%d" % job)
        j = wait_for(lambda: job_state(d, job)["state"] == "canceled", 15)
        check(j is not None, "DELETE stops it in %.2f s" % (time.time() - t0))
    finally:
        d.stop()


def no_partial_measured(d, key, n):
    """Poll until key is measured; every measured answer must come with all
    n tactics stored. True when it ended measured with nothing partial."""
    ok = True

    def look():
        nonlocal ok
        st, a = d.get(q(key))
        if st == 200 and a["source"] == "measured":
            ok = ok and stored(d, key) >= n
            return True
        return False
    return wait_for(look, 90) is not None and ok


def miss_job(d, key, old=frozenset()):
    """The newest miss job for key (its shape, when listed) not among the
    ids in old: the same work directory keeps the earlier runs' jobs, and
    the listing's order alone does not say which is this one's."""
    got = [j for j in d.get("/v1/jobs")[1]["jobs"]
           if j["kind"] == "miss" and j.get("shape") in (None, key) and j["id"] not in old]
    return max(got, key=lambda j: j["id"]) if got else None


def kill_during(binary, work, key, want_quick):
    """Miss key, kill -9 the daemon during its quick pass (want_quick) or
    its full pass, restart: the same job resumes and completes. The daemon
    holds the pass at its second tactic (ATTUNED_TEST_HOLD_MISS,
    daemon/jobs_miss.c) until it is killed: sampling a quick pass that
    lasts a few ms missed it once in nine runs at load 7 (2026-12-06)."""
    n = listed(key)
    what = "quick" if want_quick else "full"
    d = daemonlib.Daemon(binary, work, ["--tune-budget-ms", "25"],
                         env={"ATTUNED_TEST_HOLD_MISS": what})
    killed_at = None
    try:
        old = frozenset(j["id"] for j in d.get("/v1/jobs")[1]["jobs"])
        st, a = d.get(q(key))
        check(a.get("tuning") in ("queued", "running"), "miss %s queued" % key)

        def in_pass():
            j = miss_job(d, key, old)
            if j is None or j["state"] != "running" or j.get("tactic_count") is None:
                return None
            # the quick pass (at most 3 tactics) held between two of its
            # rows, one committed; the full pass anywhere before its last
            # row (its screening commits none until its verdicts)
            quick = j["tactic_count"] <= 3
            first = 1 if want_quick else 0
            return j if quick == want_quick and first <= j["tactic_index"] < j["tactic_count"] \
                else None
        # held: the same row and tactic a second apart (the listing names
        # each tactic as it starts, the full pass's screened ones too, all
        # at row 0; the hold comes at the pass's second tactic)
        def held():
            j = in_pass()
            if j is None or not j.get("tactic"):
                return None
            time.sleep(1.0)
            again = miss_job(d, key, old)
            same = again is not None and again["state"] == "running" and \
                again["tactic_index"] == j["tactic_index"] and again.get("tactic") == j["tactic"]
            return j if same else None
        j = wait_for(held, 120, 0.05)
        check(j is not None, "the %s pass is held%s" % (
            what, "" if j is None else " at row %d, %s" % (j["tactic_index"], j["tactic"])))
        if j is not None:
            d.proc.kill()
            d.proc.wait()
            killed_at = j
    finally:
        d.stop()
    if not check(killed_at is not None, "killed during the %s pass%s" % (
            what, "" if killed_at is None else " (%d of %d rows of the pass committed)" % (
                killed_at["tactic_index"], killed_at["tactic_count"]))):
        return
    d = daemonlib.Daemon(binary, work, ["--tune-budget-ms", "25"])
    try:
        st, a = d.get(q(key))
        check(a["source"] != "measured" or stored(d, key) >= n,
              "after kill -9 in the %s pass (%d of %d rows): not measured (%s)"
              % (what, stored(d, key), n, a["source"]))
        check(no_partial_measured(d, key, n),
              "the tune resumes and only its end answers measured (%d of %d rows)"
              % (stored(d, key), n))
        j = wait_for(lambda: job_state(d, killed_at["id"])["state"] == "done" and
                     job_state(d, killed_at["id"]), 20) or job_state(d, killed_at["id"])
        check(j["state"] == "done" and j["kind"] == "miss",
              "the same miss job %d resumed and is done (%s)" % (j["id"], j["state"]))
    finally:
        d.stop()


def test_miss_jobs(binary, work):
    d = daemonlib.Daemon(binary, work)
    try:
        seed(d)
        key = key_of(1, 4, 1, 24, 96, 32)
        n = listed(key)
        st, a = d.get(q(key))
        check(a.get("tuning") in ("queued", "running"), "a miss is queued")
        check(no_partial_measured(d, key, n), "measured only once all %d tactics are stored" % n)
        # the mark commits just before the job's own end: wait for its state
        wait_for(lambda: all(j["state"] == "done" for j in d.get("/v1/jobs?kind=miss")[1]["jobs"]),
                 20)
        jobs = [j for j in d.get("/v1/jobs")[1]["jobs"] if j["kind"] == "miss"]
        check(len(jobs) == 1 and jobs[0]["state"] == "done" and jobs[0]["total"] == 1,
              "GET /v1/jobs lists it: kind miss, done (%s)" % json.dumps(jobs))
        r = subprocess.run([os.environ["ATTUNE_BIN"], "jobs", "--url",
                            "http://127.0.0.1:%d" % d.port], capture_output=True, text=True)
        check(r.returncode == 0 and any(ln.split()[1:3] == ["miss", "done"]
                                        for ln in r.stdout.splitlines()[1:]),
              "attune jobs shows it (%r)" % r.stdout)
        for kind in ("miss", "tune"):
            want = sum(j["kind"] == kind for j in d.get("/v1/jobs")[1]["jobs"])
            r = subprocess.run([os.environ["ATTUNE_BIN"], "jobs", "--url",
                                "http://127.0.0.1:%d" % d.port, "--kind", kind, "--csv"],
                               capture_output=True, text=True)
            rows = [ln for ln in r.stdout.splitlines()[1:] if ln]
            check(r.returncode == 0 and len(rows) == want and
                  all(ln.split(",")[1] == kind for ln in rows),
                  "attune jobs --kind %s lists %d (%r)" % (kind, want, r.stdout))
    finally:
        d.stop()
    # Both kills on lengths no pad repeats (100 queries: 104, 112, 128 at
    # pads 8, 16, 64): on an aligned shape every pad > 1 is its pad=1 twin,
    # stored from its row without a timing, and a pass has fewer rows to
    # be caught between (at 64 x 256 the quick pass was missed under
    # .ci/run's load, at 128 x 512 the full pass had one tactic left)
    kill_during(binary, work, key_of(1, 4, 1, 100, 250, 64), True)
    # the full pass screens its tactics in a few ms each: a shape of ~50 ms
    # calls keeps it running long enough to be caught between two rows on
    # a loaded box (at 64 x 256 the whole pass ended between two polls once,
    # ctest -j4 at load 6)
    kill_during(binary, work, key_of(1, 4, 2, 100, 500, 64), False)


def test_quota(binary, work):
    d = daemonlib.Daemon(binary, work, ["--miss-quota", "4"])
    try:
        answers = [d.get(q(key_of(1, 2, 1, 8 + i, 16, 16)))[1].get("tuning") for i in range(12)]
        admitted = [t for t in answers if t in ("queued", "running")]
        refused = [t for t in answers if t and t.startswith("refused: daily quota")]
        check(len(admitted) == 4 and len(refused) == 8,
              "a flood of 12 misses: 4 admitted, 8 refused by the quota (%s)" % answers)
        st, m = d.request("GET", "/metrics")
        text = m.decode()
        check('attune_miss_quota{device="' in text and
              ("attune_miss_admitted_today{device=" in text and "} 4\n" in text) and
              'reason="quota"} 8' in text,
              "/metrics shows the quota, its use and the refusals")
        def misses():
            return [j for j in d.get("/v1/jobs")[1]["jobs"] if j["kind"] == "miss"]
        wait_for(lambda: len([j for j in misses() if j["state"] == "done"]) >= 4, 30, 0.1)
        jobs = misses()
        check(len(jobs) == 4 and all(j["state"] == "done" for j in jobs),
              "4 miss jobs, all done (%s)" % [j["state"] for j in jobs])
        keys = [key_of(1, 2, 1, 8 + i, 16, 16) for i in range(12)]
        rows = sum(stored(d, k) for k in keys)
        check(rows <= 4 * max(listed(k) for k in keys[:4]),
              "the database holds the 4 admitted shapes' rows only (%d)" % rows)
        st, only = d.get("/v1/jobs?kind=miss")
        check(st == 200 and len(only["jobs"]) == 4, "GET /v1/jobs?kind=miss lists them")
    finally:
        d.stop()


def test_retention(binary, work):
    d = daemonlib.Daemon(binary, work, ["--miss-retain-s", "3"])
    try:
        a, b = key_of(1, 2, 1, 8, 16, 16), key_of(1, 2, 1, 12, 16, 16)
        for k in (a, b):
            d.get(q(k))
        check(wait_for(lambda: all(d.get(q(k))[1]["source"] == "measured" for k in (a, b)),
                       30, 0.1) is not None, "two shapes tuned on miss")

        def forgotten():
            d.get(q(a))  # asked again: kept
            return stored(d, b) == 0
        t0 = time.time()
        gone = wait_for(forgotten, 20, 0.3)
        check(gone is not None and stored(d, a) > 0,
              "the shape nobody asked again is forgotten after %.1f s, the other kept (%d rows)"
              % (time.time() - t0, stored(d, a)))
        text = d.request("GET", "/metrics")[1].decode()
        check('attune_miss_forgotten_total{device="' in text and "} 1\n" in text and
              "attune_miss_retained{device=" in text,
              "/metrics counts it")
        kinds = [j["kind"] for j in d.get("/v1/jobs")[1]["jobs"]]
        check(kinds.count("miss") == 1, "its miss job is gone (%s)" % kinds)
    finally:
        d.stop()


def main():
    binary = os.environ.get("ATTUNED_BIN")
    if not binary or not os.path.exists(binary) or not os.environ.get("ATTUNE_BIN"):
        print("skip: ATTUNED_BIN / ATTUNE_BIN not set")
        return SKIP
    works = [tempfile.mkdtemp(prefix="attune-it-missjobs-") for _ in range(4)]
    t0 = time.time()
    test_admission(binary, works[0])
    test_miss_jobs(binary, works[1])
    test_quota(binary, works[2])
    test_retention(binary, works[3])
    print("%.1f s" % (time.time() - t0))
    if not failures:
        for w in works:
            shutil.rmtree(w, ignore_errors=True)
    print("%d FAILED: %s" % (len(failures), "; ".join(failures)) if failures else "all ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
