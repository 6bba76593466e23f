#!/usr/bin/env python3
"""test_torch_binding.py (label gpu) -- attune.torch.attention and
attn_implementation="attune" on CUDA device 0, against float64 and SDPA.

- attention() on [b, h, s, d] tensors and [b, s, h, d] views (a fused QKV
  projection's output), MHA/GQA/MQA, f16/bf16, causal prefill, top-left
  causal with fewer queries than keys (as SDPA), bottom-right on request,
  a decode loop over a growing KV cache (one plan per length bucket: the
  planned shape does not change inside a bucket), each against a float64
  reference;
- calls attune does not cover (a mask, dropout, another scale) equal SDPA's
  result exactly (they are SDPA);
- a run captured in a CUDA graph and replayed on new inputs; a shape met
  first under a capture (torch's own capture stream) runs SDPA, captured
  whole, planning nothing;
- inputs that need a gradient run SDPA (its gradients, bit for bit);
  under no_grad the same call runs attune;
- transformers: a small Llama-architecture model (GQA) and a ViT with
  attn_implementation "attune" against "sdpa": logits of a prefill and of
  decode steps with a KV cache within bf16's bound, every call through
  attune; a padded batch falls back to sdpa for its masked calls.

Exit 77 without torch or a GPU. Environment: ATTUNE_LIB (libattune.so.1),
ATTUNE_SOURCE_DIR; ATTUNE_URL unset means no daemon (default tactic).
"""
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.environ.get("ATTUNE_SOURCE_DIR", os.path.join(HERE, "..", "..")),
                                "client", "python"))
try:
    import torch
except ImportError:
    print("skip: no torch")
    sys.exit(77)
if not torch.cuda.is_available():
    print("skip: no CUDA device")
    sys.exit(77)

import attune.torch as at  # noqa: E402
import attune.lib  # noqa: E402

failures = []
TOL = {torch.float16: 3e-3, torch.bfloat16: 2e-2, torch.float32: 1e-5}


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def ref(q, k, v, causal, align="bottom_right"):
    q, k, v = (x.double() for x in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    sq, skv = q.shape[2], k.shape[2]
    if causal:
        off = skv - sq if align == "bottom_right" else 0
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(skv, device=q.device)[None, :]
        s = s.masked_fill(j > i + off, float("-inf"))
    return torch.softmax(s, -1) @ v


def rel(a, b):
    return ((a.double() - b).norm() / b.norm()).item()


def rnd(*shape, dtype=torch.float16):
    return torch.randn(*shape, device="cuda", dtype=dtype)


def sdpa_cases():
    torch.manual_seed(0)
    cases = [(2, 8, 8, 300, 300, 64, torch.float16, True),
             (1, 32, 8, 1024, 1024, 128, torch.bfloat16, True),
             (2, 8, 1, 77, 77, 256, torch.bfloat16, False),
             (4, 16, 16, 257, 257, 64, torch.float16, False),
             (1, 8, 2, 1, 333, 128, torch.float16, False)]
    for b, hq, hkv, sq, skv, d, dt, causal in cases:
        q, k, v = rnd(b, hq, sq, d, dtype=dt), rnd(b, hkv, skv, d, dtype=dt), rnd(b, hkv, skv, d, dtype=dt)
        out = at.attention(q, k, v, is_causal=causal, enable_gqa=hq != hkv)
        e = rel(out, ref(q, k, v, causal))
        check(out.shape == q.shape and e < TOL[dt], "attention b%d hq%d hkv%d sq%d skv%d d%d %s %s: %.2e"
              % (b, hq, hkv, sq, skv, d, dt, "c" if causal else "nc", e))
    # [b, s, h, d] views out of a fused QKV projection: no copy
    b, s, h, d = 2, 200, 8, 64
    qkv = rnd(b, s, 3, h, d)
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    out = at.attention(q, k, v, is_causal=True)
    e = rel(out, ref(q, k, v, True))
    check(e < TOL[torch.float16], "views of a [b, s, 3, h, d] projection: %.2e" % e)
    # top-left (SDPA's) vs bottom-right alignment with fewer queries than keys
    q, k, v = rnd(1, 4, 40, 64), rnd(1, 4, 100, 64), rnd(1, 4, 100, 64)
    tl = at.attention(q, k, v, is_causal=True)
    sd = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    check(rel(tl, sd.double()) < TOL[torch.float16], "top-left causal sq<skv is SDPA's: %.2e" % rel(tl, sd.double()))
    br = at.attention(q, k, v, is_causal=True, causal_alignment="bottom_right")
    check(rel(br, ref(q, k, v, True)) < TOL[torch.float16], "bottom-right on request")
    # not covered: SDPA itself, bit for bit
    mask = torch.rand(1, 1, 40, 100, device="cuda") > 0.3
    a = at.attention(q, k, v, attn_mask=mask)
    check(torch.equal(a, torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)),
          "a mask: SDPA's result")
    a = at.attention(q, k, v, scale=0.3)
    check(torch.equal(a, torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=0.3)),
          "another scale: SDPA's result")


def decode_loop():
    torch.manual_seed(1)
    b, hq, hkv, d, s0, steps = 4, 32, 8, 128, 2050, 40
    cache_k, cache_v = rnd(b, hkv, s0 + steps, d, dtype=torch.bfloat16), rnd(b, hkv, s0 + steps, d, dtype=torch.bfloat16)
    worst, planned = 0.0, set()
    for t in range(steps):
        skv = s0 + t + 1
        q = rnd(b, hq, 1, d, dtype=torch.bfloat16)
        k, v = cache_k[:, :, :skv], cache_v[:, :, :skv]  # a slice of the cache: a view
        out = at.attention(q, k, v, enable_gqa=True)
        worst = max(worst, rel(out, ref(q, k, v, False)))
        planned.add(at.prepare(q, k, v)[2])
    check(worst < TOL[torch.bfloat16] and len(planned) == 1,
          "decode over a growing cache (skv %d..%d): worst %.2e, planned %s" % (s0 + 1, s0 + steps, worst, planned))


def graph_capture():
    torch.manual_seed(2)
    q, k, v = rnd(2, 16, 128, 64), rnd(2, 4, 512, 64), rnd(2, 4, 512, 64)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        at.attention(q, k, v, is_causal=True, enable_gqa=True, causal_alignment="bottom_right")  # plans
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        out = at.attention(q, k, v, is_causal=True, enable_gqa=True, causal_alignment="bottom_right")
    for _ in range(2):
        q.copy_(rnd(*q.shape)), k.copy_(rnd(*k.shape)), v.copy_(rnd(*v.shape))
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
    e = rel(out, ref(q, k, v, True))
    check(e < TOL[torch.float16], "captured in a CUDA graph, replayed on new inputs: %.2e" % e)
    # a shape met first under a capture (torch's own capture stream: no
    # stream= given): SDPA for it, the capture whole, SDPA's result
    q2, k2, v2 = rnd(1, 8, 96, 64), rnd(1, 8, 96, 64), rnd(1, 8, 96, 64)
    plans = at._auto(q2).stats()["plans"]
    g2 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g2):
        out2 = at.attention(q2, k2, v2)
    g2.replay()
    torch.cuda.synchronize()
    want = torch.nn.functional.scaled_dot_product_attention(q2, k2, v2)
    check(at._auto(q2).stats()["plans"] == plans and rel(out2, want.double()) < 1e-3,
          "a shape met first under a capture: SDPA captured, nothing planned (%.2e)"
          % rel(out2, want.double()))


def autograd():
    """Inputs that need a gradient run SDPA (attune has no backward pass):
    the gradients are SDPA's; under no_grad the same call runs attune."""
    torch.manual_seed(3)
    q, k, v = (rnd(1, 4, 64, 64).requires_grad_() for _ in range(3))
    out = at.attention(q, k, v, is_causal=True)
    out.float().square().sum().backward()
    got = [x.grad.clone() for x in (q, k, v)]
    for x in (q, k, v):
        x.grad = None
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    want.float().square().sum().backward()
    check(all(torch.equal(a, x.grad) for a, x in zip(got, (q, k, v))),
          "requires_grad: SDPA's output and gradients, bit for bit")
    with torch.no_grad():
        runs = at._auto(q).stats()["runs"]
        at.attention(q, k, v, is_causal=True)
        check(at._auto(q).stats()["runs"] == runs + 1, "under no_grad: attune runs it")
    # a decode step asked bottom-right that falls back (it needs a gradient):
    # SDPA gets the bottom-right mask, not its own top-left is_causal
    qd = rnd(1, 4, 1, 64).requires_grad_()
    kd, vd = rnd(1, 4, 33, 64), rnd(1, 4, 33, 64)
    out = at.attention(qd, kd, vd, is_causal=True, causal_alignment="bottom_right")
    e = rel(out.detach(), ref(qd.detach(), kd, vd, True))
    check(e < TOL[torch.float16], "a bottom-right fallback keeps bottom-right: %.2e" % e)


def hf_models():
    try:
        import transformers
        import attune.hf as ah
    except ImportError as ex:
        print("skip transformers: %s" % ex)
        return
    from transformers import LlamaConfig, LlamaForCausalLM, ViTConfig, ViTModel
    torch.manual_seed(3)
    cfg = LlamaConfig(vocab_size=1000, hidden_size=512, intermediate_size=1024, num_hidden_layers=2,
                      num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=4096)
    with torch.device("cuda"):
        m = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    ids = torch.randint(0, 1000, (2, 300), device="cuda")
    outs = {}
    for impl in ("sdpa", "attune"):
        ah.use(m, impl)
        ah.calls.update(attune=0, sdpa=0)
        with torch.no_grad():
            r = m(ids, use_cache=True)
            logits = [r.logits[:, -1].float()]
            cache, nxt = r.past_key_values, ids[:, -1:]
            for _ in range(5):
                r = m(nxt, past_key_values=cache, use_cache=True)
                logits.append(r.logits[:, -1].float())
                cache = r.past_key_values
        outs[impl] = (torch.stack(logits), dict(ah.calls))
    e = rel(outs["attune"][0], outs["sdpa"][0].double())
    check(e < TOL[torch.bfloat16] and outs["attune"][1]["attune"] == 2 * 6 and outs["attune"][1]["sdpa"] == 0,
          "llama-like GQA: prefill + 5 cached decode steps vs sdpa: logits %.2e, calls %s" % (e, outs["attune"][1]))
    # a padded batch: masked calls go to sdpa, results still sdpa's
    mask = torch.ones_like(ids)
    mask[0, :50] = 0
    res = {}
    for impl in ("sdpa", "attune"):
        ah.use(m, impl)
        ah.calls.update(attune=0, sdpa=0)
        with torch.no_grad():
            res[impl] = (m(ids, attention_mask=mask).logits[:, -1].float(), dict(ah.calls))
    check(torch.equal(res["attune"][0], res["sdpa"][0]) and res["attune"][1]["sdpa"] > 0,
          "a padded batch: sdpa for the masked calls (%s)" % res["attune"][1])
    vcfg = ViTConfig(hidden_size=256, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512,
                     image_size=224, patch_size=14)
    with torch.device("cuda"):
        vm = ViTModel(vcfg).to(torch.float16).eval()
    px = torch.randn(4, 3, 224, 224, device="cuda", dtype=torch.float16)
    o = {}
    for impl in ("sdpa", "attune"):
        ah.use(vm, impl)
        ah.calls.update(attune=0, sdpa=0)
        with torch.no_grad():
            o[impl] = (vm(px).last_hidden_state.float(), dict(ah.calls))
    e = rel(o["attune"][0], o["sdpa"][0].double())
    check(e < TOL[torch.float16] * 3 and o["attune"][1]["attune"] == 2,
          "ViT (257 tokens, non-causal) vs sdpa: %.2e, calls %s" % (e, o["attune"][1]))


def main():
    print("libattune %s; torch %s" % (attune.lib.load()._name, torch.__version__))
    for part in (sdpa_cases, decode_loop, graph_capture, autograd, hf_models):
        try:
            part()
        except Exception as ex:  # one broken part must not hide the others
            import traceback
            traceback.print_exc()
            check(False, "%s raised %r" % (part.__name__, ex))
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
