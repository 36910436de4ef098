# A checkpoint holding a NaN: refused on load, naming the file, the tensor and
# the value's index; with --no-check loaded, and the logits it then computes
# are an error naming the step, never NaN rows written out or a token -1.
# -DMODEL=<demo executable> -DPLANT=<lathe_plant_value> -DDEMO_DIR=<models/demo> -DTEXT=<a text file> -DWORK_DIR=<dir>
include(${CMAKE_CURRENT_LIST_DIR}/run_command.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(weights ${DEMO_DIR}/model.safetensors)
set(tokenizer --tokenizer ${DEMO_DIR}/tokenizer.model)

# fails(<expected text> <args>…): MODEL with the args exits non-zero, its output holding the text.
function(fails expect)
  execute_process(COMMAND ${MODEL} ${ARGN} WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(rc EQUAL 0)
    message(FATAL_ERROR "${ARGN}\nexited 0, expected to fail with '${expect}':\n${out}${err}")
  endif()
  string(FIND "${out}${err}" "${expect}" found)
  if(found EQUAL -1)
    message(FATAL_ERROR "${ARGN}\nfailed (${rc}), but not with '${expect}':\n${out}${err}")
  endif()
  message(STATUS "${ARGN}\nfailed as expected: ${err}")
endfunction()

# One NaN in a layer's up projection ([768, 256]: index 12345 is row 48,
# column 57): every logit becomes NaN once it runs.
set(layer ${WORK_DIR}/layer-nan.safetensors)
run(_ ${PLANT} ${weights} ${layer} model.layers.3.mlp.up_proj.weight 12345 nan)
set(refused "layer-nan.safetensors: tensor 'model.layers.3.mlp.up_proj.weight' holds NaN at index 12345 (row 48, column 57): refusing to load (--no-check skips this check)")
fails("${refused}" logits -w ${layer} -t 1,1043,261 -o logits.f32)
fails("${refused}" generate -w ${layer} ${tokenizer} -p "And God said" -n 4)
fails("${refused}" generate -w ${layer} -t 1,1043,261 -n 4)
fails("${refused}" perplexity -w ${layer} ${tokenizer} -f ${TEXT} -c 64 --chunks 1)
# --no-check loads it; the logits are checked all the same.
fails("prompt row 0: the logits hold NaN at token 0 (3072 of 3072 values are NaN or inf)"
      logits -w ${layer} -t 1,1043,261 -o logits.f32 --no-check)
file(SIZE ${WORK_DIR}/logits.f32 size)
if(NOT size EQUAL 0)
  message(FATAL_ERROR "logits.f32 holds ${size} bytes: NaN rows were written")
endif()
fails("the prompt's pass: the logits hold NaN at token 0" generate -w ${layer} ${tokenizer} -p "And God said" -n 4 --no-check)
fails("the logits hold NaN (the device's argmax finds no largest value)" generate -w ${layer} -t 1,1043,261 -n 4 --no-check)

# One NaN in the embedding row of token 3000, which the prompt does not use:
# with tied embeddings only that token's logit is NaN, which the check
# still finds.
set(embed ${WORK_DIR}/embed-nan.safetensors)
run(_ ${PLANT} ${weights} ${embed} model.embed_tokens.weight 768005 nan)
fails("embed-nan.safetensors: tensor 'model.embed_tokens.weight' holds NaN at index 768005 (row 3000, column 5)"
      logits -w ${embed} -t 1,1043,261 -o logits.f32)
fails("prompt row 0: the logits hold NaN at token 3000 (1 of 3072 values are NaN or inf)"
      logits -w ${embed} -t 1,1043,261 -o logits.f32 --no-check)
fails("the prompt's pass: the logits hold NaN at token 3000 (1 of 3072 values are NaN or inf)"
      generate -w ${embed} ${tokenizer} -p "And God said" -n 4 --no-check --temp 0)
