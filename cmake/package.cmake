# package.cmake -- Debian packages with cpack (docs/deploy.md, "Packages").
#
#   cd build && cpack -G DEB        ->  attune_<v>_<arch>.deb           attuned, unit, CLI, grids
#                                       libattune-client_<v>_<arch>.deb library, header, pkg-config
#                                       python3-attune-client_<v>_all.deb the Python client
#
# Paths inside the packages are /usr (CPACK_PACKAGING_INSTALL_PREFIX); the
# unit's ExecStart= follows the install prefix (see the install(CODE) in
# CMakeLists.txt). Dependencies are named, not computed: dpkg-shlibdeps
# cannot place the CUDA toolkit's libraries (not installed by dpkg on a
# build host), and the list is short. A CUDA build also needs the CUDA
# runtime and cuBLAS of its toolkit on the target (JetPack provides them).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME attune)
set(CPACK_PACKAGE_VENDOR attune)
set(CPACK_PACKAGE_CONTACT "attune maintainers <attune@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "autotuned attention kernel selection service")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL daemon client python)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_COMPONENT_DAEMON_DEPENDS client)
if(CMAKE_CROSSCOMPILING AND CMAKE_SYSTEM_PROCESSOR STREQUAL "aarch64")
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE arm64)
endif()

set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME attune)
set(CPACK_DEBIAN_DAEMON_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_DAEMON_PACKAGE_DEPENDS
    "libsqlite3-0, libjansson4, zlib1g, libmicrohttpd12 | libmicrohttpd12t64, libcurl4 | libcurl4t64")
set(CPACK_DEBIAN_DAEMON_DESCRIPTION
    "attuned (systemd service) and the attune CLI
 attune measures fused, split and folded attention implementations per shape
 on each GPU (and the CPU), stores every time and error in SQLite and answers
 which implementation to use over HTTP. The service is enabled and started on
 install with a fresh bearer token in /etc/attune/token.")
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA
    ${CMAKE_SOURCE_DIR}/packaging/deb/postinst ${CMAKE_SOURCE_DIR}/packaging/deb/prerm
    ${CMAKE_SOURCE_DIR}/packaging/deb/postrm)
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_CLIENT_PACKAGE_NAME libattune-client)
set(CPACK_DEBIAN_CLIENT_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_CLIENT_PACKAGE_DEPENDS "libjansson4, libcurl4 | libcurl4t64")
set(CPACK_DEBIAN_CLIENT_DESCRIPTION
    "attune client library, header and pkg-config file
 libattune_client asks attuned which attention implementation to use; it never
 makes its caller fail (a documented default when the daemon is down).")

set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-attune-client)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "python3")
set(CPACK_DEBIAN_PYTHON_DESCRIPTION
    "attune client for Python (standard library only)
 import attune_client: the same lookups as libattune_client.")

include(CPack)
