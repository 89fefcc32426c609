# `cmake --install`: headers, the static library and svdqConfig.cmake, so a C++ user writes
#   find_package(svdq REQUIRED)  +  target_link_libraries(app PRIVATE svdq::svdq)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
install(TARGETS svdq EXPORT svdqTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/svdq DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(EXPORT svdqTargets NAMESPACE svdq:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/svdq COMPONENT dev)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/svdqConfig.cmake.in ${CMAKE_BINARY_DIR}/svdqConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/svdq)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/svdqConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/svdqConfig.cmake ${CMAKE_BINARY_DIR}/svdqConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/svdq COMPONENT dev)
