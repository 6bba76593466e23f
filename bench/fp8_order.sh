#!/bin/sh
# fp8_order.sh -- the cuDNN FP8 tactic's chunk schedules against each other
# (issue 30: the bf16 pass after cuDNN's FP8-O kernel; docs/cudnn.md
# "Chunks"). For each order (pairs: odd chunks' graph and pass on the side
# stream; serial: every graph on the caller's stream, every pass on the
# side stream after its graph) and chunk count, bench/fp8_parts.py on the
# 8k d128 e4m3 anchors, a fresh process each (the plan reads both settings
# when it is built). On the GPU machine:
#   tests/gpu/run.sh --no-tests --exec 'sh bench/fp8_order.sh $BUILD'
set -eu
b=${1:?usage: fp8_order.sh BUILD [REPS]}
reps=${2:-30}
export ATTUNE_LIB=$b/libattune.so.1
here=$(dirname "$0")
for mask in nc c; do
    for run in 1:pairs 4:pairs 4:serial 8:pairs 8:serial 2:serial; do
        n=${run%%:*} order=${run#*:}
        printf '%s chunks=%s order=%s: ' "$mask" "$n" "$order"
        ATTUNE_CUDNN_FP8_CHUNKS=$n ATTUNE_CUDNN_FP8_ORDER=$order python3 "$here/fp8_parts.py" \
            --shape b2.hq16.hkv16.sq8192.skv8192.d128.e4m3.$mask --reps "$reps" 2>&1 | tail -1
    done
done
