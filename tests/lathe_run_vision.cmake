# `lathe run DIR -p … --image FILE` on a Hugging Face vision model's
# directory outside lathe's trees (config.json written from a tiny vision
# spec, its random weights, tokenizer, chat template and image processor's
# settings): imported, built with its tower, run; the text it generates
# greedily is the spec's own build's for the same prompt and image.
# -DLATHE -DTWIN (lathe_gguf_twin) -DEXE (the spec's model executable)
# -DSPEC -DDATA (tests/data/vision/<model>) -DPROMPT (with the image's
# marker) -DROWS (the rows an image takes) -DIMAGE -DWORK_DIR
cmake_policy(SET CMP0054 NEW)
include(${CMAKE_CURRENT_LIST_DIR}/run_command.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/vision_directory.cmake)
set(options -p "${PROMPT}" --image ${IMAGE} -n 6 --temp 0)
run(expected ${EXE} generate -w model ${options})
run(out ${LATHE} run model ${options})
if(NOT out STREQUAL expected)
  message(FATAL_ERROR "lathe run of the Hugging Face directory wrote\n${out}\nthe spec's build\n${expected}")
endif()
if(NOT out_err MATCHES "prefill ([0-9]+) tokens" OR NOT CMAKE_MATCH_1 GREATER ${ROWS})
  message(FATAL_ERROR "the prompt did not take the image's ${ROWS} rows: ${out_err}")
endif()
