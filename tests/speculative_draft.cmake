# Speculative decoding with a draft model (a build with a draft: lathe gen
# --draft): greedy output is the text of the model without one, whether the
# draft is a random-weight stranger (most proposals refused, every refusal
# cut back) or the model itself (nearly all kept); a seed replays a sampled
# text; a draft whose tokenizer spells tokens otherwise is refused, naming
# the token; --draft-weights on a build without a draft is refused.
# -DPLAIN=<demo executable> -DDRAFTED=<demo with a tiny random draft>
# -DSELF=<demo drafting for itself> -DTINY=<the tiny draft's own executable>
# -DDEMO_DIR=<models/demo> -DMISFIT_TOKENIZER=<a tokenizer.json of another vocabulary> -DWORK_DIR=<dir>
include(${CMAKE_CURRENT_LIST_DIR}/run_command.cmake)
file(MAKE_DIRECTORY ${WORK_DIR})
set(verse "And God said, Let there be light: and there was light. ")
set(args generate -w ${DEMO_DIR}/model.safetensors -p "${verse}And the evening and the morning" -n 48)

run(plain ${PLAIN} ${args} --temp 0)
function(same_text name)
  run(out ${ARGN})
  if(NOT out STREQUAL plain)
    message(FATAL_ERROR "${name} changed the greedy text:\n${plain}\n---\n${out}")
  endif()
  if(NOT out_err MATCHES "\\[speculation: ([0-9]+) of ([0-9]+) proposed tokens accepted")
    message(FATAL_ERROR "${name}: no speculation line:\n${out_err}")
  endif()
  set(kept ${CMAKE_MATCH_1} PARENT_SCOPE)
  set(proposed ${CMAKE_MATCH_2} PARENT_SCOPE)
  message(STATUS "ok: ${name}: ${CMAKE_MATCH_1} of ${CMAKE_MATCH_2} kept")
endfunction()

# A stranger: a tiny random-weight draft of the same vocabulary.
same_text("a random draft" ${DRAFTED} ${args} --temp 0 --draft-min-p 0)
if(proposed EQUAL 0 OR kept EQUAL proposed)
  message(FATAL_ERROR "a random draft: ${kept} of ${proposed} kept: nothing refused, nothing cut back")
endif()
same_text("a random draft, 3 a step" ${DRAFTED} ${args} --temp 0 --draft-min-p 0 --draft-max 3)
# The model drafting for itself, with its own weights: every proposal is its own pick.
same_text("the model as its own draft" ${SELF} ${args} --temp 0 --draft-weights ${DEMO_DIR} --draft-min-p 0)
math(EXPR floor "${proposed} * 9 / 10")
if(kept LESS floor)
  message(FATAL_ERROR "the model as its own draft kept only ${kept} of ${proposed}")
endif()

# Sampled: the same seed, the same text.
run(first ${SELF} ${args} --temp 0.8 --seed 4 --draft-weights ${DEMO_DIR})
run(second ${SELF} ${args} --temp 0.8 --seed 4 --draft-weights ${DEMO_DIR})
if(NOT first STREQUAL second)
  message(FATAL_ERROR "--seed 4 with a draft twice wrote different texts:\n${first}\n${second}")
endif()

# A draft checkpoint whose tokenizer is another: refused, naming what differs.
set(misfit ${WORK_DIR}/misfit)
file(MAKE_DIRECTORY ${misfit})
run(written ${TINY} random-weights -o ${misfit}/model.safetensors --seed 3)
file(COPY_FILE ${MISFIT_TOKENIZER} ${misfit}/tokenizer.json)
execute_process(COMMAND ${DRAFTED} ${args} --draft-weights ${misfit} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "the draft's vocabulary is not the model's: the model's tokenizer has 3072 tokens")
  message(FATAL_ERROR "a draft of another tokenizer was not refused by name (${rc}):\n${err}")
endif()
# A build without a draft refuses --draft-weights.
execute_process(COMMAND ${PLAIN} ${args} --draft-weights ${DEMO_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "build has no draft")
  message(FATAL_ERROR "--draft-weights on a build without a draft was not refused (${rc}):\n${err}")
endif()
