#!/usr/bin/env bash
# run.sh -- build attune on the lent GPU machine, run the GPU tests, and
# optionally the peer benchmark. THE one script every session uses there.
#
# From a session (the run tool copies the working tree; .gpu-deps is
# git-ignored, so name it in carry):
#   run(command="ATTUNE_COMMIT=<hash> bash tests/gpu/run.sh [--bench]",
#       carry=[".gpu-deps"])
# Fill .gpu-deps once, here (Debian packages; the GPU machine reaches no
# registry):
#   cd .gpu-deps && apt-get download libsqlite3-dev libsqlite3-0 \
#       libjansson-dev libjansson4 libmicrohttpd-dev libmicrohttpd12 \
#       zlib1g-dev zlib1g \
#       pkgconf pkgconf-bin libpkgconf3
#
# Device time is the scarce part. A start that fails still costs it (2026-12-05:
# about 90 s a refused start of a named kind, 180 s with no kind named, which
# tries both kinds; two sessions lost their whole 30 minutes so): name the
# kind, check `status` for none_now before each try, and put the work that
# matters most first in one call, bounded by `timeout` so that what it wrote
# under $OUT comes back when it runs long.
#
# Steps: (1) for each library the machine lacks (header or runtime), dpkg -x
# its .deb files into .gpu-deps/root (never into /) and point the .pc files'
# prefix there; (2) configure CMake with -DCMAKE_CUDA_ARCHITECTURES=90,
# PKG_CONFIG_PATH and LD_LIBRARY_PATH on that prefix; (3) build everything,
# or, if someone's work in progress breaks the full build, the targets the
# GPU work needs (attune_cuda, the gpu tests, the attune CLI); (4) ctest -L
# gpu; (5) with --bench, tests/gpu/bench_split and bench/peers.py.
#
# Options: --bench (run the peer benchmark), --daemon (start attuned, tune
# grids/anchors.json (or $ATTUNE_DAEMON_GRID) through its API, check the
# served winners and that an untuned shape's lookups answer at once), --loo
# (tune grids/default.json on GPU 0, then the leave-one-out regret of
# predicted answers: loo.txt, the tuned table loo-table.json for offline
# evaluation with `attune import` + `attune loo`, loo-tune.log), --realmodels
# (bench/realmodels.sh on GPU 0: answers for grids/realmodels.json before
# tuning, their regret, tune on miss; realmodels.txt, realmodels-table.json,
# kept as bench/<set>-h200.json.gz, gzip -9n: attune import reads it so;
# --fp8 (bench/fp8.sh on GPU 0: e4m3 against bf16 winners over the anchors
# and real-model shapes; fp8.txt, fp8.db; --fp8-args "--only 7,8"),
# --realmodels-args "ARGS" passes ARGS on, e.g. "--hold grids/realmodels.json
# --hold grids/realmodels-holdout.json --no-miss-check"),
# --miss-quick "TABLE KEY..." (bench/miss_quick.sh: seconds from the first
# lookup of each KEY, its rows taken out of TABLE, to a measured answer
# under tune on miss; miss-quick.txt),
# --tune-time (bench/cudnn_tune_time.py: wall time of `attune tune` per
# anchor with the JIT cache emptied, then warm, with the default screening;
# then warm with --screen 0 (every tactic fully timed, the protocol before
# screening) for the winners' comparison;
# tune-time.txt, tune-time.jsonl, tune-time.log: ATTUNE_TUNER_TRACE's line
# per tactic and pass),
# --torch (tests/gpu/test_torch_binding.py: attune.torch and
# attn_implementation="attune" against float64 and SDPA; torch.log),
# --e2e (attuned on an empty database, tune on miss, then
# bench/e2e_models.py: Llama-3-8B-, Gemma-2B- and ViT-L/14-class models with
# sdpa, eager and attune; e2e.log, e2e.jsonl; --e2e-args "ARGS" passes
# ARGS on, e.g. "--models vit --steps 50"; --e2e-pretune: the same after
# `attune tune` of grids/e2e-models.json on that database, so no tuning
# shares the GPU with the timings),
# --lib-store (tune grids/gpu-libattune.json with --screen 0, then
# bench/libattune_store.py: every tactic through libattune against the
# time the tuner stored; libstore.log),
# --peers-args "ARGS" (extra
# arguments to peers.py, e.g. "--only 0,1 --budget-ms 100"), --no-tests,
# --ctest-args "ARGS" (after ctest's own, so they win: e.g. "-R gpu_cudnn
# --timeout 120" for one test bounded at 120 s; each test's default bound
# is 600 s, the whole of a device call, and a kernel that hangs holds the
# call that long: 2026-12-05, 560 s), --exec "CMD" (last: CMD under bash with this
# script's environment, BUILD and OUT exported; exec.log). Logs and results go under $OUT (the run tool's
# folder; ./gpu-out elsewhere): run.log, env.txt, build.log, ctest.log,
# peers.log, peers.json, peers.md. At most 8 files: the run tool brings
# back no more, so past 8 this script packs all but run.log into
# out.tar.gz (step 7).
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}
DEPS=$ROOT/.gpu-deps
PREFIX=$DEPS/root
BUILD=${ATTUNE_GPU_BUILD:-$ROOT/build-gpu}
BENCH=0
DAEMON=0
LOO=0
REALMODELS=0
FP8=0
FP8_ARGS=
TUNETIME=0
TESTS=1
TORCH=0
E2E=0
E2E_ARGS=""
E2E_PRETUNE=0
LIBSTORE=0
PEERS_ARGS=""
CTEST_ARGS=""
RM_ARGS=""
MQ_ARGS=""
EXEC=""
while [ $# -gt 0 ]; do
    case $1 in
    --bench) BENCH=1 ;;
    --daemon) DAEMON=1 ;;
    --loo) LOO=1 ;;
    --realmodels) REALMODELS=1 ;;
    --fp8) FP8=1 ;;
    --fp8-args) shift; FP8_ARGS=${1:-} ;;
    --tune-time) TUNETIME=1 ;;
    --no-tests) TESTS=0 ;;
    --torch) TORCH=1 ;;
    --e2e) E2E=1 ;;
    --e2e-pretune) E2E=1; E2E_PRETUNE=1 ;;
    --e2e-args) shift; E2E_ARGS=${1:-} ;;
    --lib-store) LIBSTORE=1 ;;
    --peers-args) shift; PEERS_ARGS=${1:-} ;;
    --ctest-args) shift; CTEST_ARGS=${1:-} ;;
    --realmodels-args) shift; RM_ARGS=${1:-} ;;
    --miss-quick) shift; MQ_ARGS=${1:-} ;;
    --exec) shift; EXEC=${1:-} ;;
    *) echo "usage: run.sh [--bench] [--daemon] [--torch] [--e2e] [--e2e-pretune] [--e2e-args ARGS] [--lib-store] [--loo] [--realmodels] [--tune-time] [--no-tests] [--peers-args ARGS] [--ctest-args ARGS] [--realmodels-args ARGS] [--fp8] [--fp8-args ARGS] [--miss-quick \"TABLE KEY...\"] [--exec CMD]" >&2
       exit 2 ;;
    esac
    shift
done
mkdir -p "$OUT"
RUNLOG=$OUT/run.log
log() { echo "[run.sh $(date +%H:%M:%S)] $*" | tee -a "$RUNLOG" >&2; }
START=$(date +%s)
STEP=$START
step() { STEP=$(date +%s); log "$*"; } # a step begins
took() { local n; n=$(date +%s); echo "$((n - STEP)) s; $((n - START)) s since run.sh began"; }

# ---- (1) libraries the machine lacks, from .deb files into the prefix

unpack() { # deb files...
    for f in "$@"; do
        [ -f "$f" ] || { log "missing $f (fill .gpu-deps, see the header)"; return 1; }
        if command -v dpkg-deb >/dev/null; then
            dpkg-deb -x "$f" "$PREFIX" || return 1
        else # no dpkg: a .deb is an ar archive holding data.tar.*
            (cd "$PREFIX" && ar p "$f" "$(ar t "$f" | grep '^data.tar')" | tar -x -a -f - 2>/dev/null ||
             ar p "$f" data.tar.xz | tar -xJ) || return 1
        fi
        log "unpacked $(basename "$f")"
    done
}

# have HEADER SONAME: both the header (for building) and the runtime library.
have() {
    [ -f "/usr/include/$1" ] || [ -f "/usr/include/x86_64-linux-gnu/$1" ] || return 1
    # grep -q would stop reading early: ldconfig then dies of SIGPIPE, and
    # under pipefail the pipeline fails at random (a library found on one
    # run, unpacked on the next, and a warm build dir left pointing at it).
    ldconfig -p 2>/dev/null | grep "$2" >/dev/null || return 1
}

mkdir -p "$PREFIX"
have sqlite3.h libsqlite3.so.0 || unpack "$DEPS"/libsqlite3-dev_*.deb "$DEPS"/libsqlite3-0_*.deb
have jansson.h libjansson.so.4 || unpack "$DEPS"/libjansson-dev_*.deb "$DEPS"/libjansson4_*.deb
have zlib.h libz.so.1 || unpack "$DEPS"/zlib1g-dev_*.deb "$DEPS"/zlib1g_*.deb
have microhttpd.h libmicrohttpd.so.12 ||
    unpack "$DEPS"/libmicrohttpd-dev_*.deb "$DEPS"/libmicrohttpd12_*.deb ||
    log "no libmicrohttpd: attuned will not be built (not needed for the GPU tests)"
if ! command -v pkg-config >/dev/null; then
    unpack "$DEPS"/pkgconf-bin_*.deb "$DEPS"/libpkgconf3_*.deb "$DEPS"/pkgconf_*.deb
    export PATH=$PREFIX/usr/bin:$PATH
fi
# libmicrohttpd.pc names gnutls as a private requirement, whose .pc the
# machine lacks; linking the shared library needs none of it.
[ -f "$PREFIX"/usr/lib/x86_64-linux-gnu/pkgconfig/libmicrohttpd.pc ] &&
    sed -i '/^Requires.private/d' "$PREFIX"/usr/lib/x86_64-linux-gnu/pkgconfig/libmicrohttpd.pc
# The .pc files say prefix=/usr: point them at the prefix.
for pc in "$PREFIX"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc "$PREFIX"/usr/share/pkgconfig/*.pc; do
    [ -f "$pc" ] && sed -i "s|^prefix=.*|prefix=$PREFIX/usr|" "$pc"
done
export PKG_CONFIG_PATH=$PREFIX/usr/lib/x86_64-linux-gnu/pkgconfig:$PREFIX/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export LD_LIBRARY_PATH=$PREFIX/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ -d /usr/local/cuda/bin ] && export PATH=$PATH:/usr/local/cuda/bin

# cuDNN for the cudnn variant: the newest cuDNN 9 among PyTorch's wheel
# (nvidia/cudnn under site-packages: what torch loads, usually newer) and
# the system's (/usr, /usr/local/cuda). CUDNN_ROOT goes to CMake; its lib/
# goes first on LD_LIBRARY_PATH, so libcudnn finds its own sub-libraries.
cudnn_version_of() { # dir holding include/cudnn_version.h -> 91400
    local h
    for h in "$1/include/cudnn_version.h" "$1/include/x86_64-linux-gnu/cudnn_version_v9.h"; do
        [ -f "$h" ] || continue
        awk '/^#define CUDNN_MAJOR /{a=$3}/^#define CUDNN_MINOR /{b=$3}/^#define CUDNN_PATCHLEVEL /{c=$3}
             END{if (a) print a*10000+b*100+c}' "$h"
        return
    done
}
CUDNN_ROOT=${CUDNN_ROOT:-}
if [ -z "$CUDNN_ROOT" ]; then
    best=0
    pydnn=$(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null)
    for d in $pydnn /usr/local/cuda /usr; do
        v=$(cudnn_version_of "$d")
        [ -n "$v" ] && [ "$v" -gt "$best" ] && { best=$v; CUDNN_ROOT=$d; }
    done
fi
if [ -n "$CUDNN_ROOT" ]; then
    export CUDNN_ROOT
    for l in "$CUDNN_ROOT/lib" "$CUDNN_ROOT/lib64" "$CUDNN_ROOT/lib/x86_64-linux-gnu"; do
        [ -d "$l" ] && export LD_LIBRARY_PATH=$l${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    done
fi

# cuBLAS likewise: attune opens libcublas.so.13 by its soname, and inside
# a torch process (libattune under attune.torch, bench/libattune_store.py,
# the models) that is the copy torch already loaded, its wheel's
# nvidia/cu13/lib (asked of torch itself, not guessed from a package
# name). The tuner and attuned time with that same copy, so a GEMM
# family's stored time comes from the cuBLAS that runs it. (It did not
# explain folded pad 1's 5% between store and libattune: docs/perf.md,
# 2026-12-04, buffer placement.)
pyblas=$(python3 -c '
import os, torch
for line in open("/proc/self/maps"):
    f = line.split()[-1]
    if "/libcublas.so" in f:
        print(os.path.dirname(os.path.realpath(f))); break' 2>/dev/null)
if [ -n "$pyblas" ] && [ -d "$pyblas" ]; then
    # only cuBLAS (and its Lt) from there: that folder holds torch's other
    # CUDA libraries too, which attune's binaries are not built against
    mkdir -p "$DEPS/cublas"
    for f in "$pyblas"/libcublas.so.* "$pyblas"/libcublasLt.so.*; do
        [ -e "$f" ] && ln -sfn "$f" "$DEPS/cublas/$(basename "$f")"
    done
    export LD_LIBRARY_PATH=$DEPS/cublas:$LD_LIBRARY_PATH
fi

{
    echo "commit: ${ATTUNE_COMMIT:-unknown}"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(uname -srm)"
    nvidia-smi --query-gpu=name,uuid,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem \
        --format=csv 2>&1
    nvcc --version 2>&1 | tail -2
    cmake --version | head -1
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
    echo "cudnn: CUDNN_ROOT=${CUDNN_ROOT:-none} version $( [ -n "$CUDNN_ROOT" ] && cudnn_version_of "$CUDNN_ROOT")"
    for d in $(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null) /usr/local/cuda /usr; do
        echo "  cudnn candidate $d: $(cudnn_version_of "$d")"
    done
    python3 -c 'import torch; print("torch cudnn", torch.backends.cudnn.version())' 2>&1
    echo "cublas: torch's ${pyblas:-none}; LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    echo "pkg-config: $(command -v pkg-config) sqlite3 $(pkg-config --modversion sqlite3 2>&1)" \
         "jansson $(pkg-config --modversion jansson 2>&1)"
} >"$OUT/env.txt" 2>&1
log "environment in env.txt ($(head -c 300 "$OUT/env.txt" | tr '\n' ' '))"

# ---- (2) configure, (3) build

GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
JOBS=$(nproc 2>/dev/null || echo 8)
step "configure $BUILD"
# A warm machine keeps $BUILD between calls, but the prefix is new each
# call (the carried .gpu-deps replaces it): a cache that names a file
# under the prefix which this call did not unpack would fail the build
# (2026-12-07: libz.a). Such a cache is dropped, and CMake finds again.
if [ -f "$BUILD/CMakeCache.txt" ]; then
    stale=$(grep -o "$PREFIX/[^;: \"]*" "$BUILD/CMakeCache.txt" | sort -u | while read -r f; do
        [ -e "$f" ] || echo "$f"
    done)
    if [ -n "$stale" ]; then
        log "CMakeCache.txt names what this prefix lacks ($(echo "$stale" | head -1)): configured afresh"
        rm -f "$BUILD/CMakeCache.txt"
    fi
fi
if ! cmake -S "$ROOT" -B "$BUILD" "${GEN[@]}" -DCMAKE_CUDA_ARCHITECTURES=90 \
        ${CUDNN_ROOT:+-DCUDNN_ROOT="$CUDNN_ROOT"} >"$OUT/build.log" 2>&1; then
    log "configure failed: tail of build.log:"
    tail -30 "$OUT/build.log" >&2
    exit 1
fi
grep "attune:" "$OUT/build.log" | tee -a "$RUNLOG" >&2
# Without tests or the benchmark only the programs are needed: the test
# binaries are not built (minutes of device time saved).
ONLY=()
[ "$TESTS" = 0 ] && [ "$BENCH" = 0 ] && ONLY=(--target attune attuned libattune libattune_time)
log "build (-j$JOBS) ${ONLY[*]}"
if ! cmake --build "$BUILD" -j "$JOBS" "${ONLY[@]}" >>"$OUT/build.log" 2>&1; then
    log "full build failed (someone's work in progress?); building the GPU targets alone"
    grep -E "error|FAILED" "$OUT/build.log" | grep -v "ptxas warning" | head -20 >&2
    GPU_TARGETS="attune_cuda attune"
    for t in "$ROOT"/tests/gpu/test_*.c; do
        [ -f "$t" ] || continue
        n=$(basename "$t" .c)
        GPU_TARGETS="$GPU_TARGETS gpu_${n#test_}"
    done
    for t in $GPU_TARGETS; do
        cmake --build "$BUILD" -j "$JOBS" --target "$t" >>"$OUT/build.log" 2>&1 ||
            log "target $t failed"
    done
fi
log "build done ($(took))"
{ echo "libraries attune itself opens (attune devices, LD_DEBUG=libs):"
  LD_DEBUG=libs "$BUILD/attune" devices 2>&1 | grep -E "calling init: .*lib(cublas|cudnn)" |
      sed 's/.*calling init: /  /' | sort -u; } >>"$OUT/env.txt"

# bench_split: not a ctest, linked by hand against the built libraries.
BENCH_SPLIT=$BUILD/bench_split
CUDNN_LINK=$(sed -n 's/^CUDNN_LIBRARY:FILEPATH=//p' "$BUILD/CMakeCache.txt" 2>/dev/null | grep -v NOTFOUND)
if [ -f "$BUILD/libattune_cuda.a" ] && [ -f "$BUILD/libattune_core.a" ]; then
    CUDA_LIB=$(dirname "$(find /usr/local/cuda/ -name 'libcudart.so' 2>/dev/null | head -1)")
    cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -DATTUNE_HAVE_CUDA=1 -I"$ROOT" \
        "$ROOT/tests/gpu/bench_split.c" -Wl,--start-group "$BUILD/libattune_core.a" \
        "$BUILD/libattune_kernels.a" "$BUILD/libattune_cuda.a" -Wl,--end-group -L"$CUDA_LIB" \
        $(pkg-config --libs sqlite3 jansson zlib 2>/dev/null) $CUDNN_LINK -lcublas -lcudart -lstdc++ -lm \
        -ldl -lpthread -o "$BENCH_SPLIT" >>"$OUT/build.log" 2>&1 ||
        { log "bench_split did not link"; BENCH_SPLIT=""; }
fi

# ---- (4) GPU tests

STATUS=0
if [ "$TESTS" = 1 ]; then
    step "ctest -L gpu"
    # shellcheck disable=SC2086
    (cd "$BUILD" && ctest -L gpu -V --timeout 600 $CTEST_ARGS) \
        >"$OUT/ctest.log" 2>&1
    STATUS=$?
    grep -E "tests passed|tests failed|Passed|Failed|Skipped|\*\*\*" "$OUT/ctest.log" | tail -15 >&2
    grep -E "worst relative| [a-z_]+ +(f16|bf16|f32) +acc=|device GPU|stack |planted|us kernels|failed" \
        "$OUT/ctest.log" >&2
    log "ctest exit $STATUS ($(took))"
fi

# ---- (4b) attuned on the GPU: lists it, tunes the anchors, serves winners

if [ "$DAEMON" = 1 ]; then
    if [ -x "$BUILD/attuned" ]; then
        DAEMON_GRID=${ATTUNE_DAEMON_GRID:-$ROOT/grids/anchors.json} # a smaller grid when time is short
        log "attuned: tune $DAEMON_GRID on the GPU through POST /v1/tune"
        bash "$ROOT/tests/gpu/daemon_gpu.sh" "$BUILD" "$DAEMON_GRID" 2>&1 | tee -a "$RUNLOG"
        [ "${PIPESTATUS[0]}" -eq 0 ] || STATUS=1
    else
        log "attuned was not built: daemon check skipped"
    fi
fi

# ---- (4c) leave-one-out regret of predicted answers over the default grid

if [ "$LOO" = 1 ]; then
    DB=${TMPDIR:-/tmp}/attune-loo-$$.db
    step "loo: tune grids/default.json on device 0"
    if "$BUILD/attune" tune --db "$DB" --device 0 --grid "$ROOT/grids/default.json" \
            >"$OUT/loo-tune.log" 2>&1; then
        log "tuned ($(took))"
        "$BUILD/attune" loo --db "$DB" --device 0 --grid "$ROOT/grids/default.json" \
            >"$OUT/loo.txt" 2>&1 || STATUS=1
        cat "$OUT/loo.txt" | tee -a "$RUNLOG"
    else
        log "tuning failed"; tail -20 "$OUT/loo-tune.log" >&2; STATUS=1
    fi
    "$BUILD/attune" export --db "$DB" --device 0 -o "$OUT/loo-table.json" || STATUS=1
    [ -x "$BUILD/tests/test_predict" ] && "$BUILD/tests/test_predict" 2>&1 | tail -4 | tee -a "$RUNLOG"
    rm -f "$DB"*
    log "loo done ($(took))"
fi

# ---- (4d) real-model shapes nobody tuned: answers, regret, tune on miss

if [ "$FP8" = 1 ]; then
    step "bench/fp8.sh on device 0"
    OUT=$OUT bash "$ROOT/bench/fp8.sh" --build "$BUILD" --device 0 --out "$OUT" $FP8_ARGS || STATUS=1
    log "fp8 done ($(took))"
fi

if [ "$REALMODELS" = 1 ]; then
    step "bench/realmodels.sh on device 0"
    # shellcheck disable=SC2086
    OUT=$OUT bash "$ROOT/bench/realmodels.sh" --build "$BUILD" --device 0 $RM_ARGS || STATUS=1
    log "realmodels done ($(took))"
fi

# ---- (4d') time to a measured answer under tune on miss (bench/miss_quick.sh)

if [ -n "$MQ_ARGS" ]; then
    step "bench/miss_quick.sh on device 0"
    # shellcheck disable=SC2086
    BUILD=$BUILD DEVICE=0 bash "$ROOT/bench/miss_quick.sh" $MQ_ARGS >"$OUT/miss-quick.txt" 2>&1 || STATUS=1
    log "miss_quick done ($(took))"
fi

# ---- (4e) tune time per anchor with the cudnn tactics, cold and warm

if [ "$TUNETIME" = 1 ]; then
    step "bench/cudnn_tune_time.py on device 0"
    JITC=${TMPDIR:-/tmp}/attune-jit-$$
    for run in "cold screen" "warm screen" "warm full --screen 0"; do
        set -- $run
        mode=$1 label=$2
        shift 2
        python3 "$ROOT/bench/cudnn_tune_time.py" --attune "$BUILD/attune" \
            --grid "$ROOT/grids/anchors.json" --cache "$JITC" --out "$OUT/tune-time.jsonl" \
            --mode "$mode" --label "$label" --tune-args "$*" --env ATTUNE_TUNER_TRACE=1 \
            --log "$OUT/tune-time.log" 2>&1 | tee -a "$OUT/tune-time.txt" || STATUS=1
    done
    rm -rf "$JITC"
    log "tune time done ($(took))"
fi

# ---- (4f) the Python binding and transformers (attune.torch, attune.hf)

export ATTUNE_LIB=$BUILD/libattune.so.1 ATTUNE_SOURCE_DIR=$ROOT
if [ "$TORCH" = 1 ]; then
    step "tests/gpu/test_torch_binding.py"
    (unset ATTUNE_URL; python3 "$ROOT/tests/gpu/test_torch_binding.py") >"$OUT/torch.log" 2>&1 ||
        STATUS=1
    grep -E "^(ok|FAIL)|failed|skip" "$OUT/torch.log" | tee -a "$RUNLOG" >&2
    log "torch done ($(took))"
fi

# ---- (4h) every tactic through libattune vs the time the tuner stored

if [ "$LIBSTORE" = 1 ]; then
    DB=${TMPDIR:-/tmp}/attune-libstore-$$.db
    step "tune grids/gpu-libattune.json (--screen 0), then bench/libattune_store.py"
    "$BUILD/attune" tune --db "$DB" --device 0 --grid "$ROOT/grids/gpu-libattune.json" \
        --screen 0 --budget-ms 50 --quiet >"$OUT/libstore.log" 2>&1 || STATUS=1
    PYTHONUNBUFFERED=1 python3 "$ROOT/bench/libattune_store.py" --db "$DB" \
        --grid "$ROOT/grids/gpu-libattune.json" --attune "$BUILD/attune" \
        --out "$OUT/libstore.jsonl" >>"$OUT/libstore.log" 2>&1 || STATUS=1
    tail -3 "$OUT/libstore.log" | tee -a "$RUNLOG" >&2
    rm -f "$DB"*
    log "lib-store done ($(took))"
fi

# ---- (4g) whole models: sdpa, eager, attune (tune on miss by a fresh attuned)

if [ "$E2E" = 1 ]; then
    STEP=$(date +%s)
    W=${TMPDIR:-/tmp}/attune-e2e-$$
    mkdir -p "$W"
    if [ "$E2E_PRETUNE" = 1 ]; then
        t0=$(date +%s)
        "$BUILD/attune" tune --db "$W/attune.db" --device 0 --grid "$ROOT/grids/e2e-models.json" \
            --budget-ms 30 --quiet >"$W/pretune.log" 2>&1 || STATUS=1
        log "pre-tuned grids/e2e-models.json in $(($(date +%s) - t0)) s"
    fi
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    "$BUILD/attuned" --port "$PORT" --db "$W/attune.db" --no-default-grid --tune-budget-ms 30 \
        --log "$W/attuned.log" &
    APID=$!
    python3 - "$PORT" <<'PY'
import sys, time, urllib.request
for _ in range(100):
    try:
        urllib.request.urlopen("http://127.0.0.1:%s/v1/health" % sys.argv[1], timeout=1); break
    except OSError:
        time.sleep(0.2)
PY
    log "bench/e2e_models.py (attuned pid $APID on port $PORT) $E2E_ARGS"
    # shellcheck disable=SC2086
    PYTHONUNBUFFERED=1 python3 "$ROOT/bench/e2e_models.py" --url "http://127.0.0.1:$PORT" \
        --out "$OUT/e2e.jsonl" $E2E_ARGS >"$OUT/e2e.log" 2>&1 || STATUS=1
    kill "$APID"; wait "$APID"
    { echo "---- attuned log (tail)"; tail -40 "$W/attuned.log"; } >>"$OUT/e2e.log"
    grep -vE "^\s*$" "$OUT/e2e.log" | grep -E "^(model|llama|gemma|vit|geomean)" | tee -a "$RUNLOG" >&2
    rm -rf "$W"
    log "e2e done ($(took))"
fi

# ---- (5) peer benchmark

if [ "$BENCH" = 1 ]; then
    step "bench/peers.py $PEERS_ARGS"
    # shellcheck disable=SC2086
    PYTHONUNBUFFERED=1 python3 "$ROOT/bench/peers.py" --attune "$BUILD/attune" \
        ${BENCH_SPLIT:+--bench-split "$BENCH_SPLIT"} --out "$OUT" \
        --db "${TMPDIR:-/tmp}/attune-peers-$$.db" $PEERS_ARGS \
        2>"$OUT/peers.log" | tee -a "$RUNLOG"
    rc=$?
    [ $rc -ne 0 ] && { log "peers.py exit $rc"; tail -30 "$OUT/peers.log" >&2; STATUS=1; }
    rm -f "${TMPDIR:-/tmp}/attune-peers-$$.db"*
    log "bench done ($(took))"
fi

# ---- (6) --exec: a command of the caller's, last, in this script's
# environment (BUILD, OUT, ROOT, CUDNN_ROOT, LD_LIBRARY_PATH exported), e.g.
# ncu over one tactic; its output goes to $OUT/exec.log.
if [ -n "$EXEC" ]; then
    step "exec: $EXEC"
    export BUILD OUT ROOT
    bash -c "$EXEC" >"$OUT/exec.log" 2>&1 || { log "exec exit $?"; STATUS=1; }
    tail -60 "$OUT/exec.log" >&2
    log "exec done ($(took))"
fi

# ---- (7) the run tool brings back 8 files at most and drops the rest:
# past 8, everything but run.log goes into one out.tar.gz (tar -xzf it
# where the files land), so no result is lost to the count.
n=$(find "$OUT" -maxdepth 1 -type f | wc -l)
if [ "$n" -gt 8 ]; then
    log "$n files under \$OUT, more than the 8 the run tool brings back: packed into out.tar.gz (run.log beside it)"
    (cd "$OUT" && find . -maxdepth 1 -type f ! -name run.log ! -name out.tar.gz -printf '%P\n' | sort >"${TMPDIR:-/tmp}/run-sh-pack.$$" &&
        tar -czf out.tar.gz -T "${TMPDIR:-/tmp}/run-sh-pack.$$" && xargs rm -f <"${TMPDIR:-/tmp}/run-sh-pack.$$")
    rm -f "${TMPDIR:-/tmp}/run-sh-pack.$$"
fi
exit $STATUS
