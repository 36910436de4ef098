# What `lathe import TEXT.gguf --mmproj FILE` refuses, each refusal naming the
# file and the key or tensor at fault: a projector type it does not read,
# an audio encoder, a tensor missing, a projector that writes another width
# than the text model's, --mmproj beside a Hugging Face directory. The files
# are the tiny LLaVA's pair (random weights, no device) and copies of its
# mmproj edited by lathe_gguf_twin edit.
# -DLATHE -DTWIN (lathe_gguf_twin) -DSPEC (tiny-llava) -DDATA -DWORK_DIR
cmake_policy(SET CMP0054 NEW)
include(${CMAKE_CURRENT_LIST_DIR}/run_command.cmake)

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
file(COPY ${DATA}/ DESTINATION ${WORK_DIR}/model)
run(out ${TWIN} config ${SPEC} model/config.json)
run(out ${TWIN} random ${SPEC} model/model.safetensors 7)
run(out ${LATHE} quantize model text0.gguf --type f16)
# (The tiny tokenizer.json, SentencePiece-style, gets no GGUF vocabulary:
# its token texts, where the image tokens are looked up, added by hand.)
run(out ${TWIN} edit text0.gguf text.gguf tokenizer.ggml.tokens:vocab=model/tokenizer.json)
run(out ${TWIN} mmproj ${SPEC} model mmproj.gguf f16)
run(out ${LATHE} import text.gguf --mmproj mmproj.gguf -o pair.toml)

function(refused expect)
  execute_process(COMMAND ${LATHE} ${ARGN} WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "${expect}")
    message(FATAL_ERROR "lathe ${ARGN}: exit ${rc}, and not \"${expect}\":\n${out}${err}")
  endif()
  message(STATUS "lathe ${ARGN}: ${err}")
endfunction()

run(out ${TWIN} edit mmproj.gguf unknown.gguf clip.projector_type=ldp)
refused("unknown.gguf: clip.projector_type \"ldp\" is not read \\(read: mlp" import text.gguf --mmproj unknown.gguf)
run(out ${TWIN} edit mmproj.gguf audio.gguf clip.has_audio_encoder:bool=true)
refused("audio.gguf: clip.has_audio_encoder: an audio encoder is not read" import text.gguf --mmproj audio.gguf)
run(out ${TWIN} edit mmproj.gguf missing.gguf -v.blk.0.attn_q.weight)
refused("missing.gguf: v.blk.0.attn_q.weight: the imported spec has it, the file does not"
        import text.gguf --mmproj missing.gguf)
# The same tower and projector, for a decoder 48 wide.
file(READ ${SPEC} text)
string(REPLACE "[dims]\nhidden = 64" "[dims]\nhidden = 48" text "${text}")
file(WRITE ${WORK_DIR}/wide.toml "${text}")
file(COPY ${DATA}/preprocessor_config.json DESTINATION ${WORK_DIR}/wide)
run(out ${TWIN} random wide.toml wide/model.safetensors 7)
run(out ${TWIN} mmproj wide.toml wide narrow.gguf f16)
refused("narrow.gguf: mm.2.weight: writes rows of 48, the text model's width is 64" import text.gguf --mmproj narrow.gguf)
refused("goes with a GGUF text model" import model --mmproj mmproj.gguf)
