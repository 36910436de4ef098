// Checkpoints as users have them: one safetensors file, a sharded one with
// its index, a directory holding either; and the index's own errors.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/error.hpp"
#include "tests/harness/temp_files.hpp"
#include "runtime/weights/checkpoint.hpp"
#include "runtime/weights/dtype.hpp"
#include "runtime/weights/gguf.hpp"

using namespace lathe;
using namespace lathe::weights;
namespace fs = std::filesystem;

namespace {

constexpr ManifestEntry kManifest[] = {
    {Role::Embed, false, -1, -1, "embed", 2, {4, 2}, DType::F32},
    {Role::Q, false, 0, -1, "q", 2, {2, 2}, DType::F32},
    {Role::FinalNorm, false, -1, -1, "norm", 1, {2, 1}, DType::F32},
};

TensorToWrite tensor(const std::string& name, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return {name, DType::F32, shape, std::vector<std::byte>(static_cast<size_t>(n) * 4, std::byte{1})};
}

struct Dir : test::TempDir {
  Dir() : test::TempDir("lathe-checkpoint-test") {}
  void write(const std::string& name, const std::string& text) const { test::write_file(file(name), text); }
};

// Shards a (embed, q) and b (norm), with the index naming them.
void write_sharded(const Dir& d) {
  write_safetensors(d.file("model-00001-of-00002.safetensors"), {tensor("embed", {4, 2}), tensor("q", {2, 2})});
  write_safetensors(d.file("model-00002-of-00002.safetensors"), {tensor("norm", {2})});
  d.write("model.safetensors.index.json",
          R"({"metadata": {"total_size": 56}, "weight_map": {"embed": "model-00001-of-00002.safetensors",
             "q": "model-00001-of-00002.safetensors", "norm": "model-00002-of-00002.safetensors"}})");
}

std::string error_of(const std::string& path, std::span<const ManifestEntry> manifest = kManifest) {
  try {
    Checkpoint(path).require_matches(manifest);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_SUITE("checkpoint") {

TEST_CASE("a sharded checkpoint opens by its index or its directory and matches the manifest") {
  Dir d;
  write_sharded(d);
  for (const std::string& path : {d.file("model.safetensors.index.json"), d.dir.string()}) {
    CAPTURE(path);
    const Checkpoint c(path);
    CHECK(c.files().size() == 2);
    CHECK(c.tensors().size() == 3);
    CHECK(c.audit(kManifest).empty());
    REQUIRE(c.find("norm") != nullptr);
    CHECK(c.find("norm")->file->path() == d.file("model-00002-of-00002.safetensors"));
    CHECK(c.find("norm")->file->data(*c.find("norm")->info).size() == 8);
    CHECK(c.total_bytes() == 56);
  }
}

TEST_CASE("a directory with one safetensors file opens it, one with several and no index is refused") {
  Dir d;
  write_safetensors(d.file("weights.safetensors"), {tensor("embed", {4, 2}), tensor("q", {2, 2}), tensor("norm", {2})});
  CHECK(Checkpoint(d.dir.string()).audit(kManifest).empty());
  write_safetensors(d.file("other.safetensors"), {tensor("x", {1})});
  try {
    Checkpoint c(d.dir.string());
    FAIL("a directory of two unindexed files opened");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::NotFound);
    CHECK(std::string(e.what()).find("2 .safetensors files without an index") != std::string::npos);
  }
}

TEST_CASE("index problems and manifest problems are listed together, naming files and tensors") {
  Dir d;
  write_sharded(d);
  // norm is also in shard 1, and the index places q in shard 2, which lacks it.
  write_safetensors(d.file("model-00001-of-00002.safetensors"),
                    {tensor("embed", {4, 2}), tensor("q", {2, 2}), tensor("norm", {2})});
  d.write("model.safetensors.index.json",
          R"({"weight_map": {"embed": "model-00001-of-00002.safetensors", "q": "model-00002-of-00002.safetensors",
             "norm": "model-00002-of-00002.safetensors"}})");
  const std::string message = error_of(d.file("model.safetensors.index.json"));
  CHECK(message.find("2 problems:") != std::string::npos);
  CHECK(message.find("q: the index places it in " + d.file("model-00002-of-00002.safetensors") +
                     ", which does not hold it") != std::string::npos);
  CHECK(message.find("norm: held by both") != std::string::npos);
}

TEST_CASE("a malformed or hostile index is a BadFile error naming the index") {
  Dir d;
  write_sharded(d);
  const std::string index = d.file("model.safetensors.index.json");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{not json", "not valid JSON"},
      {R"({"metadata": {}})", "no \"weight_map\""},
      {R"({"weight_map": {}})", "the weight_map is empty"},
      {R"({"weight_map": {"q": 7}})", "weight_map[\"q\"] is not a file name"},
      {R"({"weight_map": {"q": "../model-00002-of-00002.safetensors"}})", "is not a file name beside the index"},
      {R"({"weight_map": {"q": "/etc/passwd"}})", "is not a file name beside the index"},
  };
  for (const auto& [text, expected] : cases) {
    CAPTURE(text);
    d.write("model.safetensors.index.json", text);
    try {
      Checkpoint c(index);
      FAIL("a malformed index opened");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::BadFile);
      CHECK(std::string(e.what()).find(index + ": ") == 0);
      CHECK(std::string(e.what()).find(expected) != std::string::npos);
    }
  }
  // A shard the index names but the directory lacks.
  d.write("model.safetensors.index.json", R"({"weight_map": {"q": "model-00009-of-00009.safetensors"}})");
  try {
    Checkpoint c(index);
    FAIL("an index naming a missing shard opened");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::NotFound);
    CHECK(std::string(e.what()).find("model-00009-of-00009.safetensors") != std::string::npos);
  }
}

TEST_CASE("a GGUF file opens as a checkpoint, by path or directory, audited like any other") {
  Dir d;
  auto gguf_tensor = [](const std::string& name, std::vector<int64_t> shape, DType dtype) {
    int64_t n = 1;
    for (int64_t v : shape) n *= v;
    const std::vector<float> values(static_cast<size_t>(n), 0.5f);
    GgufTensorToWrite t{name, dtype, shape, {}};
    if (dtype == DType::Q8_0) {
      t.data = quantize_q8_0(values);
    } else {
      t.data.resize(static_cast<size_t>(n) * dtype_size(dtype));
      convert(DType::F32, std::as_bytes(std::span(values)), dtype, t.data);
    }
    return t;
  };
  write_gguf(d.file("model.gguf"), {{"general.architecture", GgufValue(std::string("llama"))}},
             {gguf_tensor("embed", {4, 2}, DType::F32), gguf_tensor("q", {2, 2}, DType::F32),
              gguf_tensor("norm", {2}, DType::F32)});
  for (const std::string& path : {d.file("model.gguf"), d.dir.string()}) {
    CAPTURE(path);
    const Checkpoint c(path);
    CHECK(c.audit(kManifest).empty());
    CHECK(c.find("q")->info->shape == std::vector<int64_t>{2, 2});
  }
  // A quantized tensor where the manifest wants f32 is named, with both dtypes.
  write_gguf(d.file("model.gguf"), {},
             {gguf_tensor("embed", {4, 32}, DType::Q8_0), gguf_tensor("q", {2, 2}, DType::F32),
              gguf_tensor("norm", {2}, DType::F32)});
  const std::string message = error_of(d.file("model.gguf"));
  CHECK(message.find("embed: shape [4, 2] expected, [4, 32] found") != std::string::npos);
  CHECK(message.find("embed: dtype f32 expected, q8_0 found") != std::string::npos);

  // llama.cpp's names where the build expects others: one line that says so.
  write_gguf(d.file("model.gguf"), {},
             {gguf_tensor("token_embd.weight", {4, 2}, DType::F32), gguf_tensor("blk.0.attn_q.weight", {2, 2}, DType::F32),
              gguf_tensor("output_norm.weight", {2}, DType::F32)});
  const std::string names = error_of(d.file("model.gguf"));
  CHECK(names.find("this file names its tensors as llama.cpp does (token_embd.weight, …)") != std::string::npos);
  CHECK(names.find("`lathe run " + d.file("model.gguf") + "` runs it as it is") != std::string::npos);
  CHECK(names.find('\n') == std::string::npos);
}

// GPT2LMHeadModel.save_pretrained writes "transformer.h.0…" where the hub's
// original GPT-2 upload (and the hf-gpt2 preset) has "h.0…"; a LlamaModel
// saved without its LM head class lacks "model.", a wrapped one doubles it.
// One spec must load them all: the names are matched through the one
// prefix that fits, and the audit names it.
TEST_CASE("a checkpoint whose names carry one prefix more or less than the manifest's matches, the prefix named") {
  constexpr ManifestEntry gpt2[] = {
      {Role::Embed, false, -1, -1, "wte.weight", 2, {4, 2}, DType::F32},
      {Role::Qkv, false, 0, -1, "h.0.attn.c_attn.weight", 2, {2, 6}, DType::F32},
      {Role::FinalNorm, false, -1, -1, "ln_f.weight", 1, {2, 1}, DType::F32},
  };
  const std::vector<std::string> ignore = {"h.{layer}.attn.bias"};
  Dir d;
  const auto write = [&](const std::string& prefix) {
    write_safetensors(d.file("model.safetensors"),
                      {tensor(prefix + "h.0.attn.bias", {1, 1}), tensor(prefix + "h.0.attn.c_attn.weight", {2, 6}),
                       tensor(prefix + "ln_f.weight", {2}), tensor(prefix + "wte.weight", {4, 2})});
  };
  write("");
  Checkpoint bare(d.file("model.safetensors"));
  CHECK(bare.match_names(gpt2) == "");
  CHECK(bare.audit(gpt2, ignore).empty());

  write("transformer.");
  Checkpoint prefixed(d.file("model.safetensors"));
  // Without the matching, every name is missing and every tensor unexpected.
  CHECK(prefixed.audit(gpt2, ignore).size() == 7);
  CHECK(prefixed.match_names(gpt2) == "tensor names carry the prefix \"transformer.\": matched without it");
  CHECK(prefixed.audit(gpt2, ignore).empty());
  REQUIRE(prefixed.find("wte.weight") != nullptr);
  CHECK(prefixed.find("wte.weight")->info->name == "transformer.wte.weight");
  CHECK(prefixed.find("transformer.wte.weight") == nullptr);

  // A wrong shape is still named, after the line that says how names matched.
  write_safetensors(d.file("model.safetensors"), {tensor("transformer.h.0.attn.c_attn.weight", {2, 6}),
                                                  tensor("transformer.ln_f.weight", {3}),
                                                  tensor("transformer.wte.weight", {4, 2})});
  Checkpoint misshapen(d.file("model.safetensors"));
  misshapen.match_names(gpt2);
  const std::vector<std::string> problems = misshapen.audit(gpt2, ignore);
  REQUIRE(problems.size() == 2);
  CHECK(problems[0] == "tensor names carry the prefix \"transformer.\": matched without it");
  CHECK(problems[1] == "ln_f.weight: shape [2] expected, [3] found");

  constexpr ManifestEntry llama[] = {
      {Role::Embed, false, -1, -1, "model.embed_tokens.weight", 2, {4, 2}, DType::F32},
      {Role::Q, false, 0, -1, "model.layers.0.self_attn.q_proj.weight", 2, {2, 2}, DType::F32},
      {Role::FinalNorm, false, -1, -1, "model.norm.weight", 1, {2, 1}, DType::F32},
      {Role::LmHead, false, -1, -1, "lm_head.weight", 2, {4, 2}, DType::F32},
  };
  const auto write_llama = [&](const std::string& prefix) {
    write_safetensors(d.file("model.safetensors"),
                      {tensor("lm_head.weight", {4, 2}), tensor(prefix + "embed_tokens.weight", {4, 2}),
                       tensor(prefix + "layers.0.self_attn.q_proj.weight", {2, 2}), tensor(prefix + "norm.weight", {2})});
  };
  write_llama("");
  Checkpoint lacking(d.file("model.safetensors"));
  CHECK(lacking.match_names(llama) == "tensor names lack the prefix \"model.\": matched with it");
  CHECK(lacking.audit(llama).empty());
  write_llama("model.model.");
  Checkpoint doubled(d.file("model.safetensors"));
  CHECK(doubled.match_names(llama) == "tensor names carry the prefix \"model.\": matched without it");
  CHECK(doubled.audit(llama).empty());
  CHECK(doubled.find("model.norm.weight")->info->name == "model.model.norm.weight");

  // Names no prefix explains stay as they are.
  Checkpoint other(d.dir.string());
  CHECK(other.match_names(gpt2) == "");
  CHECK(other.audit(gpt2).size() == 7);
}

// A checkpoint of another model: the first line says what the file is
// (from a config.json beside it, else its tensors) and how to get a spec
// that fits, before the list of every missing tensor.
TEST_CASE("a checkpoint of another model is described in one line: its names, hidden size and layer count") {
  Dir d;
  std::vector<TensorToWrite> tensors = {tensor("model.embed_tokens.weight", {10, 8}), tensor("model.norm.weight", {8})};
  for (int layer = 0; layer < 3; ++layer)
    tensors.push_back(tensor("model.layers." + std::to_string(layer) + ".mlp.down_proj.weight", {8, 4}));
  write_safetensors(d.file("model.safetensors"), tensors);
  const Checkpoint c(d.file("model.safetensors"));
  CHECK(c.shape().hidden == 8);
  CHECK(c.shape().layers == 3);
  CHECK(c.misfit("demo", 8, 3) == "");
  CHECK(c.misfit("demo", 256, 6) ==
        "not a checkpoint of demo (hidden 256, 6 layers): its tensors are named like model.layers.N.mlp.down_proj.weight, "
        "hidden 8, 3 layers; `lathe import` of its config.json writes a spec that fits it");
  d.write("config.json", R"({"model_type": "qwen2", "hidden_size": 896, "num_hidden_layers": 24})");
  CHECK(Checkpoint(d.dir.string()).misfit("demo", 256, 6) ==
        "not a checkpoint of demo (hidden 256, 6 layers): its config.json says qwen2, hidden 896, 24 layers; `lathe "
        "import " + d.dir.string() + "` writes a spec that fits it");
}

// Latent attention's norm and a Mamba layer's A_log and D: a checkpoint
// without them is refused naming each (the audit of every manifest entry).
TEST_CASE("a checkpoint missing the latent norm or a Mamba layer's A_log and D is refused naming them") {
  Dir d;
  write_safetensors(d.file("model.safetensors"),
                    {tensor("model.layers.0.self_attn.kv_a_proj_with_mqa.weight", {40, 8}),
                     tensor("backbone.layers.0.mixer.in_proj.weight", {8, 4})});
  constexpr ManifestEntry manifest[] = {
      {Role::KvA, false, 0, -1, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight", 2, {40, 8}, DType::F32},
      {Role::KvANorm, false, 0, -1, "model.layers.0.self_attn.kv_a_layernorm.weight", 1, {32, 1}, DType::F32},
      {Role::SsmIn, false, 0, -1, "backbone.layers.0.mixer.in_proj.weight", 2, {8, 4}, DType::F32},
      {Role::SsmA, false, 0, -1, "backbone.layers.0.mixer.A_log", 2, {4, 16}, DType::F32},
      {Role::SsmD, false, 0, -1, "backbone.layers.0.mixer.D", 1, {4, 1}, DType::F32},
  };
  CHECK(error_of(d.file("model.safetensors"), manifest) ==
        d.file("model.safetensors") + ": 3 problems:\n  model.layers.0.self_attn.kv_a_layernorm.weight: missing\n"
                                      "  backbone.layers.0.mixer.A_log: missing\n  backbone.layers.0.mixer.D: missing");
}

}  // TEST_SUITE
