"""fleetlib.py -- helpers of the fleet integration tests (not a test itself).

PgServer: a private PostgreSQL for one test: initdb into a temp dir, a Unix
socket in that dir only (listen_addresses=''), a superuser `attune` with a
random password that clients read from a libpq passfile (never from a URL
or the command line), stopped and removed at the end. PostgreSQL refuses to
run as root; under root the server runs as the `postgres` system user.

Daemon: an attuned on a free loopback port over a given database.
"""
import glob
import http.client
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

failures = []


_T0 = time.time()


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + "[%5.1fs] " % (time.time() - _T0) + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def result():
    if failures:
        print("%d check(s) failed:" % len(failures))
        for f in failures:
            print("  " + f)
        return 1
    print("all checks passed")
    return 0


def pg_bindir():
    """Directory of initdb/pg_ctl/postgres, or None when the server is absent."""
    cands = []
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        if out.returncode == 0:
            cands.append(out.stdout.strip())
    except OSError:
        pass
    cands += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for c in cands:
        if all(os.access(os.path.join(c, b), os.X_OK) for b in ("initdb", "pg_ctl", "postgres")):
            return c
    return None


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class PgServer:
    def __init__(self, bindir, durable=False, extra_opts=""):
        self.bindir = bindir
        self.durable = durable
        self.extra_opts = extra_opts
        self.dir = tempfile.mkdtemp(prefix="attune-pg-")
        os.chmod(self.dir, 0o755)
        self.data = os.path.join(self.dir, "data")
        self.sock = os.path.join(self.dir, "sock")
        self.logfile = os.path.join(self.dir, "server.log")
        self.port = 5432  # the socket is private to self.sock: no clash
        self.password = secrets.token_hex(16)
        self.passfile = os.path.join(self.dir, "pgpass")
        with open(self.passfile, "w") as f:
            f.write("*:*:*:attune:%s\n" % self.password)
        os.chmod(self.passfile, 0o600)
        self.url = "postgresql:///attune?host=%s&port=%d&user=attune" % (self.sock, self.port)
        self.as_user = None
        if os.geteuid() == 0:
            self.as_user = pwd.getpwnam("postgres")
        os.mkdir(self.sock)
        if self.as_user:
            # the server's user creates data/ and its socket here
            for p in (self.dir, self.sock):
                os.chown(p, self.as_user.pw_uid, self.as_user.pw_gid)
        pw = os.path.join(self.dir, "pw")
        with open(pw, "w") as f:
            f.write(self.password + "\n")
        if self.as_user:
            os.chown(pw, self.as_user.pw_uid, self.as_user.pw_gid)
            open(self.logfile, "a").close()
            os.chown(self.logfile, self.as_user.pw_uid, self.as_user.pw_gid)
        self._run(["initdb", "-D", self.data, "-U", "attune", "--pwfile", pw,
                   "--auth-local=scram-sha-256", "--auth-host=scram-sha-256",
                   "-E", "UTF8", "--no-sync"])
        os.unlink(pw)
        self.start()
        self._watch()
        self._run(["psql", "-X", "-q", "-d", "postgres", "-c", "CREATE DATABASE attune"],
                  client=True)

    def _watch(self):
        """A watchdog in its own session: when this process dies without
        close() (killed by a ctest timeout, say), it stops the server and
        removes the directory, so no test leaves a server behind."""
        src = ("import os, sys, time, shutil, subprocess\n"
               "ppid, pg_ctl, data, d, uid, gid = sys.argv[1:7]\n"
               "while True:\n"
               "    try:\n"
               "        os.kill(int(ppid), 0)\n"
               "    except ProcessLookupError:\n"
               "        break\n"
               "    if not os.path.isdir(data):\n"
               "        sys.exit(0)\n"
               "    time.sleep(1)\n"
               "def drop():\n"
               "    if int(uid) >= 0:\n"
               "        os.setgid(int(gid)); os.setuid(int(uid))\n"
               "subprocess.run([pg_ctl, '-D', data, '-m', 'immediate', 'stop'],\n"
               "               preexec_fn=drop, stdout=subprocess.DEVNULL,\n"
               "               stderr=subprocess.DEVNULL)\n"
               "shutil.rmtree(d, ignore_errors=True)\n")
        uid = self.as_user.pw_uid if self.as_user else -1
        gid = self.as_user.pw_gid if self.as_user else -1
        self.watcher = subprocess.Popen(
            [sys.executable, "-c", src, str(os.getpid()), os.path.join(self.bindir, "pg_ctl"),
             self.data, self.dir, str(uid), str(gid)],
            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def env(self):
        e = dict(os.environ)
        e["PGPASSFILE"] = self.passfile
        return e

    def _preexec(self):
        if self.as_user:
            os.setgid(self.as_user.pw_gid)
            os.setuid(self.as_user.pw_uid)

    def _run(self, argv, client=False, check=True):
        exe = os.path.join(self.bindir, argv[0])
        if client:
            argv = [exe] + argv[1:] + ["-h", self.sock, "-p", str(self.port), "-U", "attune"]
            return subprocess.run(argv, env=self.env(), check=check, capture_output=True,
                                  text=True)
        r = subprocess.run([exe] + argv[1:], preexec_fn=self._preexec, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, cwd="/")
        if check and r.returncode != 0:
            raise RuntimeError("%s failed (%d): %s" % (argv[0], r.returncode, r.stderr.strip()))
        return r

    def start(self):
        # fsync off: a test server never outlives its machine; commits stay
        # synchronous, so a killed server keeps what it acknowledged
        opts = "-c listen_addresses='' -k %s -p %d " % (self.sock, self.port)
        if not self.durable:
            opts += "-c fsync=off -c full_page_writes=off "
        opts += self.extra_opts
        self._run(["pg_ctl", "-D", self.data, "-l", self.logfile, "-w", "-t", "60",
                   "-o", opts, "start"])

    def stop(self, mode="fast"):
        self._run(["pg_ctl", "-D", self.data, "-m", mode, "-w", "stop"], check=False)

    def sql(self, query):
        """Run a query with psql; returns stdout lines (unaligned, tuples only)."""
        r = self._run(["psql", "-X", "-A", "-t", "-q", "-d", "attune", "-c", query],
                      client=True)
        return [l for l in r.stdout.splitlines() if l]

    def close(self):
        self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)
        w = getattr(self, "watcher", None)
        if w is not None:
            w.kill()
            w.wait()


def start_pg():
    """A fresh PgServer, or None (with the reason printed) when the server
    binaries are absent: scripts/deps.sh installs them, so only a machine
    that skipped deps.sh gets here."""
    b = pg_bindir()
    if b is None:
        print("skip: PostgreSQL server binaries (initdb, pg_ctl, postgres) not found; "
              "scripts/deps.sh installs them (Debian package postgresql)")
        return None
    return PgServer(b)


def start_pg_for(attune):
    """start_pg for a test of the `attune` binary at path attune: None
    (with the reason printed; the test skips, 77) also when that binary
    was built without libpq."""
    r = subprocess.run([attune, "fleet", "status", "--db", "/nonexistent/x.db", "--fleet",
                        "postgresql:///x"], capture_output=True, text=True)
    if "without libpq" in r.stderr:
        print("skip: attune was built without libpq (libpq-dev, installed by scripts/deps.sh)")
        return None
    return start_pg()


class Daemon:
    def __init__(self, binary, workdir, db, extra=(), env=None):
        self.binary = binary
        self.workdir = workdir
        self.db = db
        self.extra = list(extra)
        self.env = env
        self.port = free_port()
        self.proc = None
        self.logpath = os.path.join(workdir, "attuned.log")

    def start(self, wait=True):
        self.log = open(self.logpath, "ab")
        self.proc = subprocess.Popen(
            [self.binary, "--db", self.db, "--port", str(self.port), "--no-default-grid",
             "--threads", "2"] + self.extra,
            cwd=self.workdir, stdout=self.log, stderr=self.log, env=self.env)
        if not wait:
            return
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("attuned exited with %d at start" % self.proc.returncode)
            try:
                st, _ = self.get("/v1/health")
                if st == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("attuned did not answer within 20 s")

    def request(self, method, path, timeout=30):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(method, path, headers={"Accept": "application/json"})
            r = c.getresponse()
            raw = r.read().decode("utf-8", "replace")
            try:
                return r.status, json.loads(raw)
            except ValueError:
                return r.status, raw
        finally:
            c.close()

    def get(self, path):
        return self.request("GET", path)

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.log.close()

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()

    def logtext(self):
        with open(self.logpath, "rb") as f:
            return f.read().decode("utf-8", "replace")


# ---- synthetic fleet tables (docs/fleet.md format)

TACTICS = ["split/acc=f32/pad=1", "split/acc=f16/pad=1", "fused/pad=1/tile=64x64",
           "fused/pad=8/tile=64x64", "folded/acc=f32/pad=1", "folded/acc=f16/pad=1",
           "split_repeat/acc=f32/pad=1", "fused/pad=1/tile=128x64"]


def stack(driver, kernels="3f1c0d2a9b8e7f60"):
    s = {"driver": driver, "runtime": "12.6", "blas": "12.6.4.1", "attune": "0.1.0",
         "kernels": kernels}
    h = 0xcbf29ce484222325
    for k in ("driver", "runtime", "blas", "attune", "kernels"):
        for b in s[k].encode() + b"\0":
            h ^= b
            h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    s["id"] = "%016x" % h
    return s


def shape_of(i, sq=None):
    return {"b": 1, "hq": 8, "hkv": 1, "sq": sq if sq is not None else 16 + i, "skv": 512,
            "d": 64, "dtype": "f16", "causal": False}


def shape_key(s):
    return "b%d.hq%d.hkv%d.sq%d.skv%d.d%d.%s.%s" % (
        s["b"], s["hq"], s["hkv"], s["sq"], s["skv"], s["d"], s["dtype"],
        "c" if s["causal"] else "nc")


def row(shape, tactic, stk, time_us, taken_at, rel_err=1e-4, status="ok", host="node"):
    t = None if status in ("unsupported", "failed") else time_us
    return {"shape": shape, "shape_key": shape_key(shape), "tactic": tactic, "stack": stk["id"],
            "status": status, "time_us": t, "time_us_min": t, "time_us_max": t,
            "time_us_copies": None, "n": 10, "max_abs_err": rel_err, "rel_err": rel_err,
            "mode": "wall", "l2": "warm", "rows_checked": 64, "note": "", "host": host,
            "taken_at": taken_at}


def table(dev_id, rows, stacks, name="Test GPU", sm=100, mem=80000, host="node"):
    latest = max(stacks, key=lambda s: max([r["taken_at"] for r in rows
                                            if r["stack"] == s["id"]] or [0]))
    return {"format": "attune-fleet", "version": 1, "exported_at": 1767312000, "host": host,
            "device": {"id": dev_id, "name": name, "kind": "cuda", "cc": "9.0",
                       "sm_count": sm, "memory_mb": mem, "clock_mhz": 0, "mem_clock_mhz": 0,
                       "latest_stack": latest["id"]},
            "stacks": stacks, "measurements": rows}


def grid_rows(stk, nshapes, ntactics, time_fn, taken_at, first_shape=0):
    return [row(shape_of(first_shape + i), TACTICS[t], stk, time_fn(i, t), taken_at)
            for i in range(nshapes) for t in range(ntactics)]


def import_table(attune, db, tbl, workdir, name="t.json"):
    path = os.path.join(workdir, name)
    with open(path, "w") as f:
        json.dump(tbl, f)
    subprocess.run([attune, "import", "--db", db, path], check=True,
                   stdout=subprocess.DEVNULL)
