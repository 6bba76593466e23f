#!/usr/bin/env bash
# sass_diff.sh -- whether a change alters the sm_90a kernels' machine code:
# kernels/cuda/cuda_fused_sm90a.cu of the working tree against REV's,
# each compiled here to a cubin (nvcc and ptxas only: no GPU, no
# cuobjdump) with the build's flags, then each kernel's .text section
# compared byte for byte (bench/cubin_text.py). It is
# `bench/ptx_diff.sh --sass`.
#
# Why: bench/ptx_diff.sh compares PTX, where an edit can renumber
# registers without changing what ptxas emits (or change it: docs/
# kernels.md, version 3.14, 1.5-2.1% on the winners). The same .text is
# the same SASS: nothing to measure. Different: A/B the trees on the GPU
# machine (AB_SRC=<REV's tree> bench/build_ab.sh "").
#
# usage: bench/sass_diff.sh REV [NVCC_FLAG...]
#   REV        a commit, e.g. HEAD~1
#   NVCC_FLAG  added to both compiles, e.g. -DSM90_SKIP_IDLE=0 (a switch's
#              build against REV's same switch), or -DSM90_PERSIST_UNIT=1:
#              the persist=1 tactics' kernels, as cuda_fused_persist_sm90a.cu
#              builds them (REV 0ec0d80 or later)
# Exit status 0 if every kernel's code is the same, 1 if any differs, 2
# on a usage or build error. About 20 s (two compiles at once).
case ${1:-} in -h | --help) sed -n 2,22p "$0"; exit 0 ;; '') sed -n 2,22p "$0" >&2; exit 2 ;; esac
exec bash "$(dirname "${BASH_SOURCE[0]}")/ptx_diff.sh" --sass "$@"
