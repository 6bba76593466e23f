"""attune.torch.attention: torch.nn.functional.scaled_dot_product_attention
through attune (libattune's attune_auto, loaded with ctypes: nothing is
built against torch).

    import attune.torch
    out = attune.torch.attention(q, k, v, is_causal=True, enable_gqa=True)

Covered calls run the tactic attuned answers for the shape (tune on miss
included; the default tactic when no daemon answers), on torch's current
stream, without a copy for [b, h, s, d] tensors and views of [b, s, h, d]
ones. Everything else calls SDPA itself, and says why once per reason
(logging, logger "attune"): an attn_mask, dropout, a scale other than
1/sqrt(d), dtypes other than float16/bfloat16/float32, tensors on different
devices or not 16-byte aligned, empty tensors, top-left causal calls with
more queries than keys (see below), inputs that need a gradient (attune
has no backward pass: training runs SDPA's, so gradients flow), and a
shape not prepared on a stream that is capturing a CUDA graph.

Causal alignment: SDPA's is_causal is top-left (query i sees keys j <= i);
attune's kernels are bottom-right (j <= i + skv - sq, what a decode step
over a KV cache needs). With sq == skv they agree. attention() follows SDPA
by default: for sq < skv it runs the first sq keys (what top-left means);
causal_alignment="bottom_right" asks for attune's own alignment.

CUDA graphs: run each shape once outside the capture (or prepare() it)
on the stream the capture will use: planning allocates; a captured run of
a planned shape does not. torch.cuda.graph captures on a side stream of
its own unless given stream=, so warm up on that stream (a shape met
first under capture runs SDPA, with the reason said once).
"""
import logging
import math

import torch

from . import lib as _lib

_log = logging.getLogger("attune")
_DTYPES = {torch.float16: 0, torch.bfloat16: 1, torch.float32: 2}
_warned = set()
_ELEM = {torch.float16: 2, torch.bfloat16: 2, torch.float32: 4}
_MAX_DIM, _MAX_HEADDIM, _MAX_ELEMS = 1 << 20, 1024, 1 << 34  # common/shape.h
# libattune's answers a call falls back to SDPA for, with what to say
_FALLBACK_CODES = {_lib.EUNSUPP: "a shape no attune tactic runs here (EUNSUPP)",
                   _lib.ENOMEM: "out of memory planning the shape (ENOMEM)"}


def _say_once(what, reason):
    if reason not in _warned:
        _warned.add(reason)
        _log.warning("attune: %s (%s)", what, reason)


def _fallback(reason, q, k, v, **kw):
    _say_once("calling SDPA", reason)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, **kw)


def _device_word(t):
    return "cpu" if t.device.type == "cpu" else str(t.device.index)


# The checks' answers by everything they read but the data pointers (the
# shapes, strides, dtypes, devices and scale of a call): a model's calls
# repeat a few of these, and the checks cost several microseconds of the
# host's time per call, which a decode loop outside a CUDA graph waits for
# (bench/host_overhead.py). Bounded: cleared when full.
_WHY_CACHE = {}
_WHY_CACHE_MAX = 4096
_MISS = object()


def _why_not(q, k, v, attn_mask, dropout_p, scale):
    """Why attune does not run this call (None when it does)."""
    if attn_mask is not None:
        return "an attn_mask"
    if dropout_p:
        return "dropout"
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return "inputs that need a gradient (attune has no backward pass)"
    key = (q.shape, k.shape, v.shape, q.stride(), k.stride(), v.stride(), q.dtype, k.dtype,
           v.dtype, q.device, k.device, v.device, scale)
    why = _WHY_CACHE.get(key, _MISS)
    if why is _MISS:
        why = _why_not_layout(q, k, v, scale)
        if len(_WHY_CACHE) >= _WHY_CACHE_MAX:
            _WHY_CACHE.clear()
        _WHY_CACHE[key] = why
    if why is None and (q.data_ptr() | k.data_ptr() | v.data_ptr()) % 16:
        return "a tensor whose rows are not 16-byte aligned with a contiguous head dim"
    return why


def _why_not_layout(q, k, v, scale):
    """_why_not's checks of everything but the masks, dropout and the data
    pointers' alignment."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        return "tensors not 4-d [b, h, s, d]"
    if q.numel() == 0 or k.numel() == 0 or v.numel() == 0:
        return "an empty tensor"
    if q.dtype not in _DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        return "dtype %s" % q.dtype
    if not (q.device == k.device == v.device) or q.device.type not in ("cuda", "cpu"):
        return "tensors on different devices or not on CUDA/CPU"
    d = q.shape[3]
    if scale is not None and not math.isclose(scale, 1.0 / math.sqrt(d), rel_tol=1e-6):
        return "a scale other than 1/sqrt(d)"
    # attune's size limits (common/shape.h): past them a plan is refused
    if max(q.shape[0], q.shape[1], q.shape[2], k.shape[1], k.shape[2]) > _MAX_DIM or \
            d > _MAX_HEADDIM or max(q.numel(), k.numel()) > _MAX_ELEMS:
        return "a shape over attune's size limits"
    if k.shape[3] != d or v.shape[3] != d or tuple(k.shape) != tuple(v.shape):
        return "k and v shapes differ from each other or from q's head dim"
    if q.shape[0] != k.shape[0] or q.shape[1] % k.shape[1] != 0:
        return "batch or head counts that do not group"
    e = _ELEM[q.dtype]
    for t in (q, k, v):
        if t.stride(3) != 1 or any((s * e) % 16 for s in t.stride()[:3]):
            return "a tensor whose rows are not 16-byte aligned with a contiguous head dim"
    return None


try:  # the current stream's address without building a torch.cuda.Stream
    _raw_stream = torch._C._cuda_getCurrentRawStream
except AttributeError:  # pragma: no cover (older torch)
    _raw_stream = None
_AUTOS = {}  # torch.device -> attune.lib.Auto (lib.auto_for's, looked up once)


def _stream(t):
    if not t.is_cuda:
        return 0
    if _raw_stream is not None:
        return _raw_stream(t.device.index)
    return torch.cuda.current_stream(t.device).cuda_stream


def _auto(t):
    a = _AUTOS.get(t.device)
    if a is None or not a._auto:  # none yet, or closed since
        a = _AUTOS[t.device] = _lib.auto_for(_device_word(t))
    return a


def _view(t):
    return (t.data_ptr(), t.stride(0), t.stride(1), t.stride(2))


def run_bshd(q, k, v, causal, out=None):
    """attune on q [b, hq, sq, d], k/v [b, hkv, skv, d] views (any strides
    libattune reads), causal bottom-right. Returns out as a [b, sq, hq, d]
    contiguous tensor (what a model's output projection reads). No checks:
    attention() and attune.hf make them."""
    b, hq, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    if out is None:
        out = torch.empty((b, sq, hq, d), dtype=q.dtype, device=q.device)
    dims = (b, hq, hkv, sq, skv, d, _DTYPES[q.dtype], 1 if causal else 0)
    o = (out.data_ptr(), out.stride(0), out.stride(2), out.stride(1))
    _auto(q).run(dims, _view(q), _view(k), _view(v), o, _stream(q))
    return out


def _causal_keys(query, key, value, is_causal, causal_alignment):
    """(why not, key, value): the keys attune runs for this call's causal
    alignment (top-left over fewer queries than keys: the first sq)."""
    if causal_alignment not in ("top_left", "bottom_right"):
        raise ValueError("causal_alignment is 'top_left' or 'bottom_right'")
    sq, skv = query.shape[-2], key.shape[-2]
    if is_causal and causal_alignment == "top_left" and sq != skv:
        if sq > skv:
            return "top-left causal with more queries than keys", key, value
        key, value = key[:, :, :sq], value[:, :, :sq]  # keys past sq are never seen
    return None, key, value


def attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
              enable_gqa=False, causal_alignment="top_left"):
    """torch.nn.functional.scaled_dot_product_attention's signature and
    result ([b, hq, sq, d]), through attune where it covers the call."""
    why, k, v = _causal_keys(query, key, value, is_causal, causal_alignment)
    if why is None:
        why = _why_not(query, k, v, attn_mask, dropout_p, scale)
    if why is None and query.shape[1] != key.shape[1] and not enable_gqa:
        why = "hq != hkv without enable_gqa (SDPA says what it wants)"
    if why is None:
        try:
            return run_bshd(query, k, v, is_causal).transpose(1, 2)
        except _lib.AttuneError as e:
            why = NOT_PREPARED if e.code == _lib.EBUSY else _FALLBACK_CODES.get(e.code)
            if why is None:
                raise
    kw = dict(attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale)
    if enable_gqa:  # only when asked: torch before 2.5 has no such argument
        kw["enable_gqa"] = enable_gqa
    sq, skv = query.shape[-2], key.shape[-2]
    if is_causal and causal_alignment == "bottom_right" and sq != skv and attn_mask is None:
        # SDPA's is_causal is top-left: the fallback gets the bottom-right mask
        kw["attn_mask"] = torch.ones(sq, skv, dtype=torch.bool, device=query.device).tril(skv - sq)
        kw["is_causal"] = False
    return _fallback(why, query, key, value, **kw)


# Why a call under a CUDA graph capture ran SDPA (libattune's EBUSY).
NOT_PREPARED = ("a shape not prepared on the capturing stream (attune.torch.prepare it, "
                "or run it once, on that stream before the capture)")


def prepare(query, key, value, is_causal=False, causal_alignment="top_left"):
    """Look up and plan, on the current stream and without running, the
    shape attention() with these arguments runs (before a CUDA graph
    capture). Returns (tactic, source, planned shape), or None when
    attention() would call SDPA for it (the reason said once)."""
    why, key, value = _causal_keys(query, key, value, is_causal, causal_alignment)
    if why is None:
        why = _why_not(query, key, value, None, 0.0, None)
    if why is not None:
        _say_once("nothing to prepare, SDPA runs this call", why)
        return None
    b, hq, sq, d = query.shape
    dims = (b, hq, key.shape[1], sq, key.shape[2], d, _DTYPES[query.dtype], int(bool(is_causal)))
    return _auto(query).prepare(dims, _stream(query))
