#!/bin/sh
# loop.sh -- run the whole ctest suite N times in a row and count the passes
# (issue 13: no flaky tests; 30 green runs in a row on the 2-core machine
# while another build runs).
#
# usage: tests/loop.sh [N] [BUILD_DIR] [-- extra ctest arguments]
#   N          runs (default 30)
#   BUILD_DIR  configured build folder (default build)
# Prints one line per run (pass/FAIL, seconds, failed tests) and a summary;
# keeps each failed run's output as BUILD_DIR/loop-fail-<run>.log. Exits 0
# only when every run passed.
set -u
n=${1:-30}
build=${2:-build}
[ $# -ge 2 ] && shift 2 || shift $#
[ "${1:-}" = "--" ] && shift
case $n in ''|*[!0-9]*) echo "usage: $0 [N] [BUILD_DIR] [-- ctest args]" >&2; exit 2;; esac
[ -f "$build/CTestTestfile.cmake" ] || { echo "$build is not a configured build folder" >&2; exit 2; }

pass=0
fail=0
i=1
while [ "$i" -le "$n" ]; do
    log="$build/loop-run.log"
    t0=$(date +%s)
    if ctest --test-dir "$build" --output-on-failure "$@" >"$log" 2>&1; then
        pass=$((pass + 1))
        echo "run $i/$n: pass ($(( $(date +%s) - t0 )) s)"
    else
        fail=$((fail + 1))
        cp "$log" "$build/loop-fail-$i.log"
        failed=$(sed -n '/(Skipped)/d; s/^[[:space:]]*[0-9]* - \([^ ]*\) .*/\1/p' "$log" | tr '\n' ' ')
        echo "run $i/$n: FAIL ($(( $(date +%s) - t0 )) s): ${failed:-see $build/loop-fail-$i.log}"
    fi
    i=$((i + 1))
done
echo "loop: $pass of $n runs passed, $fail failed ($(uname -n), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
[ "$fail" -eq 0 ]
