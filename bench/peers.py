#!/usr/bin/env python3
"""peers.py -- attune's tuned winner against PyTorch's attention paths.

Runs on a GPU machine whose python3 has torch (tests/gpu/run.sh --bench calls
it after building). For each anchor shape (b, hq, hkv, sq, skv, d, dtype,
causal):

  1. `attune tune --db DB --device 0 --shape KEY` (wall time of the tune
     reported), then `attune results ... --json`: the winner, its time (with
     pad copies when padded: what a caller holding unpadded tensors pays) and
     its relative L2 error against attune's float64 reference;
  2. PyTorch's paths on random inputs of the same shape, each timed as
     CUDA-graph replays of back-to-back calls (CUDA events, median of
     replays) and checked against float64 attention on a row sample:
     SDPA with automatic dispatch, SDPA forced to flash, efficient, cuDNN
     and math, the eager Hugging Face path (repeat_kv, matmul, softmax in
     f32, matmul), the folded eager path (query heads of a KV head as
     rows of one matmul; only when hkv < hq) and FlexAttention (compiled
     by Triton once per shape, outside the timing; causal as a bottom-right
     block mask);
  3. one table: attune winner, time, error; best PyTorch path, time, error;
     ratio = PyTorch best time / attune time (> 1: attune faster); under it
     issue 25's bars judged from these rows (bench/bars.py).

On the large shapes it also splits attune's `split` tactic into its stages
(QK^T GEMM, softmax, PV GEMM; tests/gpu/bench_split) and sets the GEMMs'
throughput against torch.matmul (cuBLAS) on the same GEMM sizes.

Causal is bottom-right aligned (DESIGN.md): for sq == skv that is SDPA's
is_causal; otherwise an explicit lower-right causal bias is passed.

usage: peers.py --attune BUILD/attune [--bench-split BUILD/bench_split]
                [--out DIR] [--only N,...] [--budget-ms MS]
"""

import argparse
import faulthandler
import json
import math
import os
import statistics
import re
import signal
import subprocess
import sys
import tempfile
import time
import zlib

import torch
import torch.nn.functional as F

import bars  # bench/bars.py: the issues' bars under the table
import graphtime  # bench/graphtime.py (this script's directory is on sys.path)

ANCHORS = [
    # b, hq, hkv, sq, skv, d, dtype, causal
    (1, 8, 1, 968, 968, 256, "f16", 0),
    (1, 8, 1, 50, 1018, 256, "f16", 0),
    (1, 8, 8, 900, 900, 32, "f16", 0),
    (1, 8, 8, 904, 904, 32, "f16", 0),
    (2, 8, 1, 2048, 2048, 256, "bf16", 1),
    (4, 32, 8, 2048, 2048, 128, "bf16", 1),
    (16, 32, 8, 1, 4096, 128, "bf16", 0),
    (2, 16, 16, 8192, 8192, 128, "bf16", 0),
    (2, 16, 16, 8192, 8192, 128, "bf16", 1),
]

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
REPLAY_TARGET_US = 2000.0   # one graph replay lasts about this long
REPLAYS = 7                 # timed replays; the median is reported
# One PyTorch path (its compile, warm-up, capture and replays) gets this
# long: past it the path is recorded as an error and the next one runs
# (SIGALRM, which interrupts Python and Triton's compile waits, not a
# kernel spinning on the GPU); 60 s later every thread's stack goes to
# stderr (peers.log), so a path that hangs past both is named there. A
# run on 2026-12-03 hung in one shape's PyTorch paths until the call's
# limit, and nothing said where. $PEERS_PATH_TIMEOUT (seconds) overrides.
PATH_TIMEOUT_S = int(os.environ.get("PEERS_PATH_TIMEOUT", "180"))


def shape_key(s):
    b, hq, hkv, sq, skv, d, dt, c = s
    return f"b{b}.hq{hq}.hkv{hkv}.sq{sq}.skv{skv}.d{d}.{dt}.{'c' if c else 'nc'}"


def parse_key(key):
    """A shape key (shape_key's form) as an anchor tuple; ValueError if not one."""
    m = re.fullmatch(r"b(\d+)\.hq(\d+)\.hkv(\d+)\.sq(\d+)\.skv(\d+)\.d(\d+)\."
                     r"(f16|bf16|f32)\.(c|nc)", key)
    if m is None:
        raise ValueError(f"not a shape key: {key!r}")
    b, hq, hkv, sq, skv, d = (int(m.group(i)) for i in range(1, 7))
    return (b, hq, hkv, sq, skv, d, m.group(7), 1 if m.group(8) == "c" else 0)


def is_large(s):
    b, hq, hkv, sq, skv, d, dt, c = s
    return sq * skv >= 2048 * 2048


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---- attune

def attune_tune(attune, db, key, budget_ms):
    cmd = [attune, "tune", "--db", db, "--device", "0", "--shape", key, "--quiet"]
    if budget_ms:
        cmd += ["--budget-ms", str(budget_ms)]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        log(f"attune tune {key} failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
        return None, wall
    r = subprocess.run([attune, "results", "--db", db, "--device", "0", "--shape", key,
                        "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        log(f"attune results {key} failed: {r.stderr.strip()[-2000:]}")
        return None, wall
    return json.loads(r.stdout), wall


def select_time(m):
    """The time the tuner compares: with pad copies when stored."""
    t = m.get("time_us_copies")
    return t if t is not None and t > 0 else m.get("time_us")


# ---- PyTorch paths

def make_inputs(s, seed):
    b, hq, hkv, sq, skv, d, dt, c = s
    g = torch.Generator(device="cuda").manual_seed(seed)
    dtype = DTYPES[dt]
    q = torch.randn(b, hq, sq, d, device="cuda", generator=g).to(dtype)
    k = torch.randn(b, hkv, skv, d, device="cuda", generator=g).to(dtype)
    v = torch.randn(b, hkv, skv, d, device="cuda", generator=g).to(dtype)
    return q, k, v


def causal_bias(sq, skv):
    from torch.nn.attention.bias import causal_lower_right
    return causal_lower_right(sq, skv)


def visible_mask(rows, sq, skv, device):
    """[len(rows), skv] bool: key j visible from query row i (bottom-right)."""
    i = torch.as_tensor(rows, device=device).view(-1, 1)
    j = torch.arange(skv, device=device).view(1, -1)
    return j <= i + (skv - sq)


def sdpa_fn(s, q, k, v, backend):
    b, hq, hkv, sq, skv, d, dt, c = s
    kw = {}
    if hkv != hq:
        kw["enable_gqa"] = True
    if c and sq == skv:
        kw["is_causal"] = True
    elif c:
        kw["attn_mask"] = causal_bias(sq, skv)

    def call():
        return F.scaled_dot_product_attention(q, k, v, **kw)

    if backend is None:
        return call
    from torch.nn.attention import sdpa_kernel

    def forced():
        with sdpa_kernel(backend):
            return call()
    return forced


def eager_repeat_kv_fn(s, q, k, v):
    """The Hugging Face eager path: repeat_kv copies, matmul, softmax in f32."""
    b, hq, hkv, sq, skv, d, dt, c = s
    g = hq // hkv
    scale = 1.0 / math.sqrt(d)
    mask = None
    if c:
        mask = torch.zeros(sq, skv, device="cuda", dtype=q.dtype)
        mask.masked_fill_(~visible_mask(range(sq), sq, skv, "cuda"), float("-inf"))

    def call():
        kk = k[:, :, None].expand(b, hkv, g, skv, d).reshape(b, hq, skv, d)
        vv = v[:, :, None].expand(b, hkv, g, skv, d).reshape(b, hq, skv, d)
        w = torch.matmul(q, kk.transpose(2, 3)) * scale
        if mask is not None:
            w = w + mask
        w = torch.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        return torch.matmul(w, vv)
    return call


def folded_fn(s, q, k, v):
    """Query heads of a KV head folded into the rows of one matmul."""
    b, hq, hkv, sq, skv, d, dt, c = s
    g = hq // hkv
    scale = 1.0 / math.sqrt(d)
    mask = None
    if c:
        rows = [r % sq for r in range(g * sq)]
        mask = torch.zeros(g * sq, skv, device="cuda", dtype=q.dtype)
        mask.masked_fill_(~visible_mask(rows, sq, skv, "cuda"), float("-inf"))

    def call():
        qf = q.reshape(b, hkv, g * sq, d)
        w = torch.matmul(qf, k.transpose(2, 3)) * scale
        if mask is not None:
            w = w + mask
        w = torch.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        return torch.matmul(w, v).reshape(b, hq, sq, d)
    return call


_FLEX = {}


def flex_fn(s, q, k, v):
    """FlexAttention (torch.nn.attention.flex_attention, generated by
    Triton): compiled once per shape (dynamic=False; the compile happens in
    time_graph's warm-up, not timed), causal as a block mask aligned
    bottom-right like attune's (key j visible from query i iff j <= i +
    skv - sq; blocks that see nothing are skipped), GQA by enable_gqa."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    b, hq, hkv, sq, skv, d, dt, c = s
    if "compiled" not in _FLEX:
        import torch._dynamo as dynamo
        for knob in ("cache_size_limit", "recompile_limit"):  # one entry per shape
            if hasattr(dynamo.config, knob):
                setattr(dynamo.config, knob, 1024)
        _FLEX["compiled"] = torch.compile(flex_attention, dynamic=False)
    block_mask = None
    if c:
        shift = skv - sq

        def bottom_right(b_, h_, qi, kj):
            return kj <= qi + shift
        block_mask = create_block_mask(bottom_right, B=None, H=None, Q_LEN=sq, KV_LEN=skv,
                                       device="cuda")
    fn, gqa = _FLEX["compiled"], hkv != hq

    def call():
        return fn(q, k, v, block_mask=block_mask, enable_gqa=gqa)
    return call


def torch_paths(s, q, k, v):
    from torch.nn.attention import SDPBackend
    b, hq, hkv, sq, skv, d, dt, c = s
    paths = [
        ("sdpa_auto", sdpa_fn(s, q, k, v, None)),
        ("sdpa_flash", sdpa_fn(s, q, k, v, SDPBackend.FLASH_ATTENTION)),
        ("sdpa_efficient", sdpa_fn(s, q, k, v, SDPBackend.EFFICIENT_ATTENTION)),
        ("sdpa_cudnn", sdpa_fn(s, q, k, v, SDPBackend.CUDNN_ATTENTION)),
        ("sdpa_math", sdpa_fn(s, q, k, v, SDPBackend.MATH)),
        ("eager_repeat_kv", eager_repeat_kv_fn(s, q, k, v)),
    ]
    if hkv < hq:
        paths.append(("torch_folded", folded_fn(s, q, k, v)))
    paths.append(("flex_attention", flex_fn(s, q, k, v)))
    return paths


def time_graph(fn):
    """Median microseconds per call over CUDA-graph replays of back-to-back
    calls; also returns the output of the (captured) call."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):        # warm-up: kernels chosen, modules loaded
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    fn()
    e1.record()
    e1.synchronize()
    one_us = max(e0.elapsed_time(e1) * 1000.0, 1.0)
    iters = int(min(max(REPLAY_TARGET_US / one_us, 1), 200))
    last = {}

    def call(i):
        last["out"] = fn()        # the graph's output: the last replay's result
    times = graphtime.replay_us(call, iters, REPLAYS)
    return statistics.median(times), last["out"].clone()


def sample_rows(sq, bh):
    """Query positions checked: all for small shapes, else first/last/
    boundary positions and seeded random ones (>= 256 rows in all)."""
    if sq * bh <= 4096 or sq <= 64:
        return list(range(sq))
    pos = {0, sq - 1}
    for m in (8, 16, 64):
        lo = (sq - 1) // m * m
        pos.update({max(lo - 1, 0), lo})
    gen = torch.Generator().manual_seed(sq)
    want = max(8, -(-256 // bh))
    pos.update(torch.randint(0, sq, (want,), generator=gen).tolist())
    return sorted(pos)


def reference(s, q, k, v, rows):
    """float64 attention of query positions `rows` for every (batch, head)."""
    b, hq, hkv, sq, skv, d, dt, c = s
    g = hq // hkv
    out = torch.empty(b, hq, len(rows), d, dtype=torch.float64, device="cuda")
    vis = visible_mask(rows, sq, skv, "cuda") if c else None
    idx = torch.as_tensor(rows, device="cuda")
    for bi in range(b):
        for h in range(hkv):
            kk = k[bi, h].double()
            vv = v[bi, h].double()
            qq = q[bi, h * g:(h + 1) * g].index_select(1, idx).double()  # [g, R, d]
            w = torch.matmul(qq, kk.T) / math.sqrt(d)
            if vis is not None:
                w = w.masked_fill(~vis, float("-inf"))
            p = torch.softmax(w, dim=-1)
            p = torch.nan_to_num(p, nan=0.0)  # rows with no key: zeros
            out[bi, h * g:(h + 1) * g] = torch.matmul(p, vv)
    return out


def errors(out, ref, rows):
    o = out.index_select(2, torch.as_tensor(rows, device="cuda")).double()
    if not torch.isfinite(o).all():
        return float("inf"), float("inf")
    diff = o - ref
    rel = (diff.norm() / ref.norm()).item() if ref.norm() > 0 else diff.norm().item()
    return rel, diff.abs().max().item()


def run_torch(s):
    q, k, v = make_inputs(s, seed=zlib.crc32(shape_key(s).encode()))
    rows = sample_rows(s[3], s[0] * s[1])
    faulthandler.dump_traceback_later(PATH_TIMEOUT_S)  # the reference, should it hang
    ref = reference(s, q, k, v, rows)
    faulthandler.cancel_dump_traceback_later()
    res = {}

    def over_time(signum, frame):
        raise TimeoutError("timed out after %d s" % PATH_TIMEOUT_S)
    signal.signal(signal.SIGALRM, over_time)
    for name, fn in torch_paths(s, q, k, v):
        faulthandler.dump_traceback_later(PATH_TIMEOUT_S + 60)
        signal.alarm(PATH_TIMEOUT_S)
        try:
            us, out = time_graph(fn)
            rel, mx = errors(out, ref, rows)
            res[name] = {"time_us": us, "rel_err": rel, "max_abs_err": mx}
            del out
        except Exception as e:  # an unsupported path is data, not a failure
            msg = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
            res[name] = {"error": msg}
        finally:
            signal.alarm(0)
            faulthandler.cancel_dump_traceback_later()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    return res


# ---- stage split and GEMM throughput (large shapes)

def gemm_us(a_shape, b_shape, dtype):
    a = torch.randn(*a_shape, device="cuda").to(dtype)
    bm = torch.randn(*b_shape, device="cuda").to(dtype)
    us, _ = time_graph(lambda: torch.matmul(a, bm))
    return us


def stage_split(s, bench_split):
    b, hq, hkv, sq, skv, d, dt, c = s
    key = shape_key(s)
    tactic = "split/acc=f32/pad=64"
    p = subprocess.run([bench_split, key, tactic, "3"], capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": p.stderr.strip()[-300:]}
    r = json.loads(p.stdout)
    sqp, skp = -(-sq // 64) * 64, -(-skv // 64) * 64
    flops = 2.0 * b * hq * sqp * skp * d          # each of the two GEMMs
    dtype = DTYPES[dt]
    # cuBLAS through torch on the same GEMM sizes (output in the dtype)
    r["torch_qk_us"] = gemm_us((b * hq, sq, d), (b * hq, d, skv), dtype)
    r["torch_pv_us"] = gemm_us((b * hq, sq, skv), (b * hq, skv, d), dtype)
    for k_ in ("qk", "pv", "torch_qk", "torch_pv"):
        r[k_ + "_tflops"] = flops / (r[k_ + "_us"] * 1e6)
    torch.cuda.empty_cache()
    return r


# ---- main

def fmt_us(x):
    return "-" if x is None else (f"{x:.1f}" if x < 1000 else f"{x:.0f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--attune", required=True, help="path of the attune CLI")
    ap.add_argument("--bench-split", help="path of tests/gpu/bench_split")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--db", help="database file (default: a new one in --out)")
    ap.add_argument("--only", help="comma-separated anchor indices (0-based)")
    ap.add_argument("--shapes", help="comma-separated shape keys to run instead of the anchors "
                    "(b1.hq1.hkv1.sq1024.skv32768.d256.bf16.nc)")
    ap.add_argument("--budget-ms", type=float, help="attune tune --budget-ms")
    ap.add_argument("--skip-attune", action="store_true")
    args = ap.parse_args()

    anchors = ANCHORS
    if args.only:
        anchors = [ANCHORS[int(i)] for i in args.only.split(",")]
    if args.shapes:
        anchors = [parse_key(k) for k in args.shapes.split(",")]
    db = args.db or os.path.join(args.out, "peers.db")
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.cuda.get_device_name(0)
    log(f"device {dev}, torch {torch.__version__}, cuda {torch.version.cuda}, "
        f"cudnn {torch.backends.cudnn.version()}")

    rows_out = []
    for s in anchors:
        key = shape_key(s)
        log(f"== {key}")
        entry = {"shape": key}
        if not args.skip_attune:
            res, wall = attune_tune(args.attune, db, key, args.budget_ms)
            entry["tune_s"] = wall
            if res is not None:
                ms = res.get("measurements", [])
                win = [m for m in ms if m.get("winner")]
                entry["attune_tactics"] = len(ms)
                entry["attune_ok"] = sum(1 for m in ms if m.get("status") == "ok")
                if win:
                    w = win[0]
                    entry["attune"] = {"tactic": w["tactic"], "time_us": select_time(w),
                                       "time_us_kernel": w.get("time_us"),
                                       "rel_err": w.get("rel_err"),
                                       "max_abs_err": w.get("max_abs_err")}
                best = {}
                for m in ms:  # fastest ok tactic per variant, for the record
                    if m.get("status") != "ok" or select_time(m) is None:
                        continue
                    v = m["variant"]
                    if v not in best or select_time(m) < best[v]["time_us"]:
                        best[v] = {"tactic": m["tactic"], "time_us": select_time(m),
                                   "rel_err": m.get("rel_err")}
                entry["attune_best_per_variant"] = best
            log(f"   attune: {entry.get('attune')} (tune {wall:.1f} s)")
        entry["torch"] = run_torch(s)
        ok = {n: r for n, r in entry["torch"].items() if "time_us" in r and
              math.isfinite(r["rel_err"]) and r["rel_err"] < 0.05}
        if ok:
            bn = min(ok, key=lambda n: ok[n]["time_us"])
            entry["torch_best"] = dict(ok[bn], path=bn)
        for n, r in entry["torch"].items():
            log(f"   torch {n:16s} {r}")
        if args.bench_split and is_large(s):
            entry["split_stages"] = stage_split(s, args.bench_split)
            log(f"   split stages: {entry['split_stages']}")
        rows_out.append(entry)
        with open(os.path.join(args.out, "peers.json"), "w") as f:
            json.dump({"device": dev, "torch": torch.__version__, "rows": rows_out}, f,
                      indent=1)

    # ---- the table
    lines = []
    lines.append("| shape | attune winner | us | rel err | tune s | best PyTorch | us | rel err "
                 "| SDPA auto us | ratio |")
    lines.append("|---|---|---:|---:|---:|---|---:|---:|---:|---:|")
    for e in rows_out:
        a = e.get("attune") or {}
        t = e.get("torch_best") or {}
        auto = e["torch"].get("sdpa_auto", {})
        ratio = (t["time_us"] / a["time_us"]) if a.get("time_us") and t.get("time_us") else None
        lines.append(
            f"| {e['shape']} | {a.get('tactic', '-')} | {fmt_us(a.get('time_us'))} | "
            f"{a.get('rel_err', float('nan')):.1e} | {e.get('tune_s', 0):.0f} | "
            f"{t.get('path', '-')} | {fmt_us(t.get('time_us'))} | "
            f"{t.get('rel_err', float('nan')):.1e} | {fmt_us(auto.get('time_us'))} | "
            f"{'-' if ratio is None else f'{ratio:.2f}'} |")
    stage_lines = []
    for e in rows_out:
        st = e.get("split_stages")
        if not st or "error" in st:
            continue
        if not stage_lines:
            stage_lines.append("| shape | split total us | QK^T us | softmax us | PV us | "
                               "QK^T TFLOP/s | PV TFLOP/s | torch.matmul QK^T TFLOP/s | "
                               "torch.matmul PV TFLOP/s |")
            stage_lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        stage_lines.append(
            f"| {e['shape']} | {fmt_us(st['time_us'])} | {fmt_us(st['qk_us'])} | "
            f"{fmt_us(st['softmax_us'])} | {fmt_us(st['pv_us'])} | {st['qk_tflops']:.0f} | "
            f"{st['pv_tflops']:.0f} | {st['torch_qk_tflops']:.0f} | {st['torch_pv_tflops']:.0f} |")
    text = "\n".join(lines) + "\n"
    if stage_lines:
        text += "\n" + "\n".join(stage_lines) + "\n"
    verdicts = bars.peers_lines(rows_out, dev)
    if verdicts:
        text += "\n" + "\n".join(verdicts) + "\n"
    with open(os.path.join(args.out, "peers.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
