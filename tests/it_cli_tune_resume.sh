#!/bin/sh
# it_cli_tune_resume.sh -- `attune tune` killed with SIGKILL mid-run loses
# no committed measurement, and a re-run completes the table without
# re-measuring what was kept; the database passes integrity_check.
set -eu
: "${ATTUNE_BIN:?}"
command -v sqlite3 >/dev/null || { echo "sqlite3 CLI missing: skipped"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
db=$dir/t.db
shapes="--shape b1.hq8.hkv2.sq50.skv197.d64.f16.nc --shape b1.hq4.hkv1.sq7.skv197.d64.bf16.c
        --shape b1.hq4.hkv4.sq197.skv197.d64.f32.nc --shape b1.hq8.hkv1.sq1.skv900.d32.f16.nc"
count() { sqlite3 "$db" "select count(*) from measurements" 2>/dev/null || echo 0; }

# shellcheck disable=SC2086
"$ATTUNE_BIN" tune --db "$db" --device cpu $shapes --budget-ms 150 --quiet &
pid=$!
# Wait until a few measurements are committed, then kill without warning.
i=0
while [ "$(count)" -lt 5 ]; do
    i=$((i + 1))
    [ $i -lt 600 ] || { echo "FAIL: no measurements after 60 s"; kill -9 $pid; exit 1; }
    sleep 0.1
done
kill -9 $pid
wait $pid 2>/dev/null || true
# A row stored noisy (tuner/noise.h: a busy host) counts as not stored: the
# resume measures it again, so it is neither kept nor skipped.
before=$(sqlite3 "$db" "select count(*) from measurements where noisy = 0")
snapshot=$(sqlite3 "$db" "select tactic, taken_at, time_us from measurements where noisy = 0 order by 1, 2")
echo "killed after $before committed measurements (clean ones)"
[ "$(sqlite3 "$db" 'pragma integrity_check')" = ok ] || { echo "FAIL: integrity after kill"; exit 1; }

# shellcheck disable=SC2086
out=$("$ATTUNE_BIN" tune --db "$db" --device cpu $shapes --budget-ms 20 2>&1)
echo "$out"
after=$(count)
[ "$(sqlite3 "$db" 'pragma integrity_check')" = ok ] || { echo "FAIL: integrity after resume"; exit 1; }
# Every row that was committed before the kill is still there, unchanged.
for line in $(echo "$snapshot" | tr ' ' '_'); do
    echo "$(sqlite3 "$db" "select tactic, taken_at, time_us from measurements order by 1, 2" | tr ' ' '_')" \
        | grep -qxF "$line" || { echo "FAIL: lost or re-measured row: $line"; exit 1; }
done
skipped=$(echo "$out" | sed -n 's/.* \([0-9][0-9]*\) already stored.*/\1/p' | awk '{s+=$1} END {print s+0}')
[ "$skipped" -ge "$before" ] || { echo "FAIL: re-run skipped $skipped of $before committed"; exit 1; }
[ "$after" -gt "$before" ] || { echo "FAIL: re-run added nothing ($before -> $after)"; exit 1; }
# A third run measures nothing new.
# shellcheck disable=SC2086
"$ATTUNE_BIN" tune --db "$db" --device cpu $shapes --quiet
[ "$(count)" -eq "$after" ] || { echo "FAIL: third run changed the row count"; exit 1; }
echo "ok: $before kept through SIGKILL, $after after resume"
