#!/bin/sh
# test_trees.sh -- build the trees two tests configure for themselves,
# fuzz_smoke's (clang ASan+UBSan, fuzz/run.sh) and it_cross_arm64's (arm64),
# and check nothing: `make test` runs this at nice 10 beside its own
# configure and build and then beside ctest (issue 28 item 5), holding
# BUILD/test-trees.lock on the descriptor it inherits (fd 9, taken by the
# Makefile before it starts this) until it ends; under ctest the two tests
# start under a shared lock of that file (tests/CMakeLists.txt), then find
# their trees built and only run (the fuzzers, cpack and the package checks).
#
#   scripts/test_trees.sh BUILD
#
# Why: on a 2-core host the main tree's configure keeps one core (9 s
# cold) and its build's last links leave one idle; niced, these compiles
# take what the main build leaves and little else. At nice 19 beside
# ctest (2026-12-06) the job got so little that it ended 185 s after the
# start instead of 55-115 s, and the two tests waiting for it ended last;
# at nice 10 it ends with the main build (docs/build.md). Built in
# ctest instead, they were ~30 CPU s (fuzz tree 13, arm64 tree 18 with
# ccache's depend mode) inside two tests of 62 s and 51 s that held two of
# ctest's four slots (docs/build.md).
#
# BUILD: the main tree (its fuzz-build/ and cross-arm64/, where the tests
# look; ATTUNE_FUZZ_BUILD from its CMakeCache.txt when configured). The
# Makefile runs it through scripts/quiet.sh: one line, the output in
# BUILD/test-trees.log. A failure here is not one of the tests': each
# builds its tree again and reports what fails. Exit 0 always.
set -u
b=$1
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$b"
b=$(cd "$b" && pwd)
fz=$(sed -n 's/^ATTUNE_FUZZ_BUILD:PATH=//p' "$b/CMakeCache.txt" 2>/dev/null)
fz=${fz:-$b/fuzz-build}
# only where ctest would run them: clang for fuzz_smoke (tests/CMakeLists.txt)
if command -v clang >/dev/null 2>&1; then
    echo "== fuzz tree $fz"
    "$src/fuzz/run.sh" 0 "$fz" 2>&1 || echo "(fuzz tree: exit $?)"
fi
echo "== arm64 tree $b/cross-arm64"
ATTUNE_SOURCE_DIR=$src ATTUNE_BUILD_DIR=$b "$src/tests/it_cross_arm64.sh" --build-only 2>&1 ||
    echo "(arm64 tree: exit $?)"
exit 0
