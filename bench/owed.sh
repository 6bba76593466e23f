#!/usr/bin/env bash
# owed.sh -- the GPU measurements docs/kernels.md says are owed, most
# important first, each step skipped when the time left is under its
# estimate (OWED_BUDGET seconds from this script's start, default 480: a
# 600 s call less run.sh's build), so one device call does as much of the
# list as fits and what it wrote comes back. Run on the GPU machine:
#
#   tests/gpu/run.sh --no-tests --exec 'bash bench/owed.sh'
#   tests/gpu/run.sh --no-tests --exec 'OWED_BUDGET=300 bash bench/owed.sh rate trace'
#
# Steps (arguments pick some, in the order given; default, on an H200:
# peers fp8 order persist (the bars are an H200's; order ran on an H100
# only), on another Hopper tmastore v1order (the A/Bs owed), elsewhere
# none; the others only when named; a call does
# what fits its budget, so name the rest in the next). Ran on
# 2026-12-07 (H100s; tmastore and dhalf: bench/switches-h100-851756e.txt; bench/owed-h100-8ad86fa.txt, -4767e9d.txt,
# -cef78e2.txt, -3a12ebb.txt, -4d1a9b1.txt, -097acc4.txt, -61b752e.txt,
# -5bf3a66.txt, -e99b3ec.txt; persist, claim, ptrace, ftest and peers:
# bench/persist-tactic-h100-0ec0d80.txt, persist-claim-h100-2026-12-07.txt,
# persist-tactic-h100-7d4820b.txt, peers-h100-7d4820b.md)
# and gone from the list: spec, specab, qreg, spec6, p6 (SM90_P_LOG2 6
# is the default since), icvt, xturn, tsum (their switches taken out;
# commit cef78e2 has them), early (commit 3a12ebb has it), late (commit
# 097acc4), vote and half (commit 61b752e), lin (commit e99b3ec), dhalf
# (commit f57dcb2).
#   peers  bench/peers.py over the anchors, as tests/gpu/run.sh --bench
#          runs it: each anchor tuned, against PyTorch's paths in the same
#          run (peers.md, peers.log; 169 s on an H100 with persist=1 listed)
#   rate   bench/softmax_rate.cu built and run: elements a cycle per SM
#          of each softmax instruction form, with the MUFU's and the e4m3
#          conversion's rates mixed (ex2+cvt) and the kernel's whole
#          e4m3 softmax per element (owed-rate.txt; seconds)
#   ncu    bench/stall_ncu.sh on the e4m3 8k non-causal anchor's 192x128
#          tile (2 stages): the stall samples and each pipe's use (XU,
#          FMA, ALU, shared memory, tensor) over the kernel
#          (stall-e4m3-192.txt; about 90 s)
#   sass   the default build's SASS of the e4m3 and bf16 192x128 kernels,
#          whole (sass-192x128.txt: to read on a machine without
#          cuobjdump) and counted by opcode (bench/sass_ops.sh ALL); seconds
#   trace  bench/sm90_trace.sh, the default build's cycle trace of the 8k
#          anchors' tiles (sm90-trace.txt; about 90 s)
#   persist  version 3.28's persist=1 tactics against the same tiles
#          plain, in this build: `attune tune --force --screen 0 --only`
#          both forms of the 128x128 and 192x128 tiles (e4m3: 3 stages
#          too) on the 2k causal anchor and the 8k bf16 causal and e4m3
#          non-causal ones, 3 rounds of fresh processes, tabled by
#          bench/persist_ab.py; then ctest gpu_fused (every listed tactic,
#          persist=1 among them, against float64) (persist.txt,
#          persist.log, persist-ctest.log; 67 s on an H100)
#   claim  SM90_PERSIST_CLAIM=2 (the next item claimed after this one's
#          last tile is loaded) against 1 (after its first STAGES: the
#          default) on the persist=1 tiles of the same shapes
#          (bench/build_ab.sh, 2 rounds, then B's gpu_fused: claim.txt,
#          claim.log, claim-ctest-b.log; 145 s on an H100)
#   tmastore  version 3.29's A/B (bench/build_ab.sh -DSM90_TMA_STORE=0:
#          B is the copy loop, the default before 3.32; 2026-12-07, H100:
#          the TMA store 0.955-1.003 of its time on plain and persistent
#          128x128 and persistent 192x128 tiles; B/A should read > 1).
#          Now the kernels whose plain-unit code spills with the TMA store
#          and did not without (ptxas: d128 192x128 16/36 B, d256 128x80
#          16/28 B): plain 192x128 and persistent 192x128 (the control:
#          its spills fell) on the 8k bf16 anchors, plain 128x80 on the
#          d256 anchors, 3 rounds; no B tests (B is the old default)
#          (tmastore.txt, tmastore.log; about 200 s)
#   v1order  version 1.2's A/B (bench/build_ab.sh -DFUSED_CAUSAL_ORDER=1:
#          version 1's causal grids in sm90a's chunked longest-first
#          order, the last chunk merged under two waves of the device's
#          resident blocks; written 2026-12-08, not yet run): every
#          `fused/pad=1/` tactic (version 1, 16-bit) and `fused/acc=f32/
#          pad=1/` one (f32) on causal shapes of few heads (one to two
#          waves of blocks on 132 SMs, where bench/sched_sim.py gave the
#          order the most) and the 2k causal anchor (many waves), 2
#          rounds, then B's gpu_fused and gpu_fused_f32 (every tactic of
#          their shapes, causal among them, against float64)
#          (v1order.txt, v1order.log, v1order-ctest-b.log; about 280 s)
#   order  version 3.31's A/B in this build (bench/ab_env.py
#          ATTUNE_SM90_TAIL_MERGE=0, unset and 24: the causal grid's last
#          chunk as it falls, merged within 32 MB of K/V (the default) and
#          within 24; ran 2026-12-07 on an H100, then with 0, 24 and 32,
#          bench/order-h100-2026-12-07.txt): plain and
#          persistent 128x128 and 192x128 tiles on the 8k
#          causal anchor (bf16 and e4m3) and four real-model causal shapes
#          whose last chunks are short (bench/sched_sim.py's predictions in
#          docs/kernels.md), 3 rounds; then e4m3's chunks by its old
#          count and its new, unmerged (order-e4m3.txt); then gpu_fused
#          (its merged grids among them) (order.txt, order.log,
#          order-ctest.log; about 230 s)
#   ftest  ctest gpu_fused in this build (every listed tactic of its shapes
#          against float64, persist=1 among them; ftest.log; 53 s)
#   ptrace the cycle trace of the persist=1 tactics' items
#          (bench/sm90_trace.sh) on the 2k and 8k causal anchors' 128x128
#          tiles, and the plain tactic's of the same: where an item's
#          boundary goes; and the 8k causal and non-causal anchors'
#          persistent 192x128 tiles (sm90-trace.txt; one trace build, 71 s
#          before the 192x128 pair)
#   fp8    on an H200 only (the issue-30 bar is its): bench/fp8.sh --only 7,8,
#          every e4m3 and bf16 tactic of the 8k d128 anchors (causal too) by
#          the tuner's protocol (fp8.txt, fp8.log; about 180 s)
# BUILD and OUT come from run.sh; OUT/owed.log says what ran and what
# was skipped, OUT/owed-smi.csv the clocks and power meanwhile. Exit
# status: 1 if a step that ran failed.
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}
BUILD=${BUILD:-${ATTUNE_GPU_BUILD:-$ROOT/build-gpu}}
export OUT BUILD
case ${1:-} in -h | --help) sed -n "2,/^set -u/{/^set -u/d;p}" "$0"; exit 0 ;; esac
BUDGET=${OWED_BUDGET:-480}
case $BUDGET in '' | *[!0-9]*) echo "owed.sh: OWED_BUDGET must be whole seconds, not '$BUDGET'" >&2; exit 2 ;; esac
A=b2.hq16.hkv16.sq8192.skv8192.d128
T0=$SECONDS
STEPS=("$@")
# By default: on an H200 the bars (issue 30's and 25's are an H200's),
# then 3.31's A/B there; on another Hopper the A/Bs owed (the TMA store's
# spilling kernels, version 1's causal order).
if [ ${#STEPS[@]} -eq 0 ]; then
    gpus=$(nvidia-smi -L 2>/dev/null)
    case $gpus in
    *GH200* | *H100* | *H800*) STEPS=(tmastore v1order) ;;
    *H200*) STEPS=(peers fp8 order persist) ;;
    *)
        echo "owed.sh: nothing is owed on this card (the sm90a steps need a Hopper); name a step (see --help)" >&2
        exit 0
        ;;
    esac
fi
# need_of STEP: its estimate in seconds (a step is skipped when less is
# left); 0 for a step that does not exist.
need_of() {
    case $1 in peers) echo 180 ;; rate) echo 30 ;; ncu) echo 90 ;; sass) echo 10 ;; trace) echo 90 ;; fp8) echo 180 ;;
    persist) echo 100 ;; claim) echo 200 ;; tmastore) echo 200 ;; order) echo 230 ;; ftest) echo 80 ;;
    v1order) echo 280 ;;
    ptrace) echo 120 ;; *) echo 0 ;; esac
}
# Every step checked before anything runs: one that does not exist, or
# whose estimate the whole budget cannot hold (it would be skipped and the
# call's device time spent on the build alone: 2026-12-08, 60 s).
for s in "${STEPS[@]}"; do
    need=$(need_of "$s")
    [ "$need" -gt 0 ] || { echo "owed.sh: no step '$s' (see --help)" >&2; exit 2; }
    [ "$need" -le "$BUDGET" ] || {
        echo "owed.sh: step '$s' needs about ${need}s, more than OWED_BUDGET=${BUDGET}s: raise the budget or name another step" >&2
        exit 2
    }
done
log() { echo "[owed $(date -u +%H:%M:%S) +$((SECONDS - T0))s] $*" | tee -a "$OUT/owed.log" >&2; }
# The SM clock, power and its limit, and the clock's event (throttle)
# reasons every 250 ms while the steps run (owed-smi.csv; owed.log's
# times place each step in it): the trace counts SM cycles, and an FP8
# kernel at full tilt may run at its power limit's clock, not the boost.
SMI_Q=timestamp,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu
# (the help read whole first: grep -q on the pipe would end nvidia-smi by
# SIGPIPE, and pipefail would call the match a failure)
SMI_HELP=$(nvidia-smi --help-query-gpu 2>/dev/null || true)
case $SMI_HELP in
*clocks_event_reasons.active*) SMI_Q=$SMI_Q,clocks_event_reasons.active ;;
*clocks_throttle_reasons.active*) SMI_Q=$SMI_Q,clocks_throttle_reasons.active ;;
esac
smi_pid=
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu="$SMI_Q" --format=csv -lms 250 >"$OUT/owed-smi.csv" 2>&1 &
    smi_pid=$!
    trap 'kill "$smi_pid" 2>/dev/null' EXIT
    trap 'exit 143' TERM INT # so that the sampler goes when a timeout ends this script
fi
# ctest gpu_fused in BUILD (every listed tactic of its shapes against
# float64), built first; its output to $1
fused_test() {
    { cmake --build "$BUILD" -j "$(nproc)" --target gpu_fused &&
        "${T[@]}" ctest --test-dir "$BUILD" -R '^gpu_fused$' --output-on-failure; } >"$1" 2>&1
}
# A compile-time switch's A/B (bench/build_ab.sh; rounds, tactics and
# shapes from the ab_env args), then B's tests matching $3 (none where
# empty): NAME DEFINE TESTS [ab_env args]; OUT/NAME.txt (the table),
# NAME.log, NAME-ctest-b.log (B's tests)
ab_step() {
    local name=$1 def=$2 tests=$3 st
    shift 3
    rm -f "$OUT/ctest-b.log" # a failed B build leaves none: not an earlier step's
    AB_TESTS=$tests "${T[@]}" bash "$ROOT/bench/build_ab.sh" "$def" "$@" >"$OUT/$name.txt" 2>"$OUT/$name.log"
    st=$?
    cp "$OUT/ctest-b.log" "$OUT/$name-ctest-b.log" 2>/dev/null
    return $st
}
rc=0
for s in "${STEPS[@]}"; do
    need=$(need_of "$s")
    left=$((BUDGET - (SECONDS - T0)))
    if [ "$left" -lt "$need" ]; then
        log "$s skipped: ${left}s left, about ${need}s needed"
        continue
    fi
    # a step that hangs (a kernel that never ends) is cut at twice its
    # estimate, or the budget's end, so that the steps after it still run
    lim=$((2 * need < left ? 2 * need : left))
    T=(timeout -k 5 "$lim")
    log "$s (cut at ${lim}s)"
    case $s in
    peers)
        # a database of its own outside OUT, as run.sh --bench's; the table
        # goes to stdout (peers.md)
        db=${TMPDIR:-/tmp}/attune-owed-peers-$$.db
        PYTHONUNBUFFERED=1 "${T[@]}" python3 "$ROOT/bench/peers.py" --attune "$BUILD/attune" --out "$OUT" \
            --db "$db" >"$OUT/peers.md" 2>"$OUT/peers.log"
        rm -f "$db"*
        ;;
    rate)
        { "${T[@]}" nvcc -O3 -arch=sm_90 -o "$OUT/softmax_rate" "$ROOT/bench/softmax_rate.cu" &&
            "${T[@]}" "$OUT/softmax_rate"; } >"$OUT/owed-rate.txt" 2>&1
        rm -f "$OUT/softmax_rate"
        ;;
    ncu)
        "${T[@]}" bash "$ROOT/bench/stall_ncu.sh" "$A.e4m3.nc" fused/arch=sm90a/pad=1/stages=2/tile=192x128/warps=16 \
            e4m3-192 >"$OUT/owed-ncu.log" 2>&1
        ;;
    sass)
        lib=$(ls "$BUILD"/libattune.so.*.*.* 2>/dev/null | head -n 1)
        pat='(fp8_e4m3|bfloat16)Li128ELi192ELi128E'
        { [ -n "$lib" ] && "${T[@]}" cuobjdump --dump-sass "$lib" |
            awk -v pat="$pat" '/Function :/ { on = $3 ~ pat } on' >"$OUT/sass-192x128.txt" &&
            "${T[@]}" bash "$ROOT/bench/sass_ops.sh" "$lib" "$pat" ALL >"$OUT/sass-192x128-ops.txt"; }
        ;;
    trace) "${T[@]}" bash "$ROOT/bench/sm90_trace.sh" >/dev/null ;;
    ptrace)
        P=()
        for k in b4.hq32.hkv8.sq2048.skv2048.d128.bf16.c bf16.c; do
            P+=("$k:sm90a/pad=1/persist=1/stages=2/tile=128x128" "$k:sm90a/pad=1/stages=2/tile=128x128")
        done
        # the 8k anchors' persistent 192x128 tile, causal and not: where
        # the causal grid's 192-row items lose to the 128-row ones
        P+=("bf16.c:sm90a/pad=1/persist=1/stages=2/tile=192x128" "bf16.nc:sm90a/pad=1/persist=1/stages=2/tile=192x128")
        "${T[@]}" bash "$ROOT/bench/sm90_trace.sh" "${P[@]}" >/dev/null
        ;;
    persist)
        pdb=${TMPDIR:-/tmp}/attune-owed-persist-$$
        rm -rf "$pdb" && mkdir -p "$pdb"
        PT=stages=2/tile=128x128,stages=2/tile=192x128,stages=3/tile=192x128
        for r in 1 2 3; do
            for k in b4.hq32.hkv8.sq2048.skv2048.d128.bf16.c "$A.bf16.c" "$A.e4m3.nc"; do
                "${T[@]}" "$BUILD/attune" tune --db "$pdb/p.db" --device 0 --shape "$k" --force --screen 0 \
                    --only "$PT" --quiet >>"$OUT/persist.log" 2>&1 &&
                    "$BUILD/attune" results --db "$pdb/p.db" --device 0 --shape "$k" --csv >"$pdb/$k.r$r.csv" \
                        2>>"$OUT/persist.log"
            done
        done
        python3 "$ROOT/bench/persist_ab.py" "$pdb"/*.csv >"$OUT/persist.txt" 2>>"$OUT/persist.log" &&
            cp "$pdb"/*.csv "$OUT/" && fused_test "$OUT/persist-ctest.log"
        st=$?
        rm -rf "$pdb"
        (exit $st)
        ;;
    tmastore)
        ab_step tmastore -DSM90_TMA_STORE=0 '' --reps 3 --filter sm90a \
            --only "sm90a/pad=1/stages=2/tile=192x128,sm90a/pad=1/persist=1/stages=2/tile=192x128,\
sm90a/pad=1/stages=2/tile=128x80" \
            --shape "$A.bf16.nc" --shape "$A.bf16.c" --shape b1.hq8.hkv1.sq968.skv968.d256.f16.nc \
            --shape b2.hq8.hkv1.sq2048.skv2048.d256.bf16.c
        ;;
    order)
        "${T[@]}" python3 "$ROOT/bench/ab_env.py" --attune "$BUILD/attune" --env ATTUNE_SM90_TAIL_MERGE=0,-,24 \
            --reps 3 --filter sm90a --out "$OUT/order" \
            --only "sm90a/pad=1/stages=2/tile=128x128,sm90a/pad=1/persist=1/stages=2/tile=128x128,\
sm90a/pad=1/stages=2/tile=192x128,sm90a/pad=1/persist=1/stages=2/tile=192x128" \
            --shape "$A.bf16.c" --shape b1.hq40.hkv8.sq6000.skv6000.d128.bf16.c \
            --shape b1.hq40.hkv40.sq2048.skv2048.d128.f16.c --shape b8.hq32.hkv8.sq1280.skv1280.d128.bf16.c \
            --shape b1.hq32.hkv32.sq2048.skv2048.d80.f16.c --shape "$A.e4m3.c" >"$OUT/order.txt" 2>"$OUT/order.log" &&
            # e4m3's chunks count a byte an element since 3.31: unmerged, a
            # 4 MB budget is its old order (2 heads), unset its new (4)
            ATTUNE_SM90_TAIL_MERGE=0 "${T[@]}" python3 "$ROOT/bench/ab_env.py" --attune "$BUILD/attune" \
                --env ATTUNE_SM90_CHUNK_MB=4,- --reps 3 --filter sm90a --out "$OUT/order-e4m3" \
                --only "sm90a/pad=1/persist=1/stages=2/tile=128x128,sm90a/pad=1/persist=1/stages=2/tile=192x128" \
                --shape "$A.e4m3.c" >"$OUT/order-e4m3.txt" 2>>"$OUT/order.log" &&
            fused_test "$OUT/order-ctest.log"
        ;;
    ftest) fused_test "$OUT/ftest.log" ;;
    v1order)
        ab_step v1order -DFUSED_CAUSAL_ORDER=1 '^gpu_fused(_f32)?$' --reps 2 --filter fused/ \
            --only fused/pad=1/,fused/acc=f32/pad=1/ \
            --shape b1.hq8.hkv8.sq4096.skv4096.d128.bf16.c --shape b1.hq4.hkv4.sq8192.skv8192.d64.f16.c \
            --shape b2.hq8.hkv2.sq2048.skv2048.d128.bf16.c --shape b1.hq8.hkv8.sq4096.skv4096.d64.f32.c \
            --shape b4.hq32.hkv8.sq2048.skv2048.d128.bf16.c
        ;;
    claim)
        ab_step claim -DSM90_PERSIST_CLAIM=2 gpu_fused --reps 2 --filter sm90a \
            --only "persist=1/stages=2/tile=192x128,persist=1/stages=2/tile=128x128,persist=1/stages=3/tile=192x128" \
            --shape b4.hq32.hkv8.sq2048.skv2048.d128.bf16.c --shape "$A.bf16.c" --shape "$A.e4m3.nc"
        ;;
    fp8)
        if ! nvidia-smi -L 2>/dev/null | grep H200 >/dev/null; then
            log "fp8 skipped: not an H200"
            continue
        fi
        "${T[@]}" bash "$ROOT/bench/fp8.sh" --build "$BUILD" --device 0 --out "$OUT" --only 7,8 >"$OUT/fp8.log" 2>&1
        ;;
    esac
    st=$?
    [ $st -eq 0 ] || { log "$s: exit $st"; rc=1; }
done
log "done"
exit $rc
