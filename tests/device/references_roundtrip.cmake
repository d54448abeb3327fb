# The host half of the GPU check: dmuon_device_engine_check --write-references writes every
# reference file (exit 0), and --references on this machine reports no GPU with exit 77 (CI
# has no GPU), or, where a GPU and MPI exist, runs the cases and must pass (exit 0).
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
execute_process(COMMAND ${PROGRAM} --write-references ${DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "--write-references exited ${rc}: ${out}${err}")
endif()
foreach(f moe-muon moe-adamw vla-muon vla-adamw llm-muon llm-adamw llm-muon-clip0.5-2
          llm-muon-clip0.01-inf llm-muon-accum3 llm-muon-clip0.5-2-accum3 llm-adamw-clip0.5-2
          llm-adamw-accum3)
  if(NOT EXISTS ${DIR}/${f}.ref)
    message(FATAL_ERROR "--write-references did not write ${f}.ref: ${out}")
  endif()
endforeach()
execute_process(COMMAND ${PROGRAM} --references ${DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT (rc EQUAL 77 OR rc EQUAL 0))
  message(FATAL_ERROR "--references exited ${rc} (want 77 without a GPU, 0 with one): ${out}${err}")
endif()
