// `lathe lint`: each rule fires on a spec that breaks it, at the key's line,
// and the shipped specs get exactly the advice pinned here (real models
// deviate from practice; lint says so and refuses nothing).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "generator/spec/lint.hpp"
#include "generator/spec/parse.hpp"

using namespace lathe::spec;

namespace {

// A small Llama within practice (1024 / 8 layers, GQA, SwiGLU 2.75 h, RoPE
// base 500000), with keys changed ("" drops one) and whole tables added
// (keys that are not dims.* or position.*: their value is the table's text).
std::string llama(const std::map<std::string, std::string>& changed = {}) {
  std::map<std::string, std::string> keys = {
      {"dims.hidden", "1024"}, {"dims.layers", "8"},   {"dims.heads", "8"},   {"dims.kv_heads", "2"},
      {"dims.intermediate", "2816"}, {"dims.vocab", "32000"}, {"dims.max_context", "4096"},
      {"position.theta", "500000.0"}};
  for (const auto& [k, v] : changed) keys[k] = v;
  std::string dims = "[dims]\n", position = "[position]\n", rest;
  for (const auto& [k, v] : keys) {
    if (v.empty()) continue;
    if (k.rfind("dims.", 0) == 0) dims += k.substr(5) + " = " + v + "\n";
    else if (k.rfind("position.", 0) == 0) position += k.substr(9) + " = " + v + "\n";
    else rest += v + "\n\n";
  }
  return "[model]\nname = \"lint\"\n\n" + dims + "\n" + position + "\n" + rest + "[weights]\npreset = \"hf-llama\"\n";
}

std::vector<Advice> lint_text(const std::string& text) {
  Diagnostics diagnostics("lint.toml");
  const auto spec = parse_spec_string(text, "lint.toml", diagnostics);
  REQUIRE_MESSAGE(spec, diagnostics.format());
  return lint(*spec);
}

std::vector<std::string> rules(const std::vector<Advice>& advice) {
  std::vector<std::string> out;
  for (const Advice& a : advice) out.push_back(a.rule);
  return out;
}

}  // namespace

TEST_CASE("lint: a spec within practice gets no advice, each rule fires on what breaks it, at its line") {
  CHECK(lint_text(llama()).empty());
  const auto only = [](const std::string& text, const std::string& rule) {
    const std::vector<Advice> advice = lint_text(text);
    CAPTURE(text);
    REQUIRE(rules(advice) == std::vector<std::string>{rule});
    CHECK(advice[0].loc.line > 0);
    return advice[0];
  };
  CHECK(only(llama({{"dims.layers", "16"}}), "width-depth").text.find("1024 / 16 = 64.0") != std::string::npos);
  CHECK(only(llama({{"dims.intermediate", "6144"}}), "ffn-ratio").text.find("6.00") != std::string::npos);
  CHECK(only(llama({{"dims.heads", "16"}, {"dims.kv_heads", "16"}, {"dims.head_dim", "80"}, {"dims.intermediate", "2816"}}),
             "head-dim").text.find("head_dim = 80") != std::string::npos);
  CHECK(only(llama({{"dims.vocab", "32001"}}), "vocab-multiple").text.find("the next is 32064") != std::string::npos);
  // 8 layers × 2 KV heads × 128 × 2 (K, V) × 2 bytes = 8 KiB a position: 131072 of them, 1 GiB.
  CHECK(only(llama({{"dims.max_context", "131072"}}), "kv-cache-size").text.find("1024.0 MiB") != std::string::npos);
  CHECK(only(llama({{"position.theta", "10000.0"}, {"dims.max_context", "32768"}}), "rope-base").text.find("32768") !=
        std::string::npos);
  // Scaled RoPE extends the span: no rope-base advice.
  CHECK(lint_text(llama({{"position.theta", "10000.0"}, {"dims.max_context", "32768"},
                         {"scaling", "[position.scaling]\nkind = \"linear\"\nfactor = 8.0"}}))
            .empty());
  CHECK(only(llama({{"position.kind", "\"alibi\""}, {"position.theta", ""}, {"dims.max_context", "1024"}}), "alibi-context")
            .text.find("1024") != std::string::npos);
  // A mixture of 8 experts, top-1, no shared expert (10 layers: inside both bands).
  const std::vector<Advice> moe =
      lint_text(llama({{"dims.layers", "10"}, {"moe", "[moe]\nexperts = 8\ntop_k = 1"}}));
  CHECK(rules(moe) == std::vector<std::string>{"moe-shared-expert", "moe-top1"});
  // Llama 3 8B's shape with a tied head: 7.5B parameters.
  CHECK(only(llama({{"dims.hidden", "4096"}, {"dims.layers", "32"}, {"dims.heads", "32"}, {"dims.kv_heads", "8"},
                    {"dims.intermediate", "14336"}, {"dims.vocab", "128256"}, {"tied", "[embedding]\ntied = true"}}),
             "tied-large")
            .text.find("7.5B") != std::string::npos);
  // A 256-wide model with a 256000-token vocabulary: nearly all embedding.
  CHECK(only(llama({{"dims.hidden", "256"}, {"dims.layers", "2"}, {"dims.heads", "2"}, {"dims.kv_heads", "2"},
                    {"dims.intermediate", "688"}, {"dims.vocab", "256000"}}),
             "embedding-share")
            .text.find("embedding and LM head hold") != std::string::npos);
  // The output: file:line:col, the text, the rule.
  const std::string text = format_advice("x.toml", lint_text(llama({{"dims.vocab", "32001"}})));
  CHECK(text.rfind("x.toml:", 0) == 0);
  CHECK(text.find(": warning: vocab = 32001") != std::string::npos);
  CHECK(text.find("[vocab-multiple]\n") != std::string::npos);
}

// Real models deviate from practice: lint says where, and nothing else.
TEST_CASE("lint: the shipped specs get the advice pinned here") {
  const std::map<std::string, std::vector<std::string>> expected = {
      {"all-minilm-l6-v2", {"width-depth", "embedding-share"}},  // an encoder: no LM head, so no vocab-multiple
      {"bert-base-uncased", {"width-depth"}},
      {"roberta-base", {"width-depth"}},
      {"xlm-roberta-base", {"width-depth", "embedding-share"}},  // a 250,002-row table
      {"bloom-560m", {"width-depth"}},
      {"t5-small-encoder", {"width-depth"}},
      {"t5-small", {"width-depth"}},
      {"flan-t5-small", {"width-depth"}},
      {"bart-base", {"vocab-multiple"}},  // 50265 rows
      {"modernbert-base", {"width-depth", "ffn-ratio"}},  // GeGLU at 1.5 × hidden
      {"demo", {"width-depth"}},
      {"gemma-2-2b", {"width-depth"}},
      {"gemma-3-1b", {"width-depth", "ffn-ratio"}},
      {"gpt2", {"width-depth", "vocab-multiple"}},
      {"llama-3-8b", {}},
      {"llama-2-7b-dynamic-ntk", {}},
      {"llava-1.5-7b", {}},  // Llama 2 7B's decoder; lint's rules are the decoder's
      {"llama-3.2-1b", {"kv-cache-size"}},  // 131072 positions of 16 layers' 8 KV heads
      {"mistral-7b-v0.1", {}},
      {"mixtral-8x7b", {"width-depth", "moe-shared-expert"}},
      {"olmo-2-1b", {}},
      {"phi-2", {"width-depth", "head-dim"}},  // head_dim 80
      {"phi-3-mini-4k", {"width-depth"}},
      {"pythia-160m", {"width-depth"}},
      {"qwen1.5-moe-a2.7b", {}},
      {"qwen2.5-0.5b", {"width-depth", "ffn-ratio"}},
      {"qwen3-0.6b", {"width-depth", "kv-cache-size"}},
      {"qwen3-30b-a3b", {"width-depth", "moe-shared-expert"}},
      {"smollm2-135m", {"width-depth"}},
      {"mamba-130m", {"vocab-multiple"}},
      {"mamba2-130m", {"vocab-multiple"}},  // 50,277 padded to a multiple of 16 only
      {"bamba-9b", {"rope-base"}},          // θ 10,000 over 262,144 positions
      {"deepseek-v2-lite", {"ffn-ratio"}},  // its one dense layer's 10,944 = 5.3 × hidden
      {"deepseek-v3", {}},
      {"tinyllama-1.1b", {"width-depth"}},
  };
  size_t seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(LATHE_SOURCE_DIR) / "models")) {
    if (entry.path().extension() != ".toml") continue;
    const std::string name = entry.path().stem().string();
    CAPTURE(name);
    Diagnostics diagnostics(entry.path().string());
    const auto spec = parse_spec_file(entry.path().string(), diagnostics);
    REQUIRE_MESSAGE(spec, diagnostics.format());
    const auto it = expected.find(name);
    REQUIRE_MESSAGE(it != expected.end(), "a shipped spec without its pinned advice");
    CHECK(rules(lint(*spec)) == it->second);
    ++seen;
  }
  CHECK(seen == expected.size());
}
