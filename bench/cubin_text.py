#!/usr/bin/env python3
"""cubin_text.py -- compare two cubins' kernels by their machine code.

A cubin is an ELF file; each kernel's SASS is its `.text.<mangled name>`
section. This reads the section headers itself (no cuobjdump, no
binutils that know the CUDA machine), keys each kernel by its template
arguments (the part of a fused_sm90_kernel name after `kernelI`, else the
name with the anonymous namespace's hash taken out: that hash follows the
source file's bytes, not the code), and compares the bytes.

  python3 bench/cubin_text.py A.cubin B.cubin [--names A_NAME B_NAME]

Prints one line per kernel, then "N of M kernels' code the same"; exit 0
if all the same, 1 if any differs or is only in one, 2 on a bad file.
(bench/sass_diff.sh builds the two cubins from two source trees.)
"""
import argparse
import re
import struct
import sys


def sections(path):
    """{name: bytes} of an ELF64 little-endian file's sections, or ValueError."""
    with open(path, "rb") as f:
        d = f.read()
    if d[:4] != b"\x7fELF" or d[4] != 2 or d[5] != 1:
        raise ValueError(f"{path}: not a 64-bit little-endian ELF file (a cubin)")
    shoff = struct.unpack_from("<Q", d, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3A)
    if shoff == 0 or shnum == 0 or shstrndx >= shnum or shoff + shnum * shentsize > len(d):
        raise ValueError(f"{path}: no section headers")
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", d, shoff + i * shentsize) for i in range(shnum)]
    stro = hdrs[shstrndx][4]

    def name(off):
        end = d.index(b"\0", stro + off)
        return d[stro + off:end].decode("ascii", "replace")

    # SHT_NOBITS (8) sections occupy no bytes in the file
    return {name(h[0]): (b"" if h[1] == 8 else d[h[4]:h[4] + h[5]]) for h in hdrs}


def kernel_key(section):
    """The kernel's key for a .text section name, or None for others."""
    if not section.startswith(".text."):
        return None
    name = section[len(".text."):]
    m = re.search(r"kernelI(.*?)EEEv", name)
    if m:
        return m.group(1)
    return re.sub(r"_GLOBAL__N__[0-9a-f]+_\d+_\w+?_cu_[0-9a-f]+", "_G_", name)


def texts(path):
    return {k: v for k, v in ((kernel_key(n), b) for n, b in sections(path).items()) if k}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--names", nargs=2, default=None, help="what to call A and B in the summary")
    args = ap.parse_args(argv)
    na, nb = args.names or (args.a, args.b)
    try:
        a, b = texts(args.a), texts(args.b)
    except (OSError, ValueError, struct.error) as e:
        print(f"cubin_text: {e}", file=sys.stderr)
        return 2
    if not a or not b:
        print("cubin_text: no kernel code found", file=sys.stderr)
        return 2
    same = 0
    for k in sorted(set(a) | set(b)):
        if k not in a:
            print(f"{k}: only in {nb}")
        elif k not in b:
            print(f"{k}: only in {na}")
        elif a[k] == b[k]:
            same += 1
            print(f"{k}: same")
        else:
            print(f"{k}: differs ({len(a[k])} -> {len(b[k])} bytes)")
    n = len(set(a) | set(b))
    print(f"{same} of {n} kernels' code the same in {nb} as in {na}")
    return 0 if same == n else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
