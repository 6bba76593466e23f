#!/usr/bin/env python3
"""it_dtypes.py -- FP8 (e4m3) through attuned over real HTTP (issue 30).

Two devices known from imported tables: an H200-class GPU (compute
capability 9.0) with a bf16 tune (fused 20 us, rel_err 3e-3) and a faster
e4m3 one (fused 12 us, rel_err 0.02 against its stored inputs, 0.045
against the bf16 source), and an Orin (8.7, no FP8 tensor cores) with the
bf16 tune only. Checks:
- GET /v1/tactic with dtype=bf16,e4m3 (and any) and max_err=X: e4m3 at
  0.05, bf16 at 0.04 and at 0.03 (the e4m3 rows' own 0.02 does not count),
  404 with every dtype's reason at 0.001; the refused dtypes' verdicts;
- an e4m3 lookup, /v1/results and /v1/winners carry src_rel_err;
- the Orin: an e4m3 lookup is a 422 naming compute capability 8.7; in a
  set question e4m3 is "unsupported" and bf16 answers;
- bad questions are 400s (no max_err, unknown dtype in a list, shape= with
  a set, max_rel_err with a set);
- attune query --dtype any --max-err X and the Python client's
  choose_dtype say the same, and flip the same way;
- a real CPU tune of an e4m3 shape (the CPU emulates FP8): every checked
  row has a source error above its own error, in /v1/results and in
  `attune results` (src_err column).
Environment: ATTUNED_BIN, ATTUNE_BIN (else skip: 77), ATTUNE_SOURCE_DIR.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemonlib  # noqa: E402
import fleetlib  # noqa: E402

SKIP = 77
failures = []
T0 = 1767000000
DIMS = dict(b=1, hq=8, hkv=1, sq=64, skv=512, d=64)


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
    return cond


def shape(dtype):
    return dict(DIMS, dtype=dtype, causal=False)


def tune_rows(stk, dtype, fast_us, rel, src=None):
    """A whole tune of DIMS in dtype: fused (fast) and split (3x)."""
    rows = []
    for tactic, us in (("fused/pad=1", fast_us), ("split/acc=f32/pad=1", 3 * fast_us)):
        r = fleetlib.row(shape(dtype), tactic, stk, us, T0, rel_err=rel)
        if dtype == "e4m3":
            r["src_rel_err"] = src
        rows.append(r)
    return rows


def ask(d, device, dtype, max_err=None, **extra):
    p = dict(DIMS, device=device, dtype=dtype, causal="false", **extra)
    if max_err is not None:
        p["max_err"] = repr(max_err)
    return d.get("/v1/tactic?" + urllib.parse.urlencode(p))


def verdicts(a):
    return {c["dtype"]: c["verdict"] for c in (a or {}).get("candidates", [])}


def main():
    attuned, attune = os.environ.get("ATTUNED_BIN"), os.environ.get("ATTUNE_BIN")
    if not attuned or not attune:
        print("skip: ATTUNED_BIN and ATTUNE_BIN are needed")
        return SKIP
    src_dir = os.environ.get("ATTUNE_SOURCE_DIR",
                             os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, os.path.join(src_dir, "client", "python"))
    import attune_client  # noqa: E402

    work = tempfile.mkdtemp(prefix="it_dtypes.")
    d = None
    try:
        db = os.path.join(work, "attune.db")
        stk = fleetlib.stack("570.86.10")
        h = fleetlib.table("GPU-h200x", tune_rows(stk, "bf16", 20.0, 3e-3) +
                           tune_rows(stk, "e4m3", 12.0, 0.02, 0.045), [stk], name="Test H200")
        fleetlib.import_table(attune, db, h, work, "h.json")
        o = fleetlib.table("GPU-orinx", tune_rows(stk, "bf16", 90.0, 3e-3), [stk],
                           name="Test Orin")
        o["device"]["cc"] = "8.7"
        fleetlib.import_table(attune, db, o, work, "o.json")
        d = daemonlib.Daemon(attuned, work, db=db, budget_ms="5")
        url = "http://127.0.0.1:%d" % d.port

        # ---- the cross-dtype question flips with max_err
        st, a = ask(d, "GPU-h200x", "bf16,e4m3", 0.05)
        check(st == 200 and a.get("dtype") == "e4m3" and a.get("tactic") == "fused/pad=1"
              and a.get("time_us") == 12.0 and a.get("err") == 0.045
              and a.get("src_rel_err") == 0.045 and a.get("rel_err") == 0.02
              and a.get("shape", "").endswith(".e4m3.nc") and a.get("source") == "measured",
              "max_err 0.05: e4m3 at 12 us, error 0.045 against bf16 (%s)"
              % {k: a.get(k) for k in ("dtype", "tactic", "time_us", "err", "shape")})
        check(verdicts(a) == {"bf16": "slower", "e4m3": "chosen"}, "bf16 is slower (%s)"
              % verdicts(a))
        for me in (0.04, 0.03):
            st, a = ask(d, "GPU-h200x", "bf16,e4m3", me)
            check(st == 200 and a.get("dtype") == "bf16" and a.get("time_us") == 20.0
                  and a.get("err") == 3e-3 and verdicts(a).get("e4m3") == "over",
                  "max_err %g: bf16 answers, e4m3 over (its source error 0.045, not its own "
                  "0.02, counts) (%s)" % (me, a.get("dtype")))
        st, a = ask(d, "GPU-h200x", "any", 0.05)
        check(st == 200 and a.get("dtype") == "e4m3" and a.get("dtypes") == "f16,bf16,f32,e4m3"
              and verdicts(a) == {"f16": "not_measured", "bf16": "slower", "f32": "not_measured",
                                  "e4m3": "chosen"}, "dtype=any: the same, f16/f32 not measured")
        st, a = ask(d, "GPU-h200x", "bf16,e4m3", 0.001)
        check(st == 404 and a.get("error", "").startswith("no dtype of bf16,e4m3 within "
                                                          "max_err=0.001")
              and verdicts(a) == {"bf16": "over", "e4m3": "over"}
              and all(c["tactic"] is None for c in a["candidates"]),
              "max_err 0.001: 404, both over (%s)" % a.get("error"))
        st, a = ask(d, "GPU-h200x", "e4m3", 0.05)
        check(st == 200 and a.get("dtype") == "e4m3", "max_err with one dtype: the same question")

        # ---- e4m3 answers carry the source error
        st, a = ask(d, "GPU-h200x", "e4m3")
        check(st == 200 and a.get("source") == "measured" and a.get("src_rel_err") == 0.045,
              "an e4m3 lookup carries src_rel_err (%s)" % a.get("src_rel_err"))
        st, a = ask(d, "GPU-h200x", "bf16")
        check(st == 200 and "src_rel_err" not in a, "a bf16 lookup has none")
        st, r = d.get("/v1/results?" + urllib.parse.urlencode(
            dict(DIMS, device="GPU-h200x", dtype="e4m3", causal="false")))
        check(st == 200 and [m.get("src_rel_err") for m in r["measurements"]] == [0.045, 0.045],
              "/v1/results: each e4m3 row's src_rel_err")
        st, w = d.get("/v1/winners?device=GPU-h200x")
        wins = {x["dtype"]: x["winner"] for x in w.get("winners", [])}
        check(st == 200 and wins.get("e4m3", {}).get("src_rel_err") == 0.045
              and "src_rel_err" not in wins.get("bf16", {}) and w["max_rel_err"].get("e4m3"),
              "/v1/winners: the e4m3 winner's src_rel_err, the e4m3 bound")

        # ---- no FP8 tensor cores
        st, a = ask(d, "GPU-orinx", "e4m3")
        check(st == 422 and "compute capability 8.7" in a.get("error", "")
              and "no FP8 tensor cores" in a.get("error", ""),
              "e4m3 on the Orin: 422 (%s)" % a.get("error"))
        st, a = ask(d, "GPU-orinx", "bf16,e4m3", 0.05)
        check(st == 200 and a.get("dtype") == "bf16" and verdicts(a).get("e4m3") == "unsupported",
              "a set question on the Orin: bf16, e4m3 unsupported")

        # ---- bad questions
        for what, (dt, me, extra) in {
                "a set without max_err": ("any", None, {}),
                "an unknown dtype in a list": ("bf16,fp8", 0.05, {}),
                "max_err out of range": ("any", 1.5, {}),
                "max_rel_err with a set": ("any", 0.05, {"max_rel_err": "0.1"})}.items():
            st, a = ask(d, "GPU-h200x", dt, me, **extra)
            check(st == 400 and "error" in a, "%s: 400 (%s)" % (what, (a or {}).get("error")))
        st, a = d.get("/v1/tactic?device=GPU-h200x&shape=b1.hq8.hkv1.sq64.skv512.d64.bf16.nc"
                      "&max_err=0.1")
        check(st == 400, "shape= with max_err: 400 (%s)" % (a or {}).get("error"))
        st, a = ask(d, "GPU-nope", "any", 0.05)
        check(st == 404 and "unknown device" in a.get("error", ""), "unknown device: 404")

        # ---- the CLI and the Python client
        base = [attune, "query", "--url", url, "--device", "GPU-h200x"] + sum(
            (["--%s" % k, str(v)] for k, v in DIMS.items()), []) + ["--dtype", "any"]
        r = subprocess.run(base + ["--max-err", "0.05"], capture_output=True, text=True)
        check(r.returncode == 0 and "dtype          e4m3" in r.stdout
              and "fused/pad=1" in r.stdout and "not_measured" in r.stdout,
              "attune query --dtype any --max-err 0.05: e4m3 (%s)" % r.stdout.splitlines()[:2])
        r = subprocess.run(base + ["--max-err", "0.04", "--json"], capture_output=True, text=True)
        cj = json.loads(r.stdout) if r.returncode == 0 else {}
        check(cj.get("dtype") == "bf16", "... --max-err 0.04 --json: bf16")
        r = subprocess.run(base + ["--max-err", "0.001"], capture_output=True, text=True)
        check(r.returncode == 3 and "no dtype of" in r.stderr and "over" in r.stdout,
              "... --max-err 0.001: exit 3, each dtype's reason (%d)" % r.returncode)
        r = subprocess.run(base, capture_output=True, text=True)
        check(r.returncode == 2 and "--max-err" in r.stderr, "--dtype any without --max-err: 2")
        c = attune_client.Client(url)
        ch = c.choose_dtype(device="GPU-h200x", dtypes=["bf16", "e4m3"], max_err=0.05, **DIMS)
        check(ch.dtype == "e4m3" and ch.answer.tactic == "fused/pad=1"
              and ch.answer.src_rel_err == 0.045 and ch.err == 0.045
              and len(ch.candidates) == 2, "choose_dtype: e4m3 (%r)" % ch.dtype)
        ch = c.choose_dtype(device="GPU-h200x", dtypes="bf16,e4m3", max_err=0.04, **DIMS)
        check(ch.dtype == "bf16" and ch.answer.shape.endswith(".bf16.nc"), "... 0.04: bf16")
        ch = c.choose_dtype(device="GPU-h200x", dtypes="any", max_err=0.001, **DIMS)
        check(ch.dtype is None and ch.code == attune_client.REJECTED and ch.answer.fallback
              and "no dtype" in ch.error and len(ch.candidates) == 4,
              "... 0.001: none, the default answer, the reasons")
        ch = attune_client.Client("http://127.0.0.1:1").choose_dtype(
            device="cpu", dtypes="any", max_err=0.05, **DIMS)
        check(ch.dtype is None and ch.code == attune_client.FALLBACK
              and ch.answer.tactic == attune_client.DEFAULT_TACTIC, "unreachable: fallback")
        a = c.lookup(device="GPU-h200x", dtype="e4m3", **DIMS)
        check(a.source == "measured" and a.src_rel_err == 0.045, "lookup(dtype=e4m3)")

        # ---- a real CPU tune of an e4m3 shape (emulated FP8)
        e8 = dict(b=1, hq=4, hkv=2, sq=24, skv=70, d=32, dtype="e4m3", causal=True)
        st, j = d.post("/v1/tune", {"device": "cpu", "shapes": [e8]})
        check(st == 202, "POST /v1/tune of an e4m3 shape on the CPU: 202 (%s)" % j)
        deadline = time.time() + 240
        while st == 202 and time.time() < deadline:
            st2, job = d.get("/v1/jobs/%d" % j["job"])
            if job.get("state") in ("done", "failed", "canceled"):
                break
            time.sleep(0.2)
        check(job.get("state") == "done", "the tune is done (%s)" % job.get("state"))
        key = daemonlib.key_of(**e8)
        st, r = d.get("/v1/results?device=cpu&shape=" + key)
        ms = [m for m in r.get("measurements", []) if m["status"] in ("ok", "inaccurate")]
        check(st == 200 and len(ms) >= 8 and all(
            math.isfinite(m["src_rel_err"]) and m["src_rel_err"] > m["rel_err"] for m in ms),
            "every checked row: src_rel_err above rel_err (%s)"
            % [(round(m["rel_err"], 4), round(m["src_rel_err"], 4)) for m in ms[:3]])
        r = subprocess.run([attune, "results", "--db", db, "--device", "cpu", "--shape", key,
                            "--csv"], capture_output=True, text=True)
        head = r.stdout.splitlines()[0].split(",") if r.stdout else []
        check(r.returncode == 0 and "src_err" in head
              and head.index("src_err") == head.index("rel_err") + 1,
              "attune results --csv: src_err after rel_err (%s)" % head)
        r = subprocess.run([attune, "results", "--db", db, "--device", "cpu", "--shape",
                            daemonlib.key_of(1, 4, 2, 24, 70, 32, "f32", True), "--csv"],
                           capture_output=True, text=True)
        check("src_err" not in r.stdout, "... not for other dtypes")
    finally:
        if d is not None:
            d.stop()
        if failures and d is not None:
            print(d.log_text()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
