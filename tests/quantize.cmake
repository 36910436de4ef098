# `lathe quantize` from the command line (labels: unit):
#   a Hugging Face directory (config.json + random bf16 weights of SPEC) to
#   q4_k_m: general.file_type 15 and the per-tensor types of llama.cpp's
#   rules (output Q6_K, attn_v / ffn_down Q6_K in layers 0, 3, 6, 7 of 8,
#   ffn_down rows of 320 falling back to Q8_0 / Q5_0, vectors f32); that
#   file quantized again refused (already quantized) and imported with its
#   types as [weights.dtypes] exceptions; a q8_0 file imported as dtype q8_0; garbage, a truncated file and an unknown --type each a
#   clear error.
# -DLATHE -DTWIN (lathe_gguf_twin) -DSPEC -DWORK_DIR
cmake_policy(SET CMP0054 NEW)
include(${CMAKE_CURRENT_LIST_DIR}/run_command.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/hf)

# Fails unless `command` exits non-zero with `pattern` in its output.
function(expect_failure pattern)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "${pattern}")
    message(FATAL_ERROR "${ARGN}\nexpected a failure matching '${pattern}', got (${rc}): ${out}${err}")
  endif()
  message(STATUS "${ARGN}\n(failed as expected) ${out}${err}")
endfunction()

run(out ${TWIN} config ${SPEC} hf/config.json)
run(out ${TWIN} random ${SPEC} hf/model.safetensors 5)
run(out ${LATHE} quantize hf q4km.gguf --type q4_k_m)
if(NOT out_err MATCHES "q4km.gguf \\(written\\): .*Q4_K.*Q6_K")
  message(FATAL_ERROR "lathe quantize did not report what it wrote: ${out_err}")
endif()
run(types ${TWIN} types q4km.gguf)
if(NOT types MATCHES "^general.file_type 15\n")
  message(FATAL_ERROR "general.file_type is not 15 (MOSTLY_Q4_K_M):\n${types}")
endif()
set(rules "token_embd.weight q4_k" "output.weight q6_k" "output_norm.weight f32")
foreach(layer RANGE 7)
  if(layer EQUAL 0 OR layer EQUAL 3 OR layer EQUAL 6 OR layer EQUAL 7)
    list(APPEND rules "blk.${layer}.attn_v.weight q6_k" "blk.${layer}.ffn_down.weight q8_0")
  else()
    list(APPEND rules "blk.${layer}.attn_v.weight q4_k" "blk.${layer}.ffn_down.weight q5_0")
  endif()
  list(APPEND rules "blk.${layer}.attn_q.weight q4_k" "blk.${layer}.ffn_up.weight q4_k"
       "blk.${layer}.attn_norm.weight f32")
endforeach()
foreach(rule IN LISTS rules)
  if(NOT types MATCHES "(^|\n)${rule}\n")
    message(FATAL_ERROR "expected '${rule}' in:\n${types}")
  endif()
endforeach()

expect_failure("q4km.gguf: [a-z_.0-9]+ is q[0-9]_[0-9k] already; lathe quantize reads f32, f16 and bf16"
               ${LATHE} quantize q4km.gguf again.gguf --type q8_0)
# A mixture imports as what it holds: the most common type (45 q4_k:
# token_embd, attn_q/k/output and ffn_gate/up of 8 layers, 4 attn_v) as
# weights.dtype, the others as [weights.dtypes] exceptions, per layer where
# the layers differ.
run(mixed ${LATHE} import q4km.gguf)
set(v_types "[\"q6_k\", \"q4_k\", \"q4_k\", \"q6_k\", \"q4_k\", \"q4_k\", \"q6_k\", \"q6_k\"]")
set(down_types "[\"q8_0\", \"q5_0\", \"q5_0\", \"q8_0\", \"q5_0\", \"q5_0\", \"q8_0\", \"q8_0\"]")
foreach(line "dtype = \"q4_k\"" "[weights.dtypes]" "lm_head = \"q6_k\"" "v = ${v_types}" "down = ${down_types}")
  string(FIND "${mixed}" "${line}" at)
  if(at LESS 0)
    message(FATAL_ERROR "the q4_k_m file's imported spec lacks '${line}':\n${mixed}")
  endif()
endforeach()
# One type throughout: imported as that dtype.
run(out ${LATHE} quantize hf q8.gguf --type q8_0)
run(out ${LATHE} import q8.gguf)
if(NOT out MATCHES "dtype = \"q8_0\"")
  message(FATAL_ERROR "the q8_0 file did not import as dtype q8_0:\n${out}")
endif()

file(WRITE ${WORK_DIR}/garbage.gguf "no model here")
expect_failure("garbage.gguf: not a GGUF file" ${LATHE} quantize garbage.gguf out.gguf --type q4_0)
execute_process(COMMAND head -c 200 ${WORK_DIR}/q4km.gguf OUTPUT_FILE ${WORK_DIR}/cut.gguf)
expect_failure("cut.gguf: .*(ends|beyond the end of the file)" ${LATHE} quantize cut.gguf out.gguf --type q4_0)
expect_failure("--type: q3_k not in" ${LATHE} quantize hf out.gguf --type q3_k)
if(EXISTS ${WORK_DIR}/out.gguf)
  message(FATAL_ERROR "a failed lathe quantize left out.gguf behind")
endif()
