#!/bin/sh
# time_run.sh -- time `make run` as a new user meets it: from the command
# to attuned's event=ready, and the lines printed until then; then stop
# the daemon. CI runs it on its fresh clone (.ci/run; issue 28 item 5: the
# bars are 45 s and 20 lines on an idle 2-core host without a GPU).
#
#   scripts/time_run.sh [MAKE_ARG...]      e.g. CMAKE_FLAGS=-DATTUNE_WERROR=ON
#
# The daemon gets a database in a temporary directory and a free port.
# Prints what make run printed until then, each line behind "  | ", and
# "make run: event=ready after S s, N lines printed" (on failure the
# output stays in $TMPDIR/attune-run.*/out).
# Exit 1 when make run ends, or 900 s pass, before event=ready.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attune-run.XXXXXX")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start=$(date +%s.%N)
# its own process group, so that stopping it stops make and attuned alike
setsid make -C "$src" --no-print-directory run PORT="$port" DB="$tmp/attune.db" "$@" \
    >"$tmp/out" 2>&1 </dev/null &
pid=$!
ready=0
while :; do
    if grep -q 'event=ready' "$tmp/out"; then ready=1; break; fi
    kill -0 "$pid" 2>/dev/null || break
    [ $(($(date +%s) - ${start%.*})) -gt 900 ] && break
    sleep 0.1
done
end=$(date +%s.%N)
kill -TERM "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
if [ $ready = 0 ]; then
    echo "make run: no event=ready (output: $tmp/out):" >&2
    tail -20 "$tmp/out" >&2
    exit 1
fi
lines=$(grep -n 'event=ready' "$tmp/out" | head -1 | cut -d: -f1)
sed -n "1,${lines}p" "$tmp/out" | sed 's/^/  | /' # what the user saw
printf 'make run: event=ready after %.1f s, %d lines printed (load %s)\n' \
    "$(awk "BEGIN { print $end - $start }")" "$lines" "$(cut -d' ' -f1-3 /proc/loadavg)"
rm -rf "$tmp"
