// Specs from GGUF metadata (llama.cpp's conventions) and back: every shipped
// spec that llama.cpp can express round-trips through the metadata and
// tensor list of its GGUF twin (llama3 RoPE scaling through the factors of
// rope_freqs.weight); what it cannot express is an error naming the key or
// tensor.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numbers>

#include "generator/import/gguf_import.hpp"
#include "generator/spec/compare.hpp"
#include "core/manifest.hpp"
#include "generator/spec/parse.hpp"
#include "runtime/weights/dtype.hpp"
#include "tests/harness/temp_files.hpp"

using namespace lathe;
using importer::gguf_metadata_from_spec;
using importer::gguf_twin;
using importer::import_gguf_metadata;

namespace {

spec::Spec parse_file(const std::filesystem::path& path) {
  spec::Diagnostics diag(path.string());
  auto s = spec::parse_spec_file(path.string(), diag);
  REQUIRE_MESSAGE(s, diag.format());
  return *s;
}

spec::Spec parse_text(const std::string& text) {
  spec::Diagnostics diag("imported.toml");
  auto s = spec::parse_spec_string(text, "imported.toml", diag);
  REQUIRE_MESSAGE(s, diag.format() << text);
  return *s;
}

using Metadata = std::map<std::string, weights::GgufValue, std::less<>>;

importer::ImportOptions file_named(const std::string& file) {
  importer::ImportOptions o;
  o.file = file;
  return o;
}

Metadata metadata_of(const spec::Spec& s) {
  const auto m = gguf_metadata_from_spec(s);
  return Metadata(m.begin(), m.end());
}

bool llama3(const spec::Spec& s) {
  return s.position.kind == spec::PositionKind::Rope && s.position.scaling.kind == spec::RopeScaling::Llama3;
}

// rope_freqs.weight as llama.cpp's converter computes it (conversion/llama.py,
// LlamaModel.generate_extra_tensors), written out here on its own: f32
// inverse frequencies of head_dim, and per pair 1, factor, or the blend.
std::vector<float> converter_rope_freqs(const spec::RopeScalingParams& sc, double theta, int64_t dim) {
  const double low_wavelen = static_cast<double>(sc.original_max_context) / sc.low_freq_factor;
  const double high_wavelen = static_cast<double>(sc.original_max_context) / sc.high_freq_factor;
  std::vector<float> out;
  for (int64_t i = 0; i < dim; i += 2) {
    const float freq = 1.0f / std::pow(static_cast<float>(theta), static_cast<float>(i) / static_cast<float>(dim));
    const float wavelen = 2.0f * std::numbers::pi_v<float> / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(static_cast<float>(sc.factor));
    } else {
      const float smooth = (static_cast<float>(sc.original_max_context) / wavelen - static_cast<float>(sc.low_freq_factor)) /
                           static_cast<float>(sc.high_freq_factor - sc.low_freq_factor);
      out.push_back(1.0f / ((1.0f - smooth) / static_cast<float>(sc.factor) + smooth));
    }
  }
  return out;
}

// The values of a spec's GGUF rope_freqs.weight: none without llama3 scaling.
std::vector<float> rope_freqs_of(const spec::Spec& s) {
  return llama3(s) ? converter_rope_freqs(s.position.scaling, s.position.theta, s.dims.head_dim) : std::vector<float>{};
}

// The tensor list of a spec's GGUF file: its manifest (no data), and
// rope_freqs.weight under llama3 scaling.
std::vector<weights::TensorInfo> tensors_of(const spec::Spec& s) {
  std::vector<weights::TensorInfo> out;
  for (const spec::TensorSpec& t : spec::build_manifest(s).tensors) out.push_back({t.name, t.dtype, t.shape, 0, 0});
  if (llama3(s)) out.push_back({"rope_freqs.weight", DType::F32, {s.dims.head_dim / 2}, 0, 0});
  return out;
}

// The problems an import of (metadata, tensors) raises, one string.
std::string import_errors(const Metadata& m, const std::vector<weights::TensorInfo>& tensors,
                          std::span<const float> rope_freqs = {}) {
  try {
    import_gguf_metadata(m, tensors, file_named("x.gguf"), rope_freqs);
  } catch (const importer::ImportError& e) {
    return e.what();
  }
  FAIL("the import succeeded");
  return {};
}

spec::Spec tiny(const std::string& name) {
  return parse_file(std::filesystem::path(LATHE_SOURCE_DIR) / "tests/specs/tiny" / name);
}

spec::Spec encoder(const std::string& name) {
  return parse_file(std::filesystem::path(LATHE_SOURCE_DIR) / "tests/specs/encoder" / name);
}

// The differences of two specs, one a line.
std::string differences_of(const spec::Spec& a, const spec::Spec& b) {
  std::string all;
  for (const std::string& d : spec::spec_differences(a, b)) all += d + "\n";
  return all;
}

// A spec's GGUF twin, written as metadata and a tensor list and imported again.
spec::Spec through_gguf(const spec::Spec& s) {
  const spec::Spec twin = gguf_twin(s);
  return parse_text(import_gguf_metadata(metadata_of(twin), tensors_of(twin), file_named("e.gguf")).render());
}

// A nomic-embed-shaped encoder (llama.cpp's nomic-bert): BERT's post-norm
// LayerNorm blocks and embedding norm, RoPE, q | k | v fused, SwiGLU
// without biases, and no token-type table (the spec adds token types with
// learned positions only).
constexpr const char* kNomicText = R"(
[model]
name = "tiny-nomic"
stack = "encoder"
[dims]
hidden = 64
layers = 2
heads = 4
intermediate = 96
vocab = 101
max_context = 32
[norm]
kind = "layernorm"
eps = 1e-12
placement = "post"
final = false
[position]
kind = "rope"
theta = 1000.0
[mlp]
activation = "silu"
gated = true
[embedding]
norm = true
[pooling]
kind = "mean"
normalize = true
[weights]
dtype = "f16"
fused_qkv = true
preset = "hf-llama"
[weights.names]
embed_norm = "emb_ln"
)";

}  // namespace

TEST_CASE("every shipped spec llama.cpp can express round-trips through GGUF metadata") {
  int round_trips = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(LATHE_SOURCE_DIR) / "models")) {
    if (entry.path().extension() != ".toml") continue;
    CAPTURE(entry.path().filename().string());
    const spec::Spec original = parse_file(entry.path());
    spec::Spec twin;
    Metadata metadata;
    try {
      twin = gguf_twin(original);
      metadata = metadata_of(twin);
    } catch (const Error& e) {
      // Mixtral: llama.cpp stacks experts in a tensor a spec cannot name;
      // ModernBERT: an encoder of pre-norm blocks, none of llama.cpp's
      // bert, nomic-bert and t5encoder; RoBERTa, XLM-R: llama.cpp's
      // converter cuts their first position rows; BART: llama.cpp's one
      // encoder-decoder is t5; dynamic NTK RoPE: llama.cpp has none.
      MESSAGE(entry.path().filename().string() << ": " << std::string(e.what()));
      CHECK((original.moe.enabled() ||
             original.position.scaling.kind == spec::RopeScaling::DynamicNtk || (original.encoder() && original.position.offset > 0) ||
             (original.encoder_decoder() && original.position.kind != spec::PositionKind::Relative) ||
             (original.encoder() && original.norm.placement == spec::NormPlacement::Pre &&
              original.position.kind == spec::PositionKind::Rope)));
      continue;
    }
    // Llama 3.2's llama3 scaling comes back from the rope_freqs factors.
    const importer::TomlDoc doc =
        import_gguf_metadata(metadata, tensors_of(twin), file_named("model.gguf"), rope_freqs_of(twin));
    const spec::Spec imported = parse_text(doc.render());
    const std::vector<std::string> differences = spec::spec_differences(twin, imported);
    std::string all;
    for (const std::string& d : differences) all += d + "\n";
    CHECK_MESSAGE(differences.empty(), all << doc.render());
    CHECK(spec::build_manifest(imported).total_elements() == spec::build_manifest(original).total_elements());
    ++round_trips;
  }
  CHECK(round_trips >= 12);  // the decoders, BERT, all-MiniLM and T5's encoder among them
}

TEST_CASE("the GGUF twin of a Llama spec pairs RoPE interleaved and names tensors as llama.cpp does") {
  const spec::Spec twin = gguf_twin(tiny("llama-gqa.toml"));
  CHECK(twin.position.pairing == spec::RopePairing::Interleaved);
  // The hand-written twin the end-to-end test builds is the same model.
  std::string differences;
  for (const std::string& d : spec::spec_differences(twin, tiny("llama-gqa-gguf.toml"))) differences += d + "\n";
  CHECK_MESSAGE(differences.empty(), differences);
  const std::string text = import_gguf_metadata(metadata_of(twin), tensors_of(twin), file_named("t.gguf")).render();
  CHECK(text.find("pairing = \"interleaved\"") != std::string::npos);
  CHECK(text.find("kv_heads = 2") != std::string::npos);
  CHECK(text.find("tied = false") != std::string::npos);
  CHECK(text.find("dtype = \"f16\"") != std::string::npos);
  CHECK(text.find("preset = \"gguf\"") != std::string::npos);

  // A spec with neox pairing is not what llama.cpp writes under "llama".
  CHECK_THROWS_WITH_AS(gguf_metadata_from_spec(tiny("llama-gqa.toml")),
                       doctest::Contains("position.pairing: llama.cpp's Llama files pair RoPE dims interleaved"), Error);
}

// Each tiny model the end-to-end test hf_vs_gguf runs from both files: its
// hand-written GGUF twin is what gguf_twin derives, and the metadata of that
// twin imports back to it.
TEST_CASE("the hand-written GGUF twins of the tiny models are their GGUF twins, and import back") {
  for (const std::string name : {"llama-gqa", "gpt2", "gemma2", "gemma3", "olmo2", "qwen3", "phi3", "neox", "bloom",
                                 "phi2", "falcon", "mpt", "llama3-rope", "mamba", "mamba2", "deepseek-v3",
                                 "granite-hybrid"}) {
    CAPTURE(name);
    const spec::Spec twin = gguf_twin(tiny(name + ".toml"));
    const spec::Spec written = tiny(name + "-gguf.toml");
    std::string differences;
    for (const std::string& d : spec::spec_differences(twin, written)) differences += d + "\n";
    // llama.cpp's GPT-2 files hold a copy of the tied embedding as output.weight.
    if (name == "gpt2") CHECK(differences == "embedding.tied: true vs false\n");
    else CHECK_MESSAGE(differences.empty(), differences);
    const spec::Spec imported =
        parse_text(import_gguf_metadata(metadata_of(written), tensors_of(written), file_named("t.gguf"),
                                        rope_freqs_of(written))
                       .render());
    differences.clear();
    for (const std::string& d : spec::spec_differences(written, imported)) differences += d + "\n";
    CHECK_MESSAGE(differences.empty(), differences);
  }
}

// llama.cpp's deepseek2: what its converter writes of a DeepSeek-V3 (the
// keys, kv_b_proj split into attn_k_b and attn_v_b), an older file's whole
// attn_kv_b and heads-wide keys, and what the architecture cannot say.
TEST_CASE("deepseek2: latent attention and DeepSeek's routing in llama.cpp's keys, older files, refusals") {
  const spec::Spec v3 = tiny("deepseek-v3.toml");
  const spec::Spec twin = gguf_twin(v3);
  CHECK(twin.mla.split_kv_b);
  const Metadata m = metadata_of(twin);
  const auto u = [&](const std::string& key) { return std::get<uint32_t>(m.at("deepseek2." + key).value); };
  CHECK(u("attention.head_count_kv") == 1);
  CHECK(u("attention.key_length") == 32 + 8);  // the cached latent and rotary key
  CHECK(u("attention.key_length_mla") == 16 + 8);
  CHECK(u("attention.value_length_mla") == 12);
  CHECK(u("leading_dense_block_count") == 1);
  CHECK(u("expert_gating_func") == 2);  // sigmoid
  CHECK(u("expert_group_count") == 4);
  CHECK(std::get<float>(m.at("deepseek2.rope.scaling.yarn_log_multiplier").value) == doctest::Approx(0.0707));
  std::vector<std::string> names;
  for (const weights::TensorInfo& t : tensors_of(twin)) names.push_back(t.name);
  CHECK(std::count(names.begin(), names.end(), "blk.1.attn_k_b.weight") == 1);
  CHECK(std::count(names.begin(), names.end(), "blk.1.attn_kv_b.weight") == 0);

  // An older file: kv_b_proj whole, key and value lengths of the heads, as many KV heads.
  spec::Spec joint = twin;
  joint.mla.split_kv_b = false;
  Metadata older = m;
  older.erase("deepseek2.attention.key_length_mla");
  older.erase("deepseek2.attention.value_length_mla");
  older["deepseek2.attention.key_length"] = uint32_t{16 + 8};
  older["deepseek2.attention.value_length"] = uint32_t{12};
  older["deepseek2.attention.head_count_kv"] = uint32_t{6};
  const spec::Spec imported = parse_text(import_gguf_metadata(older, tensors_of(joint), file_named("old.gguf")).render());
  CHECK(differences_of(joint, imported).empty());
  CHECK_FALSE(imported.mla.split_kv_b);

  // What llama.cpp's deepseek2 cannot say.
  spec::Spec s = twin;
  s.position.scaling.mscale = 1.0;
  CHECK_THROWS_WITH_AS(gguf_metadata_from_spec(s), doctest::Contains("position.scaling.mscale: llama.cpp's deepseek2 leaves cos and sin unscaled"), Error);
  s = twin;
  s.moe.group_score = spec::GroupScore::Max;
  CHECK_THROWS_WITH_AS(gguf_metadata_from_spec(s), doctest::Contains("moe.group_score"), Error);
  s = twin;
  s.moe.shared_intermediate = 16;
  CHECK_THROWS_WITH_AS(gguf_metadata_from_spec(s), doctest::Contains("moe.shared_intermediate"), Error);
  s = twin;
  s.moe.dense_layers = {1};
  CHECK_THROWS_WITH_AS(gguf_metadata_from_spec(s), doctest::Contains("moe.dense_layers"), Error);
  s = twin;
  s.mla.split_kv_b = false;
  CHECK_THROWS_WITH_AS(gguf_metadata_from_spec(s), doctest::Contains("mla.split_kv_b"), Error);
  // DeepSeek-V2's own rule (a group by its best expert) is not llama.cpp's.
  CHECK_THROWS_WITH_AS(gguf_metadata_from_spec(gguf_twin(tiny("deepseek-mla.toml"))),
                       doctest::Contains("llama.cpp's deepseek2"), Error);
}

// llama.cpp's granitehybrid, as its converter writes a Bamba: the per-layer
// head_count_kv (0 for a Mamba-2 layer) gives the attention layers, the
// Mamba-2 layers are mamba2's, and RoPE turns adjacent pairs of the first
// rope.dimension_count dims of the permuted rows.
TEST_CASE("granitehybrid: Bamba's layers from the per-layer head_count_kv, the keys, the refusals") {
  const spec::Spec twin = gguf_twin(tiny("bamba.toml"));
  CHECK(twin.position.pairing == spec::RopePairing::Interleaved);
  CHECK_FALSE(twin.ssm.a_log);
  const Metadata m = metadata_of(twin);
  CHECK(std::get<std::string>(m.at("general.architecture").value) == "granitehybrid");
  const auto u = [&](const std::string& key) { return std::get<uint32_t>(m.at("granitehybrid." + key).value); };
  CHECK(u("attention.head_count") == 4);
  CHECK(u("feed_forward_length") == 64);
  CHECK(u("rope.dimension_count") == 4);
  CHECK(u("ssm.inner_size") == 64);
  CHECK(u("ssm.time_step_rank") == 4);  // Mamba-2's heads
  CHECK(u("ssm.group_count") == 1);
  CHECK(std::get<bool>(m.at("granitehybrid.rope.scaling.finetuned").value));
  const auto& kv = std::get<weights::GgufArray>(m.at("granitehybrid.attention.head_count_kv").value);
  CHECK(kv.item_type == weights::GgufType::I32);
  CHECK(kv.items == std::vector<weights::GgufValue>{int32_t{0}, int32_t{2}, int32_t{0}, int32_t{2}});

  const std::vector<weights::TensorInfo> tensors = tensors_of(twin);
  const std::string text = import_gguf_metadata(m, tensors, file_named("b.gguf")).render();
  const spec::Spec imported = parse_text(text);
  CHECK_MESSAGE(differences_of(twin, imported).empty(), differences_of(twin, imported) << text);
  CHECK(imported.ssm.attention_layers == std::vector<int64_t>{1, 3});
  CHECK(imported.dims.kv_heads == 2);
  CHECK(imported.position.rotary_dim == 4);
  int64_t elements = 0;
  for (const weights::TensorInfo& t : tensors) elements += t.shape.size() == 1 ? t.shape[0] : t.shape[0] * t.shape[1];
  CHECK(spec::build_manifest(imported).total_elements() == elements);
  CHECK(spec::build_manifest(imported).total_elements() == spec::build_manifest(tiny("bamba.toml")).total_elements());
  std::vector<std::string> names;
  for (const weights::TensorInfo& t : tensors) names.push_back(t.name);
  for (const char* name : {"blk.0.ssm_in.weight", "blk.0.ssm_dt.bias", "blk.0.attn_norm.weight", "blk.1.attn_q.weight",
                           "blk.1.attn_norm.weight", "blk.3.ffn_norm.weight", "output.weight"})
    CHECK_MESSAGE(std::count(names.begin(), names.end(), name) == 1, name);
  CHECK(std::count(names.begin(), names.end(), "blk.1.ssm_in.weight") == 0);

  // head_count_kv: one count per layer, one width for the attention layers.
  Metadata bad = m;
  bad["granitehybrid.attention.head_count_kv"] = weights::GgufArray{weights::GgufType::I32, {int32_t{0}, int32_t{2}, int32_t{0}}};
  CHECK(import_errors(bad, tensors).find("x.gguf: granitehybrid.attention.head_count_kv: 3 counts, but block_count is 4") !=
        std::string::npos);
  bad["granitehybrid.attention.head_count_kv"] = uint32_t{2};
  CHECK(import_errors(bad, tensors).find("granitehybrid.attention.head_count_kv: one count per layer expected "
                                         "(0 for a Mamba-2 layer), a u32 found") != std::string::npos);
  bad["granitehybrid.attention.head_count_kv"] =
      weights::GgufArray{weights::GgufType::I32, {int32_t{0}, int32_t{2}, int32_t{0}, int32_t{4}}};
  CHECK(import_errors(bad, tensors).find("granitehybrid.attention.head_count_kv[3]: 4 KV heads, but layer 1 has 2") !=
        std::string::npos);
  bad["granitehybrid.attention.head_count_kv"] =
      weights::GgufArray{weights::GgufType::I32, {int32_t{0}, int32_t{0}, int32_t{0}, int32_t{0}}};
  CHECK(import_errors(bad, tensors).find("every count 0: no attention layer") != std::string::npos);
  bad = m;
  bad["granitehybrid.residual_scale"] = 0.22f;
  CHECK(import_errors(bad, tensors).find("granitehybrid.residual_scale: Granite's multipliers are not read") !=
        std::string::npos);
  bad = m;
  bad["granitehybrid.rope.scaling.finetuned"] = false;
  CHECK(import_errors(bad, tensors).find("rope.scaling.finetuned = false") != std::string::npos);

  // What the architecture cannot say.
  spec::Spec s = twin;
  s.position.pairing = spec::RopePairing::Neox;
  CHECK_THROWS_WITH_AS(gguf_metadata_from_spec(s), doctest::Contains("position.pairing: llama.cpp's granitehybrid"), Error);
  s = twin;
  s.ssm.expand = 4;
  s.ssm.d_inner = 128;
  s.ssm.heads = 8;
  CHECK_THROWS_WITH_AS(gguf_metadata_from_spec(s), doctest::Contains("ssm.d_inner: llama.cpp's granitehybrid takes d_inner = 2 × hidden"), Error);
  s = twin;
  s.ssm.dt_max = 0.1;
  CHECK_THROWS_WITH_AS(gguf_metadata_from_spec(s), doctest::Contains("ssm.dt_min: llama.cpp's granitehybrid does not clamp dt"), Error);
}

TEST_CASE("Gemma's GGUF norm weights hold 1 + w: the imported spec has no unit offset") {
  const spec::Spec gemma = parse_file(std::filesystem::path(LATHE_SOURCE_DIR) / "models/gemma-2-2b.toml");
  REQUIRE(gemma.norm.unit_offset);
  const spec::Spec twin = gguf_twin(gemma);
  const std::string text = import_gguf_metadata(metadata_of(twin), tensors_of(twin), file_named("g.gguf")).render();
  const spec::Spec imported = parse_text(text);
  CHECK(!imported.norm.unit_offset);
  CHECK(imported.position.pairing == spec::RopePairing::Neox);
  CHECK(imported.embedding.scale == 48.0);  // sqrt(2304), the same in bf16
  CHECK(imported.attention.softcap == 50.0);
  CHECK(imported.output.softcap == 30.0);
  CHECK(text.find("llama.cpp stores the norm weights as 1 + w") != std::string::npos);
}

TEST_CASE("what a spec cannot say is an error naming the key or tensor, all at once") {
  const spec::Spec twin = gguf_twin(tiny("llama-gqa.toml"));
  const Metadata good = metadata_of(twin);
  const std::vector<weights::TensorInfo> tensors = tensors_of(twin);

  Metadata unknown = good;
  unknown["general.architecture"] = std::string("jamba");
  CHECK(import_errors(unknown, tensors).find("x.gguf: general.architecture \"jamba\" is not supported (supported: llama, "
                                             "qwen2") != std::string::npos);

  Metadata missing = good;
  missing.erase("llama.block_count");
  missing.erase("llama.attention.layer_norm_rms_epsilon");
  const std::string both = import_errors(missing, tensors);
  CHECK(both.find("x.gguf: llama.block_count: missing") != std::string::npos);
  CHECK(both.find("x.gguf: llama.attention.layer_norm_rms_epsilon: missing") != std::string::npos);

  // rope_freqs.weight: its values are needed, and must be llama3 factors.
  std::vector<weights::TensorInfo> with_freqs = tensors;
  with_freqs.push_back({"rope_freqs.weight", DType::F32, {8}, 0, 0});
  CHECK(import_errors(good, with_freqs).find("x.gguf: rope_freqs.weight: its values") != std::string::npos);
  const std::vector<float> zigzag{1, 2, 1, 2, 1, 2, 1, 2};
  CHECK(import_errors(good, with_freqs, zigzag).find("x.gguf: rope_freqs.weight: no llama3 parameters give") !=
        std::string::npos);

  std::vector<weights::TensorInfo> experts = tensors;
  experts.push_back({"blk.0.ffn_gate_exps.weight", DType::F16, {8, 96, 64}, 0, 0});
  CHECK(import_errors(good, experts).find("blk.0.ffn_gate_exps.weight: experts without llama.expert_count") !=
        std::string::npos);

  // Mixed matrix dtypes are no error (import_gguf writes them as [weights.dtypes]);
  // the metadata's spec takes the most common one.
  std::vector<weights::TensorInfo> mixed = tensors;
  for (weights::TensorInfo& t : mixed)
    if (t.name == "blk.1.ffn_down.weight") t.dtype = DType::Q8_0;
  CHECK(import_gguf_metadata(good, mixed, file_named("x.gguf"), {}).render().find("dtype = \"f16\"") != std::string::npos);

  Metadata wrong_type = good;
  wrong_type["llama.embedding_length"] = std::string("sixty-four");
  CHECK(import_errors(wrong_type, tensors).find("llama.embedding_length: a number expected, a string found") !=
        std::string::npos);
}

// Every tensor of `s`'s manifest, each value 0.5, in its dtype.
std::vector<weights::GgufTensorToWrite> constant_tensors(const spec::Spec& s) {
  std::vector<weights::GgufTensorToWrite> tensors;
  for (const spec::TensorSpec& t : spec::build_manifest(s).tensors) {
    std::vector<float> values(static_cast<size_t>(t.elements()), 0.5f);
    tensors.push_back({t.name, t.dtype, t.shape, weights::encode_values(t.dtype, values)});
  }
  return tensors;
}

TEST_CASE("import_gguf reads a file and checks its tensors against the imported spec") {
  test::TempDir dir("lathe-gguf-import");
  const spec::Spec twin = tiny("llama-q8.toml");
  std::vector<weights::GgufTensorToWrite> tensors = constant_tensors(twin);
  const auto metadata = gguf_metadata_from_spec(twin);
  const std::string path = (dir.dir / "tiny-q8.gguf").string();
  weights::write_gguf(path, metadata, tensors);
  const importer::ImportResult result = importer::import_gguf(path);
  REQUIRE(result.checkpoint);
  CHECK(result.checkpoint->spec_params == spec::build_manifest(twin).total_elements());
  CHECK(result.checkpoint->checkpoint_elements == result.checkpoint->spec_params);
  CHECK(result.spec.weights.dtype == DType::Q8_0);
  CHECK(result.spec.embedding.tied);
  CHECK(spec::spec_differences(gguf_twin(twin), result.spec).empty());

  // A tensor the metadata does not account for.
  tensors.push_back({"blk.0.attn_extra.weight", DType::F32, {4}, std::vector<std::byte>(16)});
  weights::write_gguf(path, metadata, tensors);
  try {
    importer::import_gguf(path);
    FAIL("an extra tensor was accepted");
  } catch (const importer::ImportError& e) {
    CHECK(std::string(e.what()).find("blk.0.attn_extra.weight: the file has it, the imported spec does not") !=
          std::string::npos);
    CHECK(std::string(e.what()).find("parameters, the file") != std::string::npos);
  }
}

TEST_CASE("GGUF metadata out of the spec's range is named by its key and value, not as an internal error") {
  test::TempDir dir("lathe-gguf-import-range");
  const spec::Spec twin = tiny("llama-q8.toml");
  std::vector<weights::GgufTensorToWrite> tensors = constant_tensors(twin);
  auto metadata = gguf_metadata_from_spec(twin);
  metadata["llama.attention.layer_norm_rms_epsilon"] = 5.0f;  // the spec allows (0, 1]
  const std::string path = (dir.dir / "tiny-range.gguf").string();
  weights::write_gguf(path, metadata, tensors);
  try {
    importer::import_gguf(path);
    FAIL("an epsilon of 5 was accepted");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK(what.find(path + ": the GGUF metadata describes no model lathe can build") != std::string::npos);
    CHECK(what.find("llama.attention.layer_norm_rms_epsilon = 5") != std::string::npos);
    CHECK(what.find("internal error") == std::string::npos);
    CHECK(what.find("(imported)") == std::string::npos);
  }
}

TEST_CASE("llama3 RoPE parameters are recovered exactly from llama.cpp's rope_freqs factors") {
  struct Released {
    const char* name;
    double factor;
    int64_t head_dim;
  };
  for (const Released m : {Released{"Llama 3.1 8B", 8.0, 128}, Released{"Llama 3.2 1B", 32.0, 64}}) {
    CAPTURE(m.name);
    spec::RopeScalingParams sc;
    sc.kind = spec::RopeScaling::Llama3;
    sc.factor = m.factor;
    sc.low_freq_factor = 1.0;
    sc.high_freq_factor = 4.0;
    sc.original_max_context = 8192;
    const std::vector<float> factors = converter_rope_freqs(sc, 500000.0, m.head_dim);
    REQUIRE(factors.size() == static_cast<size_t>(m.head_dim / 2));
    // The importer's copy of the converter (what lathe_gguf_twin writes) agrees.
    const std::vector<float> library = importer::llama3_rope_freqs(sc, 500000.0, m.head_dim);
    REQUIRE(library.size() == factors.size());
    for (size_t i = 0; i < factors.size(); ++i) CHECK(library[i] == doctest::Approx(factors[i]).epsilon(1e-6));
    // All three regimes occur, so the band is determined.
    CHECK(factors.front() == 1.0f);
    CHECK(factors.back() == static_cast<float>(m.factor));
    CHECK(std::count_if(factors.begin(), factors.end(),
                        [&](float f) { return f > 1.0f && f < static_cast<float>(m.factor); }) >= 2);

    const spec::RopeScalingParams got = importer::llama3_scaling_from_rope_freqs(factors, 500000.0, m.head_dim);
    CHECK(got.kind == spec::RopeScaling::Llama3);
    CHECK(got.factor == m.factor);
    CHECK(got.low_freq_factor == 1.0);
    CHECK(got.high_freq_factor == 4.0);
    CHECK(got.original_max_context == 8192);

    // One factor off by 0.1%: no parameters give the vector.
    std::vector<float> corrupted = factors;
    const auto blended =
        std::find_if(corrupted.begin(), corrupted.end(), [&](float f) { return f > 1.0f && f < static_cast<float>(m.factor); });
    REQUIRE(blended != corrupted.end());
    *blended *= 1.001f;
    CHECK_THROWS_WITH_AS(importer::llama3_scaling_from_rope_freqs(corrupted, 500000.0, m.head_dim),
                         doctest::Contains("rope_freqs.weight: no llama3 parameters give these"), importer::ImportError);
    // Factors of another head size.
    const std::string wrong_size = "rope_freqs.weight: " + std::to_string(factors.size()) + " factors, but";
    CHECK_THROWS_WITH_AS(importer::llama3_scaling_from_rope_freqs(factors, 500000.0, m.head_dim * 2),
                         doctest::Contains(wrong_size.c_str()), importer::ImportError);
  }
  // All ones: every band fits, nothing says which.
  CHECK_THROWS_WITH_AS(importer::llama3_scaling_from_rope_freqs(std::vector<float>(64, 1.0f), 500000.0, 128),
                       doctest::Contains("the parameters are not determined"), importer::ImportError);
}

TEST_CASE("import_gguf reads llama3 scaling from rope_freqs.weight and ignores the tensor") {
  test::TempDir dir("lathe-gguf-llama3");
  const spec::Spec hf = tiny("llama3-rope.toml");
  const spec::Spec twin = gguf_twin(hf);
  REQUIRE(twin.weights.ignore == std::vector<std::string>{"rope_freqs.weight"});
  std::vector<weights::GgufTensorToWrite> tensors = constant_tensors(twin);
  const std::vector<float> factors = rope_freqs_of(twin);
  tensors.push_back({"rope_freqs.weight", DType::F32, {static_cast<int64_t>(factors.size())},
                     weights::encode_values(DType::F32, factors)});
  const std::string path = (dir.dir / "tiny-llama3.gguf").string();
  weights::write_gguf(path, gguf_metadata_from_spec(twin), tensors);

  const importer::ImportResult result = importer::import_gguf(path);
  REQUIRE(result.checkpoint);
  CHECK(result.checkpoint->spec_params == spec::build_manifest(twin).total_elements());
  CHECK(result.checkpoint->checkpoint_elements == result.checkpoint->spec_params);
  CHECK(result.checkpoint->ignored_tensors == 1);
  CHECK(result.spec.position.scaling.kind == spec::RopeScaling::Llama3);
  CHECK(result.spec.position.scaling.original_max_context == 64);
  std::string differences;
  for (const std::string& d : spec::spec_differences(twin, result.spec)) differences += d + "\n";
  CHECK_MESSAGE(differences.empty(), differences << result.text);
  CHECK(result.text.find("ignore = [\"rope_freqs.weight\"]") != std::string::npos);
  CHECK(result.text.find("recovered from rope_freqs.weight") != std::string::npos);
}

// The LayerNorm families llama.cpp converts: gptneox, phi2, falcon (both
// forms), bloom and mpt. Each twin's metadata and tensors import back to it;
// the fused q/k/v is q | k | v in the file whatever the checkpoint's rows.
TEST_CASE("GPT-NeoX, Phi-2, Falcon, BLOOM and MPT twins round-trip through GGUF metadata") {
  const auto round_trip = [](const spec::Spec& original, const std::string& arch) {
    const spec::Spec twin = gguf_twin(original);
    const Metadata m = metadata_of(twin);
    CHECK(std::get<std::string>(m.at("general.architecture").value) == arch);
    const importer::TomlDoc doc = import_gguf_metadata(m, tensors_of(twin), file_named("t.gguf"));
    const spec::Spec imported = parse_text(doc.render());
    std::string differences;
    for (const std::string& d : spec::spec_differences(twin, imported)) differences += d + "\n";
    CHECK_MESSAGE(differences.empty(), differences << doc.render());
    CHECK(twin.weights.qkv_layout == spec::QkvLayout::Blocks);
    return twin;
  };
  const std::filesystem::path models = std::filesystem::path(LATHE_SOURCE_DIR) / "models";
  {
    const spec::Spec twin = round_trip(parse_file(models / "pythia-160m.toml"), "gptneox");
    CHECK(twin.weights.names.at(spec::Role::MlpNorm) == "blk.{layer}.ffn_norm");
    CHECK(twin.position.rotary_dim == 16);
  }
  {
    const spec::Spec twin = round_trip(parse_file(models / "phi-2.toml"), "phi2");
    CHECK(twin.output.bias);
    CHECK(spec::build_manifest(twin).total_elements() == 2'779'683'840);
  }
  {
    const spec::Spec twin = round_trip(parse_file(models / "bloom-560m.toml"), "bloom");
    CHECK(twin.embedding.norm);
    CHECK(twin.weights.names.at(spec::Role::EmbedNorm) == "token_embd_norm");
  }
  round_trip(tiny("neox.toml"), "gptneox");
  round_trip(tiny("phi2.toml"), "phi2");
  round_trip(tiny("bloom.toml"), "bloom");
  {
    const spec::Spec twin = round_trip(tiny("falcon.toml"), "falcon");  // grouped, one shared norm
    CHECK(twin.norm.parallel_shared);
    spec::Spec two_norms = tiny("falcon.toml");
    two_norms.norm.parallel_shared = false;
    two_norms.weights.names[spec::Role::MlpNorm] = "transformer.h.{layer}.ln_mlp";
    CHECK(round_trip(two_norms, "falcon").weights.names.at(spec::Role::MlpNorm) == "blk.{layer}.attn_norm_2");
  }
  {
    spec::Spec mpt = tiny("bloom.toml");  // ALiBi without the embedding norm, no biases: MPT's shape
    mpt.embedding.norm = false;
    mpt.norm.bias = false;
    mpt.attention = spec::Attention{};
    mpt.mlp.bias = false;
    mpt.mlp.activation = spec::Activation::GeluErf;
    const spec::Spec twin = round_trip(mpt, "mpt");
    CHECK(std::get<float>(metadata_of(twin).at("mpt.attention.max_alibi_bias").value) == 8.0f);
  }
  // llama.cpp converts no GPT-J.
  CHECK_THROWS_WITH_AS(gguf_twin(tiny("gptj.toml")), doctest::Contains("llama.cpp converts no GPT-J"), Error);
}

TEST_CASE("MPT and BLOOM GGUF files: what the spec's ALiBi cannot say is named") {
  spec::Spec mpt = tiny("bloom.toml");
  mpt.embedding.norm = false;
  mpt.mlp.activation = spec::Activation::GeluErf;
  const spec::Spec twin = gguf_twin(mpt);
  Metadata m = metadata_of(twin);
  m["mpt.attention.max_alibi_bias"] = weights::GgufValue(16.0f);
  m["mpt.attention.clamp_kqv"] = weights::GgufValue(8.0f);
  const std::string e = import_errors(m, tensors_of(twin));
  CHECK(e.find("mpt.attention.max_alibi_bias") != std::string::npos);
  CHECK(e.find("mpt.attention.clamp_kqv") != std::string::npos);
}

// llama.cpp's encoders: the GGUF twin of each tiny encoder it can express is
// read back to the same spec: bert (the twin the end-to-end test
// hf_vs_gguf.bert builds), nomic-bert and t5encoder.
TEST_CASE("the GGUF twins of encoders import back: bert, nomic-bert, t5encoder") {
  const spec::Spec bert = gguf_twin(encoder("bert.toml"));
  CHECK(differences_of(bert, encoder("bert-gguf.toml")).empty());
  const auto metadata = metadata_of(bert);
  CHECK(std::get<std::string>(metadata.at("general.architecture").value) == "bert");
  CHECK(std::get<uint32_t>(metadata.at("bert.pooling_type").value) == 1);  // llama.cpp's MEAN
  CHECK(std::get<bool>(metadata.at("bert.attention.causal").value) == false);
  CHECK(std::get<uint32_t>(metadata.at("tokenizer.ggml.token_type_count").value) == 2);
  const std::string text = import_gguf_metadata(metadata, tensors_of(bert), file_named("b.gguf")).render();
  CHECK(text.find("stack = \"encoder\"") != std::string::npos);
  CHECK(text.find("placement = \"post\"") != std::string::npos);
  const spec::Spec imported = parse_text(text);
  CHECK_MESSAGE(differences_of(bert, imported).empty(), differences_of(bert, imported) << text);
  std::vector<std::string> names;
  for (const spec::TensorSpec& t : spec::build_manifest(imported).tensors) names.push_back(t.name);
  for (const char* name : {"token_types.weight", "position_embd.weight", "token_embd_norm.bias",
                           "blk.1.attn_output_norm.weight", "blk.1.layer_output_norm.bias", "blk.0.ffn_up.bias"})
    CHECK_MESSAGE(std::find(names.begin(), names.end(), name) != names.end(), name);

  spec::Spec nomic = parse_text(kNomicText);
  const spec::Spec nomic_twin = gguf_twin(nomic);
  CHECK(std::get<std::string>(metadata_of(nomic_twin).at("general.architecture").value) == "nomic-bert");
  const spec::Spec nomic_back = through_gguf(nomic);
  CHECK_MESSAGE(differences_of(nomic_twin, nomic_back).empty(), differences_of(nomic_twin, nomic_back));
  CHECK(nomic_back.position.theta == 1000.0);
  CHECK(nomic_back.weights.fused_qkv);
  CHECK(spec::build_manifest(nomic_back).total_elements() == spec::build_manifest(nomic).total_elements());

  // The tiny T5 encoder buckets to distance 16; llama.cpp fixes 128.
  spec::Spec t5 = encoder("t5.toml");
  CHECK_THROWS_WITH_AS(gguf_metadata_from_spec(gguf_twin(t5)),
                       doctest::Contains("position.max_distance: llama.cpp's t5encoder fixes it at 128"), Error);
  t5.position.max_distance = 128;
  const spec::Spec t5_twin = gguf_twin(t5);
  CHECK(t5_twin.weights.names.at(Role::O) == "enc.blk.{layer}.attn_o");
  const spec::Spec t5_back = through_gguf(t5);
  CHECK_MESSAGE(differences_of(t5_twin, t5_back).empty(), differences_of(t5_twin, t5_back));
  CHECK(t5_back.attention.scale == 1.0);
  CHECK(t5_back.pooling.kind == spec::Pooling::Last);  // t5encoder.pooling_type 3
}

TEST_CASE("what llama.cpp's encoders do not compute is refused, naming the field or key") {
  // A pooled embedding is L2-normalized by llama.cpp: a file cannot say otherwise.
  spec::Spec bert = encoder("bert.toml");
  bert.pooling.normalize = false;
  CHECK_THROWS_WITH_AS(gguf_metadata_from_spec(gguf_twin(bert)),
                       doctest::Contains("pooling.normalize: llama.cpp's bert L2-normalizes"), Error);
  bert = encoder("bert.toml");
  bert.mlp.activation = spec::Activation::GeluTanh;
  CHECK_THROWS_WITH_AS(gguf_metadata_from_spec(gguf_twin(bert)), doctest::Contains("mlp.activation: llama.cpp's bert"),
                       Error);
  // ModernBERT-shaped: pre-norm RMS blocks with RoPE are none of llama.cpp's encoders.
  spec::Spec modern = encoder("rope.toml");
  modern.pooling.normalize = true;
  CHECK_THROWS_WITH_AS(gguf_metadata_from_spec(gguf_twin(modern)),
                       doctest::Contains("norm: llama.cpp's nomic-bert has post-norm LayerNorm blocks"), Error);

  const spec::Spec twin = gguf_twin(encoder("bert.toml"));
  const std::vector<weights::TensorInfo> tensors = tensors_of(twin);
  Metadata rank = metadata_of(twin);
  rank["bert.pooling_type"] = uint32_t{4};
  rank["bert.attention.causal"] = true;
  const std::string both = import_errors(rank, tensors);
  CHECK(both.find("x.gguf: bert.pooling_type 4 (rank)") != std::string::npos);
  CHECK(both.find("x.gguf: bert.attention.causal = true") != std::string::npos);

  // nomic-embed's files hold a token-type table, which a RoPE spec cannot add.
  const spec::Spec nomic = gguf_twin(parse_text(kNomicText));
  std::vector<weights::TensorInfo> with_types = tensors_of(nomic);
  with_types.push_back({"token_types.weight", DType::F32, {2, 64}, 0, 0});
  CHECK(import_errors(metadata_of(nomic), with_types)
            .find("x.gguf: token_types.weight: token types beside RoPE positions") != std::string::npos);
}

namespace {

spec::Spec encdec(const std::string& name) {
  return parse_file(std::filesystem::path(LATHE_SOURCE_DIR) / "tests/specs/encdec" / name);
}

std::vector<std::string> tensor_names(const spec::Spec& s) {
  std::vector<std::string> names;
  for (const spec::TensorSpec& t : spec::build_manifest(s).tensors) names.push_back(t.name);
  return names;
}

bool has_name(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

// llama.cpp's t5, a whole T5: the twin the end-to-end test hf_vs_gguf.t5
// builds is the hand-written t5-128-gguf.toml, and its metadata and tensor
// list read back to it: block_count the encoder's layers, decoder_block_count
// the decoder's, the tied head (no output.weight) scaled by hidden^-0.5.
TEST_CASE("the GGUF twin of a T5 encoder-decoder imports back as llama.cpp's t5") {
  spec::Spec expected = gguf_twin(encdec("t5-128.toml"));
  expected.cache.dtype = DType::F32;  // the build's choice, which a GGUF file does not state
  CHECK_MESSAGE(differences_of(expected, encdec("t5-128-gguf.toml")).empty(),
                differences_of(expected, encdec("t5-128-gguf.toml")));
  spec::Spec hf = encdec("t5-128.toml");
  hf.dims.encoder_layers = 3;  // stacks of different depths
  const spec::Spec twin = gguf_twin(hf);
  const Metadata metadata = metadata_of(twin);
  CHECK(std::get<std::string>(metadata.at("general.architecture").value) == "t5");
  CHECK(std::get<uint32_t>(metadata.at("t5.block_count").value) == 3);
  CHECK(std::get<uint32_t>(metadata.at("t5.decoder_block_count").value) == 2);
  CHECK(std::get<uint32_t>(metadata.at("t5.decoder_start_token_id").value) == 0);
  CHECK(std::get<uint32_t>(metadata.at("t5.attention.relative_buckets_count").value) == 8);
  CHECK(std::get<uint32_t>(metadata.at("t5.attention.key_length").value) == 16);

  const std::vector<std::string> names = tensor_names(twin);
  for (const char* name : {"token_embd.weight", "enc.blk.0.attn_rel_b.weight", "enc.blk.2.attn_o.weight",
                           "enc.output_norm.weight", "dec.blk.0.attn_rel_b.weight", "dec.blk.1.cross_attn_norm.weight",
                           "dec.blk.1.cross_attn_k.weight", "dec.blk.1.ffn_gate.weight", "dec.output_norm.weight"})
    CHECK_MESSAGE(has_name(names, name), name);
  CHECK_FALSE(has_name(names, "output.weight"));

  const std::string text = import_gguf_metadata(metadata, tensors_of(twin), file_named("t5.gguf")).render();
  CHECK(text.find("stack = \"encoder-decoder\"") != std::string::npos);
  const spec::Spec back = parse_text(text);
  CHECK_MESSAGE(differences_of(twin, back).empty(), differences_of(twin, back) << text);
  CHECK(back.dims.encoder_layers == 3);
  CHECK(back.dims.layers == 2);
  CHECK(back.output.scale == 0.125);
  CHECK(back.mlp.gated);
  CHECK(spec::build_manifest(back).total_elements() == spec::build_manifest(hf).total_elements());

  // Flan-T5's untied head: output.weight, no scale.
  spec::Spec untied = hf;
  untied.embedding.tied = false;
  untied.output.scale = 1.0;
  const spec::Spec untied_back = through_gguf(untied);
  CHECK_MESSAGE(differences_of(gguf_twin(untied), untied_back).empty(), differences_of(gguf_twin(untied), untied_back));
  CHECK_FALSE(untied_back.embedding.tied);
  CHECK(untied_back.output.scale == 1.0);
  CHECK(has_name(tensor_names(untied_back), "output.weight"));

  // T5 v1.0's ReLU, and as many decoder layers as encoder layers when
  // decoder_block_count is left out (llama.cpp's default).
  spec::Spec relu = hf;
  relu.mlp.gated = false;
  relu.mlp.activation = spec::Activation::ReLU;
  relu.dims.encoder_layers = relu.dims.layers;
  const spec::Spec relu_twin = gguf_twin(relu);
  Metadata relu_metadata = metadata_of(relu_twin);
  relu_metadata.erase("t5.decoder_block_count");
  const spec::Spec relu_back =
      parse_text(import_gguf_metadata(relu_metadata, tensors_of(relu_twin), file_named("t5.gguf")).render());
  CHECK_MESSAGE(differences_of(relu_twin, relu_back).empty(), differences_of(relu_twin, relu_back));
  CHECK(relu_back.mlp.activation == spec::Activation::ReLU);

  // Without decoder_start_token_id llama.cpp starts the decoder from BOS.
  Metadata bos = metadata;
  bos.erase("t5.decoder_start_token_id");
  bos["tokenizer.ggml.bos_token_id"] = uint32_t{1};
  CHECK(parse_text(import_gguf_metadata(bos, tensors_of(twin), file_named("t5.gguf")).render()).decoder_start == 1);
}

TEST_CASE("import_gguf reads a T5 file: its parameters are the imported spec's, unused cross biases ignored") {
  test::TempDir dir("lathe-gguf-import-t5");
  const spec::Spec twin = gguf_twin(encdec("t5-128.toml"));
  std::vector<weights::GgufTensorToWrite> tensors = constant_tensors(twin);
  // transformers has no cross-attention relative bias; llama.cpp loads one
  // where a file has it and never applies it.
  tensors.push_back({"dec.blk.0.cross_attn_rel_b.weight", DType::F32, {8, 4}, std::vector<std::byte>(8 * 4 * 4)});
  const std::string path = (dir.dir / "tiny-t5.gguf").string();
  weights::write_gguf(path, gguf_metadata_from_spec(twin), tensors);
  const importer::ImportResult result = importer::import_gguf(path);
  REQUIRE(result.checkpoint);
  CHECK(result.checkpoint->spec_params == spec::build_manifest(twin).total_elements());
  CHECK(result.checkpoint->checkpoint_elements == result.checkpoint->spec_params);
  CHECK(result.checkpoint->ignored_tensors == 1);
  CHECK(result.spec.encoder_decoder());
  CHECK(result.spec.weights.ignore == std::vector<std::string>{"dec.blk.0.cross_attn_rel_b.weight"});
}

TEST_CASE("what llama.cpp's t5 does not compute is refused, naming the field or key") {
  // tiny-t5 buckets to distance 16; llama.cpp fixes 128.
  CHECK_THROWS_WITH_AS(gguf_metadata_from_spec(gguf_twin(encdec("t5.toml"))),
                       doctest::Contains("position.max_distance: llama.cpp's t5 fixes it at 128"), Error);
  spec::Spec unscaled = encdec("t5-128.toml");
  unscaled.output.scale = 1.0;
  CHECK_THROWS_WITH_AS(gguf_metadata_from_spec(gguf_twin(unscaled)),
                       doctest::Contains("output.scale: a GGUF t5 file without output.weight is read as T5's tied head"),
                       Error);
  // BART: learned positions and post-norm LayerNorm blocks; llama.cpp converts no BART.
  CHECK_THROWS_WITH_AS(gguf_twin(encdec("bart.toml")),
                       doctest::Contains("position.kind: llama.cpp's one encoder-decoder, t5"), Error);

  const spec::Spec twin = gguf_twin(encdec("t5-128.toml"));
  Metadata metadata = metadata_of(twin);
  std::vector<weights::TensorInfo> tensors = tensors_of(twin);
  // A bias table per decoder layer, an encoder MLP gated where the
  // decoder's is not, and no token to start the decoder from: all named.
  tensors.push_back({"dec.blk.1.attn_rel_b.weight", DType::F32, {8, 4}, 0, 0});
  std::erase_if(tensors, [](const weights::TensorInfo& t) { return t.name.starts_with("dec.blk.0.ffn_gate"); });
  metadata.erase("t5.decoder_start_token_id");
  const std::string all = import_errors(metadata, tensors);
  CHECK(all.find("x.gguf: dec.blk.1.attn_rel_b.weight: a relative bias table per layer") != std::string::npos);
  CHECK(all.find("x.gguf: dec.blk.0.ffn_gate.weight: missing, but enc.blk.0.ffn_gate.weight is there") != std::string::npos);
  CHECK(all.find("x.gguf: t5.decoder_start_token_id: missing") != std::string::npos);
}
