#!/bin/sh
# ccache.sh -- the compiler launcher of the trees `make` configures (C and
# CUDA; the Makefile passes it through CMAKE_<LANG>_COMPILER_LAUNCHER, so
# the trees tests configure for themselves, fuzz and cross, use it too).
#
#   ccache.sh COMPILER ARG...
#
# Through ccache when it is installed (scripts/deps.sh installs it), with
# the paths under this checkout hashed relative to it (CCACHE_BASEDIR) and
# the working directory left out of the hash (CCACHE_NOHASHDIR): a fresh
# clone elsewhere reuses what an earlier one compiled from the same
# sources with the same flags, nvcc's compiles of every kernel included
# (and their ptxas reports, which the architecture check reads: ccache
# replays a compile's output). The cost: the debug information of an
# object from the cache names the directory it was first compiled in.
# Without ccache it runs the compiler itself.
#
# Depend mode (CCACHE_DEPEND): on a miss, ccache takes the files a compile
# read from the compiler's own dependency file (-MD, which CMake's
# Makefiles pass to gcc, clang and nvcc) instead of running the
# preprocessor once more to hash its output. A fresh clone with an empty
# cache (issue 28 item 5's measurement) misses on every file: the extra
# preprocessor pass was 9% more CPU on the 174 C files of a CPU-only tree
# (36.0 s against 32.9 s without ccache) and 38% on the 119 of
# it_cross_arm64's tree (23.8 s against 17.2 s: the cross compiler's
# preprocessor); in depend mode 33.4 s and 17.9 s (2026-12-03,
# 3d2a3a7). Hits are unchanged: direct mode, from another clone too
# (CCACHE_BASEDIR). A compile without -MD falls back to the preprocessor.
# CCACHE_NODEPEND=1 in the environment leaves depend mode off.
command -v ccache >/dev/null 2>&1 || exec "$@"
CCACHE_BASEDIR=$(cd "$(dirname "$0")/.." && pwd)
CCACHE_NOHASHDIR=1
export CCACHE_BASEDIR CCACHE_NOHASHDIR
[ -n "${CCACHE_NODEPEND:-}" ] || export CCACHE_DEPEND=1
exec ccache "$@"
