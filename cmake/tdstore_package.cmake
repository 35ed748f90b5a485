# Install-time package files for libtdstore_client, so that consumers write
#
#   find_package(tdstore REQUIRED)               # CMake
#   target_link_libraries(app PRIVATE tdstore::client)
#
# or `pkg-config --cflags --libs tdstore` (plus torch's own flags, see
# cmake/tdstore.pc.in). Included from the top-level CMakeLists.txt when the
# client is built; the targets themselves are installed by client/torch/ (the
# library and headers), client/ (the CLI) and server/.
include(CMakePackageConfigHelpers)

set(TDSTORE_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tdstore)

# tdstoreTargets.cmake: the imported target tdstore::client. Its link
# interface holds torch only: gRPC, protobuf and the static tdstore_proto /
# tdstore_common are PRIVATE to the shared library and stay out of it.
install(EXPORT tdstoreTargets
  NAMESPACE tdstore::
  FILE tdstoreTargets.cmake
  DESTINATION ${TDSTORE_CMAKE_INSTALL_DIR})

configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/tdstoreConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tdstoreConfig.cmake
  INSTALL_DESTINATION ${TDSTORE_CMAKE_INSTALL_DIR})
# 0.x: a minor release may break the API, so only the same major.minor matches.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/tdstoreConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/tdstoreConfig.cmake
  ${PROJECT_BINARY_DIR}/tdstoreConfigVersion.cmake
  DESTINATION ${TDSTORE_CMAKE_INSTALL_DIR})

# tdstore.pc finds its prefix from its own location (${pcfiledir}), so it is
# right for `cmake --install build --prefix ANY`, not only the configured one.
set(TDSTORE_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH TDSTORE_PC_TO_PREFIX /prefix/${TDSTORE_PC_DIR} /prefix)  # "../.."
string(REGEX REPLACE "/$" "" TDSTORE_PC_TO_PREFIX "${TDSTORE_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/tdstore.pc.in
  ${PROJECT_BINARY_DIR}/tdstore.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tdstore.pc DESTINATION ${TDSTORE_PC_DIR})
