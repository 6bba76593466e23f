"""ctypes layer over libattune.so (kernels/libattune.h): attune_auto
(lookup + plan cache + run) on caller buffers.

The library is found at $ATTUNE_LIB, else as libattune.so.1 on the loader's
path. Tensors are described by (address, strides in elements) with the head
dim contiguous, as libattune.h says; nothing here copies.
"""
import ctypes
import numbers
import os
import threading

DTYPES = {"f16": 0, "bf16": 1, "f32": 2, "e4m3": 3}  # e4m3: libattune 1.2, out in bf16
# (descales: Plan.set_descales since 1.2, Auto.set_descales since 1.3)


EBUSY = -12  # ATTUNE_RT_EBUSY: a stream capturing a CUDA graph (nothing planned on it)
EUNSUPP = -4  # ATTUNE_RT_EUNSUPP: the tactic does not run the shape here
ENOMEM = -2  # ATTUNE_RT_ENOMEM


class AttuneError(RuntimeError):
    """A libattune call failed; .code is its negative return code."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class Dims(ctypes.Structure):
    _fields_ = [("b", ctypes.c_int64), ("hq", ctypes.c_int64), ("hkv", ctypes.c_int64),
                ("sq", ctypes.c_int64), ("skv", ctypes.c_int64), ("d", ctypes.c_int64),
                ("dtype", ctypes.c_int), ("causal", ctypes.c_int)]


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("stride_b", ctypes.c_int64),
                ("stride_h", ctypes.c_int64), ("stride_s", ctypes.c_int64)]


class Choice(ctypes.Structure):
    _fields_ = [("tactic", ctypes.c_char * 96), ("source", ctypes.c_char * 16),
                ("planned", ctypes.c_char * 128)]


class Stats(ctypes.Structure):
    _fields_ = [("runs", ctypes.c_uint64), ("lookups", ctypes.c_uint64),
                ("plans", ctypes.c_uint64), ("evictions", ctypes.c_uint64),
                ("entries", ctypes.c_int64), ("retired", ctypes.c_int64)]


_lib = None
_lib_lock = threading.Lock()


def load(path=None):
    """The loaded libattune (once per process): path, $ATTUNE_LIB, or
    libattune.so.1 from the loader's search path."""
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        name = path or os.environ.get("ATTUNE_LIB") or "libattune.so.1"
        try:
            lib = ctypes.CDLL(name)
        except OSError as e:
            raise OSError("cannot load libattune (%s): %s; set ATTUNE_LIB to the build's "
                          "libattune.so.1 (build/libattune.so.1, or build/cpu-only/"
                          "libattune.so.1 where make run built without CUDA) or install "
                          "attune" % (name, e)) from e
        P, V, I, S = ctypes.POINTER, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
        lib.attune_abi.restype = I
        lib.attune_strerror.restype = ctypes.c_char_p
        lib.attune_strerror.argtypes = [I]
        lib.attune_bucket_len.restype = ctypes.c_int64
        lib.attune_bucket_len.argtypes = [ctypes.c_int64]
        lib.attune_dev_open.argtypes = [ctypes.c_char_p, P(V), ctypes.c_char_p, S]
        lib.attune_dev_close.argtypes = [V]
        lib.attune_dev_id.restype = ctypes.c_char_p
        lib.attune_dev_id.argtypes = [V]
        lib.attune_plan_create.argtypes = [V, P(Dims), ctypes.c_char_p, P(V), ctypes.c_char_p, S]
        lib.attune_plan_run.argtypes = [V, P(Tensor), P(Tensor), P(Tensor), P(Tensor),
                                        ctypes.c_int64, ctypes.c_int64, V]
        lib.attune_plan_destroy.argtypes = [V]
        if hasattr(lib, "attune_plan_set_views"):  # since 1.1
            lib.attune_plan_set_views.argtypes = [V, P(Tensor), P(Tensor), P(Tensor), P(Tensor),
                                                  V, ctypes.c_char_p, S]
        if hasattr(lib, "attune_plan_set_descales"):  # since 1.2
            F = P(ctypes.c_float)
            lib.attune_plan_set_descales.argtypes = [V, F, F, F]
        lib.attune_tactics.argtypes = [V, P(Dims), V, I, ctypes.c_char_p, S]
        lib.attune_auto_new.argtypes = [V, ctypes.c_char_p, I, P(V), ctypes.c_char_p, S]
        lib.attune_auto_free.argtypes = [V]
        lib.attune_auto_prepare.argtypes = [V, P(Dims), V, P(Choice), ctypes.c_char_p, S]
        lib.attune_auto_run.argtypes = [V, P(Dims), P(Tensor), P(Tensor), P(Tensor),
                                        P(Tensor), V, ctypes.c_char_p, S]
        if hasattr(lib, "attune_auto_set_descales"):  # since 1.3
            F = P(ctypes.c_float)
            lib.attune_auto_set_descales.argtypes = [V, F, F, F]
        if hasattr(lib, "attune_auto_get_stats"):  # since 1.4
            lib.attune_auto_get_stats.argtypes = [V, P(Stats), S]
        if lib.attune_abi() != 1:
            raise AttuneError(-1, "%s has ABI %d, this binding speaks 1" % (name, lib.attune_abi()))
        _lib = lib
        return lib


def bucket_len(n):
    """The bucket ceiling libattune plans a length n at (libattune.h)."""
    return load().attune_bucket_len(n)


def _check(lib, rc, err):
    if rc != 0:
        msg = err.value.decode(errors="replace") or lib.attune_strerror(rc).decode()
        err[0] = b"\0"  # a reused buffer: the next failure says its own, not this
        raise AttuneError(rc, msg)


# Linux maps nothing below vm.mmap_min_addr (65536 by default): an int
# under it is never an address, so it is taken as the number it is.
_MIN_ADDRESS = 1 << 16


def _descale_ptrs(box, q, k, v, on_cpu=True):
    """The three float pointers set_descales passes for q, k, v: None
    (NULL: 1); a number (an int below 65536 too: set_descales(1, 1, 1)
    means factors of 1, not addresses), stored in box[i] (a c_float * 3
    the owner keeps; the pointer is to it), on the CPU only (box is host
    memory, which a GPU's kernels cannot read: ValueError); an int of
    65536 or more, the address of one float the caller keeps."""
    ptrs = []
    for i, x in enumerate((q, k, v)):
        if x is None:
            ptrs.append(None)
        elif isinstance(x, numbers.Integral) and not isinstance(x, bool) \
                and int(x) >= _MIN_ADDRESS:  # numpy's ints too
            ptrs.append(ctypes.cast(ctypes.c_void_p(int(x)), ctypes.POINTER(ctypes.c_float)))
        elif not on_cpu:
            raise ValueError("a GPU plan reads its descales from device memory: pass the int "
                             "address of a float there (e.g. a CUDA tensor's data_ptr()), "
                             "not the number %r" % (x,))
        else:
            box[i] = float(x)
            ptrs.append(ctypes.cast(ctypes.byref(box, 4 * i), ctypes.POINTER(ctypes.c_float)))
    return ptrs


class Auto:
    """attune_auto on one device ("cpu", CUDA ordinal "0", ...): each run
    looks up the shape's tactic (attuned at url, else $ATTUNE_URL, else
    127.0.0.1:7373; the default tactic when none answers), plans it once
    per length bucket and stream, and runs it. Thread-safe, but for
    close(): no run of it may be in flight on another thread then (the C
    handle is freed). auto_for's shared Autos are the process's: close()
    on one takes it out of auto_for's cache."""

    def __init__(self, device="0", url=None, capacity=0, lib=None):
        self._lib = lib or load()
        self._dev = ctypes.c_void_p()
        self._auto = ctypes.c_void_p()
        err = ctypes.create_string_buffer(256)
        _check(self._lib, self._lib.attune_dev_open(str(device).encode(), ctypes.byref(self._dev),
                                                     err, 256), err)
        rc = self._lib.attune_auto_new(self._dev, url.encode() if url else None, capacity,
                                       ctypes.byref(self._auto), err, 256)
        if rc != 0:
            self._lib.attune_dev_close(self._dev)
            _check(self._lib, rc, err)
        self.device_id = self._lib.attune_dev_id(self._dev).decode()
        self._tls = threading.local()
        self.descales = (ctypes.c_float * 3)(1.0, 1.0, 1.0)  # set_descales' own values

    def close(self):
        if self._auto:
            with _autos_lock:  # auto_for hands it out no more
                for word, a in list(_autos.items()):
                    if a is self:
                        del _autos[word]
            self._lib.attune_auto_free(self._auto)
            self._lib.attune_dev_close(self._dev)
            self._auto = ctypes.c_void_p()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _bufs(self):
        t = self._tls
        if not hasattr(t, "dims"):
            t.dims, t.q, t.k, t.v, t.o = Dims(), Tensor(), Tensor(), Tensor(), Tensor()
            t.err = ctypes.create_string_buffer(256)
            t.choice = Choice()
        return t

    @staticmethod
    def _fill_dims(d, dims):
        d.b, d.hq, d.hkv, d.sq, d.skv, d.d, d.dtype, d.causal = dims

    def prepare(self, dims, stream=0):
        """Look up and plan dims = (b, hq, hkv, sq, skv, d, dtype, causal)
        for stream (an address, 0 = the default stream) without running:
        before a CUDA graph capture. Returns (tactic, source, planned)."""
        t = self._bufs()
        self._fill_dims(t.dims, dims)
        rc = self._lib.attune_auto_prepare(self._auto, t.dims, stream, t.choice, t.err, 256)
        _check(self._lib, rc, t.err)
        c = t.choice
        return c.tactic.decode(), c.source.decode(), c.planned.decode()

    def run(self, dims, q, k, v, o, stream=0):
        """Run attention: dims as in prepare, q/k/v/o = (address, stride_b,
        stride_h, stride_s) in elements; asynchronous on a CUDA stream."""
        t = self._bufs()
        self._fill_dims(t.dims, dims)
        for dst, src in ((t.q, q), (t.k, k), (t.v, v), (t.o, o)):
            dst.data, dst.stride_b, dst.stride_h, dst.stride_s = src
        rc = self._lib.attune_auto_run(self._auto, t.dims, t.q, t.k, t.v, t.o, stream,
                                       t.err, 256)
        _check(self._lib, rc, t.err)

    def set_descales(self, q=None, k=None, v=None):
        """For e4m3 shapes: the descale factors of q, k and v, set on the
        plan of every e4m3 shape before each run (attune_auto_set_descales),
        as Plan.set_descales takes them: each None (1), a number (an int
        below 65536 too; on the CPU only: kept in self.descales, which the
        runs read: assign auto.descales[i] to change it in place), or the
        int address (65536 or more) of one float the caller keeps alive
        (device memory on a GPU; on the CPU host memory, e.g. a numpy
        float32 array's .ctypes.data). Raises on error (ValueError: a
        number for a GPU)."""
        if not hasattr(self._lib, "attune_auto_set_descales"):
            raise AttuneError(-4, "libattune older than 1.3: no attune_auto_set_descales")
        ptrs = _descale_ptrs(self.descales, q, k, v, self.device_id.startswith("CPU-"))
        rc = self._lib.attune_auto_set_descales(self._auto, *ptrs)
        if rc != 0:
            raise AttuneError(rc, self._lib.attune_strerror(rc).decode())


    def stats(self):
        """What this Auto has done (attune_auto_get_stats, libattune 1.4):
        a dict of runs, lookups, plans, evictions, entries, retired. A
        steady loop over known shapes leaves lookups and plans unchanged."""
        if not hasattr(self._lib, "attune_auto_get_stats"):
            raise AttuneError(-4, "libattune older than 1.4: no attune_auto_get_stats")
        st = Stats()
        rc = self._lib.attune_auto_get_stats(self._auto, ctypes.byref(st), ctypes.sizeof(st))
        if rc != 0:
            raise AttuneError(rc, self._lib.attune_strerror(rc).decode())
        return {name: getattr(st, name) for name, _ in Stats._fields_}


class Device:
    """An opened device ("cpu", CUDA ordinal "0", "GPU-<uuid>", a name)."""

    def __init__(self, device="0", lib=None):
        self._lib = lib or load()
        self.handle = ctypes.c_void_p()
        err = ctypes.create_string_buffer(256)
        _check(self._lib, self._lib.attune_dev_open(str(device).encode(),
                                                     ctypes.byref(self.handle), err, 256), err)
        self.id = self._lib.attune_dev_id(self.handle).decode()

    def tactics(self, dims):
        """The tactics the device lists for dims (canonical text)."""
        err = ctypes.create_string_buffer(256)
        d = Dims(*dims)
        n = self._lib.attune_tactics(self.handle, d, None, 0, err, 256)
        _check(self._lib, min(n, 0), err)
        buf = (ctypes.c_char * 96 * n)()
        self._lib.attune_tactics(self.handle, d, buf, n, err, 256)
        return [bytes(buf[i]).split(b"\0", 1)[0].decode() for i in range(n)]

    def close(self):
        if self.handle:
            self._lib.attune_dev_close(self.handle)
            self.handle = ctypes.c_void_p()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Plan:
    """One tactic planned for dims on a Device (attune_plan_*): what the
    tuner timed, run on caller tensors."""

    def __init__(self, device, dims, tactic):
        self._lib = device._lib
        self.handle = ctypes.c_void_p()
        err = ctypes.create_string_buffer(256)
        _check(self._lib, self._lib.attune_plan_create(device.handle, Dims(*dims), tactic.encode(),
                                                        ctypes.byref(self.handle), err, 256), err)
        self._device = device  # closed after this plan, not before
        self._t = [Tensor(), Tensor(), Tensor(), Tensor()]
        self.descales = (ctypes.c_float * 3)(1.0, 1.0, 1.0)  # set_descales' own values
        self._on_cpu = device.id.startswith("CPU-")

    def run(self, q, k, v, o, sq=0, skv=0, stream=0):
        """q/k/v/o = (address, stride_b, stride_h, stride_s); raises on error."""
        for dst, src in zip(self._t, (q, k, v, o)):
            dst.data, dst.stride_b, dst.stride_h, dst.stride_s = src
        rc = self._lib.attune_plan_run(self.handle, *self._t, sq, skv, stream)
        if rc != 0:
            raise AttuneError(rc, self._lib.attune_strerror(rc).decode())

    def set_views(self, q, k, v, o, stream=0):
        """Tell the plan the strides its runs will have (q/k/v/o as in
        run; addresses unused): a cuDNN plan builds a graph that reads and
        writes them in place (libattune.h, attune_plan_set_views). Raises
        on error (EUNSUPP: the engine refuses them; runs still copy)."""
        if not hasattr(self._lib, "attune_plan_set_views"):
            raise AttuneError(-4, "libattune older than 1.1: no attune_plan_set_views")
        for dst, src in zip(self._t, (q, k, v, o)):
            dst.data, dst.stride_b, dst.stride_h, dst.stride_s = src
        err = ctypes.create_string_buffer(256)
        _check(self._lib, self._lib.attune_plan_set_views(self.handle, *self._t, stream, err,
                                                          256), err)

    def set_descales(self, q=None, k=None, v=None):
        """For an e4m3 plan: the descale factors of q, k and v (a stored
        element times its tensor's descale is the value meant), read at
        every run (attune_plan_set_descales). Each is None (1), a number
        (an int below 65536 too; on the CPU only: kept in self.descales,
        which the runs read: assign plan.descales[i] to change it in
        place), or the int address (65536 or more) of one float the caller
        keeps alive (device memory on a GPU; on the CPU host memory, e.g. a
        numpy float32 array's .ctypes.data).
        Raises on error (ValueError: a number for a GPU plan, whose
        kernels cannot read host memory; it faulted them before)."""
        if not hasattr(self._lib, "attune_plan_set_descales"):
            raise AttuneError(-4, "libattune older than 1.2: no attune_plan_set_descales")
        ptrs = _descale_ptrs(self.descales, q, k, v, self._on_cpu)
        rc = self._lib.attune_plan_set_descales(self.handle, *ptrs)
        if rc != 0:
            raise AttuneError(rc, self._lib.attune_strerror(rc).decode())

    def close(self):
        if self.handle:
            self._lib.attune_plan_destroy(self.handle)
            self.handle = ctypes.c_void_p()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


_autos = {}
_autos_lock = threading.Lock()


def auto_for(device):
    """The process's shared Auto for a device word ("cpu", "0", ...)."""
    a = _autos.get(device)
    if a is None:
        with _autos_lock:
            a = _autos.get(device)
            if a is None:
                a = _autos[device] = Auto(device)
    return a


def _view(arr, order):
    """(address, stride_b, stride_h, stride_s) of a numpy array laid out as
    order ("bhsd" or "bshd"), strides in elements."""
    item = arr.itemsize
    if arr.strides[3] != item:
        raise AttuneError(-1, "the head dim must be contiguous")
    if any(s <= 0 or s % item for s in arr.strides[:3]):
        raise AttuneError(-1, "strides %s must be positive whole elements (a flipped or "
                          "byte-offset view: copy it, np.ascontiguousarray)" % (arr.strides,))
    sb, s1, s2 = (arr.strides[i] // item for i in range(3))
    sh, ss = (s1, s2) if order == "bhsd" else (s2, s1)
    return (arr.ctypes.data, sb, sh, ss)


def _e4m3_values():
    """The value of each e4m3 pattern (OCP FP8 E4M3: bias 7, S.1111.111 NaN)."""
    import numpy as np
    x = np.arange(256)
    e, m = (x >> 3) & 15, x & 7
    v = np.where(e == 0, m * 2.0 ** -9, (1 + m / 8.0) * 2.0 ** (e - 7))
    v = np.where((x & 0x7f) == 0x7f, np.nan, v)
    return np.where(x & 0x80, -v, v)


def e4m3_to_float(codes):
    """float32 values of e4m3 patterns (a uint8 numpy array)."""
    import numpy as np
    return _e4m3_values().astype(np.float32)[np.asarray(codes, dtype=np.uint8)]


def float_to_e4m3(x):
    """e4m3 patterns (uint8) of values x: round to nearest, ties to even,
    saturating at +-448 (infinities too); NaN to S.1111.111 (as
    kernels/dtype.h converts)."""
    import numpy as np
    x = np.asarray(x, dtype=np.float64)
    pos = _e4m3_values()[:0x7f]  # 0 .. 448, ascending with the pattern
    a = np.minimum(np.abs(np.nan_to_num(x, nan=0.0, posinf=448.0, neginf=448.0)), 448.0)
    hi = np.clip(np.searchsorted(pos, a), 0, 0x7e)
    lo = np.maximum(hi - 1, 0)
    dlo, dhi = a - pos[lo], pos[hi] - a
    code = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo % 2 == 0, lo, hi)))
    code = np.where(np.isnan(x), 0x7f, code).astype(np.uint8)
    return code | np.where(np.signbit(x), 0x80, 0).astype(np.uint8)


def quantize_e4m3(x):
    """(patterns, descale) of a tensor x for an e4m3 plan, as attune's
    sessions do it: descale = amax / 448, patterns = e4m3(x / descale)."""
    import numpy as np
    amax = float(np.max(np.abs(x))) if np.size(x) else 0.0
    descale = amax / 448.0 if amax > 0 else 1.0
    return float_to_e4m3(np.asarray(x, dtype=np.float64) / descale), descale


def run_numpy(q, k, v, is_causal=False, layout="bhsd", device="cpu", out=None):
    """Attention on numpy arrays through the process's attune_auto of the
    CPU device (run_numpy_with says how)."""
    return run_numpy_with(auto_for(device), q, k, v, is_causal, layout, out)


def run_numpy_with(auto, q, k, v, is_causal=False, layout="bhsd", out=None):
    """Attention on numpy arrays through auto (an Auto of "cpu").
    q: [b, hq, sq, d] (layout "bhsd") or [b, sq, hq, d] ("bshd"), k and v
    likewise with hkv heads; float16 or float32; scale 1/sqrt(d); causal
    bottom-right (query i sees key j iff j <= i + skv - sq). Returns out
    (allocated like q when None)."""
    import numpy as np
    if not getattr(auto, "device_id", "").startswith("CPU-"):
        raise AttuneError(-1, "numpy arrays are host memory: run them through the CPU's "
                          "Auto (\"cpu\"), not %s's" % getattr(auto, "device_id", "?"))
    names = {np.dtype(np.float16): "f16", np.dtype(np.float32): "f32"}
    if q.dtype not in names or k.dtype != q.dtype or v.dtype != q.dtype:
        raise AttuneError(-1, "q, k, v must share one dtype, float16 or float32")
    if layout not in ("bhsd", "bshd"):
        raise AttuneError(-1, "layout is 'bhsd' or 'bshd', not %r" % (layout,))
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise AttuneError(-1, "q, k, v must be 4-d (%s)" % layout)
    hs = (1, 2) if layout == "bhsd" else (2, 1)
    b, hq, sq, d = q.shape[0], q.shape[hs[0]], q.shape[hs[1]], q.shape[3]
    hkv, skv = k.shape[hs[0]], k.shape[hs[1]]
    # the C side reads and writes by these dims: a mismatch would run off
    # the arrays' ends
    if k.shape != v.shape or k.shape[0] != b or k.shape[3] != d:
        raise AttuneError(-1, "k %s and v %s must have one shape, with q's batch %d and "
                          "head dim %d" % (k.shape, v.shape, b, d))
    if min(b, hq, sq, d, hkv, skv) < 1 or hq % hkv:
        raise AttuneError(-1, "sizes must be >= 1 and hq (%d) a multiple of hkv (%d)"
                          % (hq, hkv))
    if out is None:
        out = np.empty_like(q)
    elif out.shape != q.shape or out.dtype != q.dtype or not out.flags.writeable:
        raise AttuneError(-1, "out must be a writeable %s array shaped like q %s, not %s %s"
                          % (q.dtype, q.shape, out.dtype, out.shape))
    dims = (b, hq, hkv, sq, skv, d, DTYPES[names[q.dtype]], int(bool(is_causal)))
    auto.run(dims, _view(q, layout), _view(k, layout), _view(v, layout),
                         _view(out, layout))
    return out
