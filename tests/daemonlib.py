"""daemonlib.py -- a running attuned for the integration tests: start it on a
free loopback port with a temporary database, wait until it answers, talk
JSON to it over real HTTP, stop it.

Used by it_metrics.py, it_tune_on_miss.py and it_partial_tune.py (the
winners/dashboard tests keep page_fixture.py, which builds their database).
Waits are on states (the health route answering, the process exiting),
never fixed delays.
"""

import http.client
import json
import os
import socket
import subprocess
import time


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def stop_process(proc, log):
    """Terminate proc (kill after 20 s), close its log file; its exit status."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if not log.closed:
        log.close()
    return proc.returncode


def key_of(b, hq, hkv, sq, skv, d, dtype="f32", causal=False):
    return "b%d.hq%d.hkv%d.sq%d.skv%d.d%d.%s.%s" % (b, hq, hkv, sq, skv, d, dtype,
                                                   "c" if causal else "nc")


def shape(b, hq, hkv, sq, skv, d, dtype="f32", causal=False):
    return dict(b=b, hq=hq, hkv=hkv, sq=sq, skv=skv, d=d, dtype=dtype, causal=causal)


class Daemon:
    """attuned on workdir/attune.db (or db), --no-default-grid, a 10 ms
    tuning budget per tactic, plus extra arguments. Raises RuntimeError
    when it exits or does not answer GET /v1/health within 20 s."""

    def __init__(self, binary, workdir, extra=(), db=None, budget_ms="10", env=None):
        self.workdir = workdir
        self.port = free_port()
        self.db = db or os.path.join(workdir, "attune.db")
        self.log_path = os.path.join(workdir, "attuned.log")
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [binary, "--db", self.db, "--port", str(self.port), "--no-default-grid",
             "--tune-budget-ms", budget_ms] + list(extra),
            cwd=workdir, stdout=self.log, stderr=self.log,
            env=None if env is None else dict(os.environ, **env))
        deadline = time.time() + 20
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("attuned exited with %d at start" % self.proc.returncode)
            try:
                if self.request("GET", "/v1/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                self.stop()
                raise RuntimeError("attuned did not answer within 20 s")
            time.sleep(0.05)
        with open(os.path.join(os.path.dirname(self.db), "token")) as f:
            self.token = f.read().strip()

    def request(self, method, path, body=None, auth=False, headers=None):
        """(status, raw body bytes); body: bytes sent as JSON."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        h = dict(headers or {})
        if body is not None:
            h.setdefault("Content-Type", "application/json")
        if auth:
            h["Authorization"] = "Bearer " + self.token
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def json(self, method, path, obj=None):
        """(status, parsed JSON or None); non-GET requests carry the token."""
        st, data = self.request(method, path, None if obj is None else json.dumps(obj).encode(),
                                auth=method != "GET")
        return st, json.loads(data) if data else None

    def get(self, path):
        return self.json("GET", path)

    def post(self, path, obj):
        return self.json("POST", path, obj)

    def wait_job(self, job, timeout=300):
        """GET /v1/jobs/ID until the job is done, failed or canceled: its
        view then. RuntimeError past timeout seconds."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            st, j = self.get("/v1/jobs/%d" % job)
            if st == 200 and j["state"] in ("done", "failed", "canceled"):
                return j
            time.sleep(0.1)
        raise RuntimeError("job %d did not finish within %d s" % (job, timeout))

    def log_text(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self):
        """Terminate (kill after 20 s); returns the exit status."""
        return stop_process(self.proc, self.log)
