#!/usr/bin/env bash
# ptx_diff.sh -- which sm_90a kernels' PTX a change alters: the working
# tree's kernels/cuda/cuda_fused_sm90a.cu against REV's, compiled to PTX
# here (nvcc only, no GPU) with the build's flags and the file's own
# defaults, the anonymous namespace's hash (it follows the file's bytes)
# taken out of the names.
#
# Why: ptxas allocates registers from the PTX as written, so an edit that
# compiles to nothing (a switch kept off, a static_assert inside a
# kernel) can still renumber the PTX's registers and move the winners by
# about 2% (docs/kernels.md, version 3.14). Same PTX, same SASS: nothing
# to measure. Different: A/B the trees on the GPU machine
# (AB_SRC=<REV's tree> bench/build_ab.sh "").
#
# usage: bench/ptx_diff.sh [--sass] REV [NVCC_FLAG...]
#   --sass     compare the machine code instead (bench/sass_diff.sh): both
#              trees compiled to cubins, each kernel's .text compared byte
#              for byte by bench/cubin_text.py (no cuobjdump needed)
#   REV        a commit (git rev-parse), e.g. HEAD~1 or f94ff1c
#   NVCC_FLAG  added to both compiles, e.g. -DSM90_SKIP_IDLE=0
# Prints one line per kernel, "same" or "differs (N lines)" (--sass: "(A
# -> B bytes)"), then a summary; exit status 0 if every kernel's PTX (or
# code) is the same, 1 if any differs, 2 on a usage or build error.
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case ${1:-} in -h | --help) sed -n 2,23p "$0"; exit 0 ;; esac
SASS=0
[ "${1:-}" = --sass ] && { SASS=1; shift; }
[ $# -ge 1 ] || { sed -n 2,23p "$0" >&2; exit 2; }
REV=$1
shift
command -v nvcc >/dev/null || { echo "ptx_diff.sh: no nvcc on this machine" >&2; exit 2; }
git -C "$ROOT" rev-parse --verify -q "$REV^{commit}" >/dev/null ||
    { echo "ptx_diff.sh: '$REV' is not a commit" >&2; exit 2; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/rev"
git -C "$ROOT" archive "$REV" | tar -x -C "$T/rev" ||
    { echo "ptx_diff.sh: cannot export $REV" >&2; exit 2; }
F=kernels/cuda/cuda_fused_sm90a.cu
[ -f "$T/rev/$F" ] || { echo "ptx_diff.sh: $REV has no $F" >&2; exit 2; }
EXTRA=("$@")
if [ $SASS = 1 ]; then
    # the same flags, to a cubin for sm_90a (the code ptxas emits)
    cubin() { # tree out
        (cd "$1" && nvcc -O2 -DNDEBUG -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L -DATTUNE_HAVE_CUDA=1 \
            -DATTUNE_HAVE_SM90A=1 -gencode=arch=compute_90a,code=sm_90a -I. "${EXTRA[@]}" -cubin "$F" -o "$2") \
            >"$2.log" 2>&1 || { echo "ptx_diff.sh: nvcc failed in $1" >&2; cat "$2.log" >&2; return 1; }
    }
    cubin "$T/rev" "$T/rev.cubin" & a=$!
    cubin "$ROOT" "$T/work.cubin" & b=$!
    wait $a && wait $b || exit 2
    python3 "$ROOT/bench/cubin_text.py" "$T/rev.cubin" "$T/work.cubin" --names "$REV" "the working tree"
    exit
fi
# the flags of CMakeLists.txt's attune_cuda_sm90a (-O2 -DNDEBUG; no -G or -lineinfo)
ptx() { # tree out
    (cd "$1" && nvcc -O2 -DNDEBUG -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L \
        -gencode=arch=compute_90a,code=compute_90a -I. "${EXTRA[@]}" \
        -ptx "$F" -o "$2.raw") >"$2.log" 2>&1 || { echo "ptx_diff.sh: nvcc failed in $1: $2.log" >&2; cat "$2.log" >&2; return 1; }
    sed -e 's/_GLOBAL__N__[0-9a-f]*_/_G_/g' -e '/^\/\//d' -e '/^[[:space:]]*\.loc/d' -e '/^\.file/d' "$2.raw" >"$2"
}
ptx "$ROOT" "$T/work.ptx" && ptx "$T/rev" "$T/rev.ptx" || exit 2
python3 - "$T/rev.ptx" "$T/work.ptx" "$REV" <<'EOF'
import difflib, re, sys

def kernels(path):
    text = open(path).read()
    return {m.group(1): m.group(0) for m in re.finditer(r"\.entry (\S+)\(.*?\n}\n", text, re.S)}

def short(name):
    m = re.search(r"fused_sm90_kernelI(.*?)EEEv", name)
    return m.group(1) if m else name

old, new, rev = kernels(sys.argv[1]), kernels(sys.argv[2]), sys.argv[3]
if not old or not new:
    print("ptx_diff.sh: no kernels found in the PTX", file=sys.stderr)
    sys.exit(2)
changed = 0
for name in sorted(set(old) | set(new)):
    if name not in old:
        print(f"{short(name)}: new (not in {rev})")
        changed += 1
    elif name not in new:
        print(f"{short(name)}: gone (only in {rev})")
        changed += 1
    elif old[name] == new[name]:
        print(f"{short(name)}: same")
    else:
        n = sum(1 for l in difflib.unified_diff(old[name].splitlines(), new[name].splitlines(), lineterm="", n=0)
                if l[:1] in "+-" and l[:3] not in ("+++", "---"))
        print(f"{short(name)}: differs ({n} lines)")
        changed += 1
print(f"{len(set(old) | set(new)) - changed} of {len(set(old) | set(new))} kernels' PTX the same as {rev}'s")
sys.exit(1 if changed else 0)
EOF
