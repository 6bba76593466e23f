#!/bin/sh
# it_cli_walkthrough.sh -- what a new user's walk through the README met on
# a host without a GPU: device specs as the help gives them (drift --device
# cpu), ports outside 1-65535 refused as usage errors.
set -u
: "${ATTUNE_BIN:?}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
A=$ATTUNE_BIN
db=$dir/t.db
key=b1.hq2.hkv1.sq3.skv5.d8.f32.nc
fails=0
ok() { echo "ok: $1"; }
fail() { echo "FAIL: $1"; cat "$dir/err"; fails=$((fails + 1)); }
"$A" tune --db "$db" --device cpu --shape $key --quiet || exit 1

# drift --device cpu: the spec every command takes, not only a stored id
"$A" drift --db "$db" --device cpu >"$dir/out" 2>"$dir/err"
grep -q "unknown device" "$dir/err" && fail "drift --device cpu: unknown device" ||
    ok "drift --device cpu resolves the spec"
"$A" drift --db "$db" --device nosuchgpu >"$dir/out" 2>"$dir/err"
[ $? -eq 1 ] && grep -q "unknown device 'nosuchgpu'" "$dir/err" &&
    ok "drift --device nosuchgpu: unknown device" || fail "drift --device nosuchgpu"

[ $fails -eq 0 ] || { echo "$fails failures"; exit 1; }
