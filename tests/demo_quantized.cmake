# The demo model as the GGUF files people download, each made by
# `lathe quantize models/demo` and run by `lathe run FILE.gguf` with its
# weights kept in ggml's blocks on the device:
#   - the file is llama.cpp's mixture (general.file_type) and carries the
#     demo's SentencePiece vocabulary and chat template;
#   - its logits match the CPU reference run on the file's dequantized values
#     (normalized error per row ≤ 5e-3, the f16-cache tolerance of the model
#     tests; seen: ≤ 2e-4);
#   - the device holds the weights in about the bytes of the file's tensors
#     (block planes are padded to 16-byte texels per row: within 7 %);
#   - the file's own vocabulary tokenizes as the SentencePiece model does;
#   - the perplexity of the fixed KJV text stays under PPL_LIMIT (the f16
#     build's is 65.13: tests/demo_perplexity.cmake).
# -DLATHE -DTWIN (lathe_gguf_twin) -DDEMO_DIR -DTEXT -DTYPE -DFILE_TYPE -DPPL_LIMIT -DWORK_DIR
cmake_policy(SET CMP0054 NEW)
include(${CMAKE_CURRENT_LIST_DIR}/run_command.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(ENV{LATHE_CACHE_DIR} ${WORK_DIR}/cache)
set(tokens 1,1043,261,2072,312,5,900,2071,17,64,1500,3000,7,88,250,2)

run(out ${LATHE} quantize ${DEMO_DIR} demo.gguf --type ${TYPE})
if(NOT out_err MATCHES "demo.gguf \\(written\\): [^\n]* tensors, ([0-9]+) bytes of data\n"
   OR NOT out_err MATCHES "sentencepiece vocabulary of 3072 tokens, chat template")
  message(FATAL_ERROR "lathe quantize did not say what it wrote: ${out_err}")
endif()
string(REGEX MATCH "([0-9]+) bytes of data" _ "${out_err}")
set(data_bytes ${CMAKE_MATCH_1})
run(types ${TWIN} types demo.gguf)
if(NOT types MATCHES "^general.file_type ${FILE_TYPE}\n")
  message(FATAL_ERROR "general.file_type is not ${FILE_TYPE}:\n${types}")
endif()

# Logits against the reference on the file's own (dequantized) values.
run(out ${LATHE} import demo.gguf -o imported.toml)
run(out ${LATHE} run demo.gguf logits -t ${tokens} -o lathe.f32)
run(out ${TWIN} reference imported.toml demo.gguf ${tokens} reference.f32)
run(out ${TWIN} compare lathe.f32 reference.f32 3072 5e-3)

# Device memory: the weights as the session holds them, against the file's.
run(out ${LATHE} run demo.gguf generate -t ${tokens} -n 2)
if(NOT out_err MATCHES "weights ([0-9.]+) MiB")
  message(FATAL_ERROR "generate did not report the device memory: ${out_err}")
endif()
set(device_mib ${CMAKE_MATCH_1})
math(EXPR file_kib "${data_bytes} / 1024")
string(REGEX REPLACE "^([0-9]+)\\.([0-9][0-9])$" "\\1\\2" device_hundredths "${device_mib}")
math(EXPR device_kib "${device_hundredths} * 1024 / 100")
# Each row's planes are padded to whole 16-byte texels: nothing for Q4_K,
# Q5_K, Q8_0 or Q4_0 at these row lengths; for Q6_K's 210-byte blocks, 13
# texels of body and one of scales, 6.7 % on the demo's rows of 256 values
# (1.6 % on rows of 768, 0.4 % on 4096).
math(EXPR low "${file_kib} * 99 / 100")
math(EXPR high "${file_kib} * 107 / 100 + 11")  # + the rounding of the MiB printed
if(device_kib LESS low OR device_kib GREATER high)
  message(FATAL_ERROR "the device holds ${device_mib} MiB of weights, the file ${file_kib} KiB of tensors")
endif()
message(STATUS "weights: ${device_mib} MiB on the device, ${file_kib} KiB in the file")

# The file's vocabulary is the SentencePiece model's.
run(ids ${LATHE} run demo.gguf tokenize -p "In the beginning God created the heaven" --ids)
run(expected ${LATHE} run demo.gguf tokenize -p "In the beginning God created the heaven" --ids
    --tokenizer ${DEMO_DIR}/tokenizer.model)
if(NOT ids STREQUAL expected OR NOT ids MATCHES "^\\[1, 1043, 261, 2072, ")
  message(FATAL_ERROR "the GGUF vocabulary gave ${ids}, the SentencePiece model ${expected}")
endif()

# Quality: perplexity of the fixed text with the file's tokenizer.
run(out ${LATHE} run demo.gguf perplexity -f ${TEXT})
if(NOT out MATCHES "1583 tokens, 6 chunks of 256, 762 scored\nFinal estimate: PPL = ([0-9]+)\\.([0-9]+)")
  message(FATAL_ERROR "perplexity: ${out}")
endif()
set(ppl "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
if(CMAKE_MATCH_1 GREATER_EQUAL PPL_LIMIT)
  message(FATAL_ERROR "${TYPE}: perplexity ${ppl}, not under ${PPL_LIMIT}")
endif()
message(STATUS "${TYPE}: perplexity ${ppl} (limit ${PPL_LIMIT})")
