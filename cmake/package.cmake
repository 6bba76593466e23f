# package.cmake -- Debian packages with cpack (docs/deploy.md, "Packages").
#
#   cd build && cpack -G DEB        ->  attune_<v>_<arch>.deb           attuned, unit, CLI, grids
#                                       libattune1_<v>_<arch>.deb       libattune.so.1 (runtime)
#                                       libattune-client2_<v>_<arch>.deb libattune_client.so.2
#                                       libattune-lookup1_<v>_<arch>.deb libattune_lookup.so.1 (file: lookups)
#                                       libattune-dev_<v>_<arch>.deb    headers, .so links, .pc, CMake
#                                       python3-attune-client_<v>_all.deb the Python client
#                                       python3-attune_<v>_all.deb      the Python binding of libattune
#                                       *-dbgsym_<v>_<arch>.ddeb        their debug symbols
#
# Paths inside the packages are /usr (CPACK_PACKAGING_INSTALL_PREFIX), the
# libraries in the multiarch directory (CMAKE_INSTALL_LIBDIR); the unit's
# ExecStart= follows the install prefix (see the install(CODE) in
# CMakeLists.txt). Every package's Depends are computed by dpkg-shlibdeps
# from what its binaries link, plus the sibling packages of this version
# they link or load: nothing of CUDA is linked (the runtime statically,
# cuBLAS and cuDNN opened on first use), so the packages of a CUDA build
# install and run on a host without CUDA, on its CPU, and their
# descriptions say what a GPU needs. The libraries' packages follow Debian's
# naming (policy 8.1: a runtime package named after the SONAME, holding the
# library alone; one -dev package for building against them).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME attune)
set(CPACK_PACKAGE_VENDOR attune)
# Maintainer: a placeholder (lintian: bogus-mail-host) until whoever ships
# the packages sets theirs.
set(ATTUNE_DEB_MAINTAINER "attune maintainers <attune@localhost>" CACHE STRING
    "Maintainer: field of the Debian packages (cmake/package.cmake)")
set(CPACK_PACKAGE_CONTACT "${ATTUNE_DEB_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL daemon client lookup runtime dev python pybinding)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_COMPONENT_DAEMON_DEPENDS client)
set(CPACK_COMPONENT_DEV_DEPENDS runtime client)
# Stripped, with the debug symbols in -dbgsym .ddeb packages beside them
# (cpack moves them there: CPACK_STRIP_FILES stays off, or there would be
# none to move; lintian: unstripped-binary-or-object); a shlibs file for
# each shared library, so packages built against them get their Depends
# computed.
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
set(CPACK_DEBIAN_PYTHON_DEBUGINFO_PACKAGE OFF)
set(CPACK_DEBIAN_PYBINDING_DEBUGINFO_PACKAGE OFF)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
if(CMAKE_CROSSCOMPILING AND CMAKE_SYSTEM_PROCESSOR STREQUAL "aarch64")
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE arm64)
endif()

# Descriptions: the first line is the synopsis; cpack indents the rest
# (an empty line becomes " ."), so they are written unindented here.
set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME attune)
set(CPACK_DEBIAN_DAEMON_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_DAEMON_PACKAGE_SHLIBDEPS ON)
# the maintainer scripts enable and start the unit through
# deb-systemd-helper and deb-systemd-invoke (packaging/deb/postinst)
set(CPACK_DEBIAN_DAEMON_PACKAGE_DEPENDS "init-system-helpers (>= 1.54~)")
# attune query --url file: loads libattune_lookup.so.1
set(CPACK_DEBIAN_DAEMON_PACKAGE_RECOMMENDS "libattune-lookup1 (= ${PROJECT_VERSION})")
set(_attune_gpu_needs "")
if(ATTUNE_HAVE_CUDA)
  set(_attune_gpu_needs "

GPUs (CUDA backend built in): the CUDA runtime is linked in; the NVIDIA
driver's libcuda.so.1 and cuBLAS (libcublas.so.${CUDAToolkit_VERSION_MAJOR})")
  if(ATTUNE_HAVE_CUDNN)
    string(APPEND _attune_gpu_needs ", and for the cudnn
variant cuDNN 9 (libcudnn.so.9),")
  endif()
  string(APPEND _attune_gpu_needs " are opened when a GPU is first
used: NVIDIA's driver and CUDA ${CUDAToolkit_VERSION_MAJOR} packages, or JetPack. Without the
driver or cuBLAS only the CPU is listed, without cuDNN the cudnn variant;
ATTUNE_CUDA_VERBOSE=1 attune devices names a cuBLAS or cuDNN that did not
load.")
endif()
set(CPACK_DEBIAN_DAEMON_DESCRIPTION
    "autotuned attention kernel selection: attuned (systemd service), attune CLI
attune measures fused, split and folded attention implementations per shape
on each GPU (and the CPU), stores every time and error in SQLite and answers
which implementation to use over HTTP. The service is enabled and started on
first install, with a fresh bearer token in /etc/attune/token; an upgrade
leaves it disabled if it was.${_attune_gpu_needs}")
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA
    ${CMAKE_SOURCE_DIR}/packaging/deb/postinst ${CMAKE_SOURCE_DIR}/packaging/deb/prerm
    ${CMAKE_SOURCE_DIR}/packaging/deb/postrm)
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_STRICT_PERMISSION ON)

# The libraries: the loader's cache is refreshed by dpkg's ldconfig trigger
# (packaging/deb/lib/triggers; lintian: lacks-ldconfig-trigger). cpack
# still adds a postinst and postrm that run ldconfig (for a library under
# /usr/lib; lintian warns, maintscript-calls-ldconfig): redundant, harmless.
set(CPACK_DEBIAN_CLIENT_PACKAGE_NAME libattune-client2)
set(CPACK_DEBIAN_CLIENT_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_CLIENT_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_CLIENT_PACKAGE_CONTROL_EXTRA ${CMAKE_SOURCE_DIR}/packaging/deb/lib/triggers)
set(CPACK_DEBIAN_CLIENT_DESCRIPTION
    "attune client library (libattune_client.so.2)
libattune_client asks attuned which attention implementation to use; it never
makes its caller fail (a documented default when the daemon is down).
Header, pkg-config (attune_client) and CMake (attune::attune_client) files
are in libattune-dev.")

# libattune_lookup.so.1: the clients' in-process lookups from a database
# file or an exported table (attune_client_new("file:PATH"), dlopen'ed, so
# libattune-client only suggests it); Depends by dpkg-shlibdeps (SQLite,
# jansson, zlib; a CUDA build's toolkit libraries as for libattune1).
set(CPACK_DEBIAN_LOOKUP_PACKAGE_NAME libattune-lookup1)
set(CPACK_DEBIAN_LOOKUP_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LOOKUP_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_LOOKUP_PACKAGE_CONTROL_EXTRA ${CMAKE_SOURCE_DIR}/packaging/deb/lib/triggers)
set(CPACK_DEBIAN_LOOKUP_DESCRIPTION
    "attune lookups without a daemon
libattune_lookup answers which attention implementation to use from an attune
database file or exported table, in process and read-only, with the daemon's
rules: what libattune_client and the Python client load for file: URLs (a
Jetson runtime that ships its tuned table).")
set(CPACK_DEBIAN_CLIENT_PACKAGE_SUGGESTS "libattune-lookup1 (= ${PROJECT_VERSION})")

# libattune.so.1: its Depends computed by dpkg-shlibdeps (libc6, and
# libstdc++6/libgcc-s1 in a CUDA build), plus libattune-client2 of its
# version where it links libattune_client (attune_auto asks through it;
# dpkg-shlibdeps finds libattune_client.so.2 in the build tree, which has
# no shlibs of it yet).
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libattune1)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${CMAKE_SOURCE_DIR}/packaging/deb/lib/triggers)
get_target_property(_attune_rt_links libattune LINK_LIBRARIES)
if(attune_client IN_LIST _attune_rt_links)
  set(CPACK_COMPONENT_RUNTIME_DEPENDS client)
endif()
# the daemon's programs link libattune_client.so.2 too
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR})
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
    "attune runtime library: run attention tactics on caller buffers
libattune runs the attention implementation attune picked (fused, split,
folded, ...) for a shape on caller-owned q, k, v and out views, on the CPU
or a GPU, through a small versioned C ABI (libattune.h).${_attune_gpu_needs}")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libattune-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "attune libraries: development files
Headers (libattune.h, attune.h), the libattune.so and libattune_client.so
links, pkg-config files (libattune, attune_client) and the CMake package
(find_package(attune): attune::attune, attune::attune_client).")

set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-attune-client)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "python3")
set(CPACK_DEBIAN_PYTHON_DESCRIPTION
    "attune client for Python (standard library only)
import attune_client: the same lookups as libattune_client.")

# The binding loads libattune.so.1 with ctypes (no compiled part: arch all);
# numpy and torch are what a caller brings.
set(CPACK_DEBIAN_PYBINDING_PACKAGE_NAME python3-attune)
set(CPACK_DEBIAN_PYBINDING_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYBINDING_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_PYBINDING_PACKAGE_DEPENDS "python3")
set(CPACK_COMPONENT_PYBINDING_DEPENDS runtime) # libattune1 (= this version)
set(CPACK_DEBIAN_PYBINDING_PACKAGE_SUGGESTS "python3-numpy")
set(CPACK_DEBIAN_PYBINDING_DESCRIPTION
    "attune runtime for Python: run the attention tactic attune picked
import attune.torch: attention() with the signature of
torch.nn.functional.scaled_dot_product_attention, through libattune;
import attune.hf: attn_implementation=\"attune\" for Hugging Face
transformers; attune.run_numpy on the CPU (docs/libattune.md).")

# /usr/share/doc/<package>/copyright and changelog.gz (Debian policy 12.5,
# 12.7; lintian: no-copyright-file, no-changelog), in the packages only:
# EXCLUDE_FROM_ALL keeps them out of a plain `cmake --install`. The
# changelog is a native package's: one entry for the version built.
string(TIMESTAMP ATTUNE_DEB_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC) # SOURCE_DATE_EPOCH if set
configure_file(${CMAKE_SOURCE_DIR}/packaging/deb/changelog.in ${CMAKE_BINARY_DIR}/deb/changelog @ONLY)
find_program(ATTUNE_GZIP gzip)
if(ATTUNE_GZIP)
  execute_process(COMMAND ${ATTUNE_GZIP} -9nc ${CMAKE_BINARY_DIR}/deb/changelog
                  OUTPUT_FILE ${CMAKE_BINARY_DIR}/deb/changelog.gz)
endif()
foreach(_c DAEMON CLIENT LOOKUP RUNTIME DEV PYTHON PYBINDING)
  string(TOLOWER ${_c} _comp)
  set(_doc ${CMAKE_SOURCE_DIR}/packaging/deb/copyright)
  if(ATTUNE_GZIP)
    list(APPEND _doc ${CMAKE_BINARY_DIR}/deb/changelog.gz)
  endif()
  install(FILES ${_doc} DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${CPACK_DEBIAN_${_c}_PACKAGE_NAME}
          COMPONENT ${_comp} EXCLUDE_FROM_ALL)
endforeach()

include(CPack)
