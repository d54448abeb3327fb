# scripts/device_check.sh --prepare-multirank / --multirank with the GPU hidden (the exit-77
# path CI can run): the pack is made (from this build's dmuon_bench and the standalone build's
# dmuon_cuda_check) and stays under the 64 MiB that travel; --multirank unpacks it, runs
# dmuon_cuda_check from it (no GPU: exit 77) and leaves its logs and one-screen summary in
# $OUT with stage limits that sum to at most 480 s.
# -DSCRIPT= -DBENCH_BUILD= -DARCH= -DCHECK_BUILD= -DNCCL= -DWORK=
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/out)
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env DMUON_DEVICE_MPI=${WORK}/mpi DMUON_DEVICE_BENCH_BUILD=${BENCH_BUILD}
          DMUON_DEVICE_CUDA_CHECK_BUILD=${CHECK_BUILD} DMUON_CUDA_ARCH=${ARCH}
          NCCL_HOME=${NCCL} "PATH=/usr/local/bin:$ENV{PATH}" bash ${SCRIPT} --prepare-multirank
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "MiB travel with the tree \\(limit 64; carry .device-mpi\\)")
  message(FATAL_ERROR "--prepare-multirank exited ${rc}: ${out}${err}")
endif()
execute_process(COMMAND tar -tJf ${WORK}/mpi/mpi-pack.tar.xz OUTPUT_VARIABLE listing)
foreach(f dmuon-mpi/bin/dmuon_bench dmuon-mpi/bin/dmuon_cuda_check dmuon-mpi/bin/nccl_smoke
          dmuon-mpi/bin/orterun dmuon-mpi/bin/nccl_host_per_rank dmuon-mpi/lib/libmpi.so.40
          dmuon-mpi/share/openmpi/help-mpi-api.txt dmuon-mpi/share/dmuon/configs/llm.yaml)
  if(NOT listing MATCHES "${f}")
    message(FATAL_ERROR "the pack lacks ${f}")
  endif()
endforeach()
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env OUT=${WORK}/out DMUON_DEVICE_MPI=${WORK}/mpi NCCL_HOME=${NCCL}
          CUDA_VISIBLE_DEVICES= bash ${SCRIPT} --multirank -- --no-bench
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 77)
  message(FATAL_ERROR "device_check.sh --multirank exited ${rc} (want 77, no GPU): ${out}${err}")
endif()
file(READ ${WORK}/out/summary.txt summary)
foreach(want "NO GPU: nothing was checked \\(exit 77\\)" "CUDA_MODULE_LOADING=EAGER"
             "# kernels +NO GPU" "# multirank +skipped")
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
if(total GREATER 480)
  message(FATAL_ERROR "stage limits sum to ${total} s (want <= 480):\n${summary}")
endif()
message(STATUS "device_check.sh --multirank: exit 77 without a GPU; limits ${total} s:\n${summary}")
