# aarch64-linux-gnu.cmake -- cross-compile for arm64 (Jetson's CPU) with
# Debian's cross toolchain and multiarch arm64 -dev packages
# (ATTUNE_CROSS=arm64 scripts/deps.sh installs both):
#
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
#         -DATTUNE_WITH_CUDA=OFF && cmake --build build-arm64 && (cd build-arm64 && cpack -G DEB)
#
# Libraries come from /usr/lib/aarch64-linux-gnu (multiarch), the C library
# from the cross toolchain's /usr/aarch64-linux-gnu; pkg-config sees only the
# arm64 .pc files. CUDA is not cross-built here: build it on the Jetson.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH) # the cross libc first, then multiarch
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
