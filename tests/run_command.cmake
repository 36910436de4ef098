# run(<out_var> COMMAND...): runs the command in ${WORK_DIR}, fails the test
# with its output unless it exits 0; sets <out_var> to its stdout and
# <out_var>_err to its stderr. Included by the scripts of the CLI tests.
function(run out_var)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${ARGN}\nfailed (${rc}): ${out}${err}")
  endif()
  message(STATUS "${ARGN}\n${out}${err}")
  set(${out_var} "${out}" PARENT_SCOPE)
  set(${out_var}_err "${err}" PARENT_SCOPE)
endfunction()
