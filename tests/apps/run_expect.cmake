# cmake -DMPIEXEC=... -DNPFLAG=... -DNP=... -DEXE=... -DARGS="a|b|c" -DEXPECT_RC=2 (or nonzero)
#       -DEXPECT_REGEX=... [-DONE_LINE=ON] -P run_expect.cmake
# App contract: the job ends (no hang) with the expected exit code and message. With ONE_LINE,
# exactly one "dmuon_bench: error:" line (every rank exits 2, only rank 0 prints).
string(REPLACE "|" ";" args "${ARGS}")
execute_process(
  COMMAND ${MPIEXEC} ${NPFLAG} ${NP} ${EXE} ${args}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
set(all "${out}\n${err}")
message(STATUS "${EXE} ${args} at ${NP} rank(s): exit '${rc}'")
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "did not exit normally (hang?): ${rc}\n${all}")
endif()
if(EXPECT_RC STREQUAL "nonzero")
  if(rc EQUAL 0)
    message(FATAL_ERROR "exited 0, expected a failure\n${all}")
  endif()
elseif(NOT rc EQUAL EXPECT_RC)
  message(FATAL_ERROR "exit ${rc}, expected ${EXPECT_RC}\n${all}")
endif()
if(NOT all MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "output lacks '${EXPECT_REGEX}'\n${all}")
endif()
if(ONE_LINE)
  # Exactly one error line from the app (rank 0); mpiexec's own notes do not count.
  # (';' would split CMake's list of matches: count on a copy without it.)
  string(REPLACE ";" "," err_flat "${err}")
  string(REGEX MATCHALL "dmuon_bench: error:[^\n]*" lines "${err_flat}")
  list(LENGTH lines nlines)
  if(NOT nlines EQUAL 1)
    message(FATAL_ERROR "expected one error line, got ${nlines}:\n${err}")
  endif()
endif()
