# llama.cpp's multimodal pair of a tiny vision model: its Hugging Face
# directory (config.json written from a tiny vision spec, random weights,
# tokenizer, image processor's settings), the text GGUF `lathe quantize`
# writes from it (f16, with its vocabulary) and the mmproj llama.cpp's
# converter would write (lathe_gguf_twin mmproj). `lathe import` of the pair
# is the spec as the pair states it (lathe_gguf_twin pair: no difference);
# `lathe run TEXT.gguf --mmproj MMPROJ.gguf` gives the logits of the spec's
# own build on the directory (to TOLERANCE) and the same greedy text.
# -DLATHE -DTWIN (lathe_gguf_twin) -DEXE (the spec's model executable)
# -DSPEC -DDATA (tests/data/vision/<model>) -DDTYPE (the mmproj's) -DIDS
# (with the image's marker) -DVOCAB -DTOLERANCE -DPROMPT -DIMAGE -DWORK_DIR
cmake_policy(SET CMP0054 NEW)
include(${CMAKE_CURRENT_LIST_DIR}/run_command.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/vision_directory.cmake)
run(out ${LATHE} quantize model text0.gguf --type f16)
# (The tiny tokenizer.json, SentencePiece-style, gets no GGUF vocabulary:
# its token texts, where the image tokens are looked up, added by hand.)
run(out ${TWIN} edit text0.gguf text.gguf tokenizer.ggml.tokens:vocab=model/tokenizer.json)
run(out ${TWIN} mmproj ${SPEC} model mmproj.gguf ${DTYPE})

# The pair's spec: the HF spec as the pair states it.
run(out ${LATHE} import text.gguf --mmproj mmproj.gguf -o pair.toml)
run(out ${TWIN} pair ${SPEC} f16 ${DTYPE} pair.toml)

# The image's logits and two steps', then greedy text: the pair's build
# against the spec's own on the directory.
run(out ${EXE} logits -w model -t ${IDS} -n 2 -o hf.f32 --image ${IMAGE})
run(out ${LATHE} run text.gguf --mmproj mmproj.gguf logits -t ${IDS} -n 2 -o pair.f32 --image ${IMAGE})
run(out ${TWIN} compare pair.f32 hf.f32 ${VOCAB} ${TOLERANCE})
set(options -p "${PROMPT}" --image ${IMAGE} -n 6 --temp 0 --tokenizer model/tokenizer.json)
run(expected ${EXE} generate -w model ${options})
run(out ${LATHE} run text.gguf --mmproj mmproj.gguf ${options})
if(NOT out STREQUAL expected)
  message(FATAL_ERROR "lathe run of the GGUF pair wrote\n${out}\nthe spec's build on the directory\n${expected}")
endif()
# Without its mmproj, the text file takes no image.
execute_process(COMMAND ${LATHE} run text.gguf ${options} WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "takes no images")
  message(FATAL_ERROR "lathe run text.gguf --image without --mmproj: ${rc}\n${out}${err}")
endif()
