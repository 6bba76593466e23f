#!/usr/bin/env python3
"""it_keepalive.py -- attuned keeps HTTP/1.1 connections alive, within the
limits that protect it (issue 15 item 2):
- several requests, answers and errors alike, travel over one connection,
  none answered `Connection: close`;
- kept-alive connections count against --per-ip: one more from the same
  address gets no answer, and a new one is served once one of them closed;
- an idle kept-alive connection is closed by the daemon after --timeout
  (waited for as the close itself, not a delay).
tests/reliability/slow_clients.py covers the deadline for a request's
headers, which applies to every request of a kept-alive connection too.

Environment: ATTUNED_BIN (required, else skip: 77).
"""

import http.client
import os
import shutil
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib  # noqa: E402

SKIP = 77
failures = []
LOOKUP = "/v1/tactic?device=cpu&shape=" + daemonlib.key_of(1, 4, 1, 16, 64, 32)


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
    return cond


def get(c, path):
    """(status, Connection header) of one request on connection c."""
    c.request("GET", path)
    r = c.getresponse()
    r.read()
    return r.status, (r.getheader("Connection") or "").lower()


def served(port, timeout=5):
    """True when a new connection gets an answer to GET /v1/health."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        return get(c, "/v1/health")[0] == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        c.close()


def open_connections(c):
    """attune_http_connections_open, scraped over connection c."""
    c.request("GET", "/metrics")
    r = c.getresponse()
    body = r.read().decode()
    for line in body.splitlines():
        if line.startswith("attune_http_connections_open "):
            return int(float(line.split()[1]))
    return None


def wait_alone(c, timeout=30):
    """Wait until c is the daemon's only open connection: connections a
    client closed (daemonlib's start-up probe, an earlier test's) count
    against --per-ip until libmicrohttpd's thread has closed them too."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if open_connections(c) == 1:
            return True
        time.sleep(0.02)
    return False


def test_reuse_and_per_ip(attuned, work):
    d = daemonlib.Daemon(attuned, work, ["--no-tune-on-miss", "--per-ip", "2"])
    try:
        a = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
        answers = [get(a, p) for p in ("/v1/health", LOOKUP, LOOKUP + "&b=0", "/v1/devices")]
        sock = a.sock
        answers.append(get(a, "/v1/health"))
        check([s for s, _ in answers] == [200, 200, 400, 200, 200],
              "answers and a 400 on one connection: %s" % answers)
        check(all(h != "close" for _, h in answers), "none says Connection: close")
        check(sock is not None and a.sock is sock, "the same socket carried every request")

        check(wait_alone(a), "the start-up probe's connection closed on the daemon's side")
        b = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
        check(get(b, "/v1/health")[0] == 200, "a second kept-alive connection")
        check(not served(d.port), "--per-ip 2: a third connection from the address gets no answer")
        b.close()
        deadline = time.time() + 30
        ok = False
        while not ok and time.time() < deadline:
            ok = served(d.port)
        check(ok, "once one of them closed, a new connection is served")
        check(get(a, "/v1/health")[0] == 200, "the first connection still works")
        a.close()
    finally:
        d.stop()


def test_idle_close(attuned, work):
    d = daemonlib.Daemon(attuned, work, ["--no-tune-on-miss", "--timeout", "1"])
    try:
        s = socket.create_connection(("127.0.0.1", d.port), timeout=30)
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        data, closed = b"", False
        while not closed:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            closed = chunk == b""
            data += chunk
        s.close()
        check(data.startswith(b"HTTP/1.1 200") and b"Connection: close" not in data,
              "answered and kept alive")
        check(closed, "the idle kept-alive connection was closed by the daemon (--timeout 1)")
    finally:
        d.stop()


def main():
    attuned = os.environ.get("ATTUNED_BIN")
    if not attuned:
        print("skip: ATTUNED_BIN not set")
        return SKIP
    work = tempfile.mkdtemp(prefix="it_keepalive.")
    try:
        test_reuse_and_per_ip(attuned, work)
        work2 = os.path.join(work, "idle")
        os.makedirs(work2)
        test_idle_close(attuned, work2)
    finally:
        if failures:
            print("logs kept in %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
