# scripts/device_check.sh end to end with the GPU hidden (CUDA_VISIBLE_DEVICES empty: the
# exit-77 path CI can run): --prepare writes what travels and stays under 64 MiB; the check
# configures and builds tests/device (the build device_standalone_build made, so nothing is
# recompiled), finds no GPU, exits 77, and leaves its logs and one-screen summary in $OUT with
# stage limits that sum to at most 480 s.
# -DSCRIPT= -DMAIN_BUILD= -DENGINE_CHECK=<the main build's dmuon_device_engine_check>
# -DSTANDALONE_BUILD= -DDEPS= -DNCCL= -DWORK=
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/out)

execute_process(
  COMMAND ${CMAKE_COMMAND} -E env DMUON_DEVICE_DEPS=${WORK}/prepared DMUON_BUILD_DIR=${MAIN_BUILD}
          bash ${SCRIPT} --prepare
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "MiB travel with the tree \\(limit 64")
  message(FATAL_ERROR "--prepare exited ${rc}: ${out}${err}")
endif()
file(GLOB refs ${WORK}/prepared/references/*.ref)
list(LENGTH refs n)
if(NOT EXISTS ${WORK}/prepared/include/fmt/format.h OR n LESS 12)
  message(FATAL_ERROR "--prepare left ${n} references and no fmt/format.h? ${out}")
endif()

# The standalone build's own deps directory (its include/ links to the system headers), with
# the references the check reads: those --prepare just wrote with the same ENGINE_CHECK.
file(REMOVE_RECURSE ${DEPS}/references)
file(COPY ${WORK}/prepared/references DESTINATION ${DEPS})

execute_process(
  COMMAND ${CMAKE_COMMAND} -E env OUT=${WORK}/out DMUON_DEVICE_DEPS=${DEPS}
          DMUON_DEVICE_BUILD=${STANDALONE_BUILD} NCCL_HOME=${NCCL} CUDA_VISIBLE_DEVICES=
          bash ${SCRIPT} -- --no-bench
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 77)
  message(FATAL_ERROR "device_check.sh exited ${rc} (want 77, no GPU): ${out}${err}")
endif()
foreach(f device_check.log configure.txt build.txt kernels.txt summary.txt)
  if(NOT EXISTS ${WORK}/out/${f})
    message(FATAL_ERROR "device_check.sh left no ${f} in OUT: ${out}")
  endif()
endforeach()
file(READ ${WORK}/out/summary.txt summary)
foreach(want "NO GPU: nothing was checked \\(exit 77\\)" "NCCL_DEBUG=WARN"
             "CUDA_MODULE_LOADING=EAGER" "# configure +OK" "# build +OK" "# kernels +NO GPU")
  if(NOT summary MATCHES "${want}")
    message(FATAL_ERROR "the summary lacks '${want}':\n${summary}")
  endif()
endforeach()
string(REGEX MATCHALL "limit +[0-9]+ s" limits "${summary}")
set(total 0)
foreach(l IN LISTS limits)
  string(REGEX MATCH "[0-9]+" s "${l}")
  math(EXPR total "${total} + ${s}")
endforeach()
list(LENGTH limits stages)
if(NOT stages EQUAL 4 OR total GREATER 480)
  message(FATAL_ERROR "${stages} stage limits summing to ${total} s (want 4, <= 480):\n${summary}")
endif()
string(REGEX MATCHALL "\n" lines "${summary}")
list(LENGTH lines nlines)
if(nlines GREATER 24)
  message(FATAL_ERROR "the summary is ${nlines} lines, more than one screen:\n${summary}")
endif()
message(STATUS "device_check.sh: exit 77 without a GPU; stage limits ${total} s; summary:\n${summary}")
