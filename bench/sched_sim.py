#!/usr/bin/env python3
"""sched_sim.py -- a model of how a causal sm90a grid's items fall on the
SMs (docs/kernels.md, version 3.31), to say what an order of the items
gains before a GPU measures it. No GPU.

The items are the kernel's (cuda_fused_sm90a.cu, sm90_causal_item): units
(heads; KV heads folded) in chunks whose K/V fit the 8 MB budget, each
chunk's row blocks longest first; version 3.31 merges the last chunk with
the ones before it while it holds under two waves of items and its K/V
stay within four budgets (sm90_causal_clast in cuda_fused_configs.h; this
file mirrors it). Each SM takes the next item when it is free (a
persistent grid claims late, a plain grid's blocks are dispatched in
order: the same list scheduling), an item costing its key tiles plus a
fixed cost. Costs, in 128x128 d128 tile times: an item's boundary 0.46
persistent and 1.25 plain (the cycle trace by item, docs/kernels.md
version 3.28); a 192x128 tile 1.38 (H100, bench/peers-h100-7d4820b.md:
the 8k non-causal anchor's persistent 192x128 winner, 1451 us, is 10
rounds of 64 tiles and a last one cut in two key ranges by version 3.12,
2.14 us a tile; the 8k causal anchor's persistent 128x128 one, 793.7 us,
is 1.55 us a tile by this model); other head dims scale a tile by
d / 128. What it leaves out: L2 misses (it assumes the chunks keep K/V
in L2), the diagonal tiles' masked work (a 192-row item has two),
clocks. --check: it gives the measured ratios of orders, and most of the
192x128 tile's loss on the causal anchor (1.008 modelled, 1.025 measured).

    python3 bench/sched_sim.py --check             # the model against three measured ratios
    python3 bench/sched_sim.py --grid grids/realmodels-holdout13.json
    python3 bench/sched_sim.py --shape b2.hq16.hkv16.sq8192.skv8192.d128.bf16.c --tile 192x128 --cap 32
    python3 bench/sched_sim.py --form v1 --tile 64x64,128x64 --slots 32 --l2-mb 4 \
        --shape b1.hq12.hkv12.sq1024.skv1024.d64.f16.c   # version 1.2, an Orin-like device

Prints, per causal shape and tile: the items, the chunk, the last chunk's
index before and after the merge, the modelled efficiency (ideal time over
the modelled makespan) of each order, and their ratio (new / old time).
"""
import argparse
import glob
import heapq
import json
import math
import re
import sys

SMS = 132  # SM90_TAIL_SMS: the plan's SMs
CHUNK_BYTES = 8 << 20  # SM90_CHUNK_BYTES
TAIL_WAVES, TAIL_BUDGETS = 2, 4  # SM90_TAIL_WAVES, SM90_TAIL_BUDGETS
TILE_COST = {128: 1.0, 192: 1.38}
BOUNDARY = {"persist": 0.46, "plain": 1.25}
KEY = re.compile(r"b(\d+)\.hq(\d+)\.hkv(\d+)\.sq(\d+)\.skv(\d+)\.d(\d+)(?:\.(\w+))?(?:\.(c|nc))?$")


def clast_of(units, nrb, chunk, unit_bytes, cap, slots=SMS):
    """cuda_fused_configs.h's fused_causal_clast (cap 0: no merge); sm90a's
    sm90_causal_clast is it on SMS slots."""
    if units < 1 or chunk < 1:
        return 0
    c = (units + chunk - 1) // chunk - 1
    while (c > 0 and (units - c * chunk) * nrb < TAIL_WAVES * slots
           and (units - (c - 1) * chunk) * unit_bytes <= cap):
        c -= 1
    return c


def kernel_dim(d):
    for k in (64, 128, 256):
        if d <= k:
            return k
    return d


def key_tiles(sq, skv, qb, bc):
    """The key tiles of bc keys that row block mb (qb rows) of a causal,
    bottom-right aligned grid visits, as a function of mb."""
    def tiles(mb):
        kend = min(skv, min(mb * qb + qb, sq) + skv - sq)
        return -(-kend // bc) if kend > 0 else 0

    return tiles


def grid(shape, br, bc=128, fold=False, budget=CHUNK_BYTES):
    """(units, nrb, chunk, unit bytes, tiles of row block mb) as the launch
    plans them (sm90_order)."""
    b, hq, hkv, sq, skv, d = shape[:6]
    es = shape[6] if len(shape) > 6 else 2  # element bytes: e4m3 1
    g, D = hq // hkv, kernel_dim(d)
    units = b * hkv if fold else b * hq
    qb = 128 // g if fold else br
    nrb = -(-sq // qb)
    per = skv * D * 2 * es // (1 if fold else g)
    chunk = max(1, min(units, budget // max(per, 1)))
    return units, nrb, chunk, per, key_tiles(sq, skv, qb, bc)


def order(units, nrb, chunk, clast, tiles):
    """Each item's key tiles, in sm90_causal_item's order."""
    out = []
    for c in range(clast + 1):
        hc = units - c * chunk if c == clast else chunk
        for mr in range(nrb):
            out += [tiles(nrb - 1 - mr)] * hc
    return out


def makespan(items, tile, fixed, sms=SMS):
    """List scheduling: each item to the SM free first. (makespan, ideal)."""
    free = [0.0] * sms
    total = 0.0
    for n in items:
        t = heapq.heappop(free)
        c = n * tile + fixed
        total += c
        heapq.heappush(free, t + c)
    return max(free), total / sms


def model(shape, br, form, cap, budget=CHUNK_BYTES):
    """cap: the merged chunk's K/V bytes at most (0: no merge)."""
    units, nrb, chunk, per, tiles = grid(shape, br, budget=budget)
    cl = clast_of(units, nrb, chunk, per, cap)
    tile = TILE_COST[br] * kernel_dim(shape[5]) / 128
    mk, ideal = makespan(order(units, nrb, chunk, cl, tiles), tile, BOUNDARY[form])
    return dict(items=units * nrb, chunk=chunk, clast=cl, makespan=mk, ideal=ideal)


def model_v1(shape, br, bc, slots, l2_mb, budget_mb=None):
    """Version 1.2 (cuda_fused.cu's FUSED_CAUSAL_ORDER): a `fused` grid of
    br x bc tiles on `slots` resident blocks (SMs x blocks an SM, each
    taken as a processor of its own: blocks that share an SM do not run
    independently, so this is rough), head after head (old) against
    sm90a's order (new: chunks within l2 / 6, or budget_mb, merged under
    two waves of slots within four budgets, as fused_causal_order). An
    item costs its key tiles plus one (its fixed cost, assumed)."""
    b, hq, hkv, sq, skv, d = shape[:6]
    es = shape[6] if len(shape) > 6 else 2
    units, nrb = b * hq, -(-sq // br)
    per = max(skv * d * 2 * es // (hq // hkv), 1)
    budget = (budget_mb << 20) if budget_mb is not None else (l2_mb << 20) // 6
    chunk = max(1, min(units, budget // per))
    tiles = key_tiles(sq, skv, br, bc)
    old = makespan(order(units, nrb, 1, units - 1, tiles), 1.0, 1.0, sms=slots)
    cl = clast_of(units, nrb, chunk, per, 4 * budget, slots)
    new = makespan(order(units, nrb, chunk, cl, tiles), 1.0, 1.0, sms=slots)
    return dict(items=units * nrb, chunk=chunk, clast=cl, old=old, new=new)


def parse_key(k):
    m = KEY.match(k)
    if not m:
        raise SystemExit(f"sched_sim.py: not a shape key: {k} (e.g. b2.hq16.hkv16.sq8192.skv8192.d128.bf16.c)")
    if m.group(8) == "nc":
        raise SystemExit(f"sched_sim.py: {k} is not causal (the model is of causal grids' order)")
    return tuple(int(x) for x in m.groups()[:6]) + (1 if m.group(7) == "e4m3" else 2,)


def check():
    """The model against measurements it was not fitted to: ratios of
    orders (version 3.2, an H200) and of tiles (version 3.28, an H100) on
    the 8k causal anchor."""
    a = (2, 16, 16, 8192, 8192, 128)
    rows = []
    # version 3.2 (docs/kernels.md, "Causal order, measured alternately"):
    # plain 128x128, head after head / 8 MB / 24 MB chunks: 870.4 / 832.2 / 862.6 us
    base = model(a, 128, "plain", 0)["makespan"]
    for mb, meas in ((0, 870.4 / 832.2), (24, 862.6 / 832.2)):
        m = model(a, 128, "plain", 0, budget=mb << 20)
        what = f"{mb} MB chunks" if mb else "head after head"
        rows.append((f"plain 128x128: {what} / 8 MB chunks", m["makespan"] / base, meas))
    # version 3.28: persistent 192x128 against 128x128 (811.1-816.2 against 793.3-794.1 us)
    r = model(a, 192, "persist", 0)["makespan"] / model(a, 128, "persist", 0)["makespan"]
    rows.append(("persistent 192x128 / 128x128", r, 813.7 / 793.7))
    print("| the order's or tile's time against the default's | model | measured |")
    print("|---|---:|---:|")
    for name, mod, meas in rows:
        print(f"| {name} | {mod:.3f} | {meas:.3f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", action="append", default=[], help="a causal shape key (repeatable)")
    ap.add_argument("--grid", action="append", default=[], help="a grid file's causal shapes (repeatable, globs)")
    ap.add_argument("--tile", default="128x128,192x128", help="tiles, comma-separated (default %(default)s)")
    ap.add_argument("--form", choices=("persist", "plain", "v1"), default="persist",
                    help="sm90a's persistent or plain grid, or version 1's (version 1.2's order; "
                    "--tile BRxBC, --slots, --l2-mb)")
    ap.add_argument("--slots", type=int, default=2 * SMS,
                    help="v1: resident blocks, SMs x blocks an SM (default %(default)s)")
    ap.add_argument("--l2-mb", type=int, default=50, help="v1: the L2 in MB (chunks within a sixth; default 50)")
    ap.add_argument("--cap", type=int, default=TAIL_BUDGETS * CHUNK_BYTES >> 20,
                    help="the merged chunk's K/V in MB at most, as ATTUNE_SM90_TAIL_MERGE (default %(default)s)")
    ap.add_argument("--min-sq", type=int, default=256, help="skip grid shapes with fewer queries")
    ap.add_argument("--check", action="store_true", help="the model against measured ratios")
    a = ap.parse_args()
    if a.check:
        check()
        return 0
    shapes = [parse_key(k) for k in a.shape]
    for pat in a.grid:
        files = sorted(glob.glob(pat))
        if not files:
            raise SystemExit(f"sched_sim.py: no grid file {pat}")
        for f in files:
            for s in json.load(open(f)).get("shapes", []):
                if s.get("causal") and s["sq"] >= a.min_sq:
                    es = 1 if s.get("dtype") == "e4m3" else 2
                    shapes.append(tuple(s[k] for k in ("b", "hq", "hkv", "sq", "skv", "d")) + (es,))
    shapes = list(dict.fromkeys(shapes))
    if not shapes:
        ap.error("name a --shape or a --grid (or --check)")
    if a.form == "v1":
        return main_v1(a, shapes)
    tiles = [int(t.split("x")[0]) for t in a.tile.split(",")]
    lines = ["| shape | tile | items | chunk | last chunk (old -> new) | eff old | eff new | new / old |",
             "|---|---|---:|---:|---|---:|---:|---:|"]
    ratios = []
    for s in shapes:
        for br in tiles:
            if br not in TILE_COST or (br == 192 and s[5] > 128):
                continue
            old, new = model(s, br, a.form, 0), model(s, br, a.form, a.cap << 20)
            r = new["makespan"] / old["makespan"]
            ratios.append(r)
            key = "b%d.hq%d.hkv%d.sq%d.skv%d.d%d" % s[:6] + (".e4m3" if s[6] == 1 else "")
            lines.append(f"| {key} | {br}x128 | {old['items']} | {old['chunk']} | {old['clast']} -> {new['clast']} | "
                         f"{old['ideal'] / old['makespan']:.3f} | {new['ideal'] / new['makespan']:.3f} | {r:.3f} |")
    if not ratios:
        ap.error("no shape has one of the tiles asked for (192x128: d <= 128 only)")
    print("\n".join(lines))
    g = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"\n{len(ratios)} shape-tiles ({a.form}; unfolded, tiles of 128 keys): new / old geomean {g:.3f}, "
          f"best {min(ratios):.3f}, worst {max(ratios):.3f}")
    return 0


def main_v1(a, shapes):
    """The table of version 1.2's order against version 1's."""
    tiles = []
    for t in a.tile.split(","):
        m = re.match(r"(\d+)x(\d+)$", t)
        if not m:
            raise SystemExit(f"sched_sim.py: --tile {t}: BRxBC, e.g. 64x64")
        tiles.append((int(m.group(1)), int(m.group(2))))
    lines = [f"| shape | tile | items | chunk | last chunk | eff old | eff new | new / old |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    ratios = []
    for s in shapes:
        for br, bc in tiles:
            m = model_v1(s, br, bc, a.slots, a.l2_mb)
            (mo, io), (mn, inn) = m["old"], m["new"]
            ratios.append(mn / mo)
            key = "b%d.hq%d.hkv%d.sq%d.skv%d.d%d" % s[:6]
            lines.append(f"| {key} | {br}x{bc} | {m['items']} | {m['chunk']} | {m['clast']} | "
                         f"{io / mo:.3f} | {inn / mn:.3f} | {mn / mo:.3f} |")
    print("\n".join(lines))
    g = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"\n{len(ratios)} shape-tiles (v1, {a.slots} slots, {a.l2_mb} MB of L2): new / old geomean {g:.3f}, "
          f"best {min(ratios):.3f}, worst {max(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
