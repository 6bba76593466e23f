#!/bin/sh
# http_load.sh -- lookup throughput of attuned against a bare libmicrohttpd.
#
# Drives GET /v1/tactic with wrk on loopback against attuned (a measured
# shape, answered from the in-memory index) while a tuning job commits
# measurements, and in the same run against bench/mhd_bare.c (same MHD mode
# and thread pool, one fixed JSON body). Prints requests/s, p99 latency and
# errors of both and their ratio; the target is attuned >= 80% of bare with
# no errors (exit 1 otherwise).
#
#   bench/http_load.sh [path/to/attuned]
#
# Environment: DURATION (s, 10), CONNECTIONS (64), WRK_THREADS (2),
# SERVER_THREADS (4), MHD_BARE (a prebuilt mhd_bare; else cc builds it),
# CPUS_WRK / CPUS_SERVER / CPUS_TUNER (taskset CPU lists,
# e.g. 0-3 / 4-7 / 8: keeps the load generator, the servers and the tuning
# thread off each other's cores when the machine has them).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
ATTUNED=${1:-${ATTUNED_BIN:-$src/build/attuned}}
DURATION=${DURATION:-10}
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

run_wrk "http://127.0.0.1:$pb$path" "$tmp/bare.txt"

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

rb=$(rps "$tmp/bare.txt"); ra=$(rps "$tmp/attuned.txt")
lb=$(p99_us "$tmp/bare.txt"); la=$(p99_us "$tmp/attuned.txt")
eb=$(errors "$tmp/bare.txt"); ea=$(errors "$tmp/attuned.txt")
ratio=$(awk "BEGIN { printf \"%.3f\", $ra / $rb }")
echo "http_load: $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -srm), $(nproc) CPUs" \
     "($(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1))"
echo "wrk -t$WRK_THREADS -c$CONNECTIONS -d${DURATION}s, server threads $SERVER_THREADS," \
     "CPUs wrk=${CPUS_WRK:-any} server=${CPUS_SERVER:-any} tuner=${CPUS_TUNER:-any}"
printf '%-8s %12s %10s %8s\n' server 'requests/s' 'p99 us' errors
printf '%-8s %12s %10s %8s\n' bare "$rb" "$lb" "$eb"
printf '%-8s %12s %10s %8s\n' attuned "$ra" "$la" "$ea"
echo "measurements committed during the attuned run: $((m1 - m0)) (job $job: $st)"
echo "ratio attuned/bare: $ratio (target >= 0.80)"
if [ "$ea" -ne 0 ] || [ "$eb" -ne 0 ] || awk "BEGIN { exit !($ratio < 0.80) }"; then
    echo "http_load: target missed"
    exit 1
fi
echo "http_load: target met"
