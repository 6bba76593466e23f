#!/bin/sh
# it_cli_lazy_cuda.sh -- commands that never touch a GPU never load cuBLAS:
# the CUDA backend opens it on first use (kernels/cuda/cuda_blas.cu), since
# its initialisers cost every process 1-3 s at start. Nor does any load
# the CUDA runtime or cuDNN as a library (the runtime is linked in, cuDNN
# opened on first use: the programs start on hosts without CUDA). Skipped
# (77) for a build without the CUDA backend.
set -u
: "${ATTUNE_BIN:?}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
A=$ATTUNE_BIN
fails=0
# the CUDA runtime is linked statically (CMakeLists.txt): the build tree
# says whether the backend is there
if [ ! -f "${ATTUNE_BUILD_DIR:-}/libattune_cuda.a" ]; then
    echo "skipped: $A has no CUDA backend"
    exit 77
fi
db=$dir/t.db
key=b1.hq2.hkv1.sq3.skv5.d8.f32.nc
"$A" tune --db "$db" --device cpu --shape $key --quiet || exit 1
# loaded: what LD_DEBUG=libs says the dynamic loader opened for a command
for cmd in "--version" "--help" "tune --help" "devices" "results --db $db --device cpu --shape $key" \
           "winners --db $db --device cpu" "export --db $db --device cpu" \
           "tune --db $db --device cpu --shape $key --quiet" "tactics --device cpu --shape $key" \
           "variants"; do
    # shellcheck disable=SC2086
    LD_DEBUG=libs "$A" $cmd >/dev/null 2>"$dir/libs"
    if grep -q "calling init: .*libcudart\|calling init: .*libcudnn" "$dir/libs"; then
        echo "FAIL: attune $cmd loaded the CUDA runtime or cuDNN:"; grep "libcud" "$dir/libs" | head -3
        fails=$((fails + 1))
    elif grep -q "calling init: .*libcublas" "$dir/libs"; then
        echo "FAIL: attune $cmd loaded cuBLAS:"; grep "libcublas" "$dir/libs" | head -3
        fails=$((fails + 1))
    else
        echo "ok: attune $cmd: no cuBLAS"
    fi
done
[ $fails -eq 0 ] || { echo "$fails failures"; exit 1; }
