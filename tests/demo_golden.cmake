# The shipped demo model against its golden continuation, which the training
# script computed with its own PyTorch forward pass from the same f16 weights
# (models/demo/golden.json): a second, independent implementation.
#  1. token ids: the prompt's ids in, greedy ids out (the device's argmax);
#  2. text: the prompt text through the SentencePiece tokenizer, greedy
#     sampling on the host, streamed text out; it must be the golden text.
# -DMODEL=<demo executable> -DDEMO_DIR=<models/demo>
cmake_policy(SET CMP0054 NEW)
file(READ ${DEMO_DIR}/golden.json golden)
string(JSON prompt GET "${golden}" prompt)
string(JSON expected_text GET "${golden}" text)
# The integers of the JSON array golden[key], as a CMake list.
function(json_ids key out)
  string(JSON n LENGTH "${golden}" ${key})
  set(ids "")
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    string(JSON id GET "${golden}" ${key} ${i})
    list(APPEND ids ${id})
  endforeach()
  set(${out} "${ids}" PARENT_SCOPE)
endfunction()
json_ids(prompt_ids prompt_ids)
json_ids(generated_ids expected_ids)
list(LENGTH expected_ids n_new)
list(JOIN prompt_ids "," prompt_csv)
list(JOIN expected_ids " " expected_line)

execute_process(COMMAND ${MODEL} generate -w ${DEMO_DIR}/model.safetensors -t ${prompt_csv} -n ${n_new}
                RESULT_VARIABLE rc OUTPUT_VARIABLE ids ERROR_VARIABLE err)
string(STRIP "${ids}" ids)
if(NOT rc EQUAL 0 OR NOT ids STREQUAL expected_line)
  message(FATAL_ERROR "greedy ids (${rc}):\n  lathe:  ${ids}\n  golden: ${expected_line}\n${err}")
endif()
message(STATUS "ids: ${n_new} greedy tokens as the golden run's")

execute_process(COMMAND ${MODEL} generate -w ${DEMO_DIR}/model.safetensors -p "${prompt}" --temp 0
                        --repeat-penalty 1 -n ${n_new}
                RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT text STREQUAL "${expected_text}\n")
  message(FATAL_ERROR "greedy text (${rc}):\n  lathe:  [${text}]\n  golden: [${expected_text}]\n${err}")
endif()
message(STATUS "text: ${text}${err}")
