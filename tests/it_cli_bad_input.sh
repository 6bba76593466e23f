#!/bin/sh
# it_cli_bad_input.sh -- bad input to the CLI: a one-line error naming the
# problem, a non-zero exit, and the database unchanged.
set -u
: "${ATTUNE_BIN:?}" "${ATTUNE_TEST_INPUTS:?}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
db=$dir/t.db
fails=0
# expect STATUS PATTERN -- COMMAND...: exit status STATUS, stderr one line matching PATTERN
expect() {
    want=$1 pat=$2
    shift 3
    "$@" >"$dir/out" 2>"$dir/err"
    got=$?
    lines=$(wc -l <"$dir/err")
    if [ "$got" -ne "$want" ] || ! grep -qiE "$pat" "$dir/err" || [ "$lines" -ne 1 ]; then
        echo "FAIL: $* -> exit $got (want $want), stderr:"; cat "$dir/err"
        fails=$((fails + 1))
    else
        echo "ok: $* -> $(cat "$dir/err")"
    fi
}
A=$ATTUNE_BIN
"$A" tune --db "$db" --device cpu --shape b1.hq2.hkv1.sq3.skv5.d8.f32.nc --quiet || exit 1
sum0=$(sqlite3 "$db" "select count(*), total(time_us) from measurements")

expect 2 "multiple of hkv" -- "$A" tune --db "$db" --device cpu --shape b1.hq8.hkv3.sq5.skv5.d8.f16.nc
expect 2 "at least 1" -- "$A" tune --db "$db" --device cpu --shape b0.hq8.hkv1.sq5.skv5.d8.f16.nc
expect 2 "expected field|needs a number" -- "$A" tune --db "$db" --device cpu --shape b-1.hq8.hkv1.sq5.skv5.d8.f16.nc
expect 2 "unknown dtype" -- "$A" tune --db "$db" --device cpu --shape b1.hq8.hkv1.sq5.skv5.d8.f8.nc
expect 2 "limit|large" -- "$A" tune --db "$db" --device cpu --shape b1048576.hq1024.hkv1.sq1048576.skv1.d64.f16.nc
expect 1 "do not fit" -- "$A" tune --db "$db" --device cpu --shape b1.hq1024.hkv1024.sq16384.skv16384.d128.f32.nc
expect 1 "unknown device" -- "$A" tune --db "$db" --device nosuchgpu --shape b1.hq2.hkv1.sq3.skv5.d8.f32.nc
expect 1 "ordinal 7" -- "$A" tune --db "$db" --device 7 --shape b1.hq2.hkv1.sq3.skv5.d8.f32.nc
expect 1 "$dir/missing/dir" -- "$A" tune --db "$dir/missing/dir/t.db" --device cpu --shape b1.hq2.hkv1.sq3.skv5.d8.f32.nc
expect 1 "no such|not found|does not exist" -- "$A" results --db "$dir/none.db" --device cpu --shape b1.hq2.hkv1.sq3.skv5.d8.f32.nc
expect 2 "either --shape" -- "$A" tune --db "$db" --device cpu
expect 2 "unknown option" -- "$A" tune --db "$db" --device cpu --shapes x
expect 1 "cannot read" -- "$A" tune --db "$db" --device cpu --grid "$dir/nogrid.json"
expect 1 "unknown device" -- "$A" results --db "$db" --device GPU-00000000 --shape b1.hq2.hkv1.sq3.skv5.d8.f32.nc
expect 2 "unknown command" -- "$A" frobnicate
touch "$dir/notadb"; echo "garbage garbage garbage garbage" > "$dir/notadb"
expect 1 "database" -- "$A" results --db "$dir/notadb" --device cpu --shape b1.hq2.hkv1.sq3.skv5.d8.f32.nc
for f in "$ATTUNE_TEST_INPUTS"/fleet_bad_*.json; do
    [ -e "$f" ] || continue
    expect 1 "rejected" -- "$A" import --db "$db" "$f"
done
sum1=$(sqlite3 "$db" "select count(*), total(time_us) from measurements")
[ "$sum0" = "$sum1" ] || { echo "FAIL: database changed: $sum0 -> $sum1"; fails=$((fails + 1)); }
[ "$(sqlite3 "$db" 'pragma integrity_check')" = ok ] || { echo "FAIL: integrity"; fails=$((fails + 1)); }
[ $fails -eq 0 ] || { echo "$fails failures"; exit 1; }
