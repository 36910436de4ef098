# `lathe run DIR -p … --image FILE` on a Hugging Face LLaVA directory
# outside lathe's trees (config.json written from the tiny LLaVA's spec, its
# random weights, tokenizer, chat template and CLIP processor settings):
# imported, built with its tower, run; the text it generates greedily is the
# spec's own build's for the same prompt and image.
# -DLATHE -DTWIN (lathe_gguf_twin) -DEXE (the spec's model executable)
# -DSPEC -DDATA (tests/data/vision/tiny-llava) -DIMAGE -DWORK_DIR
cmake_policy(SET CMP0054 NEW)
set(ENV{LATHE_CACHE_DIR} ${WORK_DIR}/cache)
include(${CMAKE_CURRENT_LIST_DIR}/run_command.cmake)

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
file(COPY ${DATA}/ DESTINATION ${WORK_DIR}/llava)
run(out ${TWIN} config ${SPEC} llava/config.json)
run(out ${EXE} random-weights -o llava/model.safetensors --seed 7)
set(prompt "USER: <image>\nWhat is shown? ASSISTANT:")
set(options -p "${prompt}" --image ${IMAGE} -n 6 --temp 0)
run(expected ${EXE} generate -w llava ${options})
run(out ${LATHE} run llava ${options})
if(NOT out STREQUAL expected)
  message(FATAL_ERROR "lathe run of the Hugging Face directory wrote\n${out}\nthe spec's build\n${expected}")
endif()
if(NOT out_err MATCHES "prefill ([0-9]+) tokens" OR NOT CMAKE_MATCH_1 GREATER 16)
  message(FATAL_ERROR "the prompt did not take the image's 16 rows: ${out_err}")
endif()
