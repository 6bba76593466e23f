#!/usr/bin/env python3
"""it_python_binding.py -- the Python binding (client/python/attune) over
libattune.so on the CPU device, with numpy: no torch needed.

- attune.bucket_len is the documented bucketing (libattune.h);
- attune.run_numpy (attune_auto: lookup + plan cache + run) against a
  float64 reference on [b, h, s, d] and [b, s, h, d] layouts, MHA, GQA, MQA,
  causal (bottom-right), lengths inside a bucket, a decode step, f32 and
  f16, with no daemon listening (the default tactic);
- with attuned running (tune of one shape at a bucket ceiling): the
  ceiling plans the daemon's measured winner; other lengths of the bucket
  the bucket's best fused kernel (variants=fused,fused_splitkv) unless the
  winner is one; all run right;
- an e4m3 ceiling tuned by that daemon: attune_auto asks for it as e4m3
  and plans its measured winner; a run inside its bucket with
  Auto.set_descales is right;
- a table exported from that daemon's database, read in process
  (url "file:PATH"), answers the same, also when shipped to another device
  of the same model (asked by the device's name);
- bad input raises AttuneError with a reason, before any C call reads
  past an array (k, v or out shaped unlike q says);
- Auto.stats (libattune 1.4): a steady loop of known shapes plans nothing;
  at capacity 3 the LRU keeps a bucket's ceiling entry that every call
  asks first (a pinned split answer, its lengths below run the fused
  entry); with the daemon stopped an expired entry keeps its plan;
- an e4m3 Plan on the CPU (emulated FP8): inputs quantized with
  attune.lib.quantize_e4m3 (descale amax/448), descales given to
  Plan.set_descales as numbers, changed in place through plan.descales and
  given as the address of a numpy float32 array: every CPU e4m3 tactic
  within 2^-8 + 1e-5 of the float64 reference of the stored values times
  their descales (bf16 out), a doubled V descale doubling the output; the
  conversions agree with libattune's on every pattern;
- an e4m3 shape through Auto (attune_auto, the default tactic) with
  Auto.set_descales: numbers give the plan path's output bit for bit
  (within the same bound), auto.descales changed in place and a value
  changed at a numpy array's address are read by the next run, no
  descales run as 1 (far from the scaled answer).

Environment: ATTUNE_LIB (libattune.so.1), ATTUNED_BIN (the daemon part is
skipped without it), ATTUNE_SOURCE_DIR. numpy is Debian's python3-numpy
(scripts/deps.sh): when this interpreter lacks it and /usr/bin/python3 has
it, the test reruns itself there.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import numpy as np
except ImportError:
    if os.path.exists("/usr/bin/python3") and sys.executable != "/usr/bin/python3":
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("FAIL numpy missing: scripts/deps.sh installs python3-numpy")
    sys.exit(1)

sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.environ.get("ATTUNE_SOURCE_DIR", os.path.join(HERE, "..")),
                                "client", "python"))
import attune  # noqa: E402
import attune.lib  # noqa: E402
import daemonlib  # noqa: E402

from checklib import check, summary  # noqa: E402  (tests/checklib.py)


def reference(q, k, v, causal, layout):
    """float64 attention; arrays in layout, returned in [b, h, s, d]."""
    if layout == "bshd":
        q, k, v = (x.transpose(0, 2, 1, 3) for x in (q, k, v))
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[3])
    sq, skv = q.shape[2], k.shape[2]
    if causal:
        i, j = np.arange(sq)[:, None], np.arange(skv)[None, :]
        s = np.where(j <= i + (skv - sq), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def rel_l2(out, ref, layout):
    if layout == "bshd":
        out = out.transpose(0, 2, 1, 3)
    out = out.astype(np.float64)
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def make(rng, b, h, s, d, dtype, layout):
    shape = (b, h, s, d) if layout == "bhsd" else (b, s, h, d)
    return rng.standard_normal(shape).astype(dtype)


def case(rng, auto, b, hq, hkv, sq, skv, d, dtype, causal, layout):
    q = make(rng, b, hq, sq, d, dtype, layout)
    k = make(rng, b, hkv, skv, d, dtype, layout)
    v = make(rng, b, hkv, skv, d, dtype, layout)
    out = np.full_like(q, np.nan)
    if auto is None:
        attune.run_numpy(q, k, v, is_causal=causal, layout=layout, out=out)
    else:
        attune.lib.run_numpy_with(auto, q, k, v, causal, layout, out)
    err = rel_l2(out, reference(q, k, v, causal, layout), layout)
    tol = 1e-5 if dtype == np.float32 else 3e-3
    return err, tol


def bucketing():
    want = {1: 1, 5: 5, 8: 8, 9: 10, 10: 10, 11: 12, 16: 16, 17: 20, 33: 40, 57: 64,
            1000: 1024, 1025: 1280, 2049: 2560, 3000: 3072, 4096: 4096}
    got = {n: attune.bucket_len(n) for n in want}
    check(got == want, "bucket_len: four steps per octave (%s)" % got)


def default_runs():
    os.environ["ATTUNE_URL"] = "http://127.0.0.1:9"  # nothing listens: the default tactic
    rng = np.random.default_rng(7)
    cases = [(1, 4, 4, 50, 50, 64, np.float32, False, "bhsd"),
             (2, 8, 2, 37, 37, 32, np.float16, True, "bshd"),
             (1, 8, 1, 1, 45, 64, np.float32, False, "bhsd"),     # a decode step, MQA
             (1, 4, 2, 13, 100, 32, np.float32, True, "bshd"),    # inside buckets 14, 112
             (1, 4, 2, 12, 99, 32, np.float32, True, "bshd")]     # same buckets, other lengths
    for c in cases:
        err, tol = case(rng, None, *c)
        check(err < tol, "run_numpy b%d hq%d hkv%d sq%d skv%d d%d %s %s %s: rel err %.2e < %.0e"
              % (c[:6] + (np.dtype(c[6]).name, "causal" if c[7] else "nc", c[8], err, tol)))
    tactic, source, planned = attune.lib.auto_for("cpu").prepare((1, 4, 2, 13, 100, 32, 2, 1))
    check(source == "default" and tactic == "fused/pad=8"
          and planned == "b1.hq4.hkv2.sq14.skv112.d32.f32.c",
          "no daemon: the default tactic, planned at the bucket (%s %s %s)"
          % (tactic, source, planned))
    # a steady loop over shapes met before neither looks up nor plans
    auto = attune.lib.auto_for("cpu")
    before = auto.stats()
    for c in cases[3:] * 3:
        case(rng, None, *c)
    after = auto.stats()
    check(after["runs"] == before["runs"] + 6 and after["plans"] == before["plans"]
          and after["evictions"] == before["evictions"] and after["entries"] == before["entries"],
          "Auto.stats: 6 more runs of known shapes, no plan, no eviction (%s -> %s)"
          % (before, after))


def plan_views():
    """attune.lib.Plan on the CPU: told [b, s, h, d] strides (nothing to
    build: its kernels read strides), it runs them right."""
    rng = np.random.default_rng(11)
    dev = attune.lib.Device("cpu")
    b, hq, hkv, sq, skv, d = 1, 4, 2, 9, 21, 16
    plan = attune.lib.Plan(dev, (b, hq, hkv, sq, skv, d, 2, 1), "fused/pad=1")
    q, k, v = (make(rng, b, h, s, d, np.float32, "bshd") for h, s in ((hq, sq), (hkv, skv),
                                                                       (hkv, skv)))
    out = np.full_like(q, np.nan)
    view = lambda a: (a.ctypes.data, a.strides[0] // 4, a.strides[2] // 4,  # noqa: E731
                      a.strides[1] // 4)
    plan.set_views(view(q), view(k), view(v), view(out))
    plan.run(view(q), view(k), view(v), view(out))
    err = rel_l2(out, reference(q, k, v, True, "bshd"), "bshd")
    check(err < 1e-5, "Plan.set_views then run on [b, s, h, d] (cpu): rel err %.2e" % err)
    plan.close()
    dev.close()


def bf16_to_f32(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def e4m3_inputs(L):
    """A causal GQA e4m3 case: (dims, stored q8/k8/v8, their descales, the
    float64 reference of the stored values times the descales and of the
    stored values alone, the view function)."""
    rng = np.random.default_rng(13)
    b, hq, hkv, sq, skv, d = 1, 4, 2, 11, 37, 16
    dims = (b, hq, hkv, sq, skv, d, L.DTYPES["e4m3"], 1)
    raw = [rng.standard_normal((b, h, s, d)) * f for h, s, f in
           ((hq, sq, 3.0), (hkv, skv, 0.5), (hkv, skv, 7.0))]
    (q8, dq), (k8, dk), (v8, dv) = (L.quantize_e4m3(x) for x in raw)
    ref = reference(*(L.e4m3_to_float(c).astype(np.float64) * ds
                      for c, ds in ((q8, dq), (k8, dk), (v8, dv))), True, "bhsd")
    ref1 = reference(*(L.e4m3_to_float(c).astype(np.float64) for c in (q8, k8, v8)),
                     True, "bhsd")
    view = lambda a: (a.ctypes.data, a.strides[0] // a.itemsize,  # noqa: E731
                      a.strides[1] // a.itemsize, a.strides[2] // a.itemsize)
    return dims, (q8, k8, v8), (dq, dk, dv), ref, ref1, view


def e4m3_plan():
    """attune.lib.Plan.set_descales on the CPU's emulated FP8."""
    L = attune.lib
    codes = np.arange(256, dtype=np.uint8)
    vals = L.e4m3_to_float(codes)
    fin = ~np.isnan(vals)
    check(bool((L.float_to_e4m3(vals[fin]) == codes[fin]).all()) and np.isnan(vals[0x7f])
          and vals[0x7e] == 448.0 and vals[0x01] == 2.0 ** -9,
          "e4m3 patterns decode and encode back (448, 2^-9, NaN)")
    check(list(L.float_to_e4m3([1 + 1 / 16, 1 + 3 / 16, 1e30, -np.inf, 17.0])) ==
          [0x38, 0x3a, 0x7e, 0xfe, 0x58], "ties to even, saturation at 448")
    dev = L.Device("cpu")
    dims, (q8, k8, v8), (dq, dk, dv), ref, _, view = e4m3_inputs(L)
    b, hq, _, sq, _, d = dims[:6]
    tol = 2.0 ** -8 + 1e-5
    tactics = dev.tactics(dims)
    check(len(tactics) == 16, "16 CPU e4m3 tactics for a GQA shape (%d)" % len(tactics))
    box = np.array([dq, dk, dv], dtype=np.float32)
    for t in tactics:
        plan = L.Plan(dev, dims, t)
        out = np.full((b, hq, sq, d), 0x7fc0, dtype=np.uint16)  # bf16 NaN
        errs = []
        plan.set_descales(dq, dk, dv)
        plan.run(view(q8), view(k8), view(v8), view(out))
        errs.append(rel_l2(bf16_to_f32(out), ref, "bhsd"))
        plan.descales[2] = 2 * dv  # in place: the next run reads it
        plan.run(view(q8), view(k8), view(v8), view(out))
        errs.append(rel_l2(bf16_to_f32(out), 2 * ref, "bhsd"))
        plan.set_descales(box.ctypes.data, box.ctypes.data + 4, box.ctypes.data + 8)
        plan.run(view(q8), view(k8), view(v8), view(out))
        errs.append(rel_l2(bf16_to_f32(out), ref, "bhsd"))
        check(max(errs) <= tol, "e4m3 Plan %s: rel err %s <= %.3g (numbers, x2 in place, "
              "addresses)" % (t, ["%.2e" % e for e in errs], tol))
        plan.close()
    dev.close()
    # a GPU plan reads its descales on the device: a number (host memory)
    # is refused before it reaches a kernel (it faulted cuDNN's FP8 one);
    # addresses and None pass
    box3 = (L.ctypes.c_float * 3)(1.0, 1.0, 1.0)
    try:
        L._descale_ptrs(box3, 0.5, None, None, on_cpu=False)
        refused = False
    except ValueError as e:
        refused = "device memory" in str(e)
    ptrs = L._descale_ptrs(box3, 1 << 20, None, np.int64(1 << 21), on_cpu=False)
    check(refused and L.ctypes.cast(ptrs[0], L.ctypes.c_void_p).value == 1 << 20 and
          ptrs[1] is None and L.ctypes.cast(ptrs[2], L.ctypes.c_void_p).value == 1 << 21 and
          box3[0] == 1.0,
          "a number as a GPU plan's descale is refused (ValueError), addresses (int, "
          "numpy.int64) pass")
    # a small int is a number, never an address (set_descales(1, 1, 1)
    # dereferenced address 1: a segfault)
    ptrs = L._descale_ptrs(box3, 2, np.int64(3), None, on_cpu=True)
    check(list(box3[:2]) == [2.0, 3.0] and
          L.ctypes.cast(ptrs[0], L.ctypes.c_void_p).value == L.ctypes.addressof(box3),
          "small ints as descales are numbers (%s)" % list(box3))
    try:
        L._descale_ptrs(box3, 1, None, None, on_cpu=False)
        small_refused = False
    except ValueError:
        small_refused = True
    check(small_refused, "a small int as a GPU plan's descale is a number: refused")


def e4m3_auto():
    """attune.lib.Auto.set_descales (libattune 1.3) on the CPU's emulated
    FP8, nothing answering (the default tactic): numbers give the plan
    path's output bit for bit, auto.descales changes in place, addresses
    of a numpy array, None runs as 1 (far from the scaled answer)."""
    L = attune.lib
    dims, (q8, k8, v8), (dq, dk, dv), ref, ref1, view = e4m3_inputs(L)
    b, hq, _, sq, skv, d = dims[:6]
    tol = 2.0 ** -8 + 1e-5
    auto = L.Auto("cpu", url="http://127.0.0.1:9")
    out = np.full((b, hq, sq, d), 0x7fc0, dtype=np.uint16)  # bf16 NaN

    def run():
        out.fill(0x7fc0)
        auto.run(dims, view(q8), view(k8), view(v8), view(out))
        return bf16_to_f32(out)

    auto.set_descales(dq, dk, dv)
    tactic, _, planned = auto.prepare(dims)
    got = run()
    dev = L.Device("cpu")  # the plan path: the same tactic at the same planned shape
    pdims = (b, hq, dims[2], L.bucket_len(sq), L.bucket_len(skv), d) + dims[6:]
    plan = L.Plan(dev, pdims, tactic)
    plan.set_descales(dq, dk, dv)
    want = np.full_like(out, 0x7fc0)
    plan.run(view(q8), view(k8), view(v8), view(want), sq, skv)
    plan.close()
    dev.close()
    e = rel_l2(got, ref, "bhsd")
    check(bool((out == want).all()) and e <= tol,
          "e4m3 Auto %s planned %s, descales as numbers: the plan path's output, rel err %.2e"
          " <= %.3g" % (tactic, planned, e, tol))
    auto.descales[2] = 2 * dv  # in place: the next run reads it
    e = rel_l2(run(), 2 * ref, "bhsd")
    check(e <= tol, "e4m3 Auto: V's descale doubled in place, rel err %.2e to 2 ref" % e)
    box = np.array([dq, dk, dv], dtype=np.float32)
    auto.set_descales(box.ctypes.data, box.ctypes.data + 4, box.ctypes.data + 8)
    e = rel_l2(run(), ref, "bhsd")
    check(e <= tol, "e4m3 Auto: descales at addresses, rel err %.2e" % e)
    box[2] = 2 * dv  # the address is read at each run
    e = rel_l2(run(), 2 * ref, "bhsd")
    check(e <= tol, "e4m3 Auto: V's descale doubled at its address, rel err %.2e to 2 ref" % e)
    auto.set_descales()
    got1 = run()
    e1, e = rel_l2(got1, ref1, "bhsd"), rel_l2(got1, ref, "bhsd")
    check(e1 <= tol and e > 10 * tol, "e4m3 Auto: no descales run as 1 (rel err %.2e to the "
          "unscaled reference, %.2e to the scaled)" % (e1, e))
    auto.close()


def bad_input():
    q = np.zeros((1, 2, 4, 8), np.float32)
    narrow = np.zeros((1, 1, 4, 4), np.float32)  # its rows half as long as q's
    for what, args, kw in (
            ("mixed dtypes", (q, q.astype(np.float16), q), {}),
            ("hq not a multiple of hkv", (np.zeros((1, 3, 4, 8), np.float32), q, q), {}),
            ("k and v with another head dim", (q, narrow, narrow), {}),
            ("v shaped unlike k", (q, q, np.zeros((1, 2, 5, 8), np.float32)), {}),
            ("out shaped unlike q", (q, q, q), {"out": np.zeros((1, 2, 3, 8), np.float32)}),
            ("out of another dtype", (q, q, q), {"out": np.zeros((1, 2, 4, 8), np.float16)}),
            ("an empty length", (np.zeros((1, 2, 0, 8), np.float32), q, q), {}),
            ("a flipped view (negative stride)", (q[:, :, ::-1], q, q), {})):
        try:
            attune.run_numpy(*args, **kw)
            check(False, "%s refused" % what)
        except attune.AttuneError as e:
            check(str(e) != "", "%s refused: %s" % (what, e))
    # a reused error buffer: a failure the C side gave no text says its own
    # code's meaning, not the message of the failure before
    buf = attune.lib.ctypes.create_string_buffer(256)
    buf.value = b"an earlier failure"
    said = []
    for _ in range(2):
        try:
            attune.lib._check(attune.lib.load(), -1, buf)
        except attune.AttuneError as e:
            said.append(str(e))
    check(said[0] == "an earlier failure" and said[1] != said[0],
          "an error buffer is cleared after its message is read (%s)" % said)
    # a shared Auto closed: auto_for makes a new one, not the dead one
    a = attune.lib.auto_for("cpu")
    a.close()
    b = attune.lib.auto_for("cpu")
    out = attune.run_numpy(q, q, q)
    check(b is not a and bool(b._auto) and out.shape == q.shape,
          "auto_for after its Auto was closed: a new one, which runs")
    # host arrays through a GPU's Auto would hand its kernels host pointers
    try:
        attune.lib.run_numpy_with(types.SimpleNamespace(device_id="GPU-x"), q, q, q)
        check(False, "a GPU Auto for numpy arrays refused")
    except attune.AttuneError as e:
        check("CPU" in str(e), "a GPU Auto for numpy arrays refused: %s" % e)


def with_daemon():
    binary = os.environ.get("ATTUNED_BIN")
    if not binary:
        print("skip the daemon part: ATTUNED_BIN not set")
        return
    work = tempfile.mkdtemp(prefix="attune-it-py-")
    d = daemonlib.Daemon(binary, work)
    try:
        ceiling = daemonlib.shape(1, 4, 1, 16, 64, 32, "f32", True)
        fp8 = daemonlib.shape(1, 4, 2, 12, 40, 16, "e4m3", True)  # e4m3_inputs' bucket
        st, r = d.post("/v1/tune", {"device": "cpu", "shapes": [ceiling, fp8]})
        deadline = time.time() + 120
        while st == 202 and time.time() < deadline:
            st2, j = d.get("/v1/jobs/%d" % r["job"])
            if j["state"] in ("done", "failed", "canceled"):
                break
            time.sleep(0.1)
        key = daemonlib.key_of(1, 4, 1, 16, 64, 32, "f32", True)
        st, a = d.get("/v1/tactic?device=cpu&shape=" + key)
        check(st == 200 and a["source"] == "measured", "the ceiling is tuned (%s)" % a)
        auto = attune.Auto("cpu", url="http://127.0.0.1:%d" % d.port)
        tactic, source, planned = auto.prepare((1, 4, 1, 16, 64, 32, 2, 1))
        check(tactic == a["tactic"] and source == "measured" and planned == key,
              "at the ceiling %s: the measured winner %s (%s)" % (key, tactic, source))
        st, f = d.get("/v1/tactic?device=cpu&shape=%s&variants=fused,fused_splitkv" % key)
        want = f["tactic"] if a["variant"] not in ("fused", "fused_splitkv") else a["tactic"]
        t2, s2, p2 = auto.prepare((1, 4, 1, 15, 57, 32, 2, 1))
        check(st == 200 and t2 == want and p2 == key,
              "sq 15 skv 57 (bucket %s): %s, the bucket's best that runs any length (%s)"
              % (key, t2, want))
        rng = np.random.default_rng(11)
        for sq, skv in ((15, 57), (16, 64), (9, 49)):
            err, tol = case(rng, auto, 1, 4, 1, sq, skv, 32, np.float32, True, "bhsd")
            check(err < tol, "at sq %d skv %d: rel err %.2e" % (sq, skv, err))
        auto.close()
        e4m3_measured(d)
        shipped(d, work, key, a["tactic"])
        lru_keeps_ceiling(d, key)
        outage_keeps_plan(d, key)
    finally:
        d.stop()


def pin_split(d, key):
    """A force pin of a split tactic on the ceiling key: an answer that is
    no fused kernel, so lengths below the ceiling run the bucket's fused
    one (a second entry). Returns the tactic."""
    st, r = d.get("/v1/results?device=cpu&shape=" + key)
    split = next(m["tactic"] for m in r["measurements"] if m["tactic"].startswith("split/"))
    st, p = d.post("/v1/pins", {"action": "force", "tactic": split, "device": "cpu",
                                "shape": key, "reason": "it", "author": "it"})
    check(st == 201, "force pin of %s on %s (%d)" % (split, key, st))
    return split


def lru_keeps_ceiling(d, key):
    """attune_auto at capacity 3: a bucket whose answer is split (pinned)
    runs lengths below its ceiling through its fused entry, so two entries
    serve it on every call; two other shapes met in turn then take the
    third slot. Every call uses the ceiling's entry (it asks it first), so
    the LRU must evict the other shapes, never it: one plan per other
    shape met, none for the bucket (its entry was left unstamped, and
    evicted and planned again every round, before 2026-12-04)."""
    split = pin_split(d, key)
    auto = attune.Auto("cpu", url="http://127.0.0.1:%d" % d.port, capacity=3)
    t, s, _ = auto.prepare((1, 4, 1, 16, 64, 32, 2, 1))
    check(t == split and s == "pinned", "the ceiling answers the pinned %s (%s %s)" % (split, t, s))
    below = (1, 4, 1, 15, 57, 32, 2, 1)
    others = [(1, 2, 1, 16, 64, 32, 2, 1), (1, 2, 1, 16, 64, 16, 2, 1)]
    auto.prepare(below)
    start = auto.stats()
    rounds = 6
    for i in range(rounds):
        t, _, p = auto.prepare(below)
        auto.prepare(others[i % 2])
    end = auto.stats()
    check(not t.startswith("split/") and p == key,
          "below the ceiling: the bucket's fused kernel %s, planned at %s" % (t, p))
    check(end["plans"] - start["plans"] == rounds and end["entries"] == 3,
          "capacity 3, %d rounds of the bucket and another shape: %d plans (want %d: the "
          "other shapes only), %d evictions" % (rounds, end["plans"] - start["plans"], rounds,
                                                end["evictions"] - start["evictions"]))
    auto.close()


def outage_keeps_plan(d, key):
    """The daemon gone (a restart): an entry whose answer expires keeps the
    plan it has (the pinned split: answers not measured are asked again
    after a second) instead of planning the client's offline default."""
    auto = attune.Auto("cpu", url="http://127.0.0.1:%d" % d.port)
    ceiling = (1, 4, 1, 16, 64, 32, 2, 1)
    t0, s0, _ = auto.prepare(ceiling)
    d.stop()
    time.sleep(1.2)
    plans = auto.stats()["plans"]
    t1, s1, _ = auto.prepare(ceiling)
    rng = np.random.default_rng(5)
    err, tol = case(rng, auto, 1, 4, 1, 16, 64, 32, np.float32, True, "bhsd")
    check(t1 == t0 and s1 == s0 and auto.stats()["plans"] == plans,
          "daemon stopped: the entry keeps %s (%s), no new plan (got %s %s)" % (t0, s0, t1, s1))
    check(err < tol, "and runs it right: rel err %.2e" % err)
    auto.close()


def e4m3_measured(d):
    """attune_auto asks for an e4m3 shape as e4m3 (not the f32 shape of
    its dims, untuned here): the tuned ceiling plans its measured winner,
    and a run inside the bucket with Auto.set_descales is right."""
    L = attune.lib
    key = daemonlib.key_of(1, 4, 2, 12, 40, 16, "e4m3", True)
    st, a = d.get("/v1/tactic?device=cpu&shape=" + key)
    check(st == 200 and a["source"] == "measured", "the e4m3 ceiling is tuned (%s)" % a)
    auto = attune.Auto("cpu", url="http://127.0.0.1:%d" % d.port)
    tactic, source, planned = auto.prepare((1, 4, 2, 12, 40, 16, L.DTYPES["e4m3"], 1))
    check(tactic == a.get("tactic") and source == "measured" and planned == key,
          "e4m3 at the ceiling %s: the measured winner %s (%s)" % (key, tactic, source))
    dims, (q8, k8, v8), (dq, dk, dv), ref, _, view = e4m3_inputs(L)
    out = np.full((dims[0], dims[1], dims[3], dims[5]), 0x7fc0, dtype=np.uint16)
    auto.set_descales(dq, dk, dv)
    auto.run(dims, view(q8), view(k8), view(v8), view(out))
    e, tol = rel_l2(bf16_to_f32(out), ref, "bhsd"), 2.0 ** -8 + 1e-5
    check(e <= tol, "e4m3 inside the bucket (%s): rel err %.2e <= %.3g"
          % (auto.prepare(dims)[0], e, tol))
    auto.close()


def shipped(d, work, key, tactic):
    """A table exported here and shipped to another device of this model
    (its id and host changed): attune_auto reads it in process (file:)
    and, the id unknown there, asks by the device's name."""
    binary = os.environ.get("ATTUNE_BIN")
    if not binary:
        print("skip the table part: ATTUNE_BIN not set")
        return
    table = os.path.join(work, "table.json")
    r = subprocess.run([binary, "export", "--db", d.db, "--device", "cpu", "-o", table],
                       capture_output=True, text=True)
    check(r.returncode == 0, "attune export (%s)" % r.stderr.strip())
    t = json.load(open(table))
    t["device"]["id"], t["host"] = "CPU-00000000000000aa", "another-host"
    other = os.path.join(work, "other.json")
    json.dump(t, open(other, "w"))
    for path, what in ((table, "this device's table"), (other, "a table of another device")):
        auto = attune.Auto("cpu", url="file:" + path)
        got = auto.prepare((1, 4, 1, 16, 64, 32, 2, 1))
        check(got[0] == tactic and got[1] == "measured",
              "file:%s, no daemon: %s (%s)" % (what, got[0], got[1]))
        auto.close()


def main():
    bucketing()
    default_runs()
    plan_views()
    e4m3_plan()
    e4m3_auto()
    bad_input()
    with_daemon()
    return summary()


if __name__ == "__main__":
    sys.exit(main())
