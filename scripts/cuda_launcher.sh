#!/bin/sh
# cuda_launcher.sh -- the compiler launcher of the CUDA backend's objects
# when the build's architectures include the architecture check's
# (cmake/arch_check.cmake): runs nvcc as CMake gives it (with -Xptxas=-v)
# and keeps what ptxas said of each kernel, per architecture, where
# scripts/check_arch.sh --logs reads it. So a kernel file is compiled once
# for each of those architectures, for the build and the check alike
# (issue 28 item 5), and the check reads the compile that ships.
#
#   cuda_launcher.sh LOGDIR NVCC ARG...
#
# For a kernels/**/*.cu source compiled for sm_A (--generate-code
# arch=compute_A,code=[...sm_A...] or -arch=sm_A): LOGDIR/sm_A/<name>.log,
# <name> as check_arch.sh's log_name (the path under kernels/, / as __),
# written only when nvcc succeeds. nvcc's output still goes to stderr;
# its exit status is this script's.
set -u
logs=$1
shift
src=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp)
"$@" >"$out" 2>&1
rc=$?
cat "$out" >&2
if [ $rc -eq 0 ]; then
    file="" archs=""
    for a in "$@"; do
        case $a in
        "$src"/kernels/*.cu) file=$a ;;
        *arch=compute_*,code=*)
            # every sm_N among the codes, e.g. code=[compute_87,sm_87]
            archs="$archs $(echo "${a#*code=}" | grep -oE 'sm_[0-9]+[a-z]?' | sed 's/^sm_//' | tr '\n' ' ')" ;;
        -arch=sm_*) archs="$archs ${a#-arch=sm_}" ;;
        esac
    done
    if [ -n "$file" ]; then
        name=$(echo "${file#"$src/kernels/"}" | sed 's|/|__|g')
        for a in $archs; do
            mkdir -p "$logs/sm_$a"
            # a line belongs to the architecture of the last entry function
            # named before it: ptxas runs once per architecture, in turn,
            # and names each entry "for 'sm_A'". The -warn-spills warnings
            # are left out: check_arch.sh reads the properties' lines.
            awk -v want="sm_$a" '
                /Compiling entry function .* for \047sm_[0-9]+[a-z]?\047/ {
                    cur = $0; sub(/.* for \047/, "", cur); sub(/\047.*/, "", cur) }
                /^ptxas warning : Registers are spilled/ { next } # -warn-spills: the properties say it
                cur == want' "$out" >"$logs/sm_$a/$name.log.tmp" &&
                mv "$logs/sm_$a/$name.log.tmp" "$logs/sm_$a/$name.log"
        done
    fi
fi
rm -f "$out"
exit $rc
