// Writes the fuzz targets' seeds that are derived, not shipped: the GGUF and
// safetensors files the unit tests write (every metadata kind, every dtype,
// a byte-level BPE and the demo's SentencePiece vocabulary as GGUF
// metadata), the config.json of every shipped spec and tiny vision spec
// (the exporter the round-trip test uses) and byte-level BPE tokenizer.json
// files of the GPT-2 and Llama 3 kinds, and each schema of the JSON Schema
// acceptance table. scripts/fuzz adds the repository's own test inputs
// beside them.
//
//   lathe_fuzz_seeds OUT   writes OUT/gguf, OUT/safetensors, OUT/hf_config, OUT/tokenizer, OUT/json_schema
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "generator/import/hf_export.hpp"
#include "generator/spec/parse.hpp"
#include "runtime/error.hpp"
#include "runtime/text/tokenize/byte_level.hpp"
#include "runtime/text/tokenize/pipeline.hpp"
#include "runtime/text/tokenize/vocab_export.hpp"
#include "runtime/weights/gguf.hpp"
#include "runtime/weights/safetensors.hpp"

namespace fs = std::filesystem;
using namespace lathe;
using namespace lathe::weights;
using json = nlohmann::json;

namespace {

const fs::path kSource = LATHE_SOURCE_DIR;

std::vector<std::byte> bytes_of(size_t n, uint8_t seed) {
  std::vector<std::byte> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>((seed + 37 * i) & 0xff);
  return b;
}

std::vector<std::byte> values(DType dtype, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 7) - 3.0f;
  return encode_values(dtype, v);
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// A small byte-level BPE: the 256 byte characters and a few merges, two
// special tokens (tokenizer_test.cpp's vocabulary, shortened).
const std::vector<std::pair<std::string, std::string>> kMerges = {
    {"Ġ", "t"},    {"h", "e"}, {"Ġt", "he"}, {"l", "l"},   {"e", "ll"}, {"H", "ell"},
    {"Hell", "o"}, {"Ġ", "w"}, {"o", "r"},   {"Ġw", "or"}, {"1", "2"},  {"12", "3"},
};

std::vector<std::string> bpe_vocab() {
  std::vector<std::string> v;
  for (unsigned b = 0; b < 256; ++b) v.push_back(text::byte_level_char(static_cast<uint8_t>(b)));
  for (const auto& [l, r] : kMerges) v.push_back(l + r);
  v.push_back("<|endoftext|>");
  v.push_back("<|begin_of_text|>");
  return v;
}

void gguf_seeds(const fs::path& dir) {
  GgufArray nested{GgufType::Array, {GgufArray{GgufType::U8, {uint8_t{1}, uint8_t{2}}}}};
  const std::map<std::string, GgufValue> every_kind = {
      {"general.architecture", std::string("llama")},
      {"llama.embedding_length", uint32_t{64}},
      {"llama.block_count", uint32_t{2}},
      {"llama.attention.head_count", uint32_t{4}},
      {"llama.attention.head_count_kv", uint32_t{2}},
      {"llama.feed_forward_length", uint32_t{128}},
      {"u8", uint8_t{200}},
      {"i8", int8_t{-100}},
      {"u16", uint16_t{60000}},
      {"i16", int16_t{-30000}},
      {"i32", int32_t{-2000000000}},
      {"f32", 1.5f},
      {"bool", true},
      {"u64", uint64_t{1} << 63},
      {"i64", int64_t{-5}},
      {"f64", 0.1},
      {"tokens", GgufValue::strings({"a", "", "<s>"})},
      {"scores", GgufArray{GgufType::F32, {0.5f, -1.0f}}},
      {"nested", nested},
      {"general.alignment", uint32_t{32}},
  };
  std::vector<GgufTensorToWrite> tensors;
  for (const DType dtype : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                            DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const int64_t cols = dtype_layout(dtype).elements > 32 ? 256 : 32;
    tensors.push_back({"blk.0." + std::to_string(static_cast<int>(dtype)) + ".weight",
                       dtype,
                       {2, cols},
                       values(dtype, static_cast<size_t>(2 * cols))});
  }
  write_gguf((dir / "every-kind.gguf").string(), every_kind, tensors);
  write_gguf((dir / "empty.gguf").string(), {}, {});
  write_gguf((dir / "one-tensor.gguf").string(), {{"general.architecture", std::string("llama")}},
             {{"token_embd.weight", DType::F32, {4, 2}, bytes_of(32, 1)}});

  // A byte-level BPE vocabulary with merges, special ids and a template.
  const std::vector<std::string> vocab = bpe_vocab();
  std::vector<std::string> merges;
  for (const auto& [l, r] : kMerges) merges.push_back(l + " " + r);
  GgufArray types{GgufType::I32, {}};
  for (const std::string& t : vocab) types.items.emplace_back(static_cast<int32_t>(t.starts_with("<|") ? 3 : 1));
  const int32_t n = static_cast<int32_t>(vocab.size());
  write_gguf((dir / "gpt2-vocab.gguf").string(),
             {{"tokenizer.ggml.model", std::string("gpt2")},
              {"tokenizer.ggml.pre", std::string("llama-bpe")},
              {"tokenizer.ggml.tokens", GgufValue::strings(vocab)},
              {"tokenizer.ggml.token_type", types},
              {"tokenizer.ggml.merges", GgufValue::strings(merges)},
              {"tokenizer.ggml.bos_token_id", static_cast<uint32_t>(n - 1)},
              {"tokenizer.ggml.eos_token_id", static_cast<uint32_t>(n - 2)},
              {"tokenizer.ggml.add_bos_token", true},
              {"tokenizer.chat_template", std::string("{{ bos_token }}{% for m in messages %}{{ m.content }}"
                                                      "{{ eos_token }}{% endfor %}")}},
             {});

  // The demo's SentencePiece tokenizer as lathe quantize writes it.
  const text::GgufVocabulary demo = text::gguf_vocabulary((kSource / "models/demo").string(), 2048);
  std::map<std::string, GgufValue> metadata = demo.metadata;
  metadata["general.architecture"] = std::string("llama");
  write_gguf((dir / "demo-vocab.gguf").string(), metadata,
             {{"output_norm.weight", DType::F32, {8}, values(DType::F32, 8)}});
}

void safetensors_seeds(const fs::path& dir) {
  write_safetensors((dir / "dtypes.safetensors").string(),
                    {{"model.embed_tokens.weight", DType::F16, {8, 4}, bytes_of(64, 1)},
                     {"model.layers.0.self_attn.q_proj.weight", DType::F32, {4, 4}, bytes_of(64, 2)},
                     {"model.norm.weight", DType::BF16, {4}, bytes_of(8, 3)}},
                    {{"format", "pt"}});
  write_safetensors((dir / "empty.safetensors").string(), {});
  write_safetensors((dir / "gpt2.safetensors").string(),
                    {{"transformer.h.0.attn.c_attn.weight", DType::F32, {2, 6}, bytes_of(48, 4)},
                     {"h.0.attn.bias", DType::F32, {1, 1, 2, 2}, bytes_of(16, 5)},
                     {"scalar", DType::F32, {}, bytes_of(4, 6)}});
}

// The config.json of every shipped spec and of the tiny vision specs (one
// of each multimodal family: llava, mistral3, gemma3, mllama).
void hf_config_seeds(const fs::path& dir) {
  for (const char* folder : {"models", "tests/specs/vision"}) {
    for (const fs::directory_entry& e : fs::directory_iterator(kSource / folder)) {
      if (e.path().extension() != ".toml") continue;
      spec::Diagnostics diag(e.path().string());
      const auto spec = spec::parse_spec_file(e.path().string(), diag);
      if (!spec) continue;
      try {
        write_text(dir / (e.path().stem().string() + ".json"), importer::hf_config_from_spec(*spec).dump(2));
      } catch (const Error&) {  // a spec no config expresses
      }
    }
  }
}

// tokenizer.json of the byte-level vocabulary, as GPT-2 and Llama 3 pre-tokenize.
void tokenizer_seeds(const fs::path& dir) {
  const std::vector<std::string> vocab = bpe_vocab();
  json v = json::object(), merges = json::array(), added = json::array();
  for (size_t i = 0; i < vocab.size(); ++i) {
    if (vocab[i].starts_with("<|")) {
      added.push_back({{"id", i},
                       {"content", vocab[i]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", true}});
    } else {
      v[vocab[i]] = i;
    }
  }
  for (const auto& [l, r] : kMerges) merges.push_back(l + " " + r);
  const json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  json gpt2 = {{"version", "1.0"},
               {"added_tokens", added},
               {"normalizer", nullptr},
               {"pre_tokenizer", byte_level},
               {"post_processor", byte_level},
               {"decoder", byte_level},
               {"model", {{"type", "BPE"}, {"byte_fallback", false}, {"vocab", v}, {"merges", merges}}}};
  write_text(dir / "gpt2-bpe.json", gpt2.dump(1));
  json llama3 = gpt2;
  json no_regex = byte_level;
  no_regex["use_regex"] = false;
  llama3["normalizer"] = {{"type", "NFC"}};
  llama3["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers", json::array({{{"type", "Split"},
                                      {"pattern", {{"Regex", std::string(text::kLlama3Pattern)}}},
                                      {"behavior", "Isolated"},
                                      {"invert", false}},
                                     no_regex})}};
  llama3["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", json::array({{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
      {"pair", json::array()},
      {"special_tokens",
       {{"<|begin_of_text|>",
         {{"id", "<|begin_of_text|>"}, {"ids", {vocab.size() - 1}}, {"tokens", {"<|begin_of_text|>"}}}}}}};
  llama3["model"]["ignore_merges"] = true;
  write_text(dir / "llama3-bpe.json", llama3.dump(1));
}

// Each schema of the JSON Schema acceptance table, a file each.
void json_schema_seeds(const fs::path& dir) {
  std::ifstream in(kSource / "tests/data/grammar/schema_cases.json");
  const auto cases = nlohmann::ordered_json::parse(in);
  for (size_t i = 0; i < cases.size(); ++i)
    write_text(dir / ("case-" + std::to_string(i) + ".json"), cases[i].at("schema").dump(1));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: lathe_fuzz_seeds OUT\n";
    return 2;
  }
  const fs::path out = argv[1];
  try {
    for (const char* d : {"gguf", "safetensors", "hf_config", "tokenizer", "json_schema"}) fs::create_directories(out / d);
    gguf_seeds(out / "gguf");
    safetensors_seeds(out / "safetensors");
    hf_config_seeds(out / "hf_config");
    tokenizer_seeds(out / "tokenizer");
    json_schema_seeds(out / "json_schema");
  } catch (const std::exception& e) {
    std::cerr << "lathe_fuzz_seeds: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
