# One helper for every test and benchmark, so the MPI launch environment is set in one place.

include(ProcessorCount)
ProcessorCount(DMUON_NPROC)

# Environment every MPI-launched test gets: oversubscription, root-safe, shared-memory BTL,
# single-threaded BLAS (ranks already oversubscribe the cores).
set(DMUON_TEST_ENV
  OMPI_ALLOW_RUN_AS_ROOT=1
  OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  OMPI_MCA_rmaps_base_oversubscribe=1
  OMPI_MCA_pml=ob1
  OMPI_MCA_btl=self,vader
  OMPI_MCA_btl_vader_single_copy_mechanism=none
  OMP_NUM_THREADS=1
  OPENBLAS_NUM_THREADS=1)

# Sanitizer builds: full stacks for LeakSanitizer so cmake/lsan.supp can match the exit-time
# allocations Open MPI and KokkosKernels keep (none pass through dmuon code).
if(DMUON_ENABLE_SANITIZERS)
  list(APPEND DMUON_TEST_ENV
    ASAN_OPTIONS=fast_unwind_on_malloc=0
    LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/cmake/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0
    UBSAN_OPTIONS=print_stacktrace=1
    OMPI_MCA_mca_base_component_disable_dlclose=1)
endif()

# Time limits scale with the build: sanitizers run the MPI tests several times slower.
set(DMUON_TIMEOUT_SCALE 1)
if(DMUON_ENABLE_SANITIZERS)
  set(DMUON_TIMEOUT_SCALE 4)
endif()

set(DMUON_MAX_TEST_RANKS 8 CACHE STRING "Largest MPI rank count a test is launched with")

# dmuon_add_test(NAME name SOURCES ... [LIBS ...] [RANKS 1 2 4 8] [TIMEOUT s] [LABELS ...]
#                [ALSO_RANKS n... ALSO_FILTER gtest-filter])
# Without RANKS the test runs as a plain process; with RANKS once per rank count under mpiexec.
# ALSO_RANKS: rank counts where only the cases matching ALSO_FILTER run, those whose expected
# answers differ per rank count (hand-computed bytes); the rest is shown at RANKS already.
function(dmuon_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT;ALSO_FILTER" "SOURCES;LIBS;RANKS;LABELS;ARGS;ALSO_RANKS"
                        ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  if(DMUON_ENABLE_SANITIZERS)
    # ASan+UBSan runs the engine 3-5x slower: keep the limits for hangs, not for speed.
    math(EXPR T_TIMEOUT "${T_TIMEOUT} * 4")
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest dmuon_warnings)
  if(NOT T_RANKS)
    target_link_libraries(${T_NAME} PRIVATE GTest::gtest_main)
    add_test(NAME ${T_NAME} COMMAND ${T_NAME} ${T_ARGS})
    set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} ENVIRONMENT "${DMUON_TEST_ENV}"
                         LABELS "unit;${T_LABELS}")
    return()
  endif()
  foreach(n IN LISTS T_RANKS T_ALSO_RANKS)
    if(n GREATER DMUON_MAX_TEST_RANKS)
      continue()
    endif()
    set(tn ${T_NAME}_np${n})
    set(_filter "")
    if(NOT n IN_LIST T_RANKS)  # an ALSO_RANKS count: only the cases whose answers differ there
      set(_filter --gtest_filter=${T_ALSO_FILTER})
    endif()
    add_test(NAME ${tn}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n}
                     ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${T_NAME}> ${MPIEXEC_POSTFLAGS} ${T_ARGS}
                     ${_filter})
    set_tests_properties(${tn} PROPERTIES TIMEOUT ${T_TIMEOUT} ENVIRONMENT "${DMUON_TEST_ENV}"
                         PROCESSORS ${n} LABELS "mpi;${T_LABELS}")
  endforeach()
endfunction()

# dmuon_add_benchmark(NAME name SOURCES ... [LIBS ...] [SMOKE_ARGS ...])
# Every benchmark is also a quick CTest smoke run (tiny min time, no timing assertions).
function(dmuon_add_benchmark)
  cmake_parse_arguments(B "" "NAME" "SOURCES;LIBS;SMOKE_ARGS" ${ARGN})
  add_executable(${B_NAME} ${B_SOURCES})
  target_link_libraries(${B_NAME} PRIVATE ${B_LIBS} benchmark::benchmark dmuon_warnings)
  if(NOT B_SMOKE_ARGS)
    set(B_SMOKE_ARGS --benchmark_min_time=0.001)
  endif()
  add_test(NAME ${B_NAME}_smoke COMMAND ${B_NAME} ${B_SMOKE_ARGS})
  set_tests_properties(${B_NAME}_smoke PROPERTIES TIMEOUT 300 ENVIRONMENT "${DMUON_TEST_ENV}"
                       LABELS "benchmark")
endfunction()

# dmuon_expect_run(NAME test COMMAND exe args... EXPECT_RC n [STDOUT_REGEX r] [STDERR_REGEX r]
#                  [ONE_LINE_STDERR] [MPI_RANKS n])
# An app contract test: exit code and output patterns. Arguments must not contain '|'.
function(dmuon_expect_run)
  cmake_parse_arguments(E "ONE_LINE_STDERR" "NAME;EXPECT_RC;STDOUT_REGEX;STDERR_REGEX;MPI_RANKS;TIMEOUT"
                        "COMMAND" ${ARGN})
  set(cmd ${E_COMMAND})
  if(E_MPI_RANKS)
    set(cmd ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${E_MPI_RANKS} ${cmd})
  endif()
  string(REPLACE ";" "|" cmd "${cmd}")
  set(args -DCMD=${cmd} -DEXPECT_RC=${E_EXPECT_RC})
  if(DEFINED E_STDOUT_REGEX)
    list(APPEND args "-DSTDOUT_REGEX=${E_STDOUT_REGEX}")
  endif()
  if(DEFINED E_STDERR_REGEX)
    list(APPEND args "-DSTDERR_REGEX=${E_STDERR_REGEX}")
  endif()
  if(E_ONE_LINE_STDERR)
    list(APPEND args -DONE_LINE_STDERR=ON)
  endif()
  if(NOT E_TIMEOUT)
    set(E_TIMEOUT 120)
  endif()
  add_test(NAME ${E_NAME} COMMAND ${CMAKE_COMMAND} ${args} -P ${PROJECT_SOURCE_DIR}/cmake/DmuonExpectRun.cmake)
  set_tests_properties(${E_NAME} PROPERTIES TIMEOUT ${E_TIMEOUT} ENVIRONMENT "${DMUON_TEST_ENV}" LABELS "apps")
endfunction()

# dmuon_test_costs(name|seconds ...): a fresh build has no CTest cost data, so the long
# one-process tests are told their cost (seconds measured on 2 cores) and start first: with
# -j 2 they overlap the rest instead of ending the run alone. Call it in the test's directory.
function(dmuon_test_costs)
  foreach(_t IN LISTS ARGN)
    string(REPLACE "|" ";" _t "${_t}")
    list(GET _t 0 _name)
    list(GET _t 1 _cost)
    if(TEST ${_name})
      set_tests_properties(${_name} PROPERTIES COST ${_cost})
    endif()
  endforeach()
endfunction()
