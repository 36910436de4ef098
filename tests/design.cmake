# `lathe design` end to end: a spec from a budget that lathe at once checks
# (the generated code compiles), reports and lints; --explain's derivation on
# stderr, the spec alone on stdout; a bad option exits 2 naming it.
# -DLATHE=<lathe> -DWORK_DIR=<dir>
include(${CMAKE_CURRENT_LIST_DIR}/run_command.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

run(_ ${LATHE} design --params 1B -o design-1b.toml)
run(checked ${LATHE} check design-1b.toml)
string(FIND "${checked}" "design-1b.toml: ok (generated code compiles)" found)
if(found EQUAL -1)
  message(FATAL_ERROR "lathe check of the design did not say ok:\n${checked}${checked_err}")
endif()
run(report ${LATHE} report design-1b.toml)
if(NOT report MATCHES "# design-1b")
  message(FATAL_ERROR "lathe report of the design:\n${report}")
endif()
run(_ ${LATHE} lint design-1b.toml)

# A hybrid for low-latency decode: stdout is the spec, stderr the derivation.
run(hybrid ${LATHE} design --params 3B --use low-latency --explain)
if(NOT hybrid MATCHES "kind = \"mamba2\"" OR hybrid MATCHES "1\\. budget")
  message(FATAL_ERROR "stdout should hold the spec alone:\n${hybrid}")
endif()
if(NOT hybrid_err MATCHES "1\\. budget: 3,000,000,000 parameters.*5\\. result: h ")
  message(FATAL_ERROR "--explain should print the derivation on stderr:\n${hybrid_err}")
endif()
file(WRITE ${WORK_DIR}/design-3b-hybrid.toml "${hybrid}")
run(_ ${LATHE} check design-3b-hybrid.toml)

# refused(<expected text> <args>…): lathe design with the args exits 2, naming what is wrong.
function(refused expect)
  execute_process(COMMAND ${LATHE} design ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(FIND "${err}" "${expect}" found)
  if(NOT rc EQUAL 2 OR found EQUAL -1)
    message(FATAL_ERROR "lathe design ${ARGN}: exit ${rc}, expected 2 and '${expect}':\n${out}${err}")
  endif()
endfunction()
refused("--params: \"8Q\" is not a count (use 8B, 350M, 8e9)" --params 8Q)
refused("--params and --flops both set the budget" --params 8B --flops 1e24)
refused("--use: \"fast\" is not a use" --params 8B --use fast)
refused("--params: 1 required" --params)  # CLI11's own refusals exit 2 here too
refused("--bogus" --params 8B --bogus)
