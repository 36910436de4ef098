# The model executable end to end: random-weights writes a checkpoint,
# logits reads it and writes (prompt + steps) rows × vocab f32 values (an
# encoder's: hidden states, no steps; and embed writes one pooled row an input).
# An encoder-decoder's rows are its decoder's, after --source-tokens.
# -DMODEL=<executable> -DVOCAB=<n: the row width> -DWORK_DIR=<dir> [-DSTEPS=<n>, default 3] [-DEMBED=1] [-DSOURCE=1]
if(NOT DEFINED STEPS)
  set(STEPS 3)
endif()
file(MAKE_DIRECTORY ${WORK_DIR})
execute_process(COMMAND ${MODEL} random-weights -o ${WORK_DIR}/w.safetensors --seed 3 RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "random-weights failed (${rc}): ${err}")
endif()
set(source_option)
if(SOURCE)
  set(source_option --source-tokens 9,8,7,6,5,4,3)
endif()
execute_process(COMMAND ${MODEL} logits -w ${WORK_DIR}/w.safetensors ${source_option} -t 5,0,17,2 -n ${STEPS}
                        -o ${WORK_DIR}/logits.f32
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "logits failed (${rc}): ${err}")
endif()
# A written file of `rows` rows of VOCAB f32 values.
function(expect_rows file rows)
  file(SIZE ${WORK_DIR}/${file} size)
  math(EXPR expected "(${rows}) * ${VOCAB} * 4")
  if(NOT size EQUAL expected)
    message(FATAL_ERROR "${file} holds ${size} bytes, ${expected} expected")
  endif()
endfunction()
expect_rows(logits.f32 "4 + ${STEPS}")
# A bad option is named.
execute_process(COMMAND ${MODEL} logits -w ${WORK_DIR}/w.safetensors ${source_option} -t 5,x -o ${WORK_DIR}/bad.f32
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "--tokens: 'x' is not a token id")
  message(FATAL_ERROR "a bad token list was not refused by name: ${err}")
endif()
if(EMBED)
  execute_process(COMMAND ${MODEL} embed -w ${WORK_DIR}/w.safetensors -t 5,0,17,2 -t 1 -o ${WORK_DIR}/embed.f32
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT err MATCHES "embedded 2 inputs \\(5 tokens\\)")
    message(FATAL_ERROR "embed failed (${rc}): ${err}")
  endif()
  expect_rows(embed.f32 2)
endif()
message(STATUS "ok")
