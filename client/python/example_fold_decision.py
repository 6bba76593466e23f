#!/usr/bin/env python3
"""example_fold_decision.py -- a graph pass's use of attune.

For one attention node of a model graph (the shape of its q, k, v), ask
attuned which tactic wins on the target device and turn the answer into the
two rewrites a lowering pass controls:

* fold shared-KV heads: when the winner is `folded`, the g = hq/hkv query
  heads that share a KV head are folded into the rows of one GEMM,
  q.reshape(b, hkv, g*sq, d) @ k.transpose(-1, -2) (DESIGN.md: halved kernel
  time on A100/H100 for hkv=1, d=256, but slower on a Jetson Orin: measure,
  do not guess);
* pad: sq and skv rounded up to the tactic's pad, the padded keys masked
  before the softmax and the padded query rows dropped (pad=8 fixed wrong
  results of a fused kernel at seq_len 900).

When attuned is unreachable the answer is the documented default
(fused/pad=8): no folding, pad to 8. The pass never fails because of attune.

    python3 example_fold_decision.py --url http://127.0.0.1:7373 --device cpu \
        --b 1 --hq 8 --hkv 1 --sq 50 --skv 128 --d 64 --dtype f16

--device is "cpu" by default (what a fresh `make run` tunes); give a CUDA
ordinal such as 0 (the first GPU) or a device name for a GPU, e.g.
--device 0 --skv 1018 --d 256.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attune_client import Client  # noqa: E402


def round_up(x, m):
    return (x + m - 1) // m * m


def decide(node, answer):
    """The rewrite plan for an attention node from attune's answer."""
    g = node["hq"] // node["hkv"]
    pad = answer.pad if answer.pad and answer.pad > 0 else 8
    fold = answer.variant == "folded" and g > 1
    plan = {
        "tactic": answer.tactic,
        "source": answer.source,
        "stale": answer.stale,
        "fold_kv_heads": fold,
        "group": g,
        "pad": pad,
        "sq_padded": round_up(node["sq"], pad),
        "skv_padded": round_up(node["skv"], pad),
        "mask_padded_keys": round_up(node["skv"], pad) != node["skv"],
        "drop_padded_rows": round_up(node["sq"], pad) != node["sq"],
        "fallback": answer.fallback,
    }
    if fold:
        plan["q_view"] = [node["b"], node["hkv"], g * plan["sq_padded"], node["d"]]
        plan["gemm"] = "q_view @ k^T per (b, kv head): %d rows x %d keys" % (
            g * plan["sq_padded"], plan["skv_padded"])
    else:
        plan["gemm"] = "per query head (%s)" % (answer.variant or "fused")
    if answer.source == "nearest":
        plan["from_shape"] = answer.from_shape
        plan["distance"] = answer.distance
    if answer.error:
        plan["why_fallback"] = answer.error
    return plan


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=None)
    ap.add_argument("--device", default="cpu",
                    help="cpu (default), a CUDA ordinal (0: the first GPU), id or name")
    ap.add_argument("--timeout", type=float, default=0.5)
    for k, v in (("b", 1), ("hq", 8), ("hkv", 1), ("sq", 50), ("skv", 128), ("d", 64)):
        ap.add_argument("--" + k, type=int, default=v)
    ap.add_argument("--dtype", default="f16")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--max-rel-err", type=float, default=0.0)
    args = ap.parse_args()
    node = {k: getattr(args, k) for k in ("b", "hq", "hkv", "sq", "skv", "d", "dtype")}
    node["causal"] = args.causal
    client = Client(args.url, timeout=args.timeout)
    answer = client.lookup_shape(node, device=args.device, max_rel_err=args.max_rel_err)
    print(json.dumps({"node": node, "plan": decide(node, answer)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
