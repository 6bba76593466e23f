"""clientlib.py -- libattune_client through ctypes, for the integration
tests (it_variants.py, it_file_lookup.py): attune.h's query and answer
structs and one lookup call."""

import ctypes
import os


class Q(ctypes.Structure):
    _fields_ = [("device", ctypes.c_char_p), ("b", ctypes.c_longlong),
                ("hq", ctypes.c_longlong), ("hkv", ctypes.c_longlong),
                ("sq", ctypes.c_longlong), ("skv", ctypes.c_longlong),
                ("d", ctypes.c_longlong), ("dtype", ctypes.c_char_p),
                ("causal", ctypes.c_int)]


class A(ctypes.Structure):
    _fields_ = [("tactic", ctypes.c_char * 96), ("variant", ctypes.c_char * 32),
                ("pad", ctypes.c_int), ("source", ctypes.c_char * 16),
                ("stale", ctypes.c_int), ("time_us", ctypes.c_double),
                ("rel_err", ctypes.c_double), ("max_abs_err", ctypes.c_double),
                ("device", ctypes.c_char * 64), ("shape", ctypes.c_char * 128),
                ("error", ctypes.c_char * 160), ("from_shape", ctypes.c_char * 128),
                ("distance", ctypes.c_double), ("measured_stack", ctypes.c_char * 24),
                ("stack", ctypes.c_char * 24), ("tuning", ctypes.c_char * 16),
                ("fleet_device", ctypes.c_char * 64)]


def load():
    """libattune_client from $ATTUNE_CLIENT_LIB, prototypes set; None when
    it is not built."""
    path = os.environ.get("ATTUNE_CLIENT_LIB")
    if not path or not os.path.exists(path):
        print("skip C client: ATTUNE_CLIENT_LIB not set")
        return None
    lib = ctypes.CDLL(path)
    lib.attune_client_new.restype = ctypes.c_void_p
    lib.attune_client_new.argtypes = [ctypes.c_char_p, ctypes.c_long]
    lib.attune_client_free.argtypes = [ctypes.c_void_p]
    lib.attune_lookup_in.argtypes = [ctypes.c_void_p, ctypes.POINTER(Q), ctypes.c_char_p,
                                     ctypes.c_double, ctypes.POINTER(A)]
    lib.attune_lookup_in.restype = ctypes.c_int
    return lib


def lookup(lib, client, key, device=b"cpu", mre=0.0, variants=None):
    """(return code, A) of attune_lookup_in for a canonical shape key."""
    f = key.split(".")
    q = Q(device, int(f[0][1:]), int(f[1][2:]), int(f[2][3:]), int(f[3][2:]), int(f[4][3:]),
          int(f[5][1:]), f[6].encode(), 1 if f[7] == "c" else 0)
    a = A()
    rc = lib.attune_lookup_in(client, ctypes.byref(q),
                              variants.encode() if variants else None, mre, ctypes.byref(a))
    return rc, a
