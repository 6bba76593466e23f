#!/usr/bin/env python3
"""it_bench_ab_env.py -- bench/ab_env.py, the A/B of an environment switch
by the tuner's protocol: the run order, the table's per-run cells, medians
and ratios, a run refused as inaccurate shown as such (not dropped), pad
twins' copies left out; then real runs on the CPU device through the
attune CLI, with `-` leaving the variable unset."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
import ab_env  # noqa: E402

from checklib import check, summary  # noqa: E402  (tests/checklib.py)


def row(run, value, tactic, status="ok", t=None, err=1e-3, note="", shape="S"):
    return {"run": run, "value": value, "shape": shape, "tactic": tactic, "status": status, "time_us": t,
            "rel_err": err, "note": note}


def main():
    check(ab_env.run_order(["0", "1"], 3) == ["0", "1", "1", "0", "0", "1"], "ABBA order over 3 pairs")
    check(ab_env.run_order(["-", "n", "z"], 2) == ["-", "n", "z", "z", "n", "-"], "three values: forward, back")
    rows = [
        row(0, "0", "k/fast", t=100.0), row(1, "1", "k/fast", t=90.0), row(2, "1", "k/fast", t=92.0),
        row(3, "0", "k/fast", t=104.0),
        row(0, "0", "k/acc", t=50.0, err=0.02), row(1, "1", "k/acc", status="inaccurate", t=45.0, err=0.15),
        row(2, "1", "k/acc", status="inaccurate", t=44.0, err=0.16), row(3, "0", "k/acc", t=52.0, err=0.03),
        row(0, "0", "k/pad=8", t=100.0, note="pad=8 changes no length: the row of k/fast, not timed again"),
        row(1, "1", "k/pad=8", t=90.0, note="pad=8 changes no length: the row of k/fast, not timed again"),
        row(0, "0", "other", t=1.0), row(1, "1", "other", t=1.0),
    ]
    lines = ab_env.table(rows, "SW", ["0", "1"], "k/")
    body = {l.split("|")[2].strip(): [c.strip() for c in l.split("|")[1:-1]] for l in lines[2:]}
    check(set(body) == {"`k/fast`", "`k/acc`"}, "filter and twins: the two k/ rows (%s)" % sorted(body))
    f = body.get("`k/fast`", [""] * 7)
    check(f[2] == "100.0 104.0" and f[3] == "90.0 92.0", "times per side in run order (%s | %s)" % (f[2], f[3]))
    check(f[4] == "%.3f" % (91.0 / 102.0), "B / A of the medians (%s)" % f[4])
    a = body.get("`k/acc`", [""] * 7)
    check(a[3] == "**inaccurate** **inaccurate**" and a[4] == "",
          "a refused side shows its statuses, no ratio (%s)" % a[3:5])
    check(a[6] == "1.55e-01" and a[5] == "2.50e-02", "errors: the median of each side (%s, %s)" % (a[5], a[6]))
    # three values, a tactic right in some runs only: each run's cell, the
    # median of the ok runs, each ratio against the first value
    rows = [row(0, "-", "c/k8", t=10.0), row(1, "n", "c/k8", status="inaccurate", t=9.0, err=12.8),
            row(2, "z", "c/k8", t=11.0), row(3, "z", "c/k8", t=12.0), row(4, "n", "c/k8", t=20.0),
            row(5, "-", "c/k8", status="inaccurate", t=9.0, err=9.7)]
    lines = ab_env.table(rows, "F", ["-", "n", "z"])
    c = [x.strip() for x in lines[2].split("|")[1:-1]]
    check(len(c) == 2 + 3 + 2 + 3 and lines[0].count("|") == len(c) + 1 and lines[1].count("|") == len(c) + 1,
          "three values: 3 time, 2 ratio, 3 error columns (%d)" % len(c))
    check(c[2] == "10.0 **inaccurate**" and c[3] == "**inaccurate** 20.0" and c[4] == "11.0 12.0",
          "mixed runs in run order (%s | %s | %s)" % tuple(c[2:5]))
    check(c[5] == "2.000" and c[6] == "1.150", "ratios of the ok runs' medians (%s, %s)" % (c[5], c[6]))

    attune = os.environ.get("ATTUNE_BIN")
    if not attune or not os.access(attune, os.X_OK):
        print("FAIL no ATTUNE_BIN")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        # a wrapper that logs what it was given of the variable, then runs attune
        seen = os.path.join(tmp, "seen")
        wrap = os.path.join(tmp, "attune-wrap")
        with open(wrap, "w") as w:
            w.write('#!/bin/sh\n[ "$1" = tune ] && echo "${ATTUNE_AB_ENV_TEST-unset}" >> "%s"\nexec "%s" "$@"\n'
                    % (seen, attune))
        os.chmod(wrap, 0o755)
        os.environ["ATTUNE_AB_ENV_TEST"] = "inherited"  # '-' must take it away
        p = subprocess.run([sys.executable, os.path.join(HERE, "..", "bench", "ab_env.py"), "--attune", wrap,
                            "--env", "ATTUNE_AB_ENV_TEST=-,1", "--reps", "1", "--device", "cpu", "--shape",
                            "b1.hq2.hkv2.sq30.skv40.d16.f32.nc", "--filter", "fused", "--out", tmp],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
        del os.environ["ATTUNE_AB_ENV_TEST"]
        out = p.stdout.splitlines()
        check(p.returncode == 0 and len(out) >= 3 and out[0].startswith("| shape | tactic | ATTUNE_AB_ENV_TEST=-"),
              "a CPU run prints the table (rc %d, %r)" % (p.returncode, p.stderr[-300:]))
        ok_rows = [l for l in out[2:] if "`fused" in l and "**" not in l]
        check(len(ok_rows) >= 1 and all(float(l.split("|")[5]) > 0 for l in ok_rows),
              "fused rows timed on both sides with a ratio (%d rows)" % len(ok_rows))
        with open(seen) as f:
            got = f.read().split()
        check(got == ["unset", "1"], "'-' leaves the variable unset, then 1 (%s)" % got)
        check(os.path.exists(os.path.join(tmp, "ab_env.jsonl")) and not any(
            n.endswith(".db") for n in os.listdir(tmp)), "raw rows kept, databases removed")
        # --only passed on to `attune tune --only`: only those tactics
        # tuned, and (a part of the listing) no winner marked
        p = subprocess.run([sys.executable, os.path.join(HERE, "..", "bench", "ab_env.py"), "--attune", attune,
                            "--env", "ATTUNE_AB_ENV_TEST=0,1", "--reps", "1", "--device", "cpu", "--shape",
                            "b1.hq2.hkv2.sq30.skv40.d16.f32.nc", "--only", "split,pad=8", "--out", tmp],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
        with open(os.path.join(tmp, "ab_env.jsonl")) as f:
            tac = {json.loads(l)["tactic"] for l in f}
        check(p.returncode == 0 and tac and all("split" in x or "pad=8" in x for x in tac)
              and any(x.startswith("fused") for x in tac), "--only split,pad=8: those tactics alone (%s)" % sorted(tac))
        db = os.path.join(tmp, "only.db")
        key = "b1.hq2.hkv2.sq30.skv40.d16.f32.nc"
        subprocess.run([attune, "tune", "--db", db, "--device", "cpu", "--shape", key, "--only", "split", "--quiet"],
                       check=True, timeout=120)
        w = subprocess.run([attune, "winners", "--db", db, "--device", "cpu"], stdout=subprocess.PIPE, text=True,
                           timeout=60).stdout
        check("(none)" in w and "0 with a winner" in w, "tune --only marks no winner (%r)" % w[-200:])
        for bad in ("", ",split", "split,", "a,,b"):
            p = subprocess.run([attune, "tune", "--db", db, "--device", "cpu", "--shape", key, "--only", bad],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
            check(p.returncode == 2 and "--only" in p.stderr, "tune --only %r refused (%d)" % (bad, p.returncode))
        for bad in ("X=1,1", "X=1", "=1,2"):
            p = subprocess.run([sys.executable, os.path.join(HERE, "..", "bench", "ab_env.py"), "--attune", attune,
                                "--env", bad, "--shape", "b1.hq2.hkv2.sq30.skv40.d16.f32.nc"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
            check(p.returncode == 2 and "two or more different values" in p.stderr,
                  "--env %s refused (%d)" % (bad, p.returncode))
    return summary()


if __name__ == "__main__":
    sys.exit(main())
