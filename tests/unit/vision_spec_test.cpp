// [vision]: a vision tower beside the decoder, read, checked at its TOML
// lines, counted (its manifest, the report) for each family's shape.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "core/manifest.hpp"
#include "generator/spec/parse.hpp"
#include "generator/spec/report.hpp"

using namespace lathe::spec;

namespace {

std::optional<Spec> load(const std::string& file) {
  Diagnostics diag(file);
  auto spec = parse_spec_file(std::string(LATHE_SOURCE_DIR) + "/" + file, diag);
  INFO(diag.format());
  CHECK(diag.empty());
  return spec;
}

const TensorSpec* find(const Manifest& m, const std::string& name) {
  auto it = std::find_if(m.tensors.begin(), m.tensors.end(), [&](const TensorSpec& t) { return t.name == name; });
  return it == m.tensors.end() ? nullptr : &*it;
}

void check_shape(const Manifest& m, const std::string& name, const std::vector<int64_t>& shape) {
  INFO(name);
  const TensorSpec* t = find(m, name);
  REQUIRE(t != nullptr);
  CHECK(t->shape == shape);
}

const char* kText = R"(
[model]
name = "t"

[dims]
hidden = 64
layers = 2
heads = 4
intermediate = 96
vocab = 211
max_context = 160

[weights]
preset = "hf-llama"
)";

// The text model above with a [vision] table of `body` (its first line is line 15).
std::string errors_of(const std::string& body) {
  const std::string text = std::string(kText) + "\n[vision]\n" + body;
  Diagnostics diag("x.toml");
  auto spec = parse_spec_string(text, "x.toml", diag);
  CHECK(!spec);
  return diag.format();
}

const char* kTower = R"(patch = 4
image_size = 16
hidden = 32
layers = 2
heads = 2
intermediate = 48
)";

}  // namespace

TEST_CASE("a LLaVA-shaped tower: CLIP's tensors, the layers run, the tokens an image takes") {
  auto spec = load("tests/specs/vision/tiny-llava.toml");
  REQUIRE(spec);
  const Vision& v = spec->vision;
  CHECK(v.enabled);
  CHECK(v.connection == VisionConnection::Splice);
  CHECK(v.grid() == 4);
  CHECK(v.positions_count() == 17);
  CHECK(v.layers_run() == 1);  // hidden state −2 of 2 layers
  CHECK(v.dims.head_dim == 16);
  CHECK(v.norm.kind == NormKind::LayerNorm);
  CHECK(v.norm.bias);
  CHECK(v.mlp.activation == Activation::GeluQuick);
  CHECK(!v.mlp.gated);
  CHECK(v.tokens.image == 200);  // the marker itself
  CHECK(v.projector.intermediate == 64);  // the decoder's hidden
  CHECK(v.weights.dtype == DType::F16);  // the model's
  const Manifest m = build_vision_manifest(*spec);
  check_shape(m, "vision_tower.vision_model.embeddings.patch_embedding.weight", {32, 3, 4, 4});
  check_shape(m, "vision_tower.vision_model.embeddings.class_embedding", {32});
  check_shape(m, "vision_tower.vision_model.embeddings.position_embedding.weight", {17, 32});
  check_shape(m, "vision_tower.vision_model.pre_layrnorm.bias", {32});
  check_shape(m, "vision_tower.vision_model.encoder.layers.1.self_attn.out_proj.bias", {32});
  check_shape(m, "vision_tower.vision_model.encoder.layers.1.mlp.fc1.weight", {48, 32});
  check_shape(m, "multi_modal_projector.linear_1.weight", {64, 32});
  check_shape(m, "multi_modal_projector.linear_2.bias", {64});
  CHECK(find(m, "vision_tower.vision_model.post_layernorm.weight") == nullptr);  // post_norm = false
  CHECK(m.total_elements() == 23'456);
  // The patch embedding as the loaders audit it: [rows, channels·patch²].
  const std::vector<lathe::ManifestEntry> entries = manifest_entries(m);
  CHECK(entries[0].rank == 4);
  CHECK(entries[0].shape == std::array<int64_t, 2>{32, 48});
  CHECK(entries[0].stored_shape() == std::vector<int64_t>{32, 3, 4, 4});

  const Report r = make_report(*spec);
  CHECK(r.vision.present);
  CHECK(r.vision.params == 23'456);
  CHECK(r.vision.projector_params == 2'112 + 4'160);
  CHECK(r.vision.patches == 17);
  CHECK(r.vision.features == 16);
  CHECK(r.vision.tokens == 16);
  CHECK(r.total_params == build_manifest(*spec).total_elements() + 23'456);
  // One image: the patch embedding and the layer run on 17 rows, attention
  // over 17 keys, the projector on 16 rows.
  const double layer = 4.0 * 32 * 32 + 2.0 * 48 * 32;
  const double expected = 17.0 * (2.0 * (48.0 * 32 + layer) + 4.0 * 32 * 17) + 2.0 * 16 * (32.0 * 64 + 64.0 * 64);
  CHECK(r.vision.flops == doctest::Approx(expected));
  CHECK(report_json(r)["vision"]["tokens"] == 16);
  CHECK(format_report(r).find("| tokens an image takes in the prompt | 16 |") != std::string::npos);
}

TEST_CASE("a Pixtral-shaped tower: 2D RoPE over variable sizes, a patch merger, row ends") {
  auto spec = load("tests/specs/vision/tiny-pixtral.toml");
  REQUIRE(spec);
  const Vision& v = spec->vision;
  CHECK(v.positions == VisionPositions::Rope2D);
  CHECK(v.grid() == 8);
  CHECK(v.projector.kind == ProjectorKind::MergeMlp);
  CHECK(v.weights.dtype == DType::BF16);
  const Manifest m = build_vision_manifest(*spec);
  check_shape(m, "vision_tower.patch_conv.weight", {32, 3, 4, 4});
  check_shape(m, "vision_tower.ln_pre.weight", {32});
  check_shape(m, "vision_tower.transformer.layers.0.feed_forward.gate_proj.weight", {48, 32});
  check_shape(m, "multi_modal_projector.norm.weight", {32});
  check_shape(m, "multi_modal_projector.patch_merger.merging_layer.weight", {32, 128});
  check_shape(m, "multi_modal_projector.linear_1.weight", {64, 32});
  CHECK(find(m, "multi_modal_projector.linear_1.bias") == nullptr);
  CHECK(find(m, "vision_tower.ln_pre.bias") == nullptr);  // an RMS norm
  CHECK(m.total_elements() == 29'376);
  const Report r = make_report(*spec);
  CHECK(r.vision.features == 16);  // (8 / 2)²
  CHECK(r.vision.tokens == 20);    // and a row end (or the end) after each of 4 rows
}

TEST_CASE("a Gemma 3-shaped tower: SigLIP's patch bias and post-norm, a pooled projection stored [in, out]") {
  auto spec = load("tests/specs/vision/tiny-gemma3.toml");
  REQUIRE(spec);
  const Manifest m = build_vision_manifest(*spec);
  check_shape(m, "vision_tower.vision_model.embeddings.patch_embedding.bias", {32});
  check_shape(m, "vision_tower.vision_model.embeddings.position_embedding.weight", {64, 32});
  check_shape(m, "vision_tower.vision_model.post_layernorm.weight", {32});
  check_shape(m, "multi_modal_projector.mm_soft_emb_norm.weight", {32});
  check_shape(m, "multi_modal_projector.mm_input_projection_weight", {32, 64});
  CHECK(find(m, "multi_modal_projector.mm_soft_emb_norm.bias") == nullptr);
  CHECK(m.total_elements() == 20'768);
  const Report r = make_report(*spec);
  CHECK(r.vision.features == 16);
  CHECK(r.vision.tokens == 20);  // prefix and suffix of 2 each
}

TEST_CASE("a Llama 3.2 Vision-shaped model: tiles, global layers, and decoder layers that cross-attend") {
  auto spec = load("tests/specs/vision/tiny-mllama.toml");
  REQUIRE(spec);
  const Vision& v = spec->vision;
  CHECK(v.aspect_ratios() == 8);  // 1×1 … 1×4, 2×1, 2×2, 3×1, 4×1
  CHECK(v.cross_layer(1));
  CHECK(!v.cross_layer(0));
  const Manifest m = build_vision_manifest(*spec);
  check_shape(m, "vision_model.gated_positional_embedding.embedding", {17, 32});  // a parameter
  check_shape(m, "vision_model.gated_positional_embedding.gate", {1});
  check_shape(m, "vision_model.gated_positional_embedding.tile_embedding.weight", {9, 4 * 17 * 32});
  check_shape(m, "vision_model.pre_tile_positional_embedding.embedding.weight", {9, 128});
  check_shape(m, "vision_model.global_transformer.layers.0.gate_attn", {1});
  check_shape(m, "vision_model.global_transformer.layers.0.mlp.fc2.bias", {32});
  check_shape(m, "multi_modal_projector.weight", {64, 64});  // two hidden states side by side
  CHECK(m.total_elements() == 50'421);
  // The decoder: layer 1 has a cross-attention and gates instead of self-attention.
  const Manifest text = build_manifest(*spec);
  check_shape(text, "model.layers.1.cross_attn.k_proj.weight", {32, 64});
  check_shape(text, "model.layers.1.cross_attn.q_norm.weight", {16});
  check_shape(text, "model.layers.1.cross_attn_attn_gate", {1});
  check_shape(text, "model.embed_tokens.weight", {219, 64});  // the image token's row past the vocabulary
  check_shape(text, "lm_head.weight", {211, 64});
  CHECK(find(text, "model.layers.1.self_attn.q_proj.weight") == nullptr);
  CHECK(find(text, "model.layers.0.self_attn.q_proj.weight") != nullptr);
  const Report r = make_report(*spec);
  CHECK(r.vision.tokens == 1);  // the marker stays one token
  CHECK(r.vision.patches == 4 * 17);
  CHECK(r.vision.features == 4 * 17);  // every tile's rows, its class token's too
}

TEST_CASE("the shipped LLaVA-1.5 spec: CLIP ViT-L/14 at 336 pixels") {
  auto spec = load("models/llava-1.5-7b.toml");
  REQUIRE(spec);
  const Vision& v = spec->vision;
  CHECK(v.grid() == 24);
  CHECK(v.layers_run() == 23);
  CHECK(build_vision_manifest(*spec).total_elements() == 303'505'408 + 20'979'712);
  // CLIP's post_layernorm is in the checkpoint; the features skip it.
  const std::vector<std::string> ignored = ignored_patterns(*spec);
  CHECK(std::count(ignored.begin(), ignored.end(), "vision_tower.vision_model.post_layernorm.bias") == 1);
  const Report r = make_report(*spec);
  CHECK(r.vision.tokens == 576);
  CHECK(r.vision.patches == 577);
}

TEST_CASE("[vision] errors point at their keys") {
  CHECK(errors_of(std::string(kTower) + "\n[vision.tokens]\nmarker = 5\n[vision.weights]\npreset = \"hf-clop\"\n") ==
        "x.toml:27:10: vision.weights.preset: unknown preset \"hf-clop\" (did you mean \"hf-clip\"?)\n");
  CHECK(errors_of("patch = 5\nimage_size = 16\nhidden = 32\nlayers = 2\nheads = 2\nintermediate = 48\n"
                  "[vision.tokens]\nmarker = 5\n[vision.weights]\npreset = \"hf-siglip\"\n") ==
        "x.toml:18:14: image_size (16) is not a multiple of vision.patch (5)\n");
  CHECK(errors_of(std::string(kTower) + "feature_layer = -4\n[vision.tokens]\nmarker = 5\n[vision.weights]\npreset = \"hf-siglip\"\n") ==
        "x.toml:23:17: feature_layer (-4) is not a hidden state of a 2-layer tower (0 … 2, or −1 … −3)\n");
  CHECK(errors_of(std::string(kTower) + "[vision.tokens]\nmarker = 211\n[vision.weights]\npreset = \"hf-siglip\"\n") ==
        "x.toml:24:10: marker (211) is not a row of the token table (dims.vocab = 211)\n");
  // A token table past the vocabulary: a cross_attention [vision]'s, at least dims.vocab rows.
  CHECK(errors_of(std::string(kTower) + "connection = \"cross_attention\"\ncross_layers = [1]\n[embedding]\nrows = 100\n"
                  "[vision.tokens]\nmarker = 5\n[vision.weights]\npreset = \"hf-mllama\"\n") ==
        "x.toml:26:8: rows (100) is below dims.vocab (211): the table holds every token the head writes\n");
  CHECK(errors_of(std::string(kTower) + "[embedding]\nrows = 219\n[vision.tokens]\nmarker = 5\n[vision.weights]\n"
                  "preset = \"hf-siglip\"\n") ==
        "x.toml:24:8: rows past dims.vocab hold a cross_attention [vision]'s image token (Llama 3.2 Vision)\n");
  CHECK(errors_of(std::string(kTower) + "positions = \"rope_2d\"\nclass_token = true\n[vision.tokens]\nmarker = 5\n"
                  "[vision.weights]\npreset = \"hf-pixtral\"\n") ==
        "x.toml:24:15: a class token has no row or column for 2D RoPE (vision.positions = \"learned\")\n");
  CHECK(errors_of(std::string(kTower) + "connection = \"cross_attention\"\ncross_layers = [2]\n[vision.tokens]\nmarker = 5\n"
                  "[vision.weights]\npreset = \"hf-mllama\"\n") ==
        "x.toml:24:16: layer 2 is not a decoder layer (dims.layers = 2)\n");
  CHECK(errors_of(std::string(kTower) + "[vision.projector]\nkind = \"pooled\"\ntokens = 9\n[vision.tokens]\nmarker = 5\n"
                  "[vision.weights]\npreset = \"hf-siglip\"\n") ==
        "x.toml:25:10: tokens (9) must be the square of a divisor of the fixed grid (4 patches a side)\n");
  // Every tensor without a name, at [vision.weights]: the first is the patch embedding.
  const std::string unnamed = errors_of(std::string(kTower) + "[vision.tokens]\nmarker = 5\n[vision.weights]\n");
  CHECK(unnamed.rfind("x.toml:25:1: vision.weights.names.patch_embed is not set: the architecture has this tensor (set "
                      "vision.weights.preset or name it)\n", 0) == 0);
  CHECK(unnamed.find("vision.weights.names.proj_out is not set") != std::string::npos);
  CHECK(errors_of(std::string(kTower) + "[vision.mlp]\nactivation = \"gelu_fast\"\n[vision.tokens]\nmarker = 5\n") ==
        "x.toml:24:14: vision.mlp.activation: unknown value \"gelu_fast\"; expected one of \"silu\", \"gelu_erf\", "
        "\"gelu_tanh\", \"relu\", \"gelu_quick\" (did you mean \"gelu_tanh\"?)\n");
}
