# `cmake --install` lays out headers, libraries and the CMake package (fp8kitConfig.cmake and its
# version file) so that another project's find_package(fp8kit) links fp8kit::emu, fp8kit::numerics,
# fp8kit::core and (when built) fp8kit::cuda. Each layer has its own export set, so a consumer that
# asks only for the header-only components needs no third-party package (fp8kitConfig.cmake).
set(FP8KIT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/fp8kit)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/emu/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS fp8kit_emu EXPORT fp8kit-emu-targets)
install(EXPORT fp8kit-emu-targets NAMESPACE fp8kit:: DESTINATION ${FP8KIT_CMAKE_DIR})
set(FP8KIT_COMPONENTS emu)

if(TARGET fp8kit_numerics)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/numerics/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(TARGETS fp8kit_numerics EXPORT fp8kit-numerics-targets)
  install(EXPORT fp8kit-numerics-targets NAMESPACE fp8kit:: DESTINATION ${FP8KIT_CMAKE_DIR})
  list(APPEND FP8KIT_COMPONENTS numerics)
endif()
if(TARGET fp8kit_core)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/lib/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(TARGETS fp8kit_core EXPORT fp8kit-core-targets)
  install(EXPORT fp8kit-core-targets NAMESPACE fp8kit:: DESTINATION ${FP8KIT_CMAKE_DIR})
  list(APPEND FP8KIT_COMPONENTS core)
endif()
if(TARGET fp8kit_cuda)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/cuda/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(TARGETS fp8kit_cuda EXPORT fp8kit-cuda-targets)
  install(EXPORT fp8kit-cuda-targets NAMESPACE fp8kit:: DESTINATION ${FP8KIT_CMAKE_DIR})
  list(APPEND FP8KIT_COMPONENTS cuda)
endif()
if(TARGET fp8kit)
  install(TARGETS fp8kit RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/fp8kitConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/fp8kitConfig.cmake INSTALL_DESTINATION ${FP8KIT_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/fp8kitConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/fp8kitConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/fp8kitConfigVersion.cmake
        DESTINATION ${FP8KIT_CMAKE_DIR})
