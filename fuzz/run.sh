#!/bin/sh
# run.sh -- build the libFuzzer harnesses with clang (ASan + UBSan) and run
# each for SECONDS seconds from its committed seed corpus.
#
#   fuzz/run.sh [SECONDS] [BUILD_DIR]     (defaults: 60, build-asan)
#
# New inputs go to BUILD_DIR/fuzz-corpus/<harness> (fuzz/corpus/ stays as
# committed); a crash leaves crash-* in BUILD_DIR/fuzz-out/<harness> and
# makes this script fail. Exit 77 when clang is missing (ctest: skipped).
# SECONDS 0 builds the harnesses and runs none (`make test` builds
# fuzz_smoke's tree beside its own build this way: scripts/test_trees.sh).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
SECONDS_EACH=${1:-60}
BUILD=${2:-$src/build-asan}
HARNESSES=${HARNESSES:-"shape_key tactic json_body query fleet_import"}
CC_FUZZ=${CC_FUZZ:-clang}
command -v "$CC_FUZZ" >/dev/null 2>&1 || { echo "fuzz: $CC_FUZZ not found (scripts/deps.sh installs it)"; exit 77; }
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    CC=$CC_FUZZ cmake -S "$src" -B "$BUILD" -DATTUNE_WITH_CUDA=OFF -DATTUNE_FUZZ=ON \
        -DCMAKE_BUILD_TYPE=Debug \
        "-DCMAKE_C_FLAGS=-O2 -g -fno-omit-frame-pointer -fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=all" \
        >/dev/null
fi
targets=""
for h in $HARNESSES; do targets="$targets fuzz_$h"; done
cmake --build "$BUILD" -j "${JOBS:-$(nproc 2>/dev/null || echo 2)}" --target $targets >/dev/null
[ "$SECONDS_EACH" != 0 ] || exit 0
status=0
for h in $HARNESSES; do
    mkdir -p "$BUILD/fuzz-corpus/$h" "$BUILD/fuzz-out/$h"
    log="$BUILD/fuzz-out/$h/log"
    if (cd "$BUILD/fuzz-out/$h" && "$BUILD/fuzz/fuzz_$h" -max_total_time="$SECONDS_EACH" \
            -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
            "$BUILD/fuzz-corpus/$h" "$here/corpus/$h") >"$log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        echo "fuzz: $h: ${runs:-?} runs in ${SECONDS_EACH}s, no crash"
    else
        echo "fuzz: $h: FAILED (see $log)"
        grep -E "ERROR|property failed|SUMMARY" "$log" | head -5
        status=1
    fi
done
exit $status
