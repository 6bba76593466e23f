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
command -v ccache >/dev/null 2>&1 || exec "$@"
CCACHE_BASEDIR=$(cd "$(dirname "$0")/.." && pwd)
CCACHE_NOHASHDIR=1
export CCACHE_BASEDIR CCACHE_NOHASHDIR
exec ccache "$@"
