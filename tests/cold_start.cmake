# A first run compiles the kernels and says so instead of reporting a speed
# that includes the compile (naming each pass as its kernels compile); the
# next run, with the caches warm, does not.
# -DMODEL=<demo executable> -DDEMO_DIR=<models/demo> -DWORK_DIR=<dir>
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
# Both caches fresh: lathe's pipeline cache and Mesa's shader cache.
set(ENV{LATHE_CACHE_DIR} ${WORK_DIR}/lathe)
set(ENV{MESA_SHADER_CACHE_DIR} ${WORK_DIR}/mesa)
foreach(run cold warm)
  execute_process(COMMAND ${MODEL} generate -w ${DEMO_DIR}/model.safetensors -p "And God said" -n 8 --seed 1
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${run} run failed (${rc}): ${out}${err}")
  endif()
  string(FIND "${err}" "compiling kernels, once" said)
  if(run STREQUAL "cold" AND said EQUAL -1)
    message(FATAL_ERROR "the first run did not say it compiles the kernels:\n${err}")
  elseif(run STREQUAL "cold" AND NOT err MATCHES "compiling kernels, once[^\n]*: [a-z -]*prefill, decode [0-9.]+ s\n")
    message(FATAL_ERROR "the first run did not name the passes whose kernels it compiles:\n${err}")
  elseif(run STREQUAL "warm" AND NOT said EQUAL -1)
    message(FATAL_ERROR "the second run compiled the kernels again:\n${err}")
  endif()
  message(STATUS "${run}: ${err}")
endforeach()
