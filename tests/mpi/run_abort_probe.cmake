# cmake -DMPIEXEC=... -DNPFLAG=... -DNP=... -DPROBE=... -DVICTIM=... -P run_abort_probe.cmake
# Passes only if the job ends (no hang) with a non-zero exit and abort_all's message.
execute_process(
  COMMAND ${MPIEXEC} ${NPFLAG} ${NP} ${PROBE}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
set(all "${out}\n${err}")
message(STATUS "abort_probe at ${NP} rank(s): exit '${rc}'")
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "abort_probe did not exit normally (hang?): ${rc}\n${all}")
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "abort_probe exited 0 after abort_all\n${all}")
endif()
if(NOT all MATCHES "dmuon: rank ${VICTIM}: abort_probe: deliberate failure")
  message(FATAL_ERROR "abort_all's message missing\n${all}")
endif()
if(all MATCHES "passed the barrier")
  message(FATAL_ERROR "a rank left the barrier: abort did not stop every rank\n${all}")
endif()
