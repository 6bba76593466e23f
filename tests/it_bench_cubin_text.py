#!/usr/bin/env python3
"""it_bench_cubin_text.py -- bench/cubin_text.py, the byte-for-byte
comparison of two cubins' kernels (bench/sass_diff.sh's), on ELF files
written here: the same code under another anonymous-namespace hash is the
same, one changed byte differs, a kernel in one file only is named, and
what is not a 64-bit ELF is refused."""
import os
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
import cubin_text  # noqa: E402

from checklib import captured, check, summary  # noqa: E402  (tests/checklib.py)


def elf(path, secs):
    """A minimal ELF64 little-endian file: a null section, then each
    (name, bytes) of secs, then .shstrtab."""
    names = [n for n, _ in secs] + [".shstrtab"]
    strtab = b"\0"
    offs = []
    for n in names:
        offs.append(len(strtab))
        strtab += n.encode() + b"\0"
    body = b""
    places = []
    base = 64
    for _, data in secs:
        places.append((base + len(body), len(data)))
        body += data
    places.append((base + len(body), len(strtab)))
    body += strtab
    shoff = base + len(body)
    hdr = b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 9
    hdr += struct.pack("<HHIQQQIHHHHHH", 1, 190, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(names) + 1, len(names))
    shdrs = struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    for i, (off, size) in enumerate(places):
        shdrs += struct.pack("<IIQQQQIIQQ", offs[i], 1 if i < len(secs) else 3, 0, 0, off, size, 0, 0, 1, 0)
    with open(path, "wb") as f:
        f.write(hdr + body + shdrs)


def kname(hash_, args):
    return f".text._ZN43_GLOBAL__N__{hash_}_10_x_cu_3c38931717fused_sm90_kernelI{args}EEEv14CUtensorMap_st"


def main():
    k1, k2 = "13__nv_bfloat16Li128ELi192ELi128ELi2ELb1ELb0", "6__halfLi64ELi128ELi128ELi3ELb1ELb1"
    code1, code2 = bytes(range(64)) * 4, bytes(range(32, 96)) * 2
    with tempfile.TemporaryDirectory() as tmp:
        a, b = os.path.join(tmp, "a.cubin"), os.path.join(tmp, "b.cubin")
        elf(a, [(kname("2046cf6c", k1), code1), (kname("2046cf6c", k2), code2), (".nv.info", b"x")])
        # the same code under another hash (another file's bytes)
        elf(b, [(kname("38084509", k2), code2), (kname("38084509", k1), code1)])
        rc, out, err = captured(cubin_text.main, [a, b])
        check(rc == 0, "the same code under another namespace hash: exit 0 (rc %d, %s)" % (rc, err.strip()))
        check("2 of 2 kernels' code the same" in out, "both kernels the same, the non-code section ignored")

        changed = bytearray(code1)
        changed[100] ^= 1
        elf(b, [(kname("38084509", k1), bytes(changed)), (kname("38084509", k2), code2)])
        rc, out, _ = captured(cubin_text.main, [a, b, "--names", "REV", "tree"])
        check(rc == 1 and f"{k1}: differs (256 -> 256 bytes)" in out, "one changed byte differs, sizes shown")
        check(f"{k2}: same" in out and "1 of 2 kernels' code the same in tree as in REV" in out,
              "the other kernel the same; the summary names both sides")

        elf(b, [(kname("38084509", k1), code1)])
        rc, out, _ = captured(cubin_text.main, [a, b, "--names", "REV", "tree"])
        check(rc == 1 and f"{k2}: only in REV" in out, "a kernel gone from one side is named")

        with open(b, "wb") as f:
            f.write(b"not an elf file at all")
        rc, _, err = captured(cubin_text.main, [a, b])
        check(rc == 2 and "not a 64-bit little-endian ELF" in err, "another file is refused (%s)" % err.strip())
        elf(b, [(".nv.info", b"x")])
        rc, _, err = captured(cubin_text.main, [a, b])
        check(rc == 2 and "no kernel code" in err, "a cubin with no kernel is refused")
        rc, _, err = captured(cubin_text.main, [a, os.path.join(tmp, "absent.cubin")])
        check(rc == 2 and "absent.cubin" in err, "a missing file is refused, named")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
