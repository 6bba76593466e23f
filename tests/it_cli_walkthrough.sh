#!/bin/sh
# it_cli_walkthrough.sh -- what a new user's walk through the README met on
# a host without a GPU: device specs as the help gives them (drift --device
# cpu), ports outside 1-65535 refused as usage errors (attune and attuned).
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
# one stack measured: the device found, nothing to compare (exit 1 with
# that reason; "unknown device 'cpu'" before 3281ff3)
[ $? -eq 1 ] && grep -q "fewer than two stacks" "$dir/err" &&
    ok "drift --device cpu resolves the spec" || fail "drift --device cpu"
"$A" drift --db "$db" --device nosuchgpu >"$dir/out" 2>"$dir/err"
[ $? -eq 1 ] && grep -q "unknown device 'nosuchgpu'" "$dir/err" &&
    ok "drift --device nosuchgpu: unknown device" || fail "drift --device nosuchgpu"

# a port outside 1-65535: a usage error (exit 2) naming the range, not
# "cannot reach attuned" (curl's "bad/illegal format")
for cmd in "query --device cpu --shape $key" "jobs" "pins" "tune --shape $key"; do
    # shellcheck disable=SC2086
    "$A" $cmd --url http://127.0.0.1:99999 >"$dir/out" 2>"$dir/err"
    [ $? -eq 2 ] && grep -q "1-65535" "$dir/err" && ok "$cmd --url :99999: $(cat "$dir/err")" ||
        fail "$cmd --url http://127.0.0.1:99999"
done
ATTUNE_URL=http://127.0.0.1:0 "$A" jobs >"$dir/out" 2>"$dir/err"
[ $? -eq 2 ] && grep -q 'ATTUNE_URL.*1-65535' "$dir/err" && ok "ATTUNE_URL with port 0: usage" ||
    fail "ATTUNE_URL=http://127.0.0.1:0 attune jobs"
if [ -n "${ATTUNED_BIN:-}" ]; then
    "$ATTUNED_BIN" --port 99999 --db "$dir/d.db" >"$dir/out" 2>"$dir/err"
    [ $? -ne 0 ] && grep -q "0-65535" "$dir/err" && ok "attuned --port 99999 names the range" ||
        fail "attuned --port 99999"
fi

# a refusal longer than attune_answer.error (160 bytes) ends with "...",
# not cut silently mid-word ("... for th")
if [ -n "${ATTUNE_LOOKUP_LIB:-}" ]; then
    "$A" query --url "file:$db" --device cpu --shape $key --variants cudnn >"$dir/out" 2>"$dir/err"
    rc=$?
    # (a table file's refusal names no HTTP status: no HTTP is involved)
    msg=$(sed -n 's/.*refused the question: \(.*\); printed .*/\1/p' "$dir/err")
    case $msg in *"(HTTP "*) msg= ;; esac
    if [ $rc -eq 3 ] && [ -n "$msg" ] && { [ ${#msg} -lt 140 ] || [ "${msg%...}" != "$msg" ]; }; then
        ok "a long refusal is whole or ends with ...: $msg"
    else
        fail "query --variants cudnn from a table: refusal cut silently (rc $rc)"
    fi
    "$A" query --url "file:$db" --device cpu --shape $key --variants cudnn --json >"$dir/out" 2>"$dir/err"
    "${ATTUNE_PYTHON:-python3}" -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; sys.exit(0 if len(e) < 150 or e.endswith("...") else 1)' "$dir/out" &&
        ok "query --json: the long error is whole or ends with ..." || fail "query --json error cut silently"
    # a refusal's JSON names the asked device and shape (it had "" for both)
    "${ATTUNE_PYTHON:-python3}" -c 'import json,sys; o=json.load(open(sys.argv[1])); sys.exit(0 if o["refused"] and o["device"] == "cpu" and o["shape"] == sys.argv[2] else 1)' "$dir/out" "$key" &&
        ok "query --json: a refusal names the asked device and shape" || fail "query --json refusal: $(cat "$dir/out")"
fi

# README's "Defaults that fit": export ATTUNE_DB, then attune pins --json
# (no --url, no $ATTUNE_URL: the database, not the default URL)
export ATTUNE_DB="$db"
unset ATTUNE_URL
"$A" pin --exclude fused/pad=1 --reason walkthrough --device cpu >"$dir/out" 2>"$dir/err" &&
    "$A" pins --json >"$dir/out" 2>"$dir/err" && grep -q '"reason": "walkthrough"' "$dir/out" &&
    "$A" unpin 1 >"$dir/out" 2>"$dir/err" && grep -q "pin 1 removed" "$dir/out" &&
    ok "pin, pins, unpin use \$ATTUNE_DB" || fail "pin/pins/unpin with ATTUNE_DB"
ATTUNE_URL=http://127.0.0.1:99999 "$A" pins >"$dir/out" 2>"$dir/err"
[ $? -eq 2 ] && ok "pins: \$ATTUNE_URL before \$ATTUNE_DB" || fail "pins with ATTUNE_URL and ATTUNE_DB"
unset ATTUNE_DB

# the --url synopsis of tune lists --force-long; fleet status refuses
# --batch (push's) and --device (pull's); one is singular
"$A" tune --help | sed -n '/tune --url/,/^$/p' | grep -q -- "--force-long" &&
    ok "tune --url synopsis: --force-long" || fail "tune --help: --force-long not in the --url synopsis"
"$A" fleet status --db "$db" --batch 5 >"$dir/out" 2>"$dir/err"
[ $? -eq 2 ] && grep -q "fleet push only" "$dir/err" && ok "fleet status --batch 5: usage" ||
    fail "fleet status --batch 5 accepted"
"$A" fleet status --db "$db" --device cpu >"$dir/out" 2>"$dir/err"
[ $? -eq 2 ] && ok "fleet status --device cpu: usage" || fail "fleet status --device accepted"
"$A" export --db "$db" --device cpu -o "$dir/t.json" 2>"$dir/err" &&
    "$A" import --db "$dir/other.db" "$dir/t.json" >"$dir/out" 2>"$dir/err" &&
    grep -q " 1 device, 1 stack, 0 pins" "$dir/out" && ok "import: $(cat "$dir/out")" ||
    { fail "import counts: $(cat "$dir/out")"; }
# this host's CPU imported is a local device: its winners count (marks are
# not exported; the import marks what it brought)
"$A" winners --db "$dir/other.db" --device cpu >"$dir/out" 2>"$dir/err" &&
    grep -q ", 0 with a winner" "$dir/out" && fail "winners after import: $(head -1 "$dir/out")" ||
    { grep -q " with a winner" "$dir/out" && ok "winners after import: $(head -1 "$dir/out")" ||
        fail "winners after import: $(cat "$dir/out" "$dir/err")"; }

[ $fails -eq 0 ] || { echo "$fails failures"; exit 1; }
