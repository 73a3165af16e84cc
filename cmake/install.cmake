# `cmake --install`: the shared library, the public headers, the command line, the standard library
# of kernels and an exported CMake package, so that an outside project can write
#
#   find_package(kdsl REQUIRED)
#   target_link_libraries(app PRIVATE kdsl::kdsl)
#
# and find the stdlib .kdsl files in ${kdsl_STDLIB_DIR}. examples/embed is such a project;
# scripts/test_install.sh builds it against an installed tree.
include(CMakePackageConfigHelpers)

set(KDSL_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/kdsl)
set(KDSL_INSTALL_STDLIBDIR ${CMAKE_INSTALL_DATADIR}/kdsl/stdlib)

install(TARGETS kdsl EXPORT kdslTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS kdsl_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

file(GLOB KDSL_PUBLIC_HEADERS ${CMAKE_CURRENT_SOURCE_DIR}/include/kdsl/*.h)
install(FILES ${KDSL_PUBLIC_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kdsl)
file(GLOB KDSL_STDLIB_FILES ${CMAKE_CURRENT_SOURCE_DIR}/stdlib/*.kdsl)
install(FILES ${KDSL_STDLIB_FILES} DESTINATION ${KDSL_INSTALL_STDLIBDIR})

install(EXPORT kdslTargets NAMESPACE kdsl:: DESTINATION ${KDSL_INSTALL_CMAKEDIR})
configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/kdslConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/kdslConfig.cmake
                              INSTALL_DESTINATION ${KDSL_INSTALL_CMAKEDIR}
                              PATH_VARS KDSL_INSTALL_STDLIBDIR)
# 0.x: a minor version may change the API, so only the same major.minor is compatible.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/kdslConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/kdslConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/kdslConfigVersion.cmake
        DESTINATION ${KDSL_INSTALL_CMAKEDIR})
