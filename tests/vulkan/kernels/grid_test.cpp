// The grid of kernel instances the other files test: which specs it holds (harness.hpp says how).
#include <doctest/doctest.h>

#include "tests/vulkan/kernels/harness.hpp"

TEST_SUITE("kernels") {

TEST_CASE_FIXTURE(VulkanTest, "the grid holds the shipped specs the runtime supports and the tiny ones") {
  if (!whole_grid()) {
    MESSAGE("LATHE_KERNEL_SPECS narrows the grid: its completeness is not checked");
    return;
  }
  std::set<std::string> names;
  for (const Model& m : models()) names.insert(m.spec.name);
  for (const char* expected : {"smollm2-135m", "gpt2", "qwen2.5-0.5b", "tinyllama-1.1b", "llama-3-8b", "llama-3.2-1b",
                               "qwen3-0.6b", "tiny-llama3-rope", "tiny-yarn-rope", "tiny-qwen3", "tiny-qk-norm-whole",
                               "tiny-gpt2", "mistral-7b-v0.1", "tiny-llama-swa", "tiny-llama-swa-alternating",
                               "tiny-llama-gqa", "tiny-qwen2-mqa", "tiny-fused-interleaved", "tiny-llama-gqa-gguf",
                               "tiny-llama-q8", "tiny-gpt2-gguf", "gemma-2-2b", "olmo-2-1b", "phi-3-mini-4k", "gemma-3-1b",
                               "tiny-gemma2", "tiny-gemma3", "tiny-olmo2", "tiny-phi3", "tiny-neox", "tiny-phi2",
                               "tiny-gptj", "tiny-bloom", "tiny-falcon", "tiny-post-norm", "tiny-mixtral", "tiny-mpt",
                               "tiny-moe-dense-layers", "tiny-deepseek-moe", "tiny-deepseek-mla", "tiny-deepseek-mla-lite", "mixtral-8x7b", "tiny-bert", "tiny-rope-encoder", "tiny-t5", "tiny-bart"}) {
    CAPTURE(expected);
    CHECK(names.count(expected) == 1);
  }
  std::string list;
  for (const std::string& n : names) list += " " + n;
  MESSAGE(names.size() << " specs:" << list);
}

}  // TEST_SUITE("kernels")
