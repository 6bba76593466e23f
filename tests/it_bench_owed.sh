#!/bin/sh
# it_bench_owed.sh -- bench/owed.sh refuses, before it runs anything or
# writes under OUT, a step that does not exist, a budget that is not whole
# seconds, and a step whose estimate the whole budget cannot hold (such a
# step would be skipped and the device call spent on the build alone);
# its --help names every step it accepts.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
OWED=$HERE/../bench/owed.sh
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
# expect RC PATTERN ENV... -- ARGS...: owed.sh's exit status and stderr
expect() {
    want=$1 pat=$2
    shift 2
    envs=
    while [ "$1" != -- ]; do envs="$envs $1"; shift; done
    shift
    # shellcheck disable=SC2086
    env OUT="$dir/out" $envs bash "$OWED" "$@" >"$dir/so" 2>"$dir/se"
    rc=$?
    if [ $rc -ne "$want" ] || ! grep -q -- "$pat" "$dir/se"; then
        echo "FAIL: owed.sh $* ($envs): exit $rc (want $want), stderr:"; cat "$dir/se"
        fails=$((fails + 1))
    elif [ -e "$dir/out" ]; then
        echo "FAIL: owed.sh $* wrote under OUT before refusing"
        fails=$((fails + 1))
    else
        echo "ok: owed.sh $* ($envs): exit $rc, '$pat'"
    fi
}
expect 2 "no step 'nope'" -- nope
expect 2 "no step 'nope'" -- peers nope
expect 2 "OWED_BUDGET must be whole seconds, not 'x'" OWED_BUDGET=x -- peers
expect 2 "OWED_BUDGET must be whole seconds, not '-5'" OWED_BUDGET=-5 -- peers
expect 2 "step 'tmastore' needs about 200s, more than OWED_BUDGET=185s" OWED_BUDGET=185 -- tmastore
expect 2 "step 'order' needs about 230s, more than OWED_BUDGET=200s" OWED_BUDGET=200 -- sass order
# --help: every step of the case list, in the text
bash "$OWED" --help >"$dir/help" 2>&1 || { echo "FAIL: --help exit $?"; fails=$((fails + 1)); }
for s in peers rate ncu sass trace fp8 persist claim tmastore v1order order ftest ptrace; do
    grep -q "^#* *$s " "$dir/help" || { echo "FAIL: --help does not describe step $s"; fails=$((fails + 1)); }
done
[ $fails -eq 0 ] || { echo "$fails failures"; exit 1; }
echo "all passed"
