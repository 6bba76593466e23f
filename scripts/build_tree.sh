#!/bin/sh
# build_tree.sh -- configure a CMake tree once and build targets of it,
# quietly (scripts/quiet.sh: a log and one line per step): what `make
# build`, `make run` and `make test` call.
#
#   scripts/build_tree.sh DIR FLAGS EXTRA_FLAGS [TARGET...]
#
# FLAGS: the user's CMAKE_FLAGS, as one string; they apply at the first
# configure only and are kept in DIR/cmake-flags, so that a later call with
# other FLAGS warns instead of silently ignoring them (issue 13,
# tests/it_make_flags.sh). EXTRA_FLAGS: flags of this tree itself (make
# run's CPU-only tree: -DATTUNE_WITH_CUDA=OFF), given before FLAGS.
# TARGETs default to all. JOBS in the environment: parallel jobs (nproc).
set -eu
[ $# -ge 3 ] || { echo "usage: $0 DIR FLAGS EXTRA_FLAGS [TARGET...]" >&2; exit 2; }
dir=$1 flags=$2 extra=$3
shift 3
src=$(cd "$(dirname "$0")/.." && pwd)
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
if [ ! -f "$dir/CMakeCache.txt" ]; then
    mkdir -p "$dir"
    # FLAGS and EXTRA_FLAGS are split as a shell splits them (quotes kept),
    # as the Makefile passed CMAKE_FLAGS before.
    eval "\"$src/scripts/quiet.sh\" \"configure $dir\" \"$dir/configure.log\" \
        cmake -S \"$src\" -B \"$dir\" $extra $flags" ||
        { rm -f "$dir/CMakeCache.txt"; exit 1; } # configured again next time
    printf '%s\n' "$flags" >"$dir/cmake-flags"
elif [ -f "$dir/cmake-flags" ] && [ "$(cat "$dir/cmake-flags")" != "$flags" ]; then
    echo "make: warning: $dir/ was configured with CMAKE_FLAGS='$(cat "$dir/cmake-flags")'," \
        "not '$flags': the new flags are NOT applied; 'make clean' first to use them" >&2
fi
[ $# -gt 0 ] || set -- all
exec "$src/scripts/quiet.sh" "build $dir" "$dir/build.log" cmake --build "$dir" -j "$jobs" --target "$@"
