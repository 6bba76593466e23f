#!/usr/bin/env python3
"""it_log_escape.py -- outside text cannot break attuned's log lines.

Every log call site that writes text from outside attune (a path, an error
of libpq, SQLite, jansson or the C library, a device name, a client's URL
or pin, a message of libmicrohttpd) is fed quotes, backslashes, newlines,
tabs and control bytes, and every line attuned writes must then parse as
`<time> key=value ...` with each value bare or quoted with only the
escapes of daemon/log.c's log_quote (\\" \\\\ \\n \\r \\t \\xHH), and the
fed text must come back exactly from its field:

  start db=, token path=          --db and the token beside it in a named directory
  default_grid_queued grid=       --default-grid at such a path
  default_grid_skipped grid= error=  a grid file that does not parse (jansson's words)
  token_file_readable path=       --token-file of mode 0644
  token_failed error=             --token-file that is a directory
  db_dir_failed db=, db_open_failed db= error=  --db under a file, --db a directory
  listen_failed error=            --bind of such text
  reopen_log_failed path=         --log FILE replaced by a directory, then SIGHUP
  fleet_unreachable error=        --fleet to a socket directory of such a name (libpq's
                                  message quotes it and spans lines)
  request path=, method=          a request for such a path
  mhd message=                    libmicrohttpd's words on a bad Content-Length (--verbose)
  pin_added model= author= device=, pin_removed  POST and DELETE /v1/pins
  device name=                    the CPU's "model name" (a private mount of
                                  /proc/cpuinfo; skipped where unshare -m is not allowed)

Not driven here (no outside way to reach them from a test): fleet_connected
server= (a server's host and database names), fleet_push_failed and
fleet_pull_failed (libpq's errors mid-sync; it_fleet_pg.py runs them and
checks every line of its daemons with the same parser), fleet_rows_rejected,
fleet_start_failed and job_thread_store_failed (a second open of a database
that opened). They take the same LOG_Q path.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib  # noqa: E402
import loglib  # noqa: E402

SKIP = 77
fails = 0

# the text fed everywhere a file name allows it (no '/', no NUL)
W = 'q"u\\o\nn\tt\x01\x1b['


def check(ok, what):
    global fails
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        fails += 1


def run_until(args, cwd, want, timeout=20):
    """Run attuned until its log (stderr) holds an event of want or it exits."""
    p = subprocess.Popen(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = b""
    deadline = time.time() + timeout
    os.set_blocking(p.stdout.fileno(), False)
    while time.time() < deadline:
        chunk = p.stdout.read() or b""
        out += chunk
        if want and ("event=%s " % want).encode() in out:
            break
        if p.poll() is not None:
            out += p.stdout.read() or b""
            break
        time.sleep(0.05)
    if p.poll() is None:
        p.terminate()
        p.wait(timeout=20)
        out += p.stdout.read() or b""
    p.stdout.close()
    return out


def free_port():
    return daemonlib.free_port()


def main():
    binary = os.environ.get("ATTUNED_BIN")
    if not binary:
        print("skip: ATTUNED_BIN not set")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="attune-it-log-")
    try:
        run_all(binary, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failed" % fails)
    return 1 if fails else 0


def run_all(binary, tmp):
    d = os.path.join(tmp, "d" + W)
    os.mkdir(d)
    grid = os.path.join(d, "g" + W + ".json")
    with open(grid, "w") as f:
        json.dump({"shapes": [{"b": 1, "hq": 1, "hkv": 1, "sq": 4, "skv": 4, "d": 8,
                               "dtype": "f32", "causal": False}]}, f)

    # ---- a daemon that runs: the database, its token, the default grid, a
    # log file, the fleet, requests, pins, libmicrohttpd's words
    db = os.path.join(d, "a" + W + ".db")
    logf = os.path.join(d, "l" + W + ".log")
    sock_dir = os.path.join(d, "s" + W)  # no server listens there
    fleet = "host='%s' dbname=attune connect_timeout=2" % sock_dir.replace("\\", "\\\\").replace(
        "'", "\\'")
    port = free_port()
    args = [binary, "--db", db, "--port", str(port), "--default-grid", grid,
            "--tune-budget-ms", "1", "--log", logf, "--verbose", "--no-tune-on-miss"]
    have_pq = "--fleet" in subprocess.run([binary, "--help"], capture_output=True,
                                          text=True).stdout
    if have_pq:
        args += ["--fleet", fleet, "--fleet-period", "1"]
    proc = subprocess.Popen(args, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        drive(proc, port, db, logf, have_pq)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)
    ev = parse_all(read_lines(logf + ".old"), "running daemon")
    want_field(ev, "start", "db", db)
    want_field(ev, "token", "path", os.path.join(d, "token"))
    want_field(ev, "default_grid_queued", "grid", grid)
    want_field(ev, "request", "path", "/v1/x\"\\\n\t\x01\x1b[")
    want_field(ev, "pin_added", "author", 'a"u\\thor')
    want_field(ev, "pin_added", "model", 'M"od\\el "x"')
    want_field(ev, "pin_removed", "tactic", "split")
    want_field(ev, "reopen_log_failed", "path", logf)
    want_in(ev, "mhd", "message", "`Content-Length'")
    if have_pq:
        # libpq: connection to server on socket "<dir>/.s.PGSQL.5432" failed: ...
        want_in(ev, "fleet_unreachable", "error", sock_dir + "/.s.PGSQL.5432\"")
    else:
        print("skip fleet_unreachable: attuned built without libpq")

    # ---- a grid that does not parse; a token file others can read; the
    # CPU's name from a private /proc/cpuinfo when unshare -m is allowed
    d2 = os.path.join(tmp, "e" + W)
    os.mkdir(d2)
    bad_grid = os.path.join(d2, "bad" + W + ".json")
    with open(bad_grid, "wb") as f:
        f.write(b'{"shapes": [x"\\\x01\n')
    tok = os.path.join(d2, "t" + W)
    with open(tok, "w") as f:
        f.write("0123456789abcdef0123456789abcdef\n")
    os.chmod(tok, 0o644)
    args = [binary, "--db", os.path.join(d2, "b.db"), "--port", str(free_port()),
            "--default-grid", bad_grid, "--token-file", tok, "--no-tune-on-miss"]
    # no control bytes: the store refuses a device name holding one
    cpu_name = 'CPU "X" \\ \'y\' z'
    fake = os.path.join(tmp, "cpuinfo")
    with open(fake, "w") as f:
        f.write("processor\t: 0\nmodel name\t: %s\nflags\t\t: fpu\n\n" % cpu_name)
    wrapped = ["unshare", "-m", "--propagation", "private", "sh", "-c",
               'mount --bind "$0" /proc/cpuinfo && exec "$@"', fake] + args
    can_unshare = shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         'mount --bind "$0" /proc/cpuinfo', fake], capture_output=True).returncode == 0
    out = run_until(wrapped if can_unshare else args, tmp, "default_grid_skipped")
    ev = parse_all(out.decode("latin-1").splitlines(True), "bad grid, loose token")
    want_field(ev, "default_grid_skipped", "grid", bad_grid)
    want_in(ev, "default_grid_skipped", "error", "near")
    want_field(ev, "token_file_readable", "path", tok)
    if can_unshare:
        want_field(ev, "device", "name", cpu_name, where=lambda e: e.get("kind") == "cpu")
    else:
        print("skip device name: unshare -m not allowed here")

    # ---- starts that fail, each on its own outside text
    tokdir = os.path.join(d2, "td" + W)
    os.mkdir(tokdir)
    out = run_until([binary, "--db", os.path.join(d2, "c.db"), "--port", str(free_port()),
                     "--token-file", tokdir, "--no-default-grid"], tmp, None)
    ev = parse_all(out.decode("latin-1").splitlines(True), "token file a directory")
    want_in(ev, "token_failed", "error", tokdir)

    afile = os.path.join(d2, "f" + W)
    open(afile, "w").close()
    underfile = os.path.join(afile, "sub", "x.db")
    out = run_until([binary, "--db", underfile, "--port", str(free_port()), "--no-default-grid"],
                    tmp, None)
    ev = parse_all(out.decode("latin-1").splitlines(True), "database under a file")
    want_field(ev, "db_dir_failed", "db", underfile)

    dbdir = os.path.join(d2, "dd" + W)
    os.mkdir(dbdir)
    out = run_until([binary, "--db", dbdir, "--port", str(free_port()), "--no-default-grid"],
                    tmp, None)
    ev = parse_all(out.decode("latin-1").splitlines(True), "database a directory")
    want_field(ev, "db_open_failed", "db", dbdir)
    check(any(e["event"] == "db_open_failed" and e.get("error") for e in ev),
              "db_open_failed carries SQLite's error")

    bind = '127.0.0."1\n\\\x02'
    out = run_until([binary, "--db", os.path.join(d2, "e.db"), "--port", str(free_port()),
                     "--bind", bind, "--no-default-grid"], tmp, None)
    ev = parse_all(out.decode("latin-1").splitlines(True), "bind of outside text")
    want_in(ev, "listen_failed", "error", bind)


def drive(proc, port, db, logf, have_pq):
    token = None
    deadline = time.time() + 30
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("attuned exited with %d" % proc.returncode)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    with open(os.path.join(os.path.dirname(db), "token")) as f:
        token = f.read().strip()
    # a path with a quote, a backslash, a newline, a tab and control bytes
    raw(port, b"GET /v1/x%22%5C%0A%09%01%1B%5B HTTP/1.1\r\nHost: 127.0.0.1\r\n"
              b"Connection: close\r\n\r\n")
    # a Content-Length that is no number: libmicrohttpd says so in its own
    # words, quotes included
    raw(port, b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1\"x\r\n\r\n")
    body = json.dumps({"action": "exclude", "tactic": "split", "reason": "r\"\\",
                       "author": 'a"u\\thor', "model": 'M"od\\el "x"'}).encode()
    st, resp = http(port, "POST", "/v1/pins", body, token)
    check(st in (200, 201), "POST /v1/pins with quotes and backslashes: %d %s" % (st, resp[:200]))
    pid = json.loads(resp)["pin"]["id"] if st in (200, 201) else 0
    st, _ = http(port, "DELETE", "/v1/pins/%d" % pid, None, token)
    check(st == 200, "DELETE /v1/pins/%d: %d" % (pid, st))
    if have_pq:
        wait_for(logf, "event=fleet_unreachable ")
    wait_for(logf, "event=default_grid_queued ")
    # the log file moved away and a directory in its place: the reopen fails
    os.rename(logf, logf + ".old")
    os.mkdir(logf)
    proc.send_signal(signal.SIGHUP)
    wait_for(logf + ".old", "event=reopen_log_failed ")
    proc.terminate()
    proc.wait(timeout=30)


def wait_for(path, text, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with open(path, "rb") as f:
                if text.encode() in f.read():
                    return
        except OSError:
            pass
        time.sleep(0.05)
    check(False, "%r in the log within %d s" % (text, timeout))


def raw(port, data):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(data)
        while s.recv(4096):
            pass
    except OSError:
        pass
    finally:
        s.close()


def http(port, method, path, body, token):
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    h = {"Authorization": "Bearer " + token}
    if body is not None:
        h["Content-Type"] = "application/json"
    try:
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def read_lines(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("latin-1").splitlines(True)
    except OSError:
        return []


def parse_all(lines, what):
    """Every line must be a log line (tests/loglib.py); its events."""
    events, bad = loglib.parse_lines(lines)
    check(not bad and events, "%s: %d lines, each one event of parsable fields%s" % (
        what, len(events), (": not: %r" % bad[:3]) if bad else ""))
    return events


def want_field(events, event, key, value, where=None):
    # paths and names travel as bytes: compare in latin-1 like the lines
    v = value.encode("utf-8").decode("latin-1") if isinstance(value, str) else value
    got = [e.get(key) for e in events if e.get("event") == event and (where is None or where(e))]
    check(v.rstrip(" \n\t\r") in got, "%s %s= gives back %r (got %r)" % (event, key, value, got[:3]))


def want_in(events, event, key, part):
    got = [e.get(key) or "" for e in events if e.get("event") == event]
    check(any(part in g for g in got), "%s %s= holds %r (got %r)" % (event, key, part, got[:3]))


if __name__ == "__main__":
    sys.exit(main())
