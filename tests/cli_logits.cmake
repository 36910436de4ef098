# The model executable end to end: random-weights writes a checkpoint,
# logits reads it and writes (prompt + steps) rows × vocab f32 values.
# -DMODEL=<executable> -DVOCAB=<n> -DWORK_DIR=<dir>
file(MAKE_DIRECTORY ${WORK_DIR})
execute_process(COMMAND ${MODEL} random-weights -o ${WORK_DIR}/w.safetensors --seed 3 RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "random-weights failed (${rc}): ${err}")
endif()
execute_process(COMMAND ${MODEL} logits -w ${WORK_DIR}/w.safetensors -t 5,0,17,2 -n 3 -o ${WORK_DIR}/logits.f32
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "logits failed (${rc}): ${err}")
endif()
file(SIZE ${WORK_DIR}/logits.f32 size)
math(EXPR expected "(4 + 3) * ${VOCAB} * 4")
if(NOT size EQUAL expected)
  message(FATAL_ERROR "logits.f32 holds ${size} bytes, ${expected} expected")
endif()
# A bad option is named.
execute_process(COMMAND ${MODEL} logits -w ${WORK_DIR}/w.safetensors -t 5,x -o ${WORK_DIR}/bad.f32
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "--tokens: 'x' is not a token id")
  message(FATAL_ERROR "a bad token list was not refused by name: ${err}")
endif()
message(STATUS "ok: ${size} bytes")
