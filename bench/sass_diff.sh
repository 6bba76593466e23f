#!/usr/bin/env bash
# sass_diff.sh -- whether a change alters the sm_90a kernels' machine code:
# kernels/cuda/cuda_fused_sm90a.cu of the working tree against REV's,
# each compiled here to a cubin (nvcc and ptxas only: no GPU, no
# cuobjdump) with the build's flags, then each kernel's .text section
# compared byte for byte (bench/cubin_text.py).
#
# Why: bench/ptx_diff.sh compares PTX, where a harmless edit can renumber
# registers without changing what ptxas emits, or change what it emits
# (docs/kernels.md, version 3.14: 1.5-2.1% on the winners). The same
# .text is the same SASS: nothing to measure. Different: A/B the trees on
# the GPU machine (AB_SRC=<REV's tree> bench/build_ab.sh "").
#
# usage: bench/sass_diff.sh REV [NVCC_FLAG...]
#   REV        a commit, e.g. HEAD~1
#   NVCC_FLAG  added to both compiles, e.g. -DSM90_PERSIST=1 (a switch's
#              build against REV's same switch)
# Prints one line per kernel, "same" or "differs (A -> B bytes)", then a
# summary; exit status 0 if every kernel's code is the same, 1 if any
# differs, 2 on a usage or build error. About 20 s (two compiles at once).
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case ${1:-} in -h | --help) sed -n 2,20p "$0"; exit 0 ;; '') sed -n 2,20p "$0" >&2; exit 2 ;; esac
REV=$1
shift
command -v nvcc >/dev/null || { echo "sass_diff.sh: no nvcc on this machine" >&2; exit 2; }
git -C "$ROOT" rev-parse --verify -q "$REV^{commit}" >/dev/null ||
    { echo "sass_diff.sh: '$REV' is not a commit" >&2; exit 2; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/rev"
git -C "$ROOT" archive "$REV" | tar -x -C "$T/rev" || { echo "sass_diff.sh: cannot export $REV" >&2; exit 2; }
F=kernels/cuda/cuda_fused_sm90a.cu
[ -f "$T/rev/$F" ] || { echo "sass_diff.sh: $REV has no $F" >&2; exit 2; }
EXTRA=("$@")
# the flags of CMakeLists.txt's attune_cuda_sm90a, as bench/ptx_diff.sh's
cubin() { # tree out
    (cd "$1" && nvcc -O2 -DNDEBUG -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L -DATTUNE_HAVE_CUDA=1 \
        -DATTUNE_HAVE_SM90A=1 -gencode=arch=compute_90a,code=sm_90a -I. "${EXTRA[@]}" -cubin "$F" -o "$2") \
        >"$2.log" 2>&1 || { echo "sass_diff.sh: nvcc failed in $1" >&2; cat "$2.log" >&2; return 1; }
}
cubin "$T/rev" "$T/rev.cubin" & a=$!
cubin "$ROOT" "$T/work.cubin" & b=$!
wait $a && wait $b || exit 2
python3 "$ROOT/bench/cubin_text.py" "$T/rev.cubin" "$T/work.cubin" --names "$REV" "the working tree"
