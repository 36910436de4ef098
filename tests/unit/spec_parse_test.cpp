// Parsing and validating specs from strings: values, defaults, positions.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "core/manifest.hpp"
#include "generator/spec/parse.hpp"

using namespace lathe::spec;

namespace {

const char* kTiny = R"(
[model]
name = "tiny"

[dims]
hidden = 64
layers = 2
heads = 4
kv_heads = 2
intermediate = 128
vocab = 100
max_context = 256

[weights]
preset = "hf-llama"
)";

std::string errors_of(const std::string& text) {
  Diagnostics diag("x.toml");
  auto spec = parse_spec_string(text, "x.toml", diag);
  CHECK(!spec);
  return diag.format();
}

}  // namespace

TEST_CASE("a minimal llama-shaped spec gets the documented defaults") {
  Diagnostics diag("tiny.toml");
  auto spec = parse_spec_string(kTiny, "tiny.toml", diag);
  REQUIRE_MESSAGE(spec, diag.format());
  CHECK(spec->dims.head_dim == 16);
  CHECK(!spec->dims.head_dim_explicit);
  CHECK(spec->norm.kind == NormKind::RMSNorm);
  CHECK(spec->norm.eps == doctest::Approx(1e-5));
  CHECK(spec->position.kind == PositionKind::Rope);
  CHECK(spec->position.rotary_dim == 16);
  CHECK(spec->position.pairing == RopePairing::Neox);
  CHECK(spec->mlp.gated);
  CHECK(spec->attention.effective_scale(16) == doctest::Approx(0.25));
  CHECK(spec->where("dims.heads").line == 8);
  CHECK(spec->where("dims.heads").column == 9);
  CHECK(spec->where("norm.eps").line == 0);  // default: no position
}

// Hugging Face's Gemma multiplies by sqrt(hidden) as a tensor of the
// embeddings' dtype: Gemma 3 1B's sqrt(1152) = 33.941 is 34.0 in bf16.
TEST_CASE("embedding.scale = \"sqrt_hidden\" is the root rounded to the weights' 16-bit dtype") {
  const auto scale = [](const char* dtype) {
    std::string text = kTiny;
    text.replace(text.find("hidden = 64"), 11, "hidden = 1152");
    text += std::string("dtype = \"") + dtype + "\"\n[embedding]\nscale = \"sqrt_hidden\"\n";
    Diagnostics diag("s.toml");
    auto spec = parse_spec_string(text, "s.toml", diag);
    REQUIRE_MESSAGE(spec, diag.format());
    return spec->embedding.scale;
  };
  CHECK(scale("bf16") == 34.0);
  CHECK(scale("f16") == 33.9375);
  CHECK(scale("f32") == std::sqrt(1152.0));
}

TEST_CASE("the manifest names, shapes and counts every tensor") {
  Diagnostics diag("tiny.toml");
  auto spec = parse_spec_string(kTiny, "tiny.toml", diag);
  REQUIRE(spec);
  const Manifest m = build_manifest(*spec);
  // embed, 2 × (2 norms + q k v o + gate up down), final norm, lm_head
  CHECK(m.tensors.size() == 1 + 2 * 9 + 2);
  CHECK(m.tensors[0].name == "model.embed_tokens.weight");
  CHECK(m.tensors[0].shape == std::vector<int64_t>{100, 64});
  const TensorSpec& k = m.tensors[3];  // embed, attn_norm, q, k
  CHECK(k.name == "model.layers.0.self_attn.k_proj.weight");
  CHECK(k.shape == std::vector<int64_t>{32, 64});  // [H_kv·d_h, d]
  CHECK(m.tensors.back().name == "lm_head.weight");
  const int64_t per_layer = 2 * 64 + 64 * 64 + 2 * 32 * 64 + 64 * 64 + 3 * 128 * 64;
  CHECK(m.total_elements() == 100 * 64 + 2 * per_layer + 64 + 100 * 64);
}

TEST_CASE("every error of a file is reported at once, each at its line and column") {
  const std::string errors = errors_of(R"([model]
name = "bad"
[dims]
hidden = 64
layers = 0
heads = 4
kv_heads = 3
intermediate = 128
vocab = 100
max_context = 256
hiden = 3
)");
  CHECK(errors == "x.toml:5:10: dims.layers must be between 1 and 1024 (found 0)\n"
                  "x.toml:11:1: unknown key 'dims.hiden' (did you mean 'dims.hidden'?)\n");
}

TEST_CASE("an unknown key suggests the nearest known one") {
  const std::string errors = errors_of(std::string(kTiny) + "[norm]\nepsilon = 1e-6\n");
  CHECK(errors == "x.toml:17:1: unknown key 'norm.epsilon' (did you mean 'norm.eps'?)\n");
}

TEST_CASE("a contract violation names both values") {
  std::string text = kTiny;
  text.replace(text.find("kv_heads = 2"), 12, "kv_heads = 3");
  CHECK(errors_of(text) == "x.toml:9:12: heads (4) is not a multiple of kv_heads (3)\n");
}

TEST_CASE("TOML syntax errors carry the parser's position") {
  const std::string errors = errors_of("[model]\nname = \"x\nhidden = 3\n");
  CHECK(errors.rfind("x.toml:2:", 0) == 0);
}

TEST_CASE("vectors follow the weights' dtype, except under the gguf preset or q8_0") {
  auto parse = [](const std::string& weights) {
    std::string text = kTiny;
    text.replace(text.find("[weights]\npreset = \"hf-llama\"\n"), std::string("[weights]\npreset = \"hf-llama\"\n").size(),
                 "[weights]\n" + weights);
    Diagnostics diag("x.toml");
    auto spec = parse_spec_string(text, "x.toml", diag);
    REQUIRE_MESSAGE(spec, diag.format());
    return *spec;
  };
  auto dtype_of = [](const Spec& s, const std::string& name) {
    for (const TensorSpec& t : build_manifest(s).tensors)
      if (t.name == name) return t.dtype;
    FAIL("no tensor " << name);
    return DType::F32;
  };
  const Spec hf = parse("preset = \"hf-llama\"\ndtype = \"bf16\"\n");
  CHECK(hf.weights.vector_dtype == DType::BF16);
  CHECK(dtype_of(hf, "model.norm.weight") == DType::BF16);

  const Spec gguf = parse("preset = \"gguf\"\ndtype = \"f16\"\n");
  CHECK(gguf.weights.vector_dtype == DType::F32);
  CHECK(dtype_of(gguf, "blk.1.attn_norm.weight") == DType::F32);
  CHECK(dtype_of(gguf, "blk.1.attn_q.weight") == DType::F16);

  const Spec q8 = parse("preset = \"hf-llama\"\ndtype = \"q8_0\"\n");
  CHECK(dtype_of(q8, "model.layers.0.mlp.down_proj.weight") == DType::Q8_0);
  CHECK(dtype_of(q8, "model.embed_tokens.weight") == DType::Q8_0);
  CHECK(dtype_of(q8, "model.norm.weight") == DType::F32);

  const Spec written = parse("preset = \"gguf\"\ndtype = \"f16\"\nvector_dtype = \"f16\"\n");
  CHECK(dtype_of(written, "output_norm.weight") == DType::F16);

  std::string text = kTiny;
  text += "vector_dtype = \"q8_0\"\n";
  CHECK(errors_of(text) == "x.toml:16:16: weights.vector_dtype: q8_0 blocks hold matrices only; vectors are f32, f16 or bf16\n");
}
