// `lathe audit`: tiny checkpoints made from the tiny specs with random
// weights (a Hugging Face directory: config.json, safetensors, a
// BPE tokenizer, tokenizer_config.json with a chat template,
// generation_config.json; and a GGUF file with its vocabulary) audit clean,
// and each made wrong in one way fails exactly the check that names the
// fault, with its numbers.
#include <doctest/doctest.h>

#include <set>

#include "core/manifest.hpp"
#include "generator/import/audit.hpp"
#include "generator/import/gguf_import.hpp"
#include "generator/import/hf_export.hpp"
#include "generator/spec/parse.hpp"
#include "runtime/weights/gguf.hpp"
#include "runtime/weights/safetensors.hpp"
#include "tests/harness/temp_files.hpp"

using namespace lathe;
using importer::AuditResult;
using importer::AuditStatus;
using json = nlohmann::json;

namespace {

spec::Spec tiny(const std::string& name) {
  const std::string path = std::string(LATHE_SOURCE_DIR) + "/tests/specs/tiny/" + name + ".toml";
  spec::Diagnostics diag(path);
  auto s = spec::parse_spec_file(path, diag);
  REQUIRE_MESSAGE(s, diag.format());
  return *s;
}

// Values uniform in [-0.05, 0.05) (norm scales 1 + that), deterministic.
std::vector<float> random_values(const spec::TensorSpec& t, uint64_t& state) {
  std::vector<float> values(static_cast<size_t>(t.elements()));
  for (float& v : values) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;  // xorshift64
    v = (is_norm(t.role) && !t.bias ? 1.0f : 0.0f) + 0.05f * (static_cast<float>(state >> 40) / (1 << 23) - 1.0f);
  }
  return values;
}

constexpr const char* kTemplate =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

// A BPE tokenizer.json of `n` tokens: three special ones, then "t3", "t4",
// … (no merges, no byte-level step: enough to load, count and name ids).
json tokenizer_json(int64_t n) {
  json vocab = json::object();
  for (int64_t i = 3; i < n; ++i) vocab[std::string("t").append(std::to_string(i))] = i;  // (GCC 12 -Wrestrict misfires on "t" + s)
  json added = json::array();
  const char* specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  for (int64_t i = 0; i < 3; ++i)
    added.push_back({{"id", i}, {"content", specials[i]}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  return {{"version", "1.0"},   {"added_tokens", added}, {"normalizer", nullptr}, {"pre_tokenizer", nullptr},
          {"post_processor", nullptr}, {"decoder", nullptr},
          {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"vocab", vocab}, {"merges", json::array()}}}};
}

// A Hugging Face directory of a tiny spec, each file a value the test may
// change before write().
struct HfCheckpoint {
  test::TempDir dir{"lathe-audit"};
  spec::Spec spec;
  json config;
  std::vector<weights::TensorToWrite> tensors;
  int64_t tokens;
  json tokenizer_config, generation_config;
  bool sharded = false;  // two shards and model.safetensors.index.json
  json index_changes = json::object();  // weight_map entries written over the true ones

  explicit HfCheckpoint(spec::Spec s) : spec(std::move(s)), config(importer::hf_config_from_spec(spec)) {
    uint64_t state = 0x9E3779B97F4A7C15ull;
    for (const spec::TensorSpec& t : spec::build_manifest(spec).tensors)
      tensors.push_back({t.name, t.dtype, t.shape, weights::encode_values(t.dtype, random_values(t, state))});
    tokens = spec.dims.vocab;
    config["bos_token_id"] = 1;
    config["eos_token_id"] = 2;
    tokenizer_config = {{"bos_token", "<|im_start|>"}, {"eos_token", "<|im_end|>"}, {"chat_template", kTemplate}};
    generation_config = {{"bos_token_id", 1}, {"eos_token_id", 2}, {"max_length", spec.dims.max_context}};
  }

  weights::TensorToWrite* tensor(const std::string& name) {
    for (weights::TensorToWrite& t : tensors)
      if (t.name == name) return &t;
    FAIL("no tensor " << name);
    return nullptr;
  }
  void drop(const std::string& name) {
    tensor(name);
    std::erase_if(tensors, [&](const weights::TensorToWrite& t) { return t.name == name; });
  }

  AuditResult audit() {
    test::write_file(dir.file("config.json"), config.dump(2));
    if (sharded) {
      const auto half = tensors.begin() + static_cast<std::ptrdiff_t>(tensors.size() / 2);
      const std::string first = "model-00001-of-00002.safetensors", second = "model-00002-of-00002.safetensors";
      weights::write_safetensors(dir.file(first), {tensors.begin(), half});
      weights::write_safetensors(dir.file(second), {half, tensors.end()});
      json map = json::object();
      for (auto t = tensors.begin(); t != tensors.end(); ++t) map[t->name] = t < half ? first : second;
      map.update(index_changes);
      test::write_file(dir.file("model.safetensors.index.json"), json({{"metadata", json::object()}, {"weight_map", map}}).dump());
    } else {
      weights::write_safetensors(dir.file("model.safetensors"), tensors);
    }
    test::write_file(dir.file("tokenizer.json"), tokenizer_json(tokens).dump());
    test::write_file(dir.file("tokenizer_config.json"), tokenizer_config.dump(2));
    test::write_file(dir.file("generation_config.json"), generation_config.dump(2));
    return importer::audit_checkpoint(dir.dir.string());
  }
};

std::set<std::string> with_status(const AuditResult& r, AuditStatus status) {
  std::set<std::string> ids;
  for (const importer::AuditCheck& c : r.checks)
    if (c.status == status) ids.insert(c.id);
  return ids;
}

std::string message_of(const AuditResult& r, const std::string& id) {
  const importer::AuditCheck* c = r.find(id);
  REQUIRE_MESSAGE(c, "no check " << id << "\n" << importer::format_audit(r));
  return c->message;
}

// Exactly `id` errs, and its line holds `text`.
void expect_error(const AuditResult& r, const std::string& id, const std::string& text) {
  INFO(importer::format_audit(r));
  CHECK(with_status(r, AuditStatus::Error) == std::set<std::string>{id});
  CHECK(message_of(r, id).find(text) != std::string::npos);
}

// No check errs, exactly `id` warns, and its line holds `text`.
void expect_warning(const AuditResult& r, const std::string& id, const std::string& text) {
  INFO(importer::format_audit(r));
  CHECK(with_status(r, AuditStatus::Error).empty());
  CHECK(with_status(r, AuditStatus::Warning) == std::set<std::string>{id});
  CHECK(message_of(r, id).find(text) != std::string::npos);
}

void expect_clean(const AuditResult& r) {
  INFO(importer::format_audit(r));
  CHECK(with_status(r, AuditStatus::Error).empty());
  CHECK(with_status(r, AuditStatus::Warning).empty());
}

}  // namespace

TEST_CASE("audit: a good Hugging Face checkpoint audits clean, every check ok") {
  HfCheckpoint c(tiny("llama-gqa"));
  const AuditResult r = c.audit();
  expect_clean(r);
  CHECK(r.format == "Hugging Face directory");
  for (const char* id : {"files", "config", "attention", "norms", "mlp", "embedding", "lm_head", "unexpected", "tokenizer",
                         "vocab", "special_tokens", "chat_template", "rope", "context"})
    CHECK_MESSAGE(r.find(id), id);
  CHECK(message_of(r, "attention").find("hidden_size 64 = 4 heads × head_dim 16") != std::string::npos);
  CHECK(message_of(r, "attention").find("the KV cache on 2 KV heads × 16") != std::string::npos);
  // 2 layers × (K and V) × 2 KV heads × 16 × 2 bytes.
  CHECK(message_of(r, "attention").find("the build's f16 cache: 256 bytes a token") != std::string::npos);
  CHECK(message_of(r, "vocab").find("211 rows, one for each token of tokenizer.json") != std::string::npos);
  CHECK(message_of(r, "special_tokens").find("config.json eos_token_id 2 \"<|im_end|>\"") != std::string::npos);
  CHECK(message_of(r, "chat_template").find("renders a user/assistant conversation") != std::string::npos);
  // Not the check of a state-space or latent model, nor of experts.
  for (const char* id : {"latent", "moe", "ssm"}) CHECK_FALSE(r.find(id));

  const json j = importer::audit_json(r);
  CHECK(j["errors"] == 0);
  CHECK(j["checks"][0]["id"] == "files");
  CHECK(j["checks"][0]["status"] == "ok");
}

TEST_CASE("audit: a dropped tensor, a wrong shape and an extra tensor are named under their checks") {
  {
    HfCheckpoint c(tiny("llama-gqa"));
    c.drop("model.layers.1.mlp.down_proj.weight");
    expect_error(c.audit(), "mlp", "model.layers.1.mlp.down_proj.weight: missing");
  }
  {
    HfCheckpoint c(tiny("llama-gqa"));
    weights::TensorToWrite& k = *c.tensor("model.layers.0.self_attn.k_proj.weight");
    k.shape = {48, 64};
    k.data.resize(48 * 64 * 2);
    expect_error(c.audit(), "attention",
                 "model.layers.0.self_attn.k_proj.weight: shape [32, 64] expected, [48, 64] found (rows = kv_heads × "
                 "head_dim = 2 × 16)");
  }
  {
    HfCheckpoint c(tiny("llama-gqa"));
    c.drop("model.norm.weight");
    expect_error(c.audit(), "norms", "model.norm.weight: missing");
  }
  {
    HfCheckpoint c(tiny("llama-gqa"));
    c.tensors.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", DType::F32, {8}, std::vector<std::byte>(32)});
    expect_warning(c.audit(), "unexpected", "model.layers.0.self_attn.rotary_emb.inv_freq: unexpected tensor");
  }
}

TEST_CASE("audit: a sharded checkpoint audits clean, an index that misplaces a tensor errs") {
  HfCheckpoint c(tiny("llama-gqa"));
  c.sharded = true;
  const AuditResult r = c.audit();
  expect_clean(r);
  CHECK(message_of(r, "files").find("model.safetensors.index.json (2 files, 21 tensors: f16 21)") != std::string::npos);
  c.index_changes["lm_head.weight"] = "model-00001-of-00002.safetensors";
  expect_error(c.audit(), "lm_head",
               "lm_head.weight: the index places it in " + c.dir.file("model-00001-of-00002.safetensors") +
                   ", which does not hold it");
}

TEST_CASE("audit: heads that do not divide into KV heads fail the attention check with both numbers") {
  HfCheckpoint c(tiny("llama-gqa"));
  c.config["num_key_value_heads"] = 3;
  const AuditResult r = c.audit();
  expect_error(r, "attention", "num_attention_heads (4) is not a multiple of num_key_value_heads (3)");
  // The spec cannot be made: config says so (a warning: the error is attention's).
  CHECK(r.find("config")->status == AuditStatus::Warning);
}

TEST_CASE("audit: a hidden size heads do not divide, without head_dim, warns with the floored head_dim") {
  // transformers' Llama floors d / H_q: 5 heads of 12 over a width of 64.
  spec::Spec s = tiny("llama-gqa");
  s.dims.heads = s.dims.kv_heads = 5;
  s.dims.head_dim = 12;
  s.dims.head_dim_explicit = true;
  s.position.rotary_dim = 12;
  HfCheckpoint c(s);
  REQUIRE(c.config.contains("head_dim"));
  c.config.erase("head_dim");
  const AuditResult r = c.audit();
  expect_warning(r, "attention", "hidden_size (64) is not a multiple of num_attention_heads (5) and no head_dim is given: "
                                 "d_h is floored to 12, q/o map 64 to 60");
  CHECK(message_of(r, "attention").starts_with("hidden_size (64)"));  // the warning alone, not the ok line
}

TEST_CASE("audit: a declared tie with a separate head errs, an untied head identical to the embedding warns") {
  {
    HfCheckpoint c(tiny("llama-gqa"));
    c.config["tie_word_embeddings"] = true;
    expect_error(c.audit(), "lm_head", "tie_word_embeddings is true, but the checkpoint holds lm_head.weight [211, 64]");
  }
  {
    // The same with the head a copy of the embedding (Qwen3's checkpoints): ok.
    HfCheckpoint c(tiny("llama-gqa"));
    c.config["tie_word_embeddings"] = true;
    c.tensor("lm_head.weight")->data = c.tensor("model.embed_tokens.weight")->data;
    const AuditResult r = c.audit();
    expect_clean(r);
    CHECK(message_of(r, "lm_head").find("byte-identical copy of model.embed_tokens.weight") != std::string::npos);
  }
  {
    HfCheckpoint c(tiny("llama-gqa"));
    c.tensor("lm_head.weight")->data = c.tensor("model.embed_tokens.weight")->data;
    expect_warning(c.audit(), "lm_head",
                   "lm_head.weight is byte-identical to model.embed_tokens.weight: tied, the model would hold 13504 "
                   "parameters fewer");
  }
}

TEST_CASE("audit: a tokenizer larger than the embedding errs, a smaller one is padding") {
  {
    HfCheckpoint c(tiny("llama-gqa"));
    c.tokens = 250;
    expect_error(c.audit(), "vocab",
                 "tokenizer.json has 250 tokens, model.embed_tokens.weight only 211 rows: ids 211–249 have no embedding");
  }
  {
    HfCheckpoint c(tiny("llama-gqa"));
    c.tokens = 200;
    const AuditResult r = c.audit();
    expect_clean(r);
    CHECK(message_of(r, "vocab").find("211 rows for 200 tokens of tokenizer.json (11 rows of padding") != std::string::npos);
  }
}

TEST_CASE("audit: special ids outside the vocabulary or unknown to the tokenizer err") {
  {
    HfCheckpoint c(tiny("llama-gqa"));
    c.config["eos_token_id"] = 300;
    expect_error(c.audit(), "special_tokens", "config.json eos_token_id 300 is outside the vocabulary [0, 211)");
  }
  {
    HfCheckpoint c(tiny("llama-gqa"));
    c.generation_config["eos_token_id"] = json::array({2, 211});
    expect_error(c.audit(), "special_tokens", "generation_config.json eos_token_id 211 is outside the vocabulary [0, 211)");
  }
  {
    HfCheckpoint c(tiny("llama-gqa"));
    // The tokenizer's loader refuses it first (tokenizer_config.json names
    // its special tokens): the tokenizer check's error.
    c.tokenizer_config["eos_token"] = "</s>";
    expect_error(c.audit(), "tokenizer", "tokenizer_config.json: eos_token \"</s>\" is not a token of");
  }
  {
    // Inside the embedding, past the tokenizer: a padding row.
    HfCheckpoint c(tiny("llama-gqa"));
    c.tokens = 200;
    c.config["pad_token_id"] = 205;
    expect_error(c.audit(), "special_tokens", "config.json pad_token_id 205 is beyond the tokenizer's 200 tokens");
  }
}

TEST_CASE("audit: a chat template that does not render errs") {
  HfCheckpoint c(tiny("llama-gqa"));
  c.tokenizer_config["chat_template"] = "{% for m in messages %}{{ m.content | frobnicate }}{% endfor %}";
  expect_error(c.audit(), "chat_template", "does not render a user/assistant conversation");
}

TEST_CASE("audit: RoPE scaling without its factor, and a trained context past the maximum") {
  {
    HfCheckpoint c(tiny("llama-gqa"));
    c.config["rope_scaling"] = {{"rope_type", "linear"}};
    const AuditResult r = c.audit();
    expect_error(r, "rope", "rope_scaling.factor is missing; rope_type \"linear\" needs it");
  }
  {
    HfCheckpoint c(tiny("llama3-rope"));
    expect_clean(c.audit());
    c.config["rope_scaling"]["original_max_position_embeddings"] = 512;
    expect_warning(c.audit(), "rope",
                   "rope_scaling.original_max_position_embeddings (512) is not below max_position_embeddings (160)");
  }
  {
    HfCheckpoint c(tiny("llama-gqa"));
    c.generation_config["max_length"] = 4096;
    expect_warning(c.audit(), "context", "generation_config.json max_length 4096 is beyond max_position_embeddings 160");
  }
}

TEST_CASE("audit: a mixture of experts: clean, then a router of the wrong shape, then top-k above the expert count") {
  HfCheckpoint c(tiny("mixtral"));
  const AuditResult good = c.audit();
  expect_clean(good);
  CHECK(message_of(good, "moe").find("4 experts, top 2") != std::string::npos);
  {
    HfCheckpoint wrong(tiny("mixtral"));
    weights::TensorToWrite& router = *wrong.tensor("model.layers.1.block_sparse_moe.gate.weight");
    router.shape = {3, 64};
    router.data.resize(3 * 64 * 2);
    expect_error(wrong.audit(), "moe",
                 "model.layers.1.block_sparse_moe.gate.weight: shape [4, 64] expected, [3, 64] found (rows = experts 4)");
  }
  c.config["num_experts_per_tok"] = 5;
  expect_error(c.audit(), "moe", "num_experts_per_tok = 5 is larger than num_local_experts = 4");
}

TEST_CASE("audit: a routing field transformers defaults warns with the default") {
  HfCheckpoint c(tiny("qwen3-moe"));
  expect_clean(c.audit());
  REQUIRE(c.config.contains("norm_topk_prob"));
  c.config.erase("norm_topk_prob");
  expect_warning(c.audit(), "moe",
                 "norm_topk_prob is absent: transformers' default for qwen3_moe applies (false: top-k weights as scored)");
}

TEST_CASE("audit: latent attention without its latent norm, a Mamba without D, a hybrid without A_log") {
  {
    HfCheckpoint c(tiny("deepseek-mla-lite"));
    const AuditResult good = c.audit();
    expect_clean(good);
    CHECK(message_of(good, "latent").find("kv_a_layernorm") != std::string::npos);
    c.drop("model.layers.0.self_attn.kv_a_layernorm.weight");
    expect_error(c.audit(), "latent", "model.layers.0.self_attn.kv_a_layernorm.weight: missing");
  }
  {
    // Mamba's config states no context: the importer's default (8192) is the spec's.
    spec::Spec mamba = tiny("mamba");
    mamba.dims.max_context = mamba.position.table_size = 8192;
    HfCheckpoint c(mamba);
    expect_clean(c.audit());
    c.drop("backbone.layers.1.mixer.D");
    expect_error(c.audit(), "ssm", "backbone.layers.1.mixer.D: missing");
  }
  {
    HfCheckpoint c(tiny("bamba"));
    const AuditResult good = c.audit();
    expect_clean(good);
    CHECK(message_of(good, "ssm").find("A_log") != std::string::npos);
    std::string a_log;
    for (const weights::TensorToWrite& t : c.tensors)
      if (t.name.ends_with("A_log") && a_log.empty()) a_log = t.name;
    REQUIRE(!a_log.empty());
    c.drop(a_log);
    expect_error(c.audit(), "ssm", a_log + ": missing");
  }
}

TEST_CASE("audit: a GGUF file audits clean with its own vocabulary, an EOS id past it errs") {
  test::TempDir dir("lathe-audit-gguf");
  const spec::Spec twin = importer::gguf_twin(tiny("llama-gqa"));
  std::vector<weights::GgufTensorToWrite> tensors;
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (const spec::TensorSpec& t : spec::build_manifest(twin).tensors)
    tensors.push_back({t.name, t.dtype, t.shape, weights::encode_values(t.dtype, random_values(t, state))});
  std::map<std::string, weights::GgufValue> metadata = importer::gguf_metadata_from_spec(twin);
  // A SentencePiece-style vocabulary of the embedding's rows.
  std::vector<std::string> texts = {"<unk>", "<s>", "</s>"};
  weights::GgufArray scores{weights::GgufType::F32, {}}, types{weights::GgufType::I32, {}};
  while (texts.size() < static_cast<size_t>(twin.dims.vocab)) texts.push_back("\xE2\x96\x81t" + std::to_string(texts.size()));
  for (size_t i = 0; i < texts.size(); ++i) {
    scores.items.emplace_back(-static_cast<float>(i));
    types.items.emplace_back(int32_t{i == 0 ? 2 : i < 3 ? 3 : 1});
  }
  metadata["tokenizer.ggml.model"] = std::string("llama");
  metadata["tokenizer.ggml.tokens"] = weights::GgufValue::strings(texts);
  metadata["tokenizer.ggml.scores"] = scores;
  metadata["tokenizer.ggml.token_type"] = types;
  metadata["tokenizer.ggml.bos_token_id"] = uint32_t{1};
  metadata["tokenizer.ggml.eos_token_id"] = uint32_t{2};
  metadata["tokenizer.chat_template"] = std::string("{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}");
  const std::string path = dir.file("tiny.gguf");
  weights::write_gguf(path, metadata, tensors);
  const AuditResult good = importer::audit_checkpoint(path);
  expect_clean(good);
  CHECK(good.format == "GGUF file");
  CHECK(message_of(good, "config").find("general.architecture \"llama\"") != std::string::npos);
  CHECK(message_of(good, "special_tokens").find("tokenizer.ggml.eos_token_id 2 \"</s>\"") != std::string::npos);
  // The directory holding it audits the same.
  CHECK(importer::audit_checkpoint(dir.dir.string()).count(AuditStatus::Ok) == good.count(AuditStatus::Ok));

  // Heads that do not divide: the importer's words, under attention, on one line.
  std::map<std::string, weights::GgufValue> heads = metadata;
  heads["llama.attention.head_count_kv"] = uint32_t{3};
  weights::write_gguf(path, heads, tensors);
  const AuditResult bad_heads = importer::audit_checkpoint(path);
  {
    INFO(importer::format_audit(bad_heads));
    CHECK(with_status(bad_heads, AuditStatus::Error) == std::set<std::string>{"attention"});
    CHECK(message_of(bad_heads, "attention").find("llama.attention.head_count_kv") != std::string::npos);
    CHECK(message_of(bad_heads, "attention").find('\n') == std::string::npos);
  }

  metadata["tokenizer.ggml.eos_token_id"] = uint32_t{400};
  weights::write_gguf(path, metadata, tensors);
  const AuditResult bad = importer::audit_checkpoint(path);
  INFO(importer::format_audit(bad));
  // The vocabulary and the template's tokens refuse to load, and the id is
  // named against the embedding.
  CHECK(with_status(bad, AuditStatus::Error) == std::set<std::string>{"tokenizer", "special_tokens", "chat_template"});
  CHECK(message_of(bad, "special_tokens").find("tokenizer.ggml.eos_token_id 400 is outside the vocabulary [0, 211)") !=
        std::string::npos);
}

TEST_CASE("audit: a path that cannot be read is an error naming it, never a crash") {
  test::TempDir dir("lathe-audit-bad");
  const AuditResult missing = importer::audit_checkpoint(dir.file("nowhere"));
  CHECK(with_status(missing, AuditStatus::Error) == std::set<std::string>{"files"});
  CHECK(message_of(missing, "files").find(dir.file("nowhere") + ": no such file or directory") != std::string::npos);

  const AuditResult empty = importer::audit_checkpoint(dir.dir.string());
  CHECK(message_of(empty, "files").find("neither config.json nor a .gguf file") != std::string::npos);

  test::write_file(dir.file("garbage.gguf"), "not a gguf file at all");
  const AuditResult garbage = importer::audit_checkpoint(dir.file("garbage.gguf"));
  CHECK(with_status(garbage, AuditStatus::Error) == std::set<std::string>{"files"});

  // An unsupported model type is config's error, though the list of the
  // supported ones names mamba.
  test::write_file(dir.file("config.json"), R"({"model_type": "xlnet", "d_model": 64})");
  const AuditResult xlnet = importer::audit_checkpoint(dir.dir.string());
  CHECK(with_status(xlnet, AuditStatus::Error) == std::set<std::string>{"files", "config"});
  CHECK(message_of(xlnet, "config").find("model_type \"xlnet\" is not supported") != std::string::npos);

  test::write_file(dir.file("config.json"), "{ not json");
  const AuditResult bad_json = importer::audit_checkpoint(dir.dir.string());
  CHECK(with_status(bad_json, AuditStatus::Error).count("config"));
  CHECK(message_of(bad_json, "config").find("not valid JSON") != std::string::npos);
}
