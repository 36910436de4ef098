# `lathe audit` from the command line (labels: unit): a Hugging Face
# directory of SPEC (config.json + random weights) audits without errors,
# exit 0; the same directory with a config whose heads do not divide into
# its KV heads exits 1 naming both numbers under the attention check, in
# lines and in --json; its GGUF file (`lathe quantize … --type q8_0`)
# audits without errors; a missing path exits 1 naming it; usage errors
# exit 2. (unit/audit_test.cpp checks each way a checkpoint can be wrong.)
# -DLATHE -DTWIN (lathe_gguf_twin) -DSPEC -DWORK_DIR
cmake_policy(SET CMP0054 NEW)
include(${CMAKE_CURRENT_LIST_DIR}/run_command.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/hf)

# audit(<expected exit> <output var> <args>…): lathe audit with the args.
function(audit expect out_var)
  execute_process(COMMAND ${LATHE} audit ${ARGN} WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL expect)
    message(FATAL_ERROR "lathe audit ${ARGN}: exit ${rc}, expected ${expect}:\n${out}${err}")
  endif()
  message(STATUS "lathe audit ${ARGN} (exit ${rc})\n${out}${err}")
  set(${out_var} "${out}${err}" PARENT_SCOPE)
endfunction()

run(_ ${TWIN} config ${SPEC} hf/config.json)
run(_ ${TWIN} random ${SPEC} hf/model.safetensors 5)
audit(0 good hf)
foreach(line "ok      attention: hidden_size 256 = 4 heads × head_dim 64" "ok      lm_head: untied"
             "hf \\(Hugging Face directory\\): [0-9]+ checks, [0-9]+ ok, [0-9]+ warnings, 0 errors")
  if(NOT good MATCHES "${line}")
    message(FATAL_ERROR "expected '${line}' in:\n${good}")
  endif()
endforeach()

run(_ ${LATHE} quantize hf tiny-q8.gguf --type q8_0)
audit(0 gguf tiny-q8.gguf)
if(NOT gguf MATCHES "ok      config: general.architecture \"llama\" imports" OR NOT gguf MATCHES "\\(GGUF file\\)")
  message(FATAL_ERROR "the GGUF audit did not import the file:\n${gguf}")
endif()

file(READ ${WORK_DIR}/hf/config.json config)
string(REGEX REPLACE "\"num_key_value_heads\": *2" "\"num_key_value_heads\": 3" config "${config}")
file(WRITE ${WORK_DIR}/hf/config.json "${config}")
audit(1 bad hf)
if(NOT bad MATCHES "error   attention: [^\n]*num_attention_heads \\(4\\) is not a multiple of num_key_value_heads \\(3\\)")
  message(FATAL_ERROR "the attention check did not name the heads:\n${bad}")
endif()
audit(1 bad_json hf --json)
if(NOT bad_json MATCHES "\"id\": \"attention\",\n *\"status\": \"error\"" OR NOT bad_json MATCHES "\"errors\": 1")
  message(FATAL_ERROR "--json did not say the attention error:\n${bad_json}")
endif()

audit(1 missing no-such-dir)
if(NOT missing MATCHES "error   files: no-such-dir: no such file or directory")
  message(FATAL_ERROR "a missing path was not named:\n${missing}")
endif()
audit(2 _)
audit(2 _ hf --no-such-flag)
