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
#   forms  lathe build of a directory, a GGUF file and a directory holding
#          one; options before the model; weights that do not fit refused
#          before building; --help after the model; --version
#   draft  lathe build SPEC --draft DRAFT_SPEC: the draft's build beside the
#          model's, a cache entry of its own, cached the second time; a
#          --draft-weights that does not fit the draft refused; lathe run
#          --draft model.gguf passes the GGUF file on as --draft-weights,
#          a --draft-weights given passes unchanged
#   cache  the key is the canonical path, builds carry no debug information,
#          lathe cache lists, LATHE_CACHE_LIMIT prunes, lathe cache clean
#          empties (the last step: it removes the others' builds)
# -DSTEP -DLATHE -DTWIN (lathe_gguf_twin) -DSPEC -DGGUF_SPEC -DDRAFT_SPEC -DWORK_DIR
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
elseif(STEP STREQUAL "forms")
  # lathe build takes what lathe run takes; options may come before the model.
  file(READ ${WORK_DIR}/spec.ids expected)
  run(out ${LATHE} build hf -o out-forms)
  run(out ${LATHE} build model.gguf -o out-forms)
  file(MAKE_DIRECTORY ${WORK_DIR}/gguf-dir)
  file(COPY_FILE ${WORK_DIR}/model.gguf ${WORK_DIR}/gguf-dir/model.gguf)
  run(out ${LATHE} build gguf-dir -o out-forms)
  run(out ${LATHE} run -t ${tokens} -n 4 gguf-dir)
  if(NOT out STREQUAL expected)
    message(FATAL_ERROR "lathe run -t … gguf-dir gave ${out}, the spec's build ${expected}")
  endif()
  run(out ${LATHE} run -n 4 -v hf -t ${tokens})
  if(NOT out STREQUAL expected OR NOT out_err MATCHES "imported to")
    message(FATAL_ERROR "lathe run -n 4 -v hf -t … gave ${out}${out_err}, the spec's build ${expected}")
  endif()
  # Weights that do not fit the spec are refused before anything is built.
  execute_process(COMMAND ${LATHE} build ${GGUF_SPEC} -w hf/model.safetensors -o out-forms WORKING_DIRECTORY ${WORK_DIR}
                  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  if(rc EQUAL 0 OR err MATCHES "building" OR NOT err MATCHES "model.safetensors")
    message(FATAL_ERROR "lathe build with weights of another naming: exit ${rc}, ${err}")
  endif()
  run(out ${LATHE} build ${SPEC} -w hf/model.safetensors -o out-forms)
  # --help after the model: run's options and the model executable's commands.
  run(out ${LATHE} run ${SPEC} --help)
  if(NOT out MATCHES "-v,--verbose" OR NOT out MATCHES "Subcommands:.*generate.*serve")
    message(FATAL_ERROR "lathe run SPEC --help: ${out}")
  endif()
  run(out ${LATHE} --version)
  if(NOT out MATCHES "^lathe [0-9]+\\.[0-9]+\\.[0-9]+ \\(commit [^)]+\\)\nVulkan loader [0-9.]+\ndevice \\[0\\]")
    message(FATAL_ERROR "lathe --version: ${out}")
  endif()
  run(out out-forms/tiny_llama_gqa --version)
  if(NOT out MATCHES "^tiny-llama-gqa \\(lathe\\) [0-9.]+ \\(commit")
    message(FATAL_ERROR "tiny_llama_gqa --version: ${out}")
  endif()
elseif(STEP STREQUAL "draft")
  run(out ${LATHE} build ${SPEC} --draft ${DRAFT_SPEC} -o out-draft)
  if(NOT out STREQUAL "out-draft/tiny_llama_gqa\n" OR NOT out_err MATCHES "its draft tiny-llama-gqa-draft from ")
    message(FATAL_ERROR "lathe build --draft did not build the model with its draft: ${out}${out_err}")
  endif()
  run(info ${WORK_DIR}/out-draft/tiny_llama_gqa info)
  if(NOT info MATCHES "model +tiny-llama-gqa" OR NOT info MATCHES "\ndraft +tiny-llama-gqa-draft")
    message(FATAL_ERROR "the executable built with a draft is not the spec's model with its draft: ${info}")
  endif()
  # An entry of its own, named for its draft, beside the build without one.
  file(GLOB builds RELATIVE ${WORK_DIR}/cache/models ${WORK_DIR}/cache/models/tiny_llama_gqa-*)
  set(drafted "")
  set(plain "")
  foreach(build IN LISTS builds)
    if(build MATCHES "^tiny_llama_gqa-draft-tiny_llama_gqa_draft-[0-9a-f]+$")
      list(APPEND drafted ${build})
    elseif(build MATCHES "^tiny_llama_gqa-[0-9a-f]+$")
      list(APPEND plain ${build})
    endif()
  endforeach()
  list(LENGTH drafted n)
  if(NOT n EQUAL 1 OR plain STREQUAL "")
    message(FATAL_ERROR "expected one build with the draft beside the one without: ${builds}")
  endif()
  run(out ${LATHE} build ${SPEC} --draft ${DRAFT_SPEC} -o out-draft)
  if(out_err MATCHES "building")
    message(FATAL_ERROR "the second lathe build --draft built again: ${out_err}")
  endif()
  # The draft's checkpoint must fit the draft (the model's does not: hidden 64, not 32).
  execute_process(COMMAND ${LATHE} build ${SPEC} --draft ${DRAFT_SPEC} --draft-weights hf/model.safetensors -o out-draft
                  WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  if(rc EQUAL 0 OR err MATCHES "building" OR NOT err MATCHES "--draft-weights hf/model.safetensors: not a checkpoint of tiny-llama-gqa-draft")
    message(FATAL_ERROR "lathe build --draft-weights of another model: exit ${rc}, ${err}")
  endif()
  # A checkpoint draft (the model drafting for itself from its GGUF file) is
  # imported and passed on as --draft-weights; one given passes unchanged.
  # What the model executable makes of it is its own (lathe -v prints the
  # command before running it).
  execute_process(COMMAND ${LATHE} run -v ${SPEC} -w hf/model.safetensors --draft model.gguf -t ${tokens} -n 4
                  WORKING_DIRECTORY ${WORK_DIR} OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT err MATCHES "model.gguf imported to" OR NOT err MATCHES "tiny_llama_gqa generate -v --draft-weights model.gguf -w hf/model.safetensors -t ")
    message(FATAL_ERROR "lathe run --draft model.gguf: ${err}")
  endif()
  execute_process(COMMAND ${LATHE} run -v ${SPEC} --draft model.gguf --draft-weights=hf/model.safetensors -t ${tokens} -n 4
                  WORKING_DIRECTORY ${WORK_DIR} OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT err MATCHES "tiny_llama_gqa generate -v --draft-weights=hf/model.safetensors -t " OR err MATCHES "--draft-weights model.gguf")
    message(FATAL_ERROR "lathe run --draft model.gguf --draft-weights=…: ${err}")
  endif()
elseif(STEP STREQUAL "cache")
  # The key is the spec's canonical path: m.toml and ./m.toml are one entry.
  file(COPY_FILE ${SPEC} ${WORK_DIR}/m.toml)
  run(out ${LATHE} build m.toml -o out-m)
  run(out ${LATHE} build ./m.toml -o out-m)
  if(out_err MATCHES "building")
    message(FATAL_ERROR "lathe build ./m.toml built again what m.toml had built: ${out_err}")
  endif()
  # Cached executables carry no debug information.
  file(GLOB exes ${WORK_DIR}/cache/models/*/tiny_llama_gqa)
  foreach(exe IN LISTS exes)
    execute_process(COMMAND readelf -S ${exe} OUTPUT_VARIABLE sections)
    if(sections MATCHES "\\.debug_info")
      message(FATAL_ERROR "${exe} holds debug information")
    endif()
  endforeach()
  # lathe cache lists builds, imported specs and pipeline caches with sizes.
  run(out ${LATHE} cache)
  if(NOT out MATCHES "build +[0-9.]+ [KM]iB +[0-9.]+ (min|h) +[^\n]*/models/tiny_llama_gqa-"
     OR NOT out MATCHES "spec +[0-9.]+ (B|KiB)" OR NOT out MATCHES "[0-9]+ entries, ")
    message(FATAL_ERROR "lathe cache: ${out}")
  endif()
  # A limit of 1 byte keeps only the build just made.
  file(WRITE ${WORK_DIR}/m.toml "# another spec text, another key\n")
  file(READ ${SPEC} text)
  file(APPEND ${WORK_DIR}/m.toml "${text}")
  set(ENV{LATHE_CACHE_LIMIT} 1)
  run(out ${LATHE} build m.toml -o out-m)
  unset(ENV{LATHE_CACHE_LIMIT})
  file(GLOB builds ${WORK_DIR}/cache/models/*)
  list(LENGTH builds n)
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "LATHE_CACHE_LIMIT=1 left ${n} builds: ${builds}")
  endif()
  set(ENV{LATHE_CACHE_LIMIT} 12X)
  execute_process(COMMAND ${LATHE} cache WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  unset(ENV{LATHE_CACHE_LIMIT})
  if(rc EQUAL 0 OR NOT err MATCHES "LATHE_CACHE_LIMIT='12X' is not a size")
    message(FATAL_ERROR "a bad LATHE_CACHE_LIMIT: exit ${rc}, ${err}")
  endif()
  run(out ${LATHE} cache clean --older-than 1000)
  if(NOT out MATCHES "removed 0 entries")
    message(FATAL_ERROR "lathe cache clean --older-than 1000: ${out}")
  endif()
  run(out ${LATHE} cache clean)
  run(out ${LATHE} cache)
  if(NOT out MATCHES "\n0 entries, 0 B")
    message(FATAL_ERROR "lathe cache clean left: ${out}")
  endif()
else()
  message(FATAL_ERROR "unknown STEP ${STEP}")
endif()
