#!/bin/sh
# quiet.sh -- run a build step with its output in a log and one short line
# on the terminal instead of make's chatter (issue 28 item 5).
#
#   scripts/quiet.sh LABEL LOG COMMAND [ARG...]
#
# Everything COMMAND prints goes to LOG (replaced). On a terminal, one line
# is rewritten in place as CMake reports progress ("build: 45% store.c");
# elsewhere (CI, a pipe) nothing is printed until the end. Then one line:
# "LABEL: done in 27 s, CPU 50 s" (with the number of warnings and where
# they are),
# or, when COMMAND fails, its errors and the end of LOG, and COMMAND's exit
# status. ATTUNE_VERBOSE=1 prints everything instead (the plain command).
set -u
label=$1 log=$2
shift 2
if [ "${ATTUNE_VERBOSE:-0}" = 1 ]; then
    exec "$@"
fi
mkdir -p "$(dirname "$log")"
: >"$log"
tty=0
[ -t 1 ] && tty=1
start=$(date +%s)
rcfile=$(mktemp)
# The pipeline's status is COMMAND's, kept in a file: sh has no pipefail.
{ "$@" 2>&1; echo $? >"$rcfile"; } | {
    while IFS= read -r line; do
        printf '%s\n' "$line" >>"$log"
        [ $tty = 1 ] || continue
        case $line in
        "["*"%]"*)
            pct=${line#\[}
            pct=${pct%%\%*}
            what=${line##* }
            what=${what##*/}
            what=${what%.o}
            printf '\r\033[K%s: %s%% %s' "$label" "$(echo $pct)" "$what" | cut -c1-79 | tr -d '\n'
            ;;
        esac
    done
    [ $tty = 1 ] && printf '\r\033[K'
}
rc=$(cat "$rcfile")
secs=$(($(date +%s) - start))
# the CPU time (user + system) COMMAND and what it waited for took: beside
# the wall time, how busy it kept the cores (`times` in this shell, not in
# a $(...) subshell, which has no children of its own)
times >"$rcfile"
cpu=$(sed -n 2p "$rcfile" | awk '{ s = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); s += a[1] * 60 + a[2] }
    printf "%.0f", s }')
rm -f "$rcfile"
if [ "$rc" = 0 ]; then
    n=$(grep -ci 'warning' "$log" || true)
    if [ "$n" -gt 0 ]; then
        echo "$label: done in $secs s, CPU $cpu s ($n warning lines: $log)"
    else
        echo "$label: done in $secs s, CPU $cpu s"
    fi
    exit 0
fi
echo "$label: FAILED in $secs s (exit $rc); the whole output is in $log:" >&2
grep -iE 'error|fatal|undefined reference|No such file|FAIL' "$log" | head -20 >&2
echo "--- last lines of $log:" >&2
tail -n 15 "$log" >&2
exit "$rc"
