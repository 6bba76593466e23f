#!/bin/sh
# http_load.sh -- lookup throughput of attuned against a bare libmicrohttpd.
#
# Drives GET /v1/tactic with wrk on loopback against attuned (a measured
# shape, answered from the in-memory index) and against bench/mhd_bare.c
# (same MHD mode and thread pool, one fixed JSON body of the same size,
# answered on the handler's second call as attuned answers, so both keep
# their connections alive: checked). The two are run in turn, ROUNDS times,
# and compared by their medians (a shared machine's load drifts between
# runs). Prints requests/s, p99 latency and errors of both and the ratio;
# the target is attuned idle >= 0.90 of bare with no errors (exit 1
# otherwise). Then once more with a tuning job committing measurements
# meanwhile: printed, not part of the target (on 2 cores the job takes one).
#
#   bench/http_load.sh [path/to/attuned]
#
# Environment: DURATION (s, 10), ROUNDS (3), CONNECTIONS (64), WRK_THREADS
# (2), SERVER_THREADS (4), MHD_BARE (a prebuilt mhd_bare; else cc builds it),
# CPUS_WRK / CPUS_SERVER / CPUS_TUNER (taskset CPU lists,
# e.g. 0-3 / 4-7 / 8: keeps the load generator, the servers and the tuning
# thread off each other's cores when the machine has them).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
ATTUNED=${1:-${ATTUNED_BIN:-$src/build/attuned}}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
TARGET=0.90
CONNECTIONS=${CONNECTIONS:-64}
WRK_THREADS=${WRK_THREADS:-2}
SERVER_THREADS=${SERVER_THREADS:-4}

for tool in wrk curl python3; do
    command -v $tool >/dev/null 2>&1 || { echo "http_load: $tool not found" >&2; exit 1; }
done
[ -x "$ATTUNED" ] || { echo "http_load: attuned not found at $ATTUNED" >&2; exit 1; }

tmp=$(mktemp -d)
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    for p in $pids; do wait "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

pinned() { # (pinned CPULIST cmd...): exec cmd, under taskset when a CPU list is
    # given; run in a subshell so that $! of a background one is cmd's own pid
    cpus=$1; shift
    if [ -n "$cpus" ] && command -v taskset >/dev/null 2>&1; then
        exec taskset -c "$cpus" "$@"
    fi
    exec "$@"
}
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_http() {
    i=0
    until curl -sf "$1" >/dev/null 2>&1; do
        i=$((i + 1)); [ $i -lt 200 ] || { echo "http_load: $1 never answered" >&2; exit 1; }
        sleep 0.05
    done
}

bare_bin=${MHD_BARE:-}
if [ -z "$bare_bin" ]; then # built here unless a prebuilt one is given
    bare_bin=$tmp/mhd_bare
    cc -O2 -o "$bare_bin" "$here/mhd_bare.c" $(pkg-config --cflags --libs libmicrohttpd)
fi

# ---- attuned with a few tuned shapes
pa=$(free_port)
(pinned "${CPUS_SERVER:-}" "$ATTUNED" --db "$tmp/var/attune.db" --port "$pa" --no-default-grid \
    --threads "$SERVER_THREADS" --tune-budget-ms 20 --log "$tmp/attuned.log") &
pids="$pids $!"
apid=$!
wait_http "http://127.0.0.1:$pa/v1/health"
token=$(cat "$tmp/var/token")
post() {
    curl -sf -X POST -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
        "http://127.0.0.1:$pa/v1/tune" -d "$1" | sed -n 's/.*"job":\([0-9]*\).*/\1/p'
}
job_state() {
    curl -sf "http://127.0.0.1:$pa/v1/jobs/$1" | sed -n 's/.*"state":"\([a-z]*\)".*/\1/p'
}
warm=$(post '{"device":"cpu","shapes":[
 {"b":1,"hq":8,"hkv":1,"sq":16,"skv":128,"d":64,"dtype":"f32","causal":false},
 {"b":1,"hq":8,"hkv":2,"sq":32,"skv":128,"d":64,"dtype":"f32","causal":true}]}')
while [ "$(job_state "$warm")" != done ]; do sleep 0.2; done
path='/v1/tactic?device=cpu&b=1&hq=8&hkv=1&sq=16&skv=128&d=64&dtype=f32&causal=0'
curl -sf "http://127.0.0.1:$pa$path" | grep -q '"source":"measured"' ||
    { echo "http_load: the benchmark shape is not measured" >&2; exit 1; }

# ---- bare MHD
pb=$(free_port)
(pinned "${CPUS_SERVER:-}" "$bare_bin" "$pb" "$SERVER_THREADS") &
pids="$pids $!"
bpid=$!
wait_http "http://127.0.0.1:$pb/"

run_wrk() { # run_wrk URL OUTFILE
    (pinned "${CPUS_WRK:-}" wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "$1") >"$2"
}
rps() { sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$1"; }
p99_us() { # the 99% line of --latency, in microseconds
    awk '$1 == "99%" { v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
         m = (u == "us") ? 1 : (u == "ms") ? 1000 : (u == "s") ? 1e6 : 0; print v * m }' "$1"
}
errors() { # socket errors + non-2xx responses
    awk '/Socket errors/ { gsub(/,/, ""); e += $4 + $6 + $8 + $10 }
         /Non-2xx/ { e += $NF } END { print e + 0 }' "$1"
}
measured() {
    curl -sf "http://127.0.0.1:$pa/metrics" | sed -n 's/^attune_measurements_taken_total \([0-9]*\)/\1/p'
}

# keep-alive on both: the second of two requests on one curl handle
# makes no new connection
for port in "$pa" "$pb"; do
    reused=$(curl -s -o /dev/null -o /dev/null -w '%{num_connects}\n' \
        "http://127.0.0.1:$port$path" "http://127.0.0.1:$port$path" | tail -1)
    [ "$reused" = 0 ] || { echo "http_load: port $port closes its connections" >&2; exit 1; }
done

median() {
    sort -n | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m }'
}
# CPU time of a server per request (user + system, /proc/PID/stat, in
# clock ticks): what the server itself spends, which the load of other
# processes on a shared machine does not change as it changes requests/s
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
requests() { sed -n 's/^ *\([0-9]*\) requests in.*/\1/p' "$1"; }
cpu_run() { # cpu_run PID URL OUTFILE: wrk, then the server's CPU us/request in OUTFILE.cpu
    t0=$(ticks "$1")
    run_wrk "$2" "$3"
    t1=$(ticks "$1")
    awk -v t="$((t1 - t0))" -v n="$(requests "$3")" -v hz="$(getconf CLK_TCK)" \
        'BEGIN { v = (n > 0) ? t * 1e6 / hz / n : 0; printf "%.2f\n", v }' >"$3.cpu"
}
r=1
while [ $r -le "$ROUNDS" ]; do # in turn: drifting load hits both alike
    cpu_run "$bpid" "http://127.0.0.1:$pb$path" "$tmp/bare.$r.txt"
    cpu_run "$apid" "http://127.0.0.1:$pa$path" "$tmp/idle.$r.txt"
    r=$((r + 1))
done
pick() { # pick KIND: the round file of KIND whose requests/s is the median
    want=$(for f in "$tmp/$1".*.txt; do rps "$f"; done | median)
    for f in "$tmp/$1".*.txt; do
        [ "$(rps "$f")" = "$want" ] && { echo "$f"; return; }
    done
    ls "$tmp/$1".*.txt | head -1
}

# ---- attuned, with a tuning job committing measurements meanwhile
shapes=""
for sq in 24 40 56 72 88 104 120 136 152 168 184 200 216 232 248 264 280 296 312 328; do
    shapes="$shapes{\"b\":1,\"hq\":8,\"hkv\":2,\"sq\":$sq,\"skv\":512,\"d\":64,\"dtype\":\"f32\",\"causal\":false},"
done
job=$(post "{\"device\":\"cpu\",\"shapes\":[${shapes%,}]}")
while [ "$(job_state "$job")" != running ]; do sleep 0.05; done
if [ -n "${CPUS_TUNER:-}" ] && command -v taskset >/dev/null 2>&1; then
    # the tuning thread (named attuned-job-cpu) gets its own CPUs
    moved=0
    for t in /proc/"$apid"/task/*; do
        if [ "$(cat "$t/comm")" = attuned-job-cpu ]; then
            taskset -p -c "$CPUS_TUNER" "${t##*/}" >/dev/null && moved=1
        fi
    done
    [ $moved = 1 ] || { echo "http_load: no attuned-job-cpu thread in $apid" >&2; exit 1; }
fi
m0=$(measured)
run_wrk "http://127.0.0.1:$pa$path" "$tmp/attuned.txt"
m1=$(measured)
st=$(job_state "$job")
curl -sf -X DELETE -H "Authorization: Bearer $token" "http://127.0.0.1:$pa/v1/jobs/$job" >/dev/null || true

fb=$(pick bare); fid=$(pick idle)
rb=$(rps "$fb"); ri=$(rps "$fid"); ra=$(rps "$tmp/attuned.txt")
lb=$(p99_us "$fb"); li=$(p99_us "$fid"); la=$(p99_us "$tmp/attuned.txt")
eb=0; ei=0
for f in "$tmp"/bare.*.txt; do eb=$((eb + $(errors "$f"))); done
for f in "$tmp"/idle.*.txt; do ei=$((ei + $(errors "$f"))); done
ea=$(errors "$tmp/attuned.txt")
ratio=$(awk "BEGIN { printf \"%.3f\", $ri / $rb }")
cb=$(cat "$tmp"/bare.*.txt.cpu | median); ci=$(cat "$tmp"/idle.*.txt.cpu | median)
cratio=$(awk "BEGIN { printf \"%.3f\", $cb / $ci }")
rjob=$(awk "BEGIN { printf \"%.3f\", $ra / $rb }")
all() { for f in "$tmp/$1".*.txt; do printf ' %s' "$(rps "$f")"; done; }
echo "http_load: $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -srm), $(nproc) CPUs" \
     "($(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)), load $(cut -d' ' -f1-3 /proc/loadavg)," \
     "commit $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo ?)"
echo "wrk -t$WRK_THREADS -c$CONNECTIONS -d${DURATION}s x $ROUNDS rounds in turn, server threads" \
     "$SERVER_THREADS, CPUs wrk=${CPUS_WRK:-any} server=${CPUS_SERVER:-any} tuner=${CPUS_TUNER:-any}"
echo "rounds (requests/s): bare$(all bare); attuned$(all idle)"
echo "server CPU per request (us, median of the rounds): bare $cb, attuned $ci;" \
     "bare/attuned $cratio (the throughput the server's own work allows)"
printf '%-16s %12s %10s %8s\n' server 'requests/s' 'p99 us' errors
printf '%-16s %12s %10s %8s\n' bare "$rb" "$lb" "$eb"
printf '%-16s %12s %10s %8s\n' attuned "$ri" "$li" "$ei"
printf '%-16s %12s %10s %8s\n' 'attuned + job' "$ra" "$la" "$ea"
echo "measurements committed during the attuned + job run: $((m1 - m0)) (job $job: $st)"
echo "ratio attuned/bare: $ratio (target >= $TARGET); with a tuning job: $rjob"
if [ "$ei" -ne 0 ] || [ "$eb" -ne 0 ] || awk "BEGIN { exit !($ratio < $TARGET) }"; then
    echo "http_load: target missed"
    exit 1
fi
echo "http_load: target met"
