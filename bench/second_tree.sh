# second_tree.sh -- sourced by the bench scripts that build the kernels a
# second time with other compile-time switches (build_ab.sh, short_floor.sh,
# sm90_trace.sh), so each configures its tree the one same way.
#
# second_tree SRC DIR CUDA_FLAGS LOG TARGET: configure DIR afresh (any old
# tree there removed first: a kept one may name libraries no longer there)
# from the source tree SRC for sm_90, with CUDA_FLAGS as its
# CMAKE_CUDA_FLAGS, the cuDNN that BUILD's cache names (none if it names
# none) and Ninja where installed, then build TARGET; configure and build
# output to LOG. Returns cmake's status. Needs BUILD set.
second_tree() {
    local src=$1 dir=$2 flags=$3 log=$4 target=$5 cudnn gen=()
    cudnn=$(sed -n 's/^CUDNN_ROOT:[A-Z]*=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)
    command -v ninja >/dev/null && gen=(-G Ninja)
    rm -rf "$dir"
    cmake -S "$src" -B "$dir" "${gen[@]}" -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_FLAGS="$flags" \
        ${cudnn:+-DCUDNN_ROOT="$cudnn"} >"$log" 2>&1 &&
        cmake --build "$dir" -j "$(nproc)" --target "$target" >>"$log" 2>&1
}
