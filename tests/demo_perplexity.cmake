# `demo perplexity` on a fixed text against the value the training script's
# own PyTorch model computes from the same f16 weights, by the same protocol
# (llama-perplexity's: chunks of 256 tokens, the NLL of each chunk's second
# half). The expected value was printed by
#   /usr/bin/python3 tools/train_demo.py --perplexity tests/data/text/kjv-sample.txt
# → 1583 tokens, 6 chunks of 256, 762 scored: PPL = 65.125585 +/- 7.480729
# lathe printed PPL = 65.1256 +/- 7.48073 when this test was written: the
# same to the 4 decimals it prints (|difference| < 1e-4, 2e-6 relative).
# Tolerance: 0.01 % of the PPL (1e-4 nats of mean NLL), 1 % of the standard
# error. Both sides compute in f32 from the same f16 weights, lathe on the
# device (f32 KV cache, its own summation order), PyTorch on the CPU; their
# logits differ by ~1e-5 to 1e-4, and such differences average out over the
# 762 scored tokens to far below the tolerance, while a wrong token,
# position, BOS or chunking moves the PPL by whole percents.
# -DMODEL=<demo executable> -DDEMO_DIR=<models/demo> -DTEXT=<the text file>
set(expected_ppl 65.125585)
set(expected_error 7.480729)
execute_process(COMMAND ${MODEL} perplexity -w ${DEMO_DIR}/model.safetensors -f ${TEXT}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "1583 tokens, 6 chunks of 256, 762 scored\nFinal estimate: PPL = ([0-9.]+) \\+/- ([0-9.]+)")
  message(FATAL_ERROR "perplexity (${rc}):\n${out}${err}")
endif()
set(ppl ${CMAKE_MATCH_1})
set(error ${CMAKE_MATCH_2})
# CMake's math() is integer-only: compare in millionths.
foreach(v ppl error expected_ppl expected_error)
  string(REGEX MATCH "^([0-9]+)\\.([0-9]*)$" _ "${${v}}")
  set(whole ${CMAKE_MATCH_1})
  string(SUBSTRING "${CMAKE_MATCH_2}000000" 0 6 frac)
  string(REGEX REPLACE "^0+([0-9])" "\\1" frac "${frac}")
  math(EXPR ${v}_u "${whole} * 1000000 + ${frac}")
endforeach()
math(EXPR diff "${ppl_u} - ${expected_ppl_u}")
math(EXPR error_diff "${error_u} - ${expected_error_u}")
math(EXPR limit "${expected_ppl_u} / 10000")  # 0.01 %
math(EXPR error_limit "${expected_error_u} / 100")  # 1 % of the standard error
if(diff GREATER limit OR diff LESS -${limit} OR error_diff GREATER error_limit OR error_diff LESS -${error_limit})
  message(FATAL_ERROR "perplexity: lathe ${ppl} +/- ${error}, PyTorch ${expected_ppl} +/- ${expected_error}")
endif()
message(STATUS "perplexity: lathe ${ppl} +/- ${error}, PyTorch ${expected_ppl} +/- ${expected_error}")
