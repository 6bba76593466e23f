#!/bin/sh
# run_all.sh -- the long reliability campaign (make reliability): every
# script of tests/reliability/ in its long form, figures at the end.
#   run_all.sh [N]   N: kill -9 loops per kind (default 50)
set -u
here=$(cd "$(dirname "$0")" && pwd)
N=${1:-50}
out=$(mktemp)
status=0
run() {
    echo "==== $*"
    "$@" 2>&1 | tee -a "$out" | grep -v '^ok ' || true
    # tee hides the exit status: read it back from the summary line
    tail -1 "$out" | grep -q '^all passed' || status=1
}
run "$here/crash_loop.py" --n "$N"
run "$here/battery.py" --long
run "$here/slow_clients.py" --long --strict
run "$here/load.py" --long --strict
run "$here/miss_flood.py" --long
run "$here/../it_reads_off_writer.py" --long
run "$here/../it_import_memory.py" --long
echo "==== figures (commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo ?), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
grep '^figures:' "$out"
rm -f "$out"
exit $status
