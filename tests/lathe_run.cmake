# `lathe build` and `lathe run` from a directory outside lathe's trees, with
# a cache of their own (LATHE_CACHE_DIR). One step per test; they share
# WORK_DIR through the fixture that the `build` step sets up.
#   build  lathe build SPEC -o out: the executable runs (info, random-weights);
#          the checkpoint of the later steps is written; a second build is
#          the cached one (nothing compiled, the file untouched)
#   spec   lathe run SPEC -w CHECKPOINT: the cached build, greedy ids out
#   hf     lathe run DIR: a Hugging Face directory (config.json + safetensors)
#          imported, built, run with -w DIR: the ids of `spec`
#   gguf   lathe run FILE.gguf: the same weights as llama.cpp would write
#          them, imported, built, run
#   serve  lathe run DIR --serve --port 99999: --serve means the serve
#          command, whose own option check refuses the port (nothing listens)
#   error  lathe run on a file that is no model names it
# -DSTEP -DLATHE -DTWIN (lathe_gguf_twin) -DSPEC -DGGUF_SPEC -DWORK_DIR
cmake_policy(SET CMP0054 NEW)
set(ENV{LATHE_CACHE_DIR} ${WORK_DIR}/cache)
set(tokens 5,0,17,2)
include(${CMAKE_CURRENT_LIST_DIR}/run_command.cmake)
# Fails unless `out` is what generate -t prints: greedy token ids, the
# prompt's pick and one a step.
function(expect_ids out)
  if(NOT out MATCHES "^[0-9]+( [0-9]+)+\n$")
    message(FATAL_ERROR "expected greedy token ids, got: ${out}")
  endif()
endfunction()

if(STEP STREQUAL "build")
  file(REMOVE_RECURSE ${WORK_DIR})
  file(MAKE_DIRECTORY ${WORK_DIR}/hf)
  run(out ${LATHE} build ${SPEC} -o out)
  set(exe ${WORK_DIR}/out/tiny_llama_gqa)
  if(NOT out STREQUAL "out/tiny_llama_gqa\n" OR NOT EXISTS ${exe} OR NOT out_err MATCHES "built ")
    message(FATAL_ERROR "lathe build did not build ${exe}")
  endif()
  run(info ${exe} info)
  if(NOT info MATCHES "model +tiny-llama-gqa")
    message(FATAL_ERROR "the built executable is not the spec's model: ${info}")
  endif()
  run(out ${exe} random-weights -o hf/model.safetensors --seed 11)
  run(out ${TWIN} config ${SPEC} hf/config.json)
  file(TIMESTAMP ${exe} before "%s")
  file(GLOB cached ${WORK_DIR}/cache/models/*/tiny_llama_gqa)
  file(TIMESTAMP ${cached} cached_before "%s")
  execute_process(COMMAND ${CMAKE_COMMAND} -E sleep 1)
  run(out ${LATHE} build ${SPEC} -o out)
  file(TIMESTAMP ${cached} cached_after "%s")
  if(out_err MATCHES "build" OR NOT cached_before STREQUAL cached_after)
    message(FATAL_ERROR "the second lathe build of the same spec built again: ${out_err}")
  endif()
elseif(STEP STREQUAL "spec")
  run(out ${LATHE} run ${SPEC} -w hf/model.safetensors -t ${tokens} -n 4)
  expect_ids("${out}")
  if(out_err MATCHES "building")
    message(FATAL_ERROR "lathe run rebuilt what lathe build had cached: ${out_err}")
  endif()
  file(WRITE ${WORK_DIR}/spec.ids "${out}")
elseif(STEP STREQUAL "hf")
  run(out ${LATHE} run hf -t ${tokens} -n 4)
  expect_ids("${out}")
  file(READ ${WORK_DIR}/spec.ids expected)
  if(NOT out STREQUAL expected)
    message(FATAL_ERROR "the Hugging Face directory gave ${out}, its spec's build ${expected}")
  endif()
elseif(STEP STREQUAL "gguf")
  run(out ${TWIN} convert ${SPEC} ${GGUF_SPEC} hf/model.safetensors model.gguf)
  run(out ${LATHE} run -v model.gguf -t ${tokens} -n 4)
  expect_ids("${out}")
  if(NOT out_err MATCHES "model.gguf imported to")
    message(FATAL_ERROR "lathe run did not import model.gguf: ${out_err}")
  endif()
elseif(STEP STREQUAL "serve")
  # --port is an option of the serve command alone: its range check answering
  # shows that --serve reached it (whether or not the build was cached).
  execute_process(COMMAND ${LATHE} run hf --serve --port 99999 WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "--port: Value 99999 not in range")
    message(FATAL_ERROR "lathe run --serve did not run the serve command: exit ${rc}, ${out}${err}")
  endif()
elseif(STEP STREQUAL "error")
  file(WRITE ${WORK_DIR}/notes.txt "not a model\n")
  execute_process(COMMAND ${LATHE} run notes.txt -n 4 WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc
                  ERROR_VARIABLE err OUTPUT_QUIET)
  if(rc EQUAL 0 OR NOT err MATCHES "notes.txt: not a spec")
    message(FATAL_ERROR "lathe run notes.txt: exit ${rc}, ${err}")
  endif()
else()
  message(FATAL_ERROR "unknown STEP ${STEP}")
endif()
