# install() rules: the tools (bin/), the scripts and the shipped configs (share/dmuon/), the
# libraries with their headers, and an exported package so another CMake project can
#   find_package(dmuon REQUIRED)   target_link_libraries(app PRIVATE dmuon::dmuon)
# The tools find the configs relative to themselves (<bin>/../share/dmuon/configs), so the
# installed tree works wherever it is put. `cmake --install build --prefix DIR`.
include(CMakePackageConfigHelpers)

set(DMUON_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/dmuon)
set(DMUON_INSTALL_DATADIR ${CMAKE_INSTALL_DATADIR}/dmuon)

# Tools.
set(_tools dmuon_inspect dmuon_bench dmuon_compare dmuon_project)
foreach(t dmuon_microbench dmuon_planbench dmuon_projectbench)
  if(TARGET ${t})
    list(APPEND _tools ${t})
  endif()
endforeach()
install(TARGETS ${_tools} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)

# Scripts and configs: the scripts find each other and the tools relative to themselves.
install(PROGRAMS
  scripts/plot_results.py scripts/partition_quality.py scripts/export_topology.py
  scripts/scaling_study.sh scripts/device_check.sh scripts/validate_projection.py
  scripts/reference_projections.py scripts/mpi_single_copy.py
  DESTINATION ${DMUON_INSTALL_DATADIR}/scripts COMPONENT tools)
install(DIRECTORY scripts/slurm/ DESTINATION ${DMUON_INSTALL_DATADIR}/scripts/slurm
        COMPONENT tools)
install(DIRECTORY configs/ DESTINATION ${DMUON_INSTALL_DATADIR}/configs COMPONENT tools)
install(FILES results/README.md docs/METRICS.md DESTINATION ${CMAKE_INSTALL_DOCDIR}
        COMPONENT tools)

# Libraries, headers and the package. Static libraries export their private link dependencies
# too, so the small interface helpers (warnings, KokkosKernels and NCCL wrappers) go along.
set(_export dmuon dmuon_kernels dmuon_warnings dmuon_kokkoskernels)
if(TARGET dmuon_nccl)
  list(APPEND _export dmuon_nccl)
endif()
install(TARGETS ${_export} EXPORT dmuonTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY src/dmuon DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev
        FILES_MATCHING PATTERN "*.hpp")
install(FILES ${PROJECT_BINARY_DIR}/generated/dmuon/base/build_info.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dmuon/base COMPONENT dev)
install(DIRECTORY kernels/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kernels COMPONENT dev
        FILES_MATCHING PATTERN "*.hpp" PATTERN "host" EXCLUDE PATTERN "standalone" EXCLUDE)
install(EXPORT dmuonTargets NAMESPACE dmuon:: DESTINATION ${DMUON_INSTALL_CMAKEDIR}
        COMPONENT dev)
configure_package_config_file(cmake/dmuonConfig.cmake.in
  ${PROJECT_BINARY_DIR}/dmuonConfig.cmake INSTALL_DESTINATION ${DMUON_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dmuonConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dmuonConfig.cmake ${PROJECT_BINARY_DIR}/dmuonConfigVersion.cmake
              cmake/DmuonFixups.cmake cmake/Findre2.cmake
        DESTINATION ${DMUON_INSTALL_CMAKEDIR} COMPONENT dev)
