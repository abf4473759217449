# Installs the libraries, their headers and a CMake package, so that a C++
# trainer can find_package(sacplan) and link sacplan::planner and friends
# (cmake/sacplanConfig.cmake.in lists the targets; docs/cmake.md).
include(CMakePackageConfigHelpers)

set(SACPLAN_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/sacplan)

install(TARGETS sacplan_status sacplan_planner sacplan_api sacplan_models sacplan_profiler sacplan_reports
                sacplan_gpu_records
  EXPORT sacplanTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT sacplanTargets NAMESPACE sacplan::
  DESTINATION ${SACPLAN_CMAKE_INSTALL_DIR})
install(DIRECTORY
  ${PROJECT_SOURCE_DIR}/status/include/
  ${PROJECT_SOURCE_DIR}/planner/include/
  ${PROJECT_SOURCE_DIR}/api/include/
  ${PROJECT_SOURCE_DIR}/models/include/
  ${PROJECT_SOURCE_DIR}/profiler/include/
  ${PROJECT_SOURCE_DIR}/reports/include/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# LibTorch parts: a second export set, loaded only for COMPONENTS executor,
# so that torch-free users never need to find LibTorch.
if(SACPLAN_WITH_TORCH)
  set(torch_targets sacplan_torch_models sacplan_metering sacplan_executor
                    sacplan_orchestration sacplan_cpu_profiler)
  # The fused CUDA kernels the LibTorch modules call with --kernels fused.
  if(TARGET sacplan_kernels_torch)
    list(APPEND torch_targets sacplan_kernels_reference sacplan_cuda_check
         sacplan_kernels_cuda sacplan_kernels_torch)
  endif()
  install(TARGETS ${torch_targets}
    EXPORT sacplanTorchTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT sacplanTorchTargets NAMESPACE sacplan::
    DESTINATION ${SACPLAN_CMAKE_INSTALL_DIR})
  install(DIRECTORY
    ${PROJECT_SOURCE_DIR}/models/torch/include/
    ${PROJECT_SOURCE_DIR}/metering/include/
    ${PROJECT_SOURCE_DIR}/executor/include/
    ${PROJECT_SOURCE_DIR}/orchestration/include/
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endif()

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/sacplanConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/sacplanConfig.cmake
  INSTALL_DESTINATION ${SACPLAN_CMAKE_INSTALL_DIR})
write_basic_package_version_file(
  ${CMAKE_CURRENT_BINARY_DIR}/sacplanConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/sacplanConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/sacplanConfigVersion.cmake
  DESTINATION ${SACPLAN_CMAKE_INSTALL_DIR})
