#!/bin/sh
# deps.sh -- make sure the Debian packages attune builds with (and its tests
# use) are installed, and the browser test's npm package (tests/browser,
# from its lockfile).
# As root: installs what is missing (apt-get). Otherwise: names what is
# missing and the command to install it, and fails.
# ATTUNE_NPM=0 (make run, make tune: `make deps-build`): what building and
# running need, not the tests' packages nor their npm package.
set -eu
# building: the compilers, the libraries attune links, ccache (make's
# compiles go through it, scripts/ccache.sh, so that a fresh clone does not
# compile again what an earlier one did)
pkgs="build-essential cmake pkg-config libsqlite3-dev libjansson-dev zlib1g-dev libmicrohttpd-dev
libcurl4-openssl-dev libpq-dev ccache"
# the tests: Python with numpy (the binding's tests), python3-venv
# (tests/it_python_install.py installs the Python client into a fresh
# venv), sqlite3 and curl, chromium (the page's browser test), postgresql
# (the fleet server's tests start one), clang and its runtimes (libFuzzer and
# the sanitizers: fuzz/, .ci/sanitizers), lintian (tests/it_package.sh
# checks the library packages), node and npm (Debian's unless the commands
# are already there: another Node.js installation is kept)
if [ "${ATTUNE_NPM:-1}" != 0 ]; then
    pkgs="$pkgs python3 python3-numpy python3-venv sqlite3 curl chromium postgresql
clang libclang-rt-dev lintian"
    command -v node >/dev/null 2>&1 || pkgs="$pkgs nodejs"
    command -v npm >/dev/null 2>&1 || pkgs="$pkgs npm"
fi
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
# cuDNN 9 (optional: the cudnn variant) where NVIDIA's packages put it:
# CUDNN_ROOT, the CUDA toolkit, /usr (Debian/Ubuntu and JetPack packages,
# multiarch), or a pip wheel (nvidia/cudnn, what PyTorch loads). Never
# fatal: without it CMake leaves the variant out.
if [ -z "${CUDNN_ROOT:-}" ]; then
    for d in /usr/local/cuda /usr $(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null); do
        for h in "$d/include/cudnn_graph.h" "$d/include/x86_64-linux-gnu/cudnn_graph_v9.h" \
                 "$d/include/aarch64-linux-gnu/cudnn_graph_v9.h"; do
            [ -f "$h" ] && { CUDNN_ROOT=$d; break 2; }
        done
    done
fi
[ -n "${CUDNN_ROOT:-}" ] || echo "deps: no cuDNN 9 found (optional: set CUDNN_ROOT for the cudnn variant)" >&2
if [ -n "$missing" ]; then
    if [ "$(id -u)" -eq 0 ]; then
        echo "deps: installing$missing" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y --no-install-recommends $missing >/dev/null 2>&1 || {
            apt-get update -qq >/dev/null && apt-get install -y --no-install-recommends $missing
        }
    else
        echo "deps: missing Debian packages:$missing" >&2
        echo "deps: install them with: sudo apt-get install$missing" >&2
        exit 1
    fi
fi
# playwright-core for tests/it_page_browser.py, exactly as locked; again
# only when the lockfile changed since the last install; not for `make
# run` (ATTUNE_NPM=0), which runs no test. npm's output is shown on failure.
dir=$(cd "$(dirname "$0")/../tests/browser" && pwd)
if [ "${ATTUNE_NPM:-1}" != 0 ] && { [ ! -f "$dir/node_modules/.package-lock.json" ] ||
   ! cmp -s "$dir/package-lock.json" "$dir/node_modules/.attune-lock"; }; then
    echo "deps: npm ci in tests/browser (playwright-core)" >&2
    npmlog=$(mktemp)
    if (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >"$npmlog" 2>&1); then
        cp "$dir/package-lock.json" "$dir/node_modules/.attune-lock"
    else # the build goes on; the browser test fails and names this step
        tail -5 "$npmlog" >&2
        echo "deps: npm ci failed in $dir: the browser test cannot run" >&2
    fi
    rm -f "$npmlog"
fi
# The arm64 cross toolchain and arm64 -dev libraries (Debian multiarch) for
# the Jetson CPU-only cross build (tests/it_cross_arm64.sh, docs/jetson.md):
# only when asked, ATTUNE_CROSS=arm64 (about 200 MB).
if [ "${ATTUNE_CROSS:-}" = arm64 ]; then
    cross="gcc-aarch64-linux-gnu libc6-dev-arm64-cross libsqlite3-dev:arm64 libjansson-dev:arm64
           libmicrohttpd-dev:arm64 libcurl4-openssl-dev:arm64 zlib1g-dev:arm64"
    missing=""
    for p in $cross; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
    done
    if [ -n "$missing" ] && [ "$(id -u)" -eq 0 ]; then
        echo "deps: installing the arm64 cross toolchain:$missing" >&2
        export DEBIAN_FRONTEND=noninteractive
        dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
        apt-get update -qq >/dev/null
        apt-get install -y --no-install-recommends $missing >/dev/null
    elif [ -n "$missing" ]; then
        echo "deps: missing for the arm64 cross build:$missing" >&2
        echo "deps: sudo dpkg --add-architecture arm64 && sudo apt-get update && sudo apt-get install$missing" >&2
    fi
fi
