#!/usr/bin/env bash
# fp8.sh -- e4m3 against bf16 on one device (issue 30): each shape below is
# tuned in bf16 and in e4m3 by `attune tune` into one fresh database, and
# bench/fp8_table.py prints, per shape, both winners' time, TFLOP/s and
# error (e4m3: against the float64 reference of its stored inputs, and
# against that of the bf16 values they were quantized from, when the
# store keeps it), the speed-up, and why e4m3 has no winner where it has
# none.
#
# Shapes: the nine anchors (docs/perf.md) in bf16, then real-model shapes:
# Llama-3-8B prefill (4k, causal) and decode (8k keys, batch 8), a chunked
# prefill (512 new queries over 4096 keys: a shifted causal mask), Qwen2-7B
# prefill, Gemma-2 (d = 256), ViT-B/16 (257 tokens), Whisper's encoder
# (1500), Stable Diffusion's 64x64 self-attention (4096, d = 64).
#
# usage: bench/fp8.sh [--build DIR] [--device ID] [--out DIR] [--only N,M]
# On the GPU machine: tests/gpu/run.sh --no-tests --fp8. Writes
# $OUT/fp8.db, $OUT/fp8.txt (the table) and $OUT/fp8-winners.json.
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build DEVICE=0 OUT=${OUT:-$ROOT/fp8-out} ONLY=
while [ $# -gt 0 ]; do
    case $1 in
    --build) shift; BUILD=$1 ;;
    --device) shift; DEVICE=$1 ;;
    --out) shift; OUT=$1 ;;
    --only) shift; ONLY=$1 ;;
    -h|--help) sed -n 2,19p "$0"; exit 0 ;;
    *) echo "fp8.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
SHAPES=(
    b1.hq8.hkv1.sq968.skv968.d256.bf16.nc
    b1.hq8.hkv1.sq50.skv1018.d256.bf16.nc
    b1.hq8.hkv8.sq900.skv900.d32.bf16.nc
    b1.hq8.hkv8.sq904.skv904.d32.bf16.nc
    b2.hq8.hkv1.sq2048.skv2048.d256.bf16.c
    b4.hq32.hkv8.sq2048.skv2048.d128.bf16.c
    b16.hq32.hkv8.sq1.skv4096.d128.bf16.nc
    b2.hq16.hkv16.sq8192.skv8192.d128.bf16.nc
    b2.hq16.hkv16.sq8192.skv8192.d128.bf16.c
    b1.hq32.hkv8.sq4096.skv4096.d128.bf16.c
    b8.hq32.hkv8.sq1.skv8192.d128.bf16.nc
    b1.hq32.hkv8.sq512.skv4096.d128.bf16.c
    b1.hq28.hkv4.sq2048.skv2048.d128.bf16.c
    b1.hq8.hkv4.sq4096.skv4096.d256.bf16.c
    b32.hq12.hkv12.sq257.skv257.d64.bf16.nc
    b8.hq20.hkv20.sq1500.skv1500.d64.bf16.nc
    b2.hq10.hkv10.sq4096.skv4096.d64.bf16.nc
)
ATTUNE=$BUILD/attune
[ -x "$ATTUNE" ] || { echo "fp8.sh: no $ATTUNE (build first, or --build DIR)" >&2; exit 2; }
mkdir -p "$OUT"
DB=$OUT/fp8.db
rm -f "$DB" "$DB-wal" "$DB-shm"
SEL=()
for i in "${!SHAPES[@]}"; do
    if [ -z "$ONLY" ] || [[ ",$ONLY," == *",$i,"* ]]; then SEL+=("${SHAPES[$i]}"); fi
done
ARGS=()
for s in "${SEL[@]}"; do ARGS+=(--shape "$s" --shape "${s/.bf16./.e4m3.}"); done
START=$(date +%s)
"$ATTUNE" tune --db "$DB" --device "$DEVICE" --quiet "${ARGS[@]}" >"$OUT/fp8-tune.log" 2>&1
TUNE_RC=$?
echo "tuned ${#SEL[@]} shapes x 2 dtypes in $(($(date +%s) - START)) s (exit $TUNE_RC)"
"$ATTUNE" winners --db "$DB" --device "$DEVICE" --json >"$OUT/fp8-winners.json"
RESULTS=()
for s in "${SEL[@]}"; do
    for k in "$s" "${s/.bf16./.e4m3.}"; do
        "$ATTUNE" results --db "$DB" --device "$DEVICE" --shape "$k" --json \
            >"$OUT/fp8-results-$k.json" 2>/dev/null && RESULTS+=("$OUT/fp8-results-$k.json")
    done
done
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader -i "$DEVICE" 2>/dev/null | head -n 1)
python3 "$ROOT/bench/fp8_table.py" --gpu-name "${GPU_NAME:-unknown}" "$OUT/fp8-winners.json" "${RESULTS[@]}" |
    tee "$OUT/fp8.txt"
exit $TUNE_RC
