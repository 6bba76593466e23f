#!/usr/bin/env python3
"""it_empty_reads.py -- every read route of a daemon with nothing in it
(no job, no measurement, no fleet): answers, and the daemon lives.

Issue 29 item 5: GET /v1/jobs with no jobs did memcpy(NULL, 0) and GET
/v1/drift with no rows qsort(NULL, 0), undefined behaviour reachable
without a token. In make test this runs the plain attuned; .ci/sanitizers
runs it again against the ASan+UBSan attuned (halt on the first report),
so a report kills the daemon and fails the test.

Environment: ATTUNED_BIN (required, else skip: 77).
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib  # noqa: E402

ROUTES = ["/v1/health", "/v1/devices", "/v1/jobs", "/v1/jobs?state=running", "/v1/jobs/1",
          "/v1/drift?device=cpu", "/v1/drift?device=cpu&model=1", "/v1/winners?device=cpu",
          "/v1/results?device=cpu&shape=b1.hq2.hkv2.sq8.skv8.d16.f32.nc",
          "/v1/tactic?device=cpu&shape=b1.hq2.hkv2.sq8.skv8.d16.f32.nc",
          "/v1/tactic?device=cpu&shape=b1.hq2.hkv2.sq8.skv8.d16.f32.nc&variants=split",
          "/v1/export?device=cpu", "/metrics", "/"]


def main():
    binary = os.environ.get("ATTUNED_BIN")
    if not binary:
        print("skip: ATTUNED_BIN not set")
        return 77
    work = tempfile.mkdtemp(prefix="attune-it-empty-")
    d = daemonlib.Daemon(binary, work, extra=("--no-tune-on-miss",))
    failures = 0
    try:
        for path in ROUTES:
            try:
                st, body = d.request("GET", path)
            except OSError as ex:  # the daemon died (a sanitizer report?)
                st, body = repr(ex), b""
            ok = st in (200, 404) and (st != 200 or len(body) > 0)
            print(("ok   " if ok else "FAIL ") + "GET %s -> %s" % (path, st))
            failures += not ok
        try:
            st, _ = d.request("GET", "/v1/health")
        except OSError:
            st = None
        alive = st == 200 and d.proc.poll() is None
        print(("ok   " if alive else "FAIL ") + "the daemon lives after them")
        failures += not alive
    finally:
        rc = d.stop()
    clean = rc == 0
    print(("ok   " if clean else "FAIL ") + "it exits 0 on SIGTERM (%s)" % rc)
    failures += not clean
    print("%d failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
