# install() rules: the tools (bin/), the scripts and the shipped configs (share/dmuon/), the
# libraries with their headers (all under include/dmuon/), and an exported package so another
# CMake project (C++ only is enough) can
#   find_package(dmuon REQUIRED)   target_link_libraries(app PRIVATE dmuon::dmuon)
#   #include "dmuon/plan/plan.hpp"   #include "dmuon/kernels/newton_schulz.hpp"
# The tools find the configs relative to themselves (<bin>/../share/dmuon/configs), so the
# installed tree works wherever it is put. `cmake --install build --prefix DIR`.
include(CMakePackageConfigHelpers)

set(DMUON_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/dmuon)
set(DMUON_INSTALL_DATADIR ${CMAKE_INSTALL_DATADIR}/dmuon)

# Tools.
set(_tools dmuon_inspect dmuon_bench dmuon_compare dmuon_project dmuon_advise)
foreach(t dmuon_microbench dmuon_planbench dmuon_projectbench)
  if(TARGET ${t})
    list(APPEND _tools ${t})
  endif()
endforeach()
install(TARGETS ${_tools} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)

# Scripts and configs: the scripts find each other and the tools relative to themselves.
install(PROGRAMS
  scripts/plot_results.py scripts/partition_quality.py scripts/export_topology.py
  scripts/scaling_study.sh scripts/device_check.sh scripts/cuda_root.sh
  scripts/device_mpi_pack.sh scripts/device_multirank.sh scripts/validate_projection.py
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
# The exported targets' include directory is include/ alone (their INSTALL_INTERFACE), under
# which every public header sits in dmuon/: the library's areas and the kernels' API
# (include/dmuon/kernels/, whose "kernels/..." includes the staging spells "dmuon/kernels/...").
install(TARGETS ${_export} EXPORT dmuonTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
set(_stage ${PROJECT_BINARY_DIR}/install_headers)
install(CODE "include(\"${PROJECT_SOURCE_DIR}/cmake/DmuonStageHeaders.cmake\")
dmuon_stage_headers(\"${PROJECT_SOURCE_DIR}\" \"${PROJECT_BINARY_DIR}/generated\" \"${_stage}\")"
        COMPONENT dev)
install(DIRECTORY ${_stage}/dmuon DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(EXPORT dmuonTargets NAMESPACE dmuon:: DESTINATION ${DMUON_INSTALL_CMAKEDIR}
        COMPONENT dev)
# A C++-only consumer cannot run FindHDF5 for the C library (it test-compiles a .c file): the
# package config then defines HDF5::HDF5 as this configure found it.
set(DMUON_HDF5_TARGET OFF)
if(TARGET HDF5::HDF5)
  set(DMUON_HDF5_TARGET ON)
  foreach(_p INCLUDE_DIRECTORIES LINK_LIBRARIES COMPILE_DEFINITIONS)
    get_target_property(_v HDF5::HDF5 INTERFACE_${_p})
    if(NOT _v)
      set(_v "")
    endif()
    set(DMUON_HDF5_${_p} "${_v}")
  endforeach()
endif()
configure_package_config_file(cmake/dmuonConfig.cmake.in
  ${PROJECT_BINARY_DIR}/dmuonConfig.cmake INSTALL_DESTINATION ${DMUON_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dmuonConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dmuonConfig.cmake ${PROJECT_BINARY_DIR}/dmuonConfigVersion.cmake
              cmake/DmuonFixups.cmake cmake/Findre2.cmake
        DESTINATION ${DMUON_INSTALL_CMAKEDIR} COMPONENT dev)
