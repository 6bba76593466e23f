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
expect 2 "not both" -- "$A" query --url "file:$db" --shape b1.hq8.hkv1.sq50.skv128.d64.f16.nc --b 2
expect 2 "not both" -- "$A" query --url "file:$db" --shape b1.hq8.hkv1.sq50.skv128.d64.f16.nc --causal
expect 2 "not both" -- "$A" query --url "file:$db" --shape b1.hq8.hkv1.sq50.skv128.d64.f16.nc --dtype bf16
expect 2 "table file" -- "$A" query --url "file:$db" --b 1 --hq 8 --hkv 1 --sq 50 --skv 128 --d 64 --dtype any --max-err 0.1
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
expect 2 "needs a value" -- "$A" results --db "$db" --device cpu --shape
expect 2 "needs a value" -- "$A" export --device cpu -o
expect 2 "unknown option --dbx" -- "$A" results --dbx="$db"
expect 2 "option --json takes no value" -- "$A" devices --json=yes
expect 2 "unexpected argument 'extra'" -- "$A" results --db "$db" --device cpu extra
expect 2 "unknown option --frobnicate" -- "$A" --frobnicate

# --opt=VALUE and --opt VALUE are the same, in any order
key=b1.hq2.hkv1.sq3.skv5.d8.f32.nc
"$A" results --db "$db" --device cpu --shape $key --json >"$dir/r1" 2>&1 &&
    "$A" results --shape=$key --json --db="$db" --device=cpu >"$dir/r2" 2>&1 &&
    cmp -s "$dir/r1" "$dir/r2" && grep -q '"winner"' "$dir/r1" &&
    echo "ok: results --db=FILE --device=ID --shape=KEY equals the spaced form" ||
    { echo "FAIL: results with --opt=VALUE differs"; cat "$dir/r1" "$dir/r2"; fails=$((fails + 1)); }

# --version: the project's version, on stdout, exit 0
want=$(sed -n 's/^project(attune VERSION \([0-9.]*\).*/\1/p' "$ATTUNE_TEST_INPUTS/../../CMakeLists.txt")
got=$("$A" --version 2>&1); rc=$?
[ $rc -eq 0 ] && [ -n "$want" ] && [ "$got" = "attune $want" ] && echo "ok: --version: $got" ||
    { echo "FAIL: --version -> $rc '$got' (want 'attune $want')"; fails=$((fails + 1)); }

# Every command's --help exits 0 on stdout, and every option it documents is
# accepted: `CMD --opt x --zz-end x` fails on --zz-end, never on --opt (a
# value option takes x, a flag leaves x as an argument; parsing stops at the
# unknown option before anything runs).
for cmd in devices tune results winners export import tactics loo query jobs "fleet push" drift \
    variants; do
    # shellcheck disable=SC2086
    "$A" $cmd --help >"$dir/help" 2>"$dir/err"; rc=$?
    if [ $rc -ne 0 ] || [ -s "$dir/err" ] || ! grep -q "usage: attune ${cmd%% *}" "$dir/help"; then
        echo "FAIL: attune $cmd --help -> $rc"; cat "$dir/err"; fails=$((fails + 1)); continue
    fi
    for o in $(grep -oE -- '(^|[^a-z-])--[a-z][a-z-]*' "$dir/help" | grep -oE -- '--[a-z-]+' | sort -u); do
        [ "$o" = --help ] && continue
        # shellcheck disable=SC2086
        "$A" $cmd "$o" x --zz-end x >/dev/null 2>"$dir/err"
        if ! grep -q "unknown option --zz-end" "$dir/err"; then
            echo "FAIL: attune $cmd --help documents $o, which it refuses:"; cat "$dir/err"
            fails=$((fails + 1))
        fi
    done
    echo "ok: attune $cmd --help: every documented option is accepted"
done

# attune variants: the table of kernel families, every variant with a
# family of each backend that runs it (cudnn's is described in any build)
got=$("$A" variants --csv 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s\n' "$got" | grep -q '^fused,fused,cpu,yes,"f16,bf16,f32,e4m3",#' &&
    printf '%s\n' "$got" | grep -q '^cudnn,cudnn,cuda,\(yes\|no\),"f16,bf16,e4m3",#b07aa1,'; then
    echo "ok: attune variants lists the table"
else
    echo "FAIL: attune variants -> $rc"; printf '%s\n' "$got" | head -5; fails=$((fails + 1))
fi

for f in "$ATTUNE_TEST_INPUTS"/fleet_bad_*.json; do
    [ -e "$f" ] || continue
    expect 1 "rejected" -- "$A" import --db "$db" "$f"
done
sum1=$(sqlite3 "$db" "select count(*), total(time_us) from measurements")
[ "$sum0" = "$sum1" ] || { echo "FAIL: database changed: $sum0 -> $sum1"; fails=$((fails + 1)); }
[ "$(sqlite3 "$db" 'pragma integrity_check')" = ok ] || { echo "FAIL: integrity"; fails=$((fails + 1)); }
[ $fails -eq 0 ] || { echo "$fails failures"; exit 1; }
