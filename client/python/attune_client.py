"""attune_client -- ask a running attuned which attention tactic to use.

Standard library only (urllib, json), for Python runtimes, graph lowering
passes and engine builders. The same behaviour as the C client
(client/attune.h):

    from attune_client import Client
    c = Client("http://127.0.0.1:7373", timeout=0.2)
    a = c.lookup(device="cpu", b=1, hq=8, hkv=1, sq=50, skv=128, d=64, dtype="f16")
    a = c.lookup_shape("b1.hq8.hkv1.sq50.skv128.d64.f16.nc", device="cpu")  # the same
    a.tactic   # "folded/acc=f32/pad=8"
    a.source   # "measured", "nearest" (a.from_shape, a.distance) or "default"
    a.stale    # True: measured under another software stack (a.measured_stack)
    a = c.lookup(device="cpu", b=1, hq=8, hkv=1, sq=50, skv=128, d=64, dtype="f16",
                 variants="split,folded")  # the best of what this runtime can run

Without a daemon (a device that ships its table): ``Client(table=PATH)``
answers in process from a database file or an exported table (.json,
.json.gz) with attuned's own lookup code, loaded through ctypes
(libattune_lookup; docs/api.md "Lookups without a daemon").

``device`` is "cpu", a CUDA ordinal ("0" is the first GPU: on a host
without one it is an unknown device, refused with the default answer), a
device id or a device name. Without one (None, the default) a lookup is
for the first local GPU the daemon reports, else its CPU (GET /v1/devices,
asked once and kept for cache_ttl); a table: its GPU 0, else its CPU. The
C client does the same.

A lookup never raises because of the daemon: when it is unreachable, slow
or refuses the question, the answer is the documented default
(DEFAULT_TACTIC, source "default") and ``answer.code`` says why (FALLBACK,
REJECTED; INVALID when the arguments are wrong and nothing was asked). Answers from the daemon are cached (bounded LRU with a time to
live); after a failure to reach the daemon, lookups fall back at once for
``retry_interval`` seconds instead of waiting for the timeout each time.
A Client may be shared between threads.
"""

import json
import math
import os
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import OrderedDict

__all__ = ["Client", "Answer", "DEFAULT_TACTIC", "DEFAULT_URL", "OK", "FALLBACK",
           "REJECTED", "INVALID", "VARIANTS", "default_answer", "parse_shape_key",
           "canon_variants"]

#: The answer when nothing better is known (identical to the daemon's and
#: the C client's): the fused kernel runs every shape; pad=8 keeps rows aligned.
DEFAULT_TACTIC = "fused/pad=8"
DEFAULT_URL = "http://127.0.0.1:7373"

OK = 0          # the daemon answered (maybe from the cache)
SHORT_TTL = 1.0  # seconds an answer that is not "measured" stays cached
FALLBACK = 1    # unreachable, timed out or failing: default answer
REJECTED = 2    # the daemon refused the question (unknown device, bad shape)
INVALID = -1    # bad arguments: default answer, no request made

_DTYPES = ("f16", "bf16", "f32", "e4m3")
_MAX_DIM = 1 << 20
_LOOPBACK = ("localhost", "127.0.0.1", "::1", "[::1]")
_KEY_RE = re.compile(r"b(\d+)\.hq(\d+)\.hkv(\d+)\.sq(\d+)\.skv(\d+)\.d(\d+)\."
                     r"(f16|bf16|f32|e4m3)\.(c|nc)")


class Answer:
    """One lookup's answer. Numbers are NaN when unknown.

    source: "measured", "fleet" (fleet_device measured it), "nearest" or
    "predicted" (the prediction model), "default", or "pinned" (an
    operator's pin forced the tactic; docs/api.md "Pins"). from_shape: the tuned
    shape that answered (the shape itself for "measured" and "fleet", the
    closest one leaned on for "nearest"/"predicted", "" for "default");
    distance: how far it is in log-shape space (0 for measured, NaN for
    default). stale: measured under another software stack; measured_stack
    is the answering measurement's stack, stack the device's current one
    ("" when unknown). tuning: "queued"/"running" while the daemon tunes
    this shape (tune on miss), "refused: <why>" when its admission refused
    to (predicted over its budget, or its daily quota used), "deferred:
    <why>" while the daemon lists a GPU's tactics for a shape it has not
    seen (a later lookup decides), else "".
    A lookup limited to variants (lookup(variants=...)) that none of them
    can answer has tactic "" and source "none". src_rel_err: for an e4m3
    shape, the error against the bf16 values the FP8 inputs were quantized
    from (the whole cost of FP8), NaN otherwise.
    """

    __slots__ = ("tactic", "variant", "pad", "source", "stale", "time_us", "rel_err",
                 "max_abs_err", "device", "shape", "error", "code", "from_shape",
                 "distance", "measured_stack", "stack", "tuning", "fleet_device",
                 "src_rel_err")

    def __init__(self, tactic, variant, pad, source, stale=False, time_us=math.nan,
                 rel_err=math.nan, max_abs_err=math.nan, device="", shape="", error="",
                 code=OK, from_shape="", distance=math.nan, measured_stack="", stack="",
                 tuning="", fleet_device="", src_rel_err=math.nan):
        self.tactic = tactic
        self.variant = variant
        self.pad = pad
        self.source = source
        self.stale = stale
        self.time_us = time_us
        self.rel_err = rel_err
        self.max_abs_err = max_abs_err
        self.device = device
        self.shape = shape
        self.error = error
        self.code = code
        self.from_shape = from_shape
        self.distance = distance
        self.measured_stack = measured_stack
        self.stack = stack
        self.tuning = tuning
        self.fleet_device = fleet_device
        self.src_rel_err = src_rel_err

    @property
    def fallback(self):
        """True when this is the client's default, not the daemon's answer."""
        return self.code != OK

    def as_dict(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self):
        return "Answer(%s)" % ", ".join("%s=%r" % (k, getattr(self, k)) for k in self.__slots__)


class DtypeChoice:
    """The answer of choose_dtype(): the fastest measured tactic of any of
    the dtypes asked whose error against the bf16 answer is within max_err
    (docs/api.md "Which dtype").

    dtype: the dtype that won ("e4m3", "bf16", ...), None when none
    qualified or attuned could not be asked (keep the bf16 path: answer is
    then the default answer, error says why). answer: the winner's Answer
    (its shape is the winner's dtype's). err: its error against the bf16
    answer (an e4m3 tactic's src_rel_err, a 16/32-bit one's rel_err).
    candidates: attuned's list, one dict per dtype asked with "dtype",
    "shape", "verdict" ("chosen", "slower", "over", "no_source_error",
    "not_measured", "pinned", "unsupported"), "why", "tactic", "time_us",
    "err", "rel_err" (and "src_rel_err" for e4m3)."""

    __slots__ = ("dtype", "answer", "err", "max_err", "candidates", "error", "code")

    def __init__(self, dtype, answer, err=math.nan, max_err=math.nan, candidates=(),
                 error="", code=OK):
        self.dtype = dtype
        self.answer = answer
        self.err = err
        self.max_err = max_err
        self.candidates = list(candidates)
        self.error = error
        self.code = code

    def __repr__(self):
        return "DtypeChoice(%s)" % ", ".join("%s=%r" % (k, getattr(self, k))
                                             for k in self.__slots__)


def default_answer(why="", code=FALLBACK):
    """The documented default answer, with the reason in ``error``."""
    return Answer(DEFAULT_TACTIC, "fused", 8, "default", error=why, code=code)


def _num(v):
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


def _shape_key(b, hq, hkv, sq, skv, d, dtype, causal):
    return "b%d.hq%d.hkv%d.sq%d.skv%d.d%d.%s.%s" % (b, hq, hkv, sq, skv, d, dtype,
                                                    "c" if causal else "nc")


def parse_shape_key(key):
    """The shape dict of a canonical key such as
    "b1.hq8.hkv1.sq50.skv128.d64.f16.nc" (".c": causal). Raises ValueError."""
    m = _KEY_RE.fullmatch(key) if isinstance(key, str) else None
    if m is None:
        raise ValueError("%r is not a shape key like b1.hq8.hkv1.sq50.skv128.d64.f16.nc"
                         % (key,))
    v = [int(x) for x in m.groups()[:6]]
    return {"b": v[0], "hq": v[1], "hkv": v[2], "sq": v[3], "skv": v[4], "d": v[5],
            "dtype": m.group(7), "causal": m.group(8) == "c"}



#: The variant names of DESIGN.md (attuned refuses others).
VARIANTS = ("fused", "fused_splitkv", "split", "split_repeat", "folded", "cudnn")
_NAME_RE = re.compile(r"[a-z0-9_]+")


def canon_variants(variants):
    """The canonical text of a set of variants: names sorted, repeats
    dropped ("split,cudnn" -> "cudnn,split"); "" for None or "" (every
    variant). variants: a comma-separated string or an iterable of names.
    Raises ValueError for anything else (unknown names are attuned's to
    refuse, as the C client leaves them)."""
    if variants is None or variants == "":
        return ""
    names = variants.split(",") if isinstance(variants, str) else list(variants)
    names = [n.strip() if isinstance(n, str) else n for n in names]
    if not names or not all(isinstance(n, str) and _NAME_RE.fullmatch(n) for n in names):
        raise ValueError("variants: %r is not a list of variant names (e.g. "
                         "\"cudnn,split,folded\")" % (variants,))
    return ",".join(sorted(set(names)))


def _fallback(why, vs="", code=FALLBACK):
    """The fallback of a lookup limited to the variants vs (canonical): the
    default answer when vs allows fused (or is empty), else no tactic
    (tactic "", source "none"), as the C client (attune_lookup_in)."""
    if not vs or "fused" in vs.split(","):
        return default_answer(why, code)
    return Answer("", "", 0, "none", error=why, code=code)


def _check_query(device, sizes, dtype):
    """Why a lookup's arguments are wrong, or ""."""
    if not all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= _MAX_DIM
               for v in sizes):
        return "shape sizes must be integers in [1, 2^20]"
    if sizes[1] % sizes[2]:
        return "hq must be a multiple of hkv"
    if dtype not in _DTYPES:
        return "dtype must be f16, bf16, f32 or e4m3"
    if device is not None and (not isinstance(device, str) or not device
                               or len(device) > 128):
        return "device must be a non-empty string (or None: the first local device)"
    return ""


def _answer_of(obj, vs=""):
    """The Answer of a GET /v1/tactic JSON object (a fallback when it is
    malformed)."""
    if (not isinstance(obj, dict) or not isinstance(obj.get("tactic"), str)
            or not isinstance(obj.get("source"), str)):
        return _fallback("malformed answer from attuned", vs)
    pad = obj.get("pad")
    shape = str(obj.get("shape") or "")
    if obj["source"] in ("nearest", "predicted"):
        from_shape, distance = str(obj.get("from_shape") or ""), _num(obj.get("distance"))
    elif obj["source"] in ("measured", "fleet"):
        from_shape, distance = shape, 0.0
    else:
        from_shape, distance = "", math.nan
    return Answer(obj["tactic"], str(obj.get("variant") or ""),
                  pad if isinstance(pad, int) else 0, obj["source"],
                  stale=obj.get("stale") is True, time_us=_num(obj.get("time_us")),
                  rel_err=_num(obj.get("rel_err")), max_abs_err=_num(obj.get("max_abs_err")),
                  device=str(obj.get("device") or ""), shape=shape, from_shape=from_shape,
                  distance=distance, measured_stack=str(obj.get("measured_stack") or ""),
                  stack=str(obj.get("stack") or ""), tuning=str(obj.get("tuning") or ""),
                  fleet_device=str(obj.get("fleet_device") or ""),
                  src_rel_err=_num(obj.get("src_rel_err")))



class _Table:
    """A table file answered in process by libattune_lookup
    (lookup/attune_lookup.h) through ctypes: attuned's lookup code, its
    rules and its JSON. error is "" when the table is open."""

    def __init__(self, path):
        import ctypes
        import ctypes.util
        self._ct, self._lib, self._t, self.error = ctypes, None, None, ""
        name = (os.environ.get("ATTUNE_LOOKUP_LIB") or ctypes.util.find_library("attune_lookup")
                or "libattune_lookup.so.1")
        try:
            lib = ctypes.CDLL(name)
            lib.attune_table_open.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p),
                                              ctypes.c_char_p, ctypes.c_size_t]
            lib.attune_table_tactic.argtypes = [
                ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_longlong),
                ctypes.c_char_p, ctypes.c_int, ctypes.c_double, ctypes.c_char_p,
                ctypes.POINTER(ctypes.c_void_p)]
            lib.attune_table_free.argtypes = [ctypes.c_void_p]
            lib.attune_table_close.argtypes = [ctypes.c_void_p]
            if lib.attune_table_abi() != 1:
                raise OSError("libattune_lookup: not the interface of version 1")
        except (OSError, AttributeError) as e:
            self.error = "cannot load libattune_lookup (%s; installed with attuned, or set " \
                         "ATTUNE_LOOKUP_LIB): %s" % (name, e)
            return
        t, err = ctypes.c_void_p(), ctypes.create_string_buffer(256)
        if lib.attune_table_open(os.fsencode(path), ctypes.byref(t), err, 256) != 0:
            self.error = err.value.decode("utf-8", "replace")
            return
        self._lib, self._t = lib, t

    def tactic(self, q):
        """(status, decoded JSON) of the table's answer to the query pairs
        of GET /v1/tactic; (0, {"error": why}) without a table."""
        if self._t is None:
            return 0, {"error": self.error}
        ct = self._ct
        dims = (ct.c_longlong * 6)(*[int(q[k]) for k in ("b", "hq", "hkv", "sq", "skv", "d")])
        out = ct.c_void_p()
        vs = q.get("variants")
        status = self._lib.attune_table_tactic(
            self._t, q["device"].encode(), dims, q["dtype"].encode(), int(q["causal"]),
            float(q.get("max_rel_err", 0.0)), vs.encode() if vs else None, ct.byref(out))
        if not out.value:
            return 0, {"error": "out of memory"}
        text = ct.string_at(out.value).decode("utf-8")
        self._lib.attune_table_free(out)
        return status, json.loads(text)

    def __del__(self):
        if self._t is not None and self._lib is not None:
            self._lib.attune_table_close(self._t)
            self._t = None

class Client:
    """Client of one attuned.

    url: the daemon (default $ATTUNE_URL, else DEFAULT_URL). timeout: seconds
    per request, connect included. cache_size answers are kept for
    cache_ttl seconds (cache_size 0 disables the cache). token: bearer token
    for request() on POST/DELETE routes.

    table: a database file or an exported table (.json, .json.gz) to answer
    from in process, without a daemon (url "file:PATH" is the same). The
    answers are attuned's own code's: libattune_lookup, loaded through
    ctypes ($ATTUNE_LOOKUP_LIB, else the loader's search path: it is
    installed with attuned), reads the file once and answers by the
    daemon's rules. When it or the file cannot be loaded, every lookup
    falls back (FALLBACK) with the reason in error, as for a daemon that is
    down; table_error says it at once.
    """

    def __init__(self, url=None, timeout=1.0, cache_size=256, cache_ttl=60.0,
                 retry_interval=1.0, token=None, table=None):
        if table is not None:
            url = "file:" + os.fspath(table)
        self.url = (url or os.environ.get("ATTUNE_URL") or DEFAULT_URL).rstrip("/")
        self.timeout = float(timeout) if timeout and timeout > 0 else 1.0
        self.cache_size = max(0, int(cache_size))
        self.cache_ttl = float(cache_ttl)
        self.retry_interval = max(0.0, float(retry_interval))
        self.token = token
        self._lock = threading.Lock()
        self._cache = OrderedDict()   # key -> (expires, Answer)
        self._down_until = 0.0
        self._default_dev, self._default_until = "", 0.0  # a lookup without device
        host = urllib.parse.urlsplit(self.url).hostname or ""
        # a proxy from the environment must not swallow loopback lookups
        handlers = [urllib.request.ProxyHandler({})] if host in _LOOPBACK else []
        self._opener = urllib.request.build_opener(*handlers)
        self._table = None
        self.table_error = ""
        if self.url.startswith("file:"):
            path = self.url[5:]
            self._table = _Table(path[2:] if path.startswith("//") else path)
            self.table_error = self._table.error

    # ---- raw requests

    def request(self, method, path, body=None):
        """Send one request; returns (status, decoded JSON or text). Raises
        OSError (URLError, timeout) when no HTTP answer comes (always for a
        table: there is no daemon to ask)."""
        if self._table is not None:
            raise OSError("%s is a table file, not a daemon" % self.url)
        data = None
        headers = {"Accept": "application/json"}
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        req = urllib.request.Request(self.url + path, data=data, headers=headers,
                                     method=method)
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        try:
            return status, json.loads(raw.decode("utf-8"))
        except ValueError:
            return status, raw.decode("utf-8", "replace")

    # ---- lookups

    def lookup(self, device=None, b=1, hq=1, hkv=1, sq=1, skv=1, d=64, dtype="f16",
               causal=False, max_rel_err=0.0, variants=None):
        """Which tactic to use for this shape on device ("cpu", a CUDA
        ordinal: "0" is the first GPU, a UUID or a name; None: the first
        local GPU the daemon reports, else its CPU). max_rel_err > 0
        overrides the daemon's accuracy bound. variants: the variants the
        caller can run, "cudnn,split" or a list of names (None: all); the
        answer is the best among them, or, when nothing of them can answer,
        tactic "" with source "none" (see Answer). Always returns an Answer;
        never raises for daemon trouble."""
        try:
            vs = canon_variants(variants)
        except ValueError as e:
            return _fallback(str(e), "-", INVALID)
        why = _check_query(device, (b, hq, hkv, sq, skv, d), dtype)
        if why:
            return _fallback(why, vs, INVALID)
        try:
            mre = float(max_rel_err)
        except (TypeError, ValueError):
            mre = -1.0
        if not (0.0 <= mre <= 1.0):
            return _fallback("max_rel_err must be 0 or in (0, 1]", vs, INVALID)
        causal = 1 if causal else 0
        key = (device, _shape_key(b, hq, hkv, sq, skv, d, dtype, causal), mre, vs)

        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                if hit[0] > now:
                    self._cache.move_to_end(key)
                    return hit[1]
                del self._cache[key]
            if self._down_until > now:
                return _fallback("attuned at %s unreachable (recent failure; retrying "
                                 "later)" % self.url, vs)

        q = [("device", device), ("b", b), ("hq", hq), ("hkv", hkv), ("sq", sq),
             ("skv", skv), ("d", d), ("dtype", dtype), ("causal", causal)]
        if mre > 0:
            q.append(("max_rel_err", repr(mre)))
        if vs:
            q.append(("variants", vs))
        if device is not None:
            a = self._ask(q, vs)
        elif self._table is not None:  # the table's GPU 0, else its CPU
            a = self._ask([("device", "0")] + q[1:], vs)
            if a.code == REJECTED and "unknown device" in a.error:
                a = self._ask([("device", "cpu")] + q[1:], vs)
        else:
            dev, why = self._default_device()
            if dev is None:
                return _fallback(why, vs, REJECTED if why.startswith("HTTP 4") else FALLBACK)
            a = self._ask([("device", dev)] + q[1:], vs)
        if a.code == OK and self.cache_size > 0 and self.cache_ttl > 0:
            # an answer not measured yet is re-asked soon: the daemon may be
            # tuning the shape (tune on miss)
            ttl = self.cache_ttl if a.source == "measured" else min(self.cache_ttl,
                                                                    SHORT_TTL)
            with self._lock:
                self._cache[key] = (time.monotonic() + ttl, a)
                self._cache.move_to_end(key)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return a

    def _default_device(self):
        """(device id, "") of the first local GPU the daemon reports, else
        of its first local device (GET /v1/devices), kept for cache_ttl
        seconds (at least one); (None, why) when it cannot say."""
        now = time.monotonic()
        with self._lock:
            if self._default_dev and self._default_until > now:
                return self._default_dev, ""
        try:
            status, obj = self.request("GET", "/v1/devices")
        except Exception as e:  # transport trouble: a fallback, as a lookup's
            self._mark_down()
            return None, "cannot reach attuned at %s: %s (give its address with url= or " \
                         "ATTUNE_URL)" % (self.url, e)
        if status != 200:
            msg = obj.get("error") if isinstance(obj, dict) else None
            if status >= 500:
                self._mark_down()
            return None, "HTTP %d: %s" % (status, msg or "no error text")
        devs = obj.get("devices") if isinstance(obj, dict) else None
        local = [d for d in devs or [] if isinstance(d, dict) and d.get("local") is True
                 and isinstance(d.get("id"), str) and d["id"]]
        gpus = [d for d in local if d.get("kind") == "cuda"]
        if not local:
            return None, "attuned reports no local device (GET /v1/devices)"
        dev = (gpus or local)[0]["id"]
        with self._lock:
            self._default_dev = dev
            self._default_until = time.monotonic() + max(1.0, self.cache_ttl)
        return dev, ""

    def _ask(self, q, vs):
        """GET /v1/tactic with the query pairs q (or the table's answer to
        them); the Answer (a fallback on any trouble)."""
        if self._table is not None:
            status, obj = self._table.tactic(dict(q))
            if status == 200:
                return _answer_of(obj, vs)
            msg = obj.get("error") if isinstance(obj, dict) else None
            why = ("HTTP %d: %s" % (status, msg or "no error text")) if status else msg
            return _fallback(why, vs, REJECTED if 400 <= status < 500 else FALLBACK)
        path = "/v1/tactic?" + urllib.parse.urlencode(q)
        try:
            status, obj = self.request("GET", path)
        except Exception as e:  # any transport trouble is a fallback, never an error
            self._mark_down()
            return _fallback("cannot reach attuned at %s: %s (give its address with "
                             "url= or ATTUNE_URL)" % (self.url, e), vs)
        if status != 200:
            msg = obj.get("error") if isinstance(obj, dict) else None
            why = "HTTP %d: %s" % (status, msg or "no error text")
            if status >= 500:
                self._mark_down()
                return _fallback(why, vs)
            return _fallback(why, vs, REJECTED)
        return _answer_of(obj, vs)

    def choose_dtype(self, device=None, b=1, hq=1, hkv=1, sq=1, skv=1, d=64, causal=False,
                     dtypes="any", max_err=0.0, variants=None):
        """The fastest measured tactic of any of dtypes ("any", a list such
        as ["bf16", "e4m3"], or "bf16,e4m3") whose error against the bf16
        answer of the shape is at most max_err (in (0, 1]): whether FP8 is
        worth it here (GET /v1/tactic?dtype=...&max_err=...). Returns a
        DtypeChoice; never raises for daemon trouble (dtype None, the
        default answer). Not cached, not for table files."""
        try:
            vs = canon_variants(variants)
        except ValueError as e:
            return DtypeChoice(None, _fallback(str(e), "-", INVALID), error=str(e),
                               code=INVALID)
        if self._table is not None:  # asked of no daemon: not a daemon's failure
            why = "choose_dtype asks attuned; this client reads a table file"
            return DtypeChoice(None, _fallback(why, vs, INVALID), error=why, code=INVALID)
        names = dtypes.split(",") if isinstance(dtypes, str) else list(dtypes or ())
        bad = "" if names == ["any"] or (names and all(n in _DTYPES for n in names)
                                          and len(set(names)) == len(names)) else \
            "dtypes must be \"any\" or distinct names of %s" % ", ".join(_DTYPES)
        why = bad or _check_query(device, (b, hq, hkv, sq, skv, d), "bf16")
        try:
            me = float(max_err)
        except (TypeError, ValueError):
            me = -1.0
        if not why and not (0.0 < me <= 1.0):
            why = "max_err must be in (0, 1]"
        if why:
            return DtypeChoice(None, _fallback(why, vs, INVALID), error=why, code=INVALID)
        if device is None and self._table is None:
            device, why = self._default_device()
            if device is None:
                code = REJECTED if why.startswith("HTTP 4") else FALLBACK
                return DtypeChoice(None, _fallback(why, vs, code), error=why, code=code)
        q = [("device", device), ("b", b), ("hq", hq), ("hkv", hkv), ("sq", sq), ("skv", skv),
             ("d", d), ("dtype", ",".join(names)), ("causal", 1 if causal else 0),
             ("max_err", repr(me))]
        if vs:
            q.append(("variants", vs))
        try:
            status, obj = self.request("GET", "/v1/tactic?" + urllib.parse.urlencode(q))
        except Exception as e:  # transport trouble: keep bf16
            self._mark_down()
            why = "cannot reach attuned at %s: %s" % (self.url, e)
            return DtypeChoice(None, _fallback(why, vs), error=why, code=FALLBACK)
        obj = obj if isinstance(obj, dict) else {}
        cands = obj.get("candidates") if isinstance(obj.get("candidates"), list) else []
        if status == 200:
            return DtypeChoice(str(obj.get("dtype") or ""), _answer_of(obj, vs),
                               _num(obj.get("err")), _num(obj.get("max_err")), cands)
        why = "HTTP %d: %s" % (status, obj.get("error") or "no error text")
        code = FALLBACK if status >= 500 else REJECTED
        return DtypeChoice(None, _fallback(why, vs, code), max_err=_num(obj.get("max_err")),
                           candidates=cands, error=why, code=code)

    def lookup_shape(self, shape, device=None, max_rel_err=0.0, variants=None):
        """lookup() with a shape given as a canonical key,
        "b1.hq8.hkv1.sq50.skv128.d64.f16.nc", or as a dict as in the API:
        {"b":1,"hq":8,"hkv":1,"sq":50,"skv":128,"d":64,"dtype":"f16","causal":False}
        (causal may be a bool or 0/1, and may be left out: False). device as
        in lookup(): "0" is the first GPU, "cpu" the CPU, None the first
        local device."""
        try:  # a bad shape falls back as lookup() does: within the variants
            vs = canon_variants(variants)
        except ValueError as e:
            return _fallback(str(e), "-", INVALID)
        if isinstance(shape, str):
            try:
                shape = parse_shape_key(shape)
            except ValueError as e:
                return _fallback(str(e), vs, INVALID)
        try:
            return self.lookup(device=device, b=shape["b"], hq=shape["hq"], hkv=shape["hkv"],
                               sq=shape["sq"], skv=shape["skv"], d=shape["d"],
                               dtype=shape["dtype"], causal=bool(shape.get("causal", False)),
                               max_rel_err=max_rel_err, variants=variants)
        except KeyError as e:
            return _fallback("shape dict lacks the field %s" % (e,), vs, INVALID)
        except (AttributeError, TypeError):
            return _fallback("shape must be a canonical key or a dict", vs, INVALID)

    def clear_cache(self):
        with self._lock:
            self._cache.clear()

    def _mark_down(self):
        if self.retry_interval > 0:
            with self._lock:
                self._down_until = time.monotonic() + self.retry_interval

    # ---- jobs (need the token)

    def tune(self, device, shapes):
        """Queue a tuning job; returns its id. Raises RuntimeError on refusal."""
        status, obj = self.request("POST", "/v1/tune", {"device": device, "shapes": shapes})
        if status != 202:
            raise RuntimeError("tune refused: HTTP %d: %s" % (status, obj))
        return obj["job"]

    def job(self, job_id):
        status, obj = self.request("GET", "/v1/jobs/%d" % int(job_id))
        if status != 200:
            raise RuntimeError("job %s: HTTP %d: %s" % (job_id, status, obj))
        return obj
