# One random-weight Llama model, two checkpoints, two builds: the Hugging
# Face safetensors file (rotate-half RoPE) run by the HF spec's build, and
# the GGUF file llama.cpp's converter would write from it (q/k rows permuted
# for the interleaved pairing, its own tensor names, f32 norms) run by the
# GGUF twin spec's build. Their logits agree to float rounding; without the
# permutation they do not (the negative control).
# An encoder (-DENCODER=1) has no decode steps: its rows are the final
# hidden states of the prompt (VOCAB is then the hidden width), and the
# imported spec must be an encoder's.
# An encoder-decoder (-DSOURCE=1) encodes a source first: its rows are the
# decoder's logits, from the decoder's start token on, and the imported spec
# must be an encoder-decoder's.
# -DHF_MODEL -DGGUF_MODEL (executables) -DTWIN (lathe_gguf_twin) -DLATHE (lathe)
# -DHF_SPEC -DGGUF_SPEC -DVOCAB -DWORK_DIR [-DENCODER] [-DSOURCE]
cmake_policy(SET CMP0054 NEW)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${ARGN}\nfailed (${rc}): ${out}${err}")
  endif()
  message(STATUS "${out}")
endfunction()
set(tokens 5,0,17,2,99,150,3,42)
set(steps -n 8)
if(ENCODER)
  set(steps)
endif()
set(source)
if(SOURCE)
  # Source positions far enough apart to reach T5's logarithmic buckets.
  set(source --source-tokens 9,8,7,6,5,4,3,120,64,1,33,17,2,99,17,3,42,77,5,0,11)
  set(tokens 0,17,2,99,3,42)
endif()
run(${HF_MODEL} random-weights -o ${WORK_DIR}/hf.safetensors --seed 11)
run(${TWIN} convert ${HF_SPEC} ${GGUF_SPEC} ${WORK_DIR}/hf.safetensors ${WORK_DIR}/model.gguf)
run(${HF_MODEL} logits -w ${WORK_DIR}/hf.safetensors ${source} -t ${tokens} ${steps} -o ${WORK_DIR}/hf.f32)
run(${GGUF_MODEL} logits -w ${WORK_DIR}/model.gguf ${source} -t ${tokens} ${steps} -o ${WORK_DIR}/gguf.f32)
run(${TWIN} compare ${WORK_DIR}/gguf.f32 ${WORK_DIR}/hf.f32 ${VOCAB} 1e-4)

# Negative control (for a twin whose q/k rows are permuted): the same file
# without the permutation gives other logits.
file(READ ${GGUF_SPEC} twin)
string(REGEX MATCH "pairing = \"[a-z]+\"" twin_pairing "${twin}")
file(READ ${HF_SPEC} original)
string(REGEX MATCH "pairing = \"[a-z]+\"" original_pairing "${original}")
# (A model interleaved in both files, as DeepSeek's, has nothing permuted.)
if(twin_pairing MATCHES "interleaved" AND NOT original_pairing MATCHES "interleaved")
  run(${TWIN} convert ${HF_SPEC} ${GGUF_SPEC} ${WORK_DIR}/hf.safetensors ${WORK_DIR}/unpermuted.gguf --no-permute)
  run(${GGUF_MODEL} logits -w ${WORK_DIR}/unpermuted.gguf -t ${tokens} -o ${WORK_DIR}/unpermuted.f32)
  run(${HF_MODEL} logits -w ${WORK_DIR}/hf.safetensors -t ${tokens} -o ${WORK_DIR}/hf_prompt.f32)
  execute_process(COMMAND ${TWIN} compare ${WORK_DIR}/unpermuted.f32 ${WORK_DIR}/hf_prompt.f32 ${VOCAB} 1e-3
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out)
  if(rc EQUAL 0)
    message(FATAL_ERROR "unpermuted q/k rows gave the HF logits too: the test cannot tell: ${out}")
  endif()
  message(STATUS "without the permutation: ${out}")
endif()

# lathe import reads the GGUF file back to a spec of the same model: the
# twin spec's parameter count, the file's pairing.
run(${LATHE} import ${WORK_DIR}/model.gguf -o ${WORK_DIR}/imported.toml)
file(READ ${WORK_DIR}/imported.toml imported)
if(ENCODER AND NOT imported MATCHES "stack = \"encoder\"")
  message(FATAL_ERROR "the imported spec is not an encoder's:\n${imported}")
endif()
if(SOURCE AND NOT imported MATCHES "stack = \"encoder-decoder\"")
  message(FATAL_ERROR "the imported spec is not an encoder-decoder's:\n${imported}")
endif()
if(twin_pairing AND NOT imported MATCHES "${twin_pairing}")
  message(FATAL_ERROR "the imported spec lacks ${twin_pairing}:\n${imported}")
endif()
foreach(spec ${WORK_DIR}/imported.toml ${GGUF_SPEC})
  execute_process(COMMAND ${LATHE} report ${spec} --json OUTPUT_VARIABLE json RESULT_VARIABLE rc)
  string(REGEX MATCH "\"total\": [0-9]+" total "${json}")
  list(APPEND totals "${total}")
endforeach()
list(GET totals 0 a)
list(GET totals 1 b)
if(NOT a OR NOT a STREQUAL b)
  message(FATAL_ERROR "imported spec: ${a}, twin spec: ${b}")
endif()
message(STATUS "imported spec: ${a}, as the twin spec")
