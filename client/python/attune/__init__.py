"""attune: run the attention tactic attune picked, from Python.

    import attune.torch
    out = attune.torch.attention(q, k, v, is_causal=True)   # like SDPA

attune.torch needs PyTorch; attune.hf registers attn_implementation="attune"
with Hugging Face transformers; attune.lib is the ctypes layer over
libattune.so (kernels/libattune.h), usable with numpy on the CPU device.
Nothing here is built against torch: the library is loaded with ctypes.
"""
from .lib import AttuneError, Auto, bucket_len, load, run_numpy

__all__ = ["AttuneError", "Auto", "bucket_len", "load", "run_numpy"]
