# Speculative decoding by prompt lookup (generate --lookup): greedy output
# is the same text as without it, whatever the n-gram size and the tokens
# proposed a step, and the last line says how many proposals were kept.
# -DMODEL=<demo executable> -DDEMO_DIR=<models/demo> -DWORK_DIR=<dir>
include(${CMAKE_CURRENT_LIST_DIR}/run_command.cmake)
file(MAKE_DIRECTORY ${WORK_DIR})
# A prompt that repeats itself, so that lookup finds what to propose.
set(verse "And God said, Let there be light: and there was light. ")
set(base ${MODEL} generate -w ${DEMO_DIR}/model.safetensors -p "${verse}${verse}${verse}And God said" -n 64)
set(gen ${base} --temp 0)

run(plain ${gen})
foreach(variant "3;8" "1;1" "4;3" "2;16")
  list(GET variant 0 ngram)
  list(GET variant 1 draft)
  run(speculated ${gen} --lookup ${ngram} --draft-max ${draft})
  if(NOT speculated STREQUAL plain)
    message(FATAL_ERROR "--lookup ${ngram} --draft-max ${draft} changed the greedy text:\n${plain}\n---\n${speculated}")
  endif()
  if(NOT speculated_err MATCHES "\\[speculation: ([0-9]+) of ([0-9]+) proposed tokens accepted")
    message(FATAL_ERROR "--lookup ${ngram}: no speculation line:\n${speculated_err}")
  endif()
  if(CMAKE_MATCH_2 EQUAL 0 OR CMAKE_MATCH_1 EQUAL 0)
    message(FATAL_ERROR "--lookup ${ngram}: nothing proposed or kept on a text that repeats:\n${speculated_err}")
  endif()
  message(STATUS "ok: --lookup ${ngram} --draft-max ${draft}: ${CMAKE_MATCH_1} of ${CMAKE_MATCH_2} kept")
endforeach()

# Sampled: a seed still replays its text.
run(first ${base} --temp 0.8 --seed 9 --lookup 3)
run(second ${base} --temp 0.8 --seed 9 --lookup 3)
if(NOT first STREQUAL second)
  message(FATAL_ERROR "--seed 9 --lookup 3 twice wrote different texts:\n${first}\n${second}")
endif()
