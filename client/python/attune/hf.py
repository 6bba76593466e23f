"""attn_implementation="attune" for Hugging Face transformers.

    import attune.hf                       # registers "attune"
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="attune")

The attention function takes the arguments transformers' sdpa path takes
and makes the same decisions (transformers/integrations/sdpa_attention.py):
causal only without a mask and with more than one query, the keys cropped
to the queries when a causal prefill meets longer keys (an empty static
cache). Masks are built as for sdpa (the same mask function is registered),
so a batch without padding gets no mask at all and runs attune: prefill,
decode with a KV cache (fewer queries than keys: the query rows are the
last ones, which is attune's bottom-right alignment), GQA and MQA without
repeating K and V. What attune cannot express runs transformers' own sdpa
function, said once per reason (logger "attune"): a padding or other mask,
dropout, a scale other than 1/sqrt(d), output_attentions, position biases,
inputs that need a gradient (training), a shape met first under a CUDA
graph capture (attune.torch's reasons).
"""
import logging

from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from . import torch as _at

_log = logging.getLogger("attune")
_warned = set()
calls = {"attune": 0, "sdpa": 0}  # how many calls went where (for benchmarks)


def _sdpa(reason, *args, **kwargs):
    if reason not in _warned:
        _warned.add(reason)
        _log.warning("attune: transformers' sdpa for this call (%s)", reason)
    calls["sdpa"] += 1
    return sdpa_attention_forward(*args, **kwargs)


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                      is_causal=None, **kwargs):
    """transformers' attention interface: query [b, hq, sq, d], key and
    value [b, hkv, skv, d]; returns ([b, sq, hq, d], None)."""
    args = (module, query, key, value, attention_mask)
    kw = dict(dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs)
    if kwargs.get("output_attentions") or kwargs.get("position_bias") is not None:
        return _sdpa("attention weights or a position bias", *args, **kw)
    why = _at._why_not(query, key, value, attention_mask, dropout, scaling)
    if why is not None:
        return _sdpa(why, *args, **kw)
    sq, skv = query.shape[2], key.shape[2]
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    causal = bool(causal) and sq > 1
    if causal and skv > sq:
        # sdpa_attention_forward's rule: only an empty static cache gets here
        key, value = key[:, :, :sq], value[:, :, :sq]
    try:
        out = _at.run_bshd(query, key, value, causal)
    except _at._lib.AttuneError as e:
        why = _at.NOT_PREPARED if e.code == _at._lib.EBUSY else _at._FALLBACK_CODES.get(e.code)
        if why is None:
            raise
        return _sdpa(why, *args, **kw)
    calls["attune"] += 1
    return out, None


def use(model, impl):
    """Switch model's attention implementation ("attune", "sdpa", "eager")
    after it was built: transformers' own switch where it has one, else the
    configs' field every attention layer reads."""
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(impl)
        return
    for m in model.modules():
        cfg = getattr(m, "config", None)
        if cfg is not None:
            cfg._attn_implementation = impl


def register(name="attune"):
    """Register attune under name with transformers (done on import)."""
    AttentionInterface.register(name, attention_forward)
    AttentionMaskInterface.register(name, sdpa_mask)


register()
