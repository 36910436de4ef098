# generate's sampling defaults, as llama.cpp and the OpenAI API have them:
# --temp 0 is greedy (no repeat penalty unless asked for); without --seed
# every run draws a seed, which -v prints and --seed replays.
# -DMODEL=<demo executable> -DDEMO_DIR=<models/demo> -DWORK_DIR=<dir>
include(${CMAKE_CURRENT_LIST_DIR}/run_command.cmake)
file(MAKE_DIRECTORY ${WORK_DIR})
set(gen ${MODEL} generate -w ${DEMO_DIR}/model.safetensors -p "And God said" -n 48)

run(greedy ${gen} --temp 0)
run(unpenalized ${gen} --temp 0 --repeat-penalty 1)
if(NOT greedy STREQUAL unpenalized)
  message(FATAL_ERROR "--temp 0 is not greedy: it differs from --temp 0 --repeat-penalty 1:\n${greedy}\n${unpenalized}")
endif()
run(penalized ${gen} --temp 0 --repeat-penalty 1.3)
if(greedy STREQUAL penalized)
  message(FATAL_ERROR "--repeat-penalty 1.3 changed nothing:\n${greedy}")
endif()

# At temperature 1 over the whole vocabulary, 48 tokens: two runs without
# --seed writing the same text would take a drawn seed repeated.
set(sampled ${gen} --temp 1 --top-k 0 --top-p 1 --min-p 0)
run(first ${sampled} -v)
run(second ${sampled})
if(first STREQUAL second)
  message(FATAL_ERROR "two runs without --seed wrote the same text:\n${first}")
endif()
if(NOT first_err MATCHES "seed ([0-9]+) \\(--seed [0-9]+ samples this text again\\)")
  message(FATAL_ERROR "-v did not print the seed:\n${first_err}")
endif()
set(seed ${CMAKE_MATCH_1})
# That seed replays the text; a seed given twice writes the same text twice.
run(replayed ${sampled} --seed ${seed})
if(NOT replayed STREQUAL first)
  message(FATAL_ERROR "--seed ${seed} (printed by -v) did not replay the text:\n${first}\n${replayed}")
endif()
run(again ${sampled} --seed ${seed})
if(NOT again STREQUAL replayed)
  message(FATAL_ERROR "--seed ${seed} twice wrote different texts:\n${replayed}\n${again}")
endif()
message(STATUS "ok: seed ${seed}")
