"""run_winner.py -- ask attuned for a shape's tactic and run it on numpy arrays (docs/libattune.md).
PYTHONPATH=client/python ATTUNE_LIB=build/libattune.so.1 python3 docs/examples/run_winner.py [URL]
(build/cpu-only/libattune.so.1 where make run built without CUDA; a python3 with numpy:
Debian's /usr/bin/python3 after scripts/deps.sh)"""
import sys

import numpy as np

import attune

auto = attune.Auto("cpu", url=sys.argv[1] if len(sys.argv) > 1 else None)
rng = np.random.default_rng(0)
q = rng.standard_normal((1, 8, 50, 64)).astype(np.float16)      # [b, hq, sq, d]
k = rng.standard_normal((1, 1, 128, 64)).astype(np.float16)     # one KV head: [b, hkv, skv, d]
v = rng.standard_normal((1, 1, 128, 64)).astype(np.float16)
tactic, source, planned = auto.prepare((1, 8, 1, 50, 128, 64, 0, 0))  # b hq hkv sq skv d f16 causal
out = attune.lib.run_numpy_with(auto, q, k, v)                  # every call: the planned tactic
print("%s (%s, planned %s): ran, out[0, 0, 0, :3] = %s" % (tactic, source, planned, out[0, 0, 0, :3]))
