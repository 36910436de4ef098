# `lathe run DIR -p … --image FILE` on a Hugging Face vision model's
# directory outside lathe's trees (config.json written from a tiny vision
# spec, its random weights, tokenizer, chat template and image processor's
# settings): imported, built with its tower, run; the text it generates
# greedily is the spec's own build's for the same prompt and image.
# -DLATHE -DTWIN (lathe_gguf_twin) -DEXE (the spec's model executable)
# -DSPEC -DDATA (tests/data/vision/<model>) -DPROMPT (with the image's
# marker) -DROWS (the rows an image takes) -DIMAGE -DWORK_DIR
cmake_policy(SET CMP0054 NEW)
set(ENV{LATHE_CACHE_DIR} ${WORK_DIR}/cache)
include(${CMAKE_CURRENT_LIST_DIR}/run_command.cmake)

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
file(COPY ${DATA}/ DESTINATION ${WORK_DIR}/model)
run(out ${TWIN} config ${SPEC} model/config.json)
run(out ${EXE} random-weights -o model/model.safetensors --seed 7)
set(options -p "${PROMPT}" --image ${IMAGE} -n 6 --temp 0)
run(expected ${EXE} generate -w model ${options})
run(out ${LATHE} run model ${options})
if(NOT out STREQUAL expected)
  message(FATAL_ERROR "lathe run of the Hugging Face directory wrote\n${out}\nthe spec's build\n${expected}")
endif()
if(NOT out_err MATCHES "prefill ([0-9]+) tokens" OR NOT CMAKE_MATCH_1 GREATER ${ROWS})
  message(FATAL_ERROR "the prompt did not take the image's ${ROWS} rows: ${out_err}")
endif()
