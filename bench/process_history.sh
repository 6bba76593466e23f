#!/bin/sh
# process_history.sh -- does a tactic's time through libattune depend on
# what the process ran before it? (issue 24: folded at pad 1 on the 77x300
# GQA shape stores 13.3 us in most tuner processes, every placement alike,
# and runs 14.0-14.1 through libattune; docs/perf.md, 2026-12-04 17:10.)
#
#   bench/process_history.sh BUILD [SHAPE_KEY [TACTIC...]]
#
# Times the tactics with BUILD/libattune_time on 7 placements, in fresh
# processes: with no prelude, after every listed tactic of the shape (the
# tuner's history), then after each family's alone (cudnn, fused/arch=sm90a,
# fused/, fused_splitkv, split, split_repeat, folded), one line per run
# with the mean; then with no prelude but the context's per-thread stack
# set first (stack=BYTES: does a prelude's fast mode come from the stack a
# spilling kernel grew? libattune_time prints the limits after the
# prelude); then with CUDA_DEVICE_MAX_CONNECTIONS=1 and 32 (conn=N, alone
# and after the split/ prelude: is the mode the hardware queue the timed
# stream lands on, which streams made earlier decide?). On the GPU machine:
#   tests/gpu/run.sh --no-tests --exec 'sh bench/process_history.sh $BUILD'
set -eu
b=${1:?usage: process_history.sh BUILD [SHAPE_KEY [TACTIC...]]}
shift
key=${1:-b2.hq8.hkv2.sq77.skv300.d128.f16.c}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || set -- folded/acc=f16/pad=1 folded/acc=f32/pad=1
for pre in none all cudnn fused/arch=sm90a fused/ fused_splitkv split/ split_repeat folded \
    stack=4096 stack=65536 conn=1 conn=1+split/ conn=32 conn=32+split/; do
    conn=
    case $pre in
    conn=*+*) conn=${pre%%+*}; arg=--prelude=${pre#*+} ;;
    conn=*) conn=$pre; arg= ;;
    none) arg= ;;
    all) arg=--prelude ;;
    stack=*) arg="--stack ${pre#stack=}" ;;
    *) arg=--prelude=$pre ;;
    esac
    echo "== prelude: $pre"
    if [ -n "$conn" ]; then
        CUDA_DEVICE_MAX_CONNECTIONS=${conn#conn=} "$b/libattune_time" "$key" "$@" --placements 7 $arg
    else
        "$b/libattune_time" "$key" "$@" --placements 7 $arg
    fi
done
