"""rel.py -- what the reliability tests share: a daemon under test, raw
HTTP, the C load generator, and figures.

Environment (set by ctest and the Makefile): ATTUNED_BIN, ATTUNE_BIN,
LOOKUP_LOAD (the lookup_load binary). A missing binary is a skip (77)."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77
SHAPE_ARGS = "b=1&hq=4&hkv=1&sq=16&skv=64&d=32&dtype=f32&causal=0"
SHAPE_JSON = {"b": 1, "hq": 4, "hkv": 1, "sq": 16, "skv": 64, "d": 32, "dtype": "f32",
              "causal": False}


def need(*names):
    """Absolute paths of the binaries named by these environment variables
    (a relative one, such as make's build/attuned, is taken from the current
    directory: the daemons run from temporary directories); exit 77 (skip)
    when one is missing."""
    out = []
    for n in names:
        p = os.environ.get(n)
        if not p or not os.path.exists(p):
            print("skip: %s not set or missing" % n)
            sys.exit(SKIP)
        out.append(os.path.abspath(p))
    return out


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Failures:
    def __init__(self):
        self.items = []

    def check(self, cond, what):
        print(("ok   " if cond else "FAIL ") + what, flush=True)
        if not cond:
            self.items.append(what)
        return cond

    def exception(self, e):
        """An exception a test did not expect: its traceback, then a failure."""
        import traceback
        traceback.print_exc()
        self.items.append("exception: %s" % e)

    def exit(self):
        if self.items:
            print("%d FAILED: %s" % (len(self.items), "; ".join(self.items)))
            return 1
        print("all passed")
        return 0


class Daemon:
    def __init__(self, binary, work=None, args=(), db=None):
        self.binary = binary
        self.work = work or tempfile.mkdtemp(prefix="attune-rel-")
        self.own_work = work is None
        self.db = db or os.path.join(self.work, "var", "attune.db")
        self.args = list(args)
        self.port = free_port()
        self.proc = None
        self.logpath = os.path.join(self.work, "attuned.log")

    def start(self, timeout=20):
        self.logf = open(self.logpath, "ab")
        self.proc = subprocess.Popen(
            [self.binary, "--db", self.db, "--port", str(self.port), "--no-default-grid",
             "--tune-budget-ms", "5"] + self.args + os.environ.get("ATTUNED_EXTRA", "").split(),
            cwd=self.work, stdout=self.logf, stderr=self.logf)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("attuned exited with %d at start" % self.proc.returncode)
            try:
                if self.request("GET", "/v1/health", timeout=2)[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("attuned did not answer within %d s" % timeout)

    @property
    def token(self):
        with open(os.path.join(os.path.dirname(self.db), "token")) as f:
            return f.read().strip()

    def request(self, method, path, body=None, headers=None, timeout=30):
        h = {"Host": "127.0.0.1:%d" % self.port}
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body).encode()
        if body is not None:  # urllib would say x-www-form-urlencoded
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), data=body,
                                     method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                raw = r.read()
                st = r.status
        except urllib.error.HTTPError as e:
            raw = e.read()
            st = e.code
        try:
            return st, json.loads(raw.decode())
        except ValueError:
            return st, raw

    def authed(self, method, path, body=None, timeout=30):
        return self.request(method, path, body, {"Authorization": "Bearer " + self.token},
                            timeout=timeout)

    def raw(self, data, timeout=10, src=None):
        """Send raw bytes; (status, headers text, body bytes); status 0 when
        the connection closed without an answer."""
        s = socket.socket()
        s.settimeout(timeout)
        if src:
            s.bind((src, 0))
        s.connect(("127.0.0.1", self.port))
        chunks = []
        try:
            s.sendall(data)
            while True:
                try:
                    b = s.recv(65536)
                except (ConnectionResetError, socket.timeout):
                    break
                if not b:
                    break
                chunks.append(b)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            s.close()
        resp = b"".join(chunks)
        head, _, body = resp.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split()[1])
        except (IndexError, ValueError):
            status = 0
        return status, "\n".join(lines[1:]), body

    def wait_job(self, job, states=("done", "failed", "canceled"), timeout=300):
        deadline = time.time() + timeout
        while time.time() < deadline:
            st, j = self.request("GET", "/v1/jobs/%d" % job)
            if st == 200 and j["state"] in states:
                return j
            time.sleep(0.1)
        raise RuntimeError("job %d not in %s after %d s" % (job, states, timeout))

    def rss_kb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self, sig=signal.SIGTERM):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode if self.proc is not None else None
        if getattr(self, "logf", None):
            self.logf.close()
        return rc

    def log_tail(self, n=40):
        try:
            with open(self.logpath, "rb") as f:
                return b"\n".join(f.read().splitlines()[-n:]).decode("utf-8", "replace")
        except OSError:
            return ""

    def cleanup(self):
        self.stop(signal.SIGKILL)
        if self.own_work:
            shutil.rmtree(self.work, ignore_errors=True)


def lookup_load(port, seconds, conns=1, rate=0, fresh=False, path=None, src=None):
    """Run the C load generator; its JSON figures."""
    (binary,) = need("LOOKUP_LOAD")
    cmd = [binary, "-p", str(port), "-t", str(seconds), "-c", str(conns),
           "-u", path or "/v1/tactic?device=cpu&" + SHAPE_ARGS]
    if rate:
        cmd += ["-r", str(rate)]
    if fresh:
        cmd += ["-n"]
    if src:
        cmd += ["-s", src]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)


def load_result(p):
    out, _ = p.communicate()
    return json.loads(out.strip().splitlines()[-1])


def tune_once(d, shapes=None, timeout=300):
    """Tune shapes (default: the one test shape) through the daemon and
    wait for the job."""
    st, r = d.authed("POST", "/v1/tune", {"device": "cpu", "shapes": shapes or [SHAPE_JSON]})
    if st != 202:
        raise RuntimeError("tune: %s %s" % (st, r))
    return d.wait_job(r["job"], timeout=timeout)
