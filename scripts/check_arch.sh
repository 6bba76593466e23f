#!/bin/sh
# check_arch.sh -- compile every CUDA kernel file for the Jetson
# architectures, device code only, and fail on register spills or static
# shared memory over the architecture's per-block limit.
#
#   scripts/check_arch.sh [ARCH...]        default: 87 (Orin) 110 (Thor)
#
# Every kernels/**/*.cu is compiled with `nvcc -cubin -arch=sm_ARCH -O2
# -Xptxas -v` (the flags of the RelWithDebInfo build's device code), so new
# kernel files are covered without an edit here. Per kernel (template
# instance) ptxas reports registers, spill stores/loads and static shared
# memory; a spill is allowed only in a configuration the architecture does
# not get: the ARCH_EXCLUDED(X) lines `X(sm, variant, D, Br, Bc, warps)` of
# the kernel files, which cuda_fused_tactics also reads (dynamic shared
# memory, not visible to ptxas, is checked against the same limits by
# tests/test_fused_arch.c). The report goes to stdout and to
# $ATTUNE_ARCH_CHECK_DIR (default build/arch-check); compiles are cached
# there by the hash of the kernel sources, flags and nvcc version, so an
# unchanged tree costs nothing. Exit 0 ok, 1 failure, 77 without nvcc.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
out=${ATTUNE_ARCH_CHECK_DIR:-$src/build/arch-check}
archs=${*:-87 110}
nvcc=${NVCC:-nvcc}
command -v "$nvcc" >/dev/null 2>&1 || for c in /usr/local/cuda/bin/nvcc; do
    [ -x "$c" ] && nvcc=$c
done
command -v "$nvcc" >/dev/null 2>&1 || { echo "skip: nvcc not found"; exit 77; }
command -v c++filt >/dev/null 2>&1 || { echo "skip: c++filt not found"; exit 77; }
flags="-cubin -O2 -DNDEBUG -Xptxas -v -DATTUNE_HAVE_CUDA=1 -I$src"
files=$(find "$src/kernels" -name '*.cu' | sort)
[ -n "$files" ] || { echo "no .cu files under kernels/"; exit 0; }
mkdir -p "$out"
# One hash for everything a compile depends on: any kernel source or
# header, the flags, the compiler; not the ARCH_EXCLUDED lines, which
# change no code (editing them re-checks without recompiling).
key=$( (find "$src/kernels" "$src/common" -type f \( -name '*.cu' -o -name '*.cuh' -o -name '*.h' \) \
        | sort | xargs cat | grep -vE '^ *X\([0-9]+, ATTN_'; echo "$flags"; "$nvcc" --version) |
      sha256sum | cut -c1-16)

# Per-block shared memory limits (bytes), as in cuda_fused.cu's smem_block_max.
limit() {
    case $1 in
    80 | 87) echo $((163 * 1024)) ;;
    90 | 10? | 11?) echo $((227 * 1024)) ;;
    *) echo $((99 * 1024)) ;;
    esac
}

compile_arch() { # arch -> $out/$arch.$key.log (all files), or a .fail file
    a=$1
    log=$out/sm_$a.$key.log
    [ -f "$log" ] && return 0
    tmp=$(mktemp -d)
    rc=0
    for f in $files; do
        echo "== $f" >>"$tmp/log"
        # shellcheck disable=SC2086
        "$nvcc" $flags -arch=sm_$a "$f" -o "$tmp/x.cubin" >>"$tmp/log" 2>&1 || rc=1
    done
    if [ $rc -eq 0 ]; then mv "$tmp/log" "$log"; else mv "$tmp/log" "$out/sm_$a.$key.fail"; fi
    rm -rf "$tmp"
    return $rc
}

supported=""
for a in $archs; do
    if "$nvcc" --list-gpu-arch 2>/dev/null | grep -qx "compute_$a"; then
        supported="$supported $a"
    else
        echo "note: $("$nvcc" --version | tail -1 | cut -c1-60) cannot build sm_$a: not checked"
    fi
done
# The architectures compile side by side: two processes, as the 2-core CI.
pids=""
for a in $supported; do
    compile_arch "$a" &
    pids="$pids $!"
done
fail=0
for p in $pids; do wait "$p" || fail=1; done
for a in $supported; do
    if [ -f "$out/sm_$a.$key.fail" ]; then
        echo "FAIL sm_$a: nvcc failed:"
        grep -E "error|==" "$out/sm_$a.$key.fail" | head -20
        fail=1
    fi
done
[ $fail -eq 0 ] || exit 1

# Exclusions: "sm variant D Br Bc warps" per line.
grep -hE '^ *X\([0-9]+, ATTN_FUSED(_SPLITKV)?, [0-9]+, [0-9]+, [0-9]+, [0-9]+\)' $files |
    sed -E 's/^ *X\(([0-9]+), ATTN_([A-Z_]+), ([0-9]+), ([0-9]+), ([0-9]+), ([0-9]+)\).*/\1 \2 \3 \4 \5 \6/' \
    >"$out/excluded.txt"

for a in $supported; do
    lim=$(limit "$a")
    # kernel<TAB>regs<TAB>spill stores<TAB>spill loads<TAB>static smem
    awk -v OFS='\t' '
        /Compiling entry function/ { f = $0; sub(/.*function \047/, "", f); sub(/\047.*/, "", f); st = 0; ld = 0 }
        /Function properties for/ { pf = $0; sub(/.*properties for /, "", pf) }
        /spill stores/ && pf == f { st = $5; ld = $9 }
        /spill stores/ && pf != f && ($5 > 0 || $9 > 0) { print pf, 0, $5, $9, 0 } # a called function
        /Used [0-9]+ registers/ {
            r = $0; sub(/.*Used /, "", r); sub(/ registers.*/, "", r)
            sm = 0; if (match($0, /[0-9]+ bytes smem/)) { sm = substr($0, RSTART); sub(/ .*/, "", sm) }
            print f, r, st, ld, sm
        }' "$out/sm_$a.$key.log" >"$out/sm_$a.raw"
    cut -f1 "$out/sm_$a.raw" | c++filt >"$out/sm_$a.names"
    paste "$out/sm_$a.names" "$out/sm_$a.raw" | cut -f1,3- >"$out/sm_$a.tsv"
    n=0 spilled=0 excl=0 maxr=0
    while IFS="$(printf '\t')" read -r name regs st ld smem; do
        n=$((n + 1))
        [ "$regs" -gt "$maxr" ] && maxr=$regs
        if [ "$smem" -gt "$lim" ]; then
            echo "FAIL sm_$a: $name: $smem B static shared memory > $lim"
            fail=1
        fi
        [ "$st" -eq 0 ] && [ "$ld" -eq 0 ] && continue
        # Template arguments of fused_fwd_kernel<T, D, Br, Bc, warps, ...>
        # and splitkv_fwd_kernel<T, D, Bc, warps>.
        cfg=$(printf '%s\n' "$name" | sed -nE \
            -e 's/.*fused_fwd_kernel<[^,]+, ([0-9]+), ([0-9]+), ([0-9]+), ([0-9]+),.*/FUSED \1 \2 \3 \4/p' \
            -e 's/.*splitkv_fwd_kernel<[^,]+, ([0-9]+), ([0-9]+), ([0-9]+)>.*/FUSED_SPLITKV \1 16 \2 \3/p')
        if [ -n "$cfg" ] && grep -qx "$a $cfg" "$out/excluded.txt"; then
            excl=$((excl + 1))
        else
            echo "FAIL sm_$a: $name spills ($st B stored, $ld B loaded)"
            spilled=$((spilled + 1))
            fail=1
        fi
    done <"$out/sm_$a.tsv"
    echo "sm_$a: $n kernels, at most $maxr registers, $spilled spilling outside ARCH_EXCLUDED, $excl excluded instances spill (limit $lim B smem per block)"
done
[ $fail -eq 0 ] && echo "ok: every kernel configuration an architecture gets compiles without spills for:$supported"
exit $fail
