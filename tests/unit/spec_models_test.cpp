// The shipped model specs (models/*.toml): each parses without a diagnostic,
// counts exactly the parameters of its published checkpoint, and lays out the
// tensors whose shapes the loaders and kernels depend on.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>

#include "core/manifest.hpp"
#include "generator/emit/emit_cpp.hpp"
#include "generator/spec/parse.hpp"
#include "generator/spec/report.hpp"

using namespace lathe::spec;

namespace {

struct Published {
  const char* file;  // under models/
  int64_t params;
};

// The parameter count of each published checkpoint: the sum of the element
// counts of every tensor in its safetensors files (GPT-2: 124,439,808,
// excluding the per-layer attn.bias / attn.masked_bias causal-mask buffers).
// A new spec under models/ needs its row here.
constexpr Published kPublished[] = {
    {"gpt2.toml", 124'439'808},
    {"smollm2-135m.toml", 134'515'008},
    {"qwen2.5-0.5b.toml", 494'032'768},
    {"tinyllama-1.1b.toml", 1'100'048'384},
    {"llama-3.2-1b.toml", 1'235'814'400},
    {"llama-3-8b.toml", 8'030'261'248},
    {"llama-2-7b-dynamic-ntk.toml", 6'738'415'616},  // Llama 2 7B's; the scaling adds no weight
    {"mistral-7b-v0.1.toml", 7'241'732'096},
    {"gemma-2-2b.toml", 2'614'341'888},
    {"phi-3-mini-4k.toml", 3'821'079'552},
    {"olmo-2-1b.toml", 1'484'916'736},
    {"mixtral-8x7b.toml", 46'702'792'704},
    {"qwen3-0.6b.toml", 596'049'920},  // the model card's 0.6B (0.44B non-embedding); lm_head.weight, a tied copy, left out
    {"gemma-3-1b.toml", 999'885'952},  // the released model.safetensors' tensors (the model card's "1B")
    {"pythia-160m.toml", 162'322'944},  // the model card's total; embed_in and the untied embed_out both count
    {"phi-2.toml", 2'779'683'840},  // the released safetensors' tensors, lm_head.bias (51,200) among them
    {"bloom-560m.toml", 559'214'592},  // the model card's count; the tied LM head stores no tensor
    {"qwen3-30b-a3b.toml", 30'532'122'624},  // the model card's 30.5B (3.3B activated)
    {"qwen1.5-moe-a2.7b.toml", 14'315'784'192},  // the model card's 14.3B (2.7B activated)
    {"demo.toml", 5'508'352},  // models/demo/model.safetensors, the shipped checkpoint
    // llava-hf/llava-1.5-7b-hf's 7,063,427,072 less the tower's
    // post_layernorm (2,048), which the features skip and the spec ignores:
    // the decoder's 6,738,939,904 (Llama 2 7B's with 64 more rows in each
    // table), the CLIP tower's 303,505,408 and the projector's 20,979,712.
    {"llava-1.5-7b.toml", 7'063'425'024},
    // Encoders: the published BertModel counts less the pooler, which the
    // spec's weights.ignore leaves in the checkpoint (109,482,240 − 590,592;
    // all-MiniLM-L6-v2 22,713,216 − 147,840).
    {"bert-base-uncased.toml", 108'891'648},
    {"all-minilm-l6-v2.toml", 22'565'376},
    // RoBERTa: RobertaModel's 124,645,632 and XLM-R's 278,043,648 less the
    // pooler's 590,592 (a 250,002-row table makes XLM-R's count).
    {"roberta-base.toml", 124'055'040},
    {"xlm-roberta-base.toml", 277'453'056},
    // The encoder of t5-small: its published 60,506,624 less the decoder's
    // 25,175,808 (six blocks of self- and cross-attention, a bias table and a norm).
    {"t5-small-encoder.toml", 35'330'816},
    // answerdotai/ModernBERT-base: ModernBertForMaskedLM's 149,655,232 less
    // its prediction head (dense 589,824, norm 768, decoder bias 50,368).
    {"modernbert-base.toml", 149'014'272},
    // Encoder-decoders. transformers' num_parameters() counts the shared
    // table once, as the manifest does (t5-small's and bart-base's tied
    // heads store no tensor): t5-small 60,506,624, flan-t5-small 76,961,152.
    // It leaves out buffers: bart-base's published 139,420,416 lacks
    // final_logits_bias ([1, 50265]), which the checkpoint holds and the
    // manifest counts.
    {"t5-small.toml", 60'506'624},
    {"flan-t5-small.toml", 76'961'152},
    {"bart-base.toml", 139'470'681},
    // State-space: state-spaces/mamba-130m-hf's model card count (tied: the
    // embeddings' 38,615,040, 24 layers of 3,771,648, the final norm's 768).
    {"mamba-130m.toml", 129'135'360},
    // Mamba-2-130M: the embeddings' 38,621,184 (50,288 padded rows), 24
    // layers of 3,765,320, the final norm's 768.
    {"mamba2-130m.toml", 128'989'632},
    // Bamba-9B: the model card's 9.78B (29 Mamba-2 layers of 277,898,496
    // with their MLPs, 3 attention layers of 217,990,144, untied head).
    {"bamba-9b.toml", 9'780'235'392},
    // Latent attention: the sums of the published checkpoints' tensors
    // (the model cards' 15.7B and 671B; V3's multi-token-prediction layer
    // 61 is not part of the model).
    {"deepseek-v2-lite.toml", 15'706'484'224},
    {"deepseek-v3.toml", 671'026'419'200},
};

std::filesystem::path models_dir() { return std::filesystem::path(LATHE_SOURCE_DIR) / "models"; }

std::optional<Spec> load(const std::string& file) {
  const std::string path = (models_dir() / file).string();
  Diagnostics diag(path);
  auto spec = parse_spec_file(path, diag);
  INFO(diag.format());
  CHECK(diag.empty());
  return spec;
}

const TensorSpec* find(const Manifest& m, const std::string& name) {
  auto it = std::find_if(m.tensors.begin(), m.tensors.end(), [&](const TensorSpec& t) { return t.name == name; });
  return it == m.tensors.end() ? nullptr : &*it;
}

using Shape = std::vector<int64_t>;

// The tensor exists and has this stored shape.
void check_shape(const Manifest& m, const std::string& name, const Shape& shape) {
  INFO(name);
  const TensorSpec* t = find(m, name);
  REQUIRE(t != nullptr);
  CHECK(t->shape == shape);
}

}  // namespace

TEST_CASE("every shipped spec parses cleanly and counts its checkpoint's published parameters") {
  for (const Published& p : kPublished) {
    CAPTURE(p.file);
    auto spec = load(p.file);
    REQUIRE(spec);
    const Report report = make_report(*spec);
    CHECK(report.total_params == p.params);
    CHECK(build_manifest(*spec).total_elements() + build_vision_manifest(*spec).total_elements() == p.params);
  }
}

TEST_CASE("every spec under models/ has a published parameter count") {
  std::set<std::string> known;
  for (const Published& p : kPublished) known.insert(p.file);
  size_t found = 0;
  for (const auto& entry : std::filesystem::directory_iterator(models_dir())) {
    if (!entry.is_regular_file() || entry.path().extension() != ".toml") continue;
    ++found;
    const std::string file = entry.path().filename().string();
    INFO(file << " is under models/ but has no row in kPublished");
    CHECK(known.count(file) == 1);
  }
  CHECK(found == known.size());  // and every row names a file that exists
}

TEST_CASE("bert-base-uncased: an encoder of post-norm blocks, positions and token types, no LM head") {
  auto spec = load("bert-base-uncased.toml");
  REQUIRE(spec);
  CHECK(spec->encoder());
  const Manifest m = build_manifest(*spec);
  check_shape(m, "embeddings.word_embeddings.weight", {30522, 768});
  check_shape(m, "embeddings.position_embeddings.weight", {512, 768});
  check_shape(m, "embeddings.token_type_embeddings.weight", {2, 768});
  check_shape(m, "embeddings.LayerNorm.bias", {768});
  check_shape(m, "encoder.layer.11.attention.output.LayerNorm.weight", {768});
  check_shape(m, "encoder.layer.11.intermediate.dense.weight", {3072, 768});
  check_shape(m, "encoder.layer.11.output.LayerNorm.bias", {768});
  for (const TensorSpec& t : m.tensors) CHECK(t.role != Role::LmHead);
  auto minilm = load("all-minilm-l6-v2.toml");
  REQUIRE(minilm);
  CHECK(minilm->pooling.kind == Pooling::Mean);
  CHECK(minilm->pooling.normalize);
}

TEST_CASE("modernbert-base: no attention norm in layer 0, local layers two of every three") {
  auto spec = load("modernbert-base.toml");
  REQUIRE(spec);
  const Manifest m = build_manifest(*spec);
  CHECK(find(m, "model.layers.0.attn_norm.weight") == nullptr);
  check_shape(m, "model.layers.1.attn_norm.weight", {768});
  check_shape(m, "model.layers.0.attn.Wqkv.weight", {2304, 768});
  check_shape(m, "model.layers.21.mlp.Wi.weight", {2304, 768});
  check_shape(m, "model.layers.21.mlp.Wo.weight", {768, 1152});
  CHECK_FALSE(spec->attention.windowed(0));
  CHECK(spec->attention.windowed(1));
  CHECK(spec->attention.windowed(2));
  CHECK_FALSE(spec->attention.windowed(3));
  CHECK(spec->attention.sliding_window == 64);
}

TEST_CASE("gemma-2-2b: head_dim 256 decouples the attention width from hidden") {
  auto spec = load("gemma-2-2b.toml");
  REQUIRE(spec);
  CHECK(spec->dims.head_dim == 256);
  CHECK(spec->attention.effective_scale(256) == doctest::Approx(1.0 / 16.0));
  CHECK(spec->embedding.scale == doctest::Approx(48.0));  // sqrt(2304)
  CHECK(spec->attention.windowed(0));                     // HF: even layers slide
  CHECK(!spec->attention.windowed(1));
  CHECK(spec->attention.windowed(24));
  CHECK(!spec->attention.windowed(25));
  const Manifest m = build_manifest(*spec);
  check_shape(m, "model.layers.0.self_attn.q_proj.weight", {2048, 2304});
  check_shape(m, "model.layers.0.self_attn.k_proj.weight", {1024, 2304});
  check_shape(m, "model.layers.0.self_attn.o_proj.weight", {2304, 2048});
  for (const char* norm : {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                           "post_feedforward_layernorm"})
    check_shape(m, "model.layers.25." + std::string(norm) + ".weight", {2304});
  CHECK(find(m, "lm_head.weight") == nullptr);  // tied
}

TEST_CASE("mistral-7b-v0.1: the report counts each windowed layer's KV cache at its window") {
  auto spec = load("mistral-7b-v0.1.toml");
  REQUIRE(spec);
  const Report report = make_report(*spec);
  // 32 layers × K and V × 8 KV heads × 128 dims × 2 bytes (f16): 128 KiB a position.
  CHECK(report.kv_bytes_per_token == 32 * 2 * 8 * 128 * 2);
  CHECK(report.kv_bytes_max_context == report.kv_bytes_per_token * 4096);  // not 32768: every layer slides
}

TEST_CASE("phi-3-mini-4k: fused qkv_proj and gate_up_proj") {
  auto spec = load("phi-3-mini-4k.toml");
  REQUIRE(spec);
  CHECK(spec->mlp.fused_gate_up == FusedGateUp::GateUp);
  const Manifest m = build_manifest(*spec);
  check_shape(m, "model.layers.0.self_attn.qkv_proj.weight", {9216, 3072});
  check_shape(m, "model.layers.31.mlp.gate_up_proj.weight", {16384, 3072});
  check_shape(m, "model.layers.31.mlp.down_proj.weight", {3072, 8192});
  check_shape(m, "lm_head.weight", {32064, 3072});
  CHECK(find(m, "model.layers.0.self_attn.q_proj.weight") == nullptr);
  CHECK(find(m, "model.layers.0.mlp.gate_proj.weight") == nullptr);
}

TEST_CASE("mixtral-8x7b: 8 experts of w1/w2/w3 in each of 32 layers") {
  auto spec = load("mixtral-8x7b.toml");
  REQUIRE(spec);
  CHECK(spec->moe.top_k == 2);
  CHECK(spec->moe.norm_topk_prob);
  const Manifest m = build_manifest(*spec);
  for (Role role : {Role::ExpertGate, Role::ExpertUp, Role::ExpertDown}) {
    CAPTURE(name(role));
    CHECK(std::count_if(m.tensors.begin(), m.tensors.end(), [&](const TensorSpec& t) { return t.role == role; }) ==
          8 * 32);
  }
  check_shape(m, "model.layers.0.block_sparse_moe.gate.weight", {8, 4096});
  check_shape(m, "model.layers.31.block_sparse_moe.experts.7.w1.weight", {14336, 4096});
  check_shape(m, "model.layers.31.block_sparse_moe.experts.7.w2.weight", {4096, 14336});
  check_shape(m, "model.layers.31.block_sparse_moe.experts.7.w3.weight", {14336, 4096});
  CHECK(find(m, "model.layers.0.mlp.gate_proj.weight") == nullptr);
  CHECK(make_report(*spec).active_params == 12'879'925'248);
}

TEST_CASE("qwen2.5-0.5b: biases on q, k and v but not on o") {
  auto spec = load("qwen2.5-0.5b.toml");
  REQUIRE(spec);
  const Manifest m = build_manifest(*spec);
  check_shape(m, "model.layers.0.self_attn.q_proj.bias", {896});
  check_shape(m, "model.layers.0.self_attn.k_proj.bias", {128});
  check_shape(m, "model.layers.0.self_attn.v_proj.bias", {128});
  check_shape(m, "model.layers.0.self_attn.k_proj.weight", {128, 896});
  CHECK(find(m, "model.layers.0.self_attn.o_proj.bias") == nullptr);
  CHECK(find(m, "lm_head.weight") == nullptr);  // tied
}

TEST_CASE("olmo-2-1b: norms on the branch outputs and over the whole q and k") {
  auto spec = load("olmo-2-1b.toml");
  REQUIRE(spec);
  const Manifest m = build_manifest(*spec);
  check_shape(m, "model.layers.0.self_attn.q_norm.weight", {2048});
  check_shape(m, "model.layers.0.self_attn.k_norm.weight", {2048});
  check_shape(m, "model.layers.0.post_attention_layernorm.weight", {2048});
  check_shape(m, "model.layers.0.post_feedforward_layernorm.weight", {2048});
  CHECK(find(m, "model.layers.0.input_layernorm.weight") == nullptr);
  CHECK(find(m, "model.layers.0.pre_feedforward_layernorm.weight") == nullptr);
  check_shape(m, "lm_head.weight", {100352, 2048});
}

TEST_CASE("llama-3.2-1b: llama3 rope scaling and a tied head") {
  auto spec = load("llama-3.2-1b.toml");
  REQUIRE(spec);
  const RopeScalingParams& r = spec->position.scaling;
  CHECK(r.kind == RopeScaling::Llama3);
  CHECK(r.factor == doctest::Approx(32.0));
  CHECK(r.original_max_context == 8192);
  const Manifest m = build_manifest(*spec);
  check_shape(m, "model.layers.15.self_attn.k_proj.weight", {512, 2048});
  CHECK(find(m, "lm_head.weight") == nullptr);
}

TEST_CASE("a tied spec's checkpoint may hold a copy of the LM head: its name is ignored, an untied one's never") {
  auto qwen3 = load("qwen3-0.6b.toml");
  const std::vector<std::string> tied = ignored_patterns(*qwen3);
  CHECK(std::count(tied.begin(), tied.end(), "lm_head.weight") == 1);
  auto llama = load("llama-3-8b.toml");
  const std::vector<std::string> untied = ignored_patterns(*llama);
  CHECK(std::count(untied.begin(), untied.end(), "lm_head.weight") == 0);
  auto gpt2 = load("gpt2.toml");  // tied, with mask buffers of its own
  CHECK(ignored_patterns(*gpt2).size() == gpt2->weights.ignore.size() + 1);
}

TEST_CASE("the encoder-decoders: each stack's tables and layers, the decoder's cross-attention, the head") {
  auto t5 = load("t5-small.toml");
  REQUIRE(t5);
  CHECK(t5->encoder_decoder());
  CHECK(t5->blocks() == 12);
  const Manifest t5m = build_manifest(*t5);
  check_shape(t5m, "shared.weight", {32128, 512});
  check_shape(t5m, "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", {32, 8});
  check_shape(t5m, "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", {32, 8});
  check_shape(t5m, "encoder.block.5.layer.1.DenseReluDense.wi.weight", {2048, 512});
  check_shape(t5m, "decoder.block.5.layer.1.EncDecAttention.k.weight", {512, 512});
  check_shape(t5m, "decoder.block.5.layer.2.DenseReluDense.wo.weight", {512, 2048});
  check_shape(t5m, "encoder.final_layer_norm.weight", {512});
  check_shape(t5m, "decoder.final_layer_norm.weight", {512});
  CHECK(find(t5m, "lm_head.weight") == nullptr);  // tied, read at 512^-0.5
  CHECK(t5->output.scale == std::pow(512.0, -0.5));

  auto flan = load("flan-t5-small.toml");
  REQUIRE(flan);
  const Manifest fm = build_manifest(*flan);
  check_shape(fm, "encoder.block.7.layer.1.DenseReluDense.wi_0.weight", {1024, 512});
  check_shape(fm, "encoder.block.7.layer.1.DenseReluDense.wi_1.weight", {1024, 512});
  check_shape(fm, "decoder.block.7.layer.2.DenseReluDense.wi_1.weight", {1024, 512});
  check_shape(fm, "decoder.block.7.layer.1.EncDecAttention.o.weight", {512, 384});
  check_shape(fm, "lm_head.weight", {32128, 512});
  CHECK(flan->output.scale == 1.0);

  auto bart = load("bart-base.toml");
  REQUIRE(bart);
  const Manifest bm = build_manifest(*bart);
  check_shape(bm, "model.shared.weight", {50265, 768});
  check_shape(bm, "model.encoder.embed_positions.weight", {1026, 768});
  check_shape(bm, "model.decoder.embed_positions.weight", {1026, 768});
  check_shape(bm, "model.encoder.layernorm_embedding.bias", {768});
  check_shape(bm, "model.decoder.layers.5.encoder_attn.v_proj.bias", {768});
  check_shape(bm, "model.decoder.layers.5.encoder_attn_layer_norm.weight", {768});
  check_shape(bm, "model.encoder.layers.5.fc1.weight", {3072, 768});
  check_shape(bm, "final_logits_bias", {50265});
  CHECK(find(bm, "model.encoder.layer_norm.weight") == nullptr);  // BART: no final norms
  CHECK(find(bm, "lm_head.weight") == nullptr);
}

TEST_CASE("deepseek-v2-lite and deepseek-v3: latent attention's tensors, a latent cache, V3's experts in parts") {
  auto lite = load("deepseek-v2-lite.toml");
  REQUIRE(lite);
  const Manifest m = build_manifest(*lite);
  const std::string L = "model.layers.26.self_attn.";
  check_shape(m, L + "q_proj.weight", {16 * 192, 2048});  // no query latent
  check_shape(m, L + "kv_a_proj_with_mqa.weight", {576, 2048});
  check_shape(m, L + "kv_a_layernorm.weight", {512});
  check_shape(m, L + "kv_b_proj.weight", {16 * 256, 512});
  check_shape(m, L + "o_proj.weight", {2048, 16 * 128});
  CHECK(find(m, L + "k_proj.weight") == nullptr);
  check_shape(m, "model.layers.0.mlp.gate_proj.weight", {10944, 2048});  // the dense layer
  check_shape(m, "model.layers.1.mlp.experts.63.down_proj.weight", {2048, 1408});
  check_shape(m, "model.layers.1.mlp.shared_experts.up_proj.weight", {2 * 1408, 2048});
  // One head of 576 cached a token and layer, no V: 27 · 576 · 2 bytes.
  CHECK(cache_row_bytes(*lite) == 576 * 2);
  CHECK(v_cache_row_bytes(*lite) == 0);
  CHECK(make_report(*lite).kv_bytes_per_token == 31'104);
  Diagnostics diag("deepseek-v2-lite.toml");
  CHECK_MESSAGE(lathe::emit::check_supported(*lite, diag), diag.format());

  auto v3 = load("deepseek-v3.toml");
  REQUIRE(v3);
  check_shape(build_manifest(*v3), "model.layers.60.self_attn.q_b_proj.weight", {128 * 192, 1536});
  // bf16: a layer's 256 experts of one role, 7.5 GB, are over the 2 GiB one
  // binding holds: they are bound in parts of 73 experts (29,360,128 bytes
  // each); q4_k fits one binding.
  Diagnostics bf16("deepseek-v3.toml");
  CHECK_MESSAGE(lathe::emit::check_supported(*v3, bf16), bf16.format());
  v3->weights.max_part_bytes = 16 << 20;  // under one expert's matrix: refused, naming it
  Diagnostics refused("deepseek-v3.toml");
  CHECK(!lathe::emit::check_supported(*v3, refused));
  CHECK(refused.format().find("one expert's matrix takes 29360128 bytes, over weights.max_part_bytes (16777216)") !=
        std::string::npos);
  v3->weights.max_part_bytes = int64_t{1} << 31;
  v3->weights.dtype = DType::Q4_K;
  Diagnostics fits("deepseek-v3.toml");
  CHECK_MESSAGE(lathe::emit::check_supported(*v3, fits), fits.format());
}

TEST_CASE("mamba-130m: every layer a Mamba block, a fixed state per sequence, no KV cache") {
  auto spec = load("mamba-130m.toml");
  REQUIRE(spec);
  CHECK(spec->ssm.kind == SsmKind::Mamba);
  CHECK(spec->ssm.d_inner == 1536);  // expand 2 × 768
  CHECK(spec->position.kind == PositionKind::None);
  const Manifest m = build_manifest(*spec);
  const std::string L = "backbone.layers.23.";
  check_shape(m, L + "norm.weight", {768});
  check_shape(m, L + "mixer.in_proj.weight", {3072, 768});
  check_shape(m, L + "mixer.conv1d.weight", {1536, 1, 4});  // torch's Conv1d, rank 3 as stored
  check_shape(m, L + "mixer.conv1d.bias", {1536});
  check_shape(m, L + "mixer.x_proj.weight", {80, 1536});  // dt_rank 48 + 2 × d_state 16
  check_shape(m, L + "mixer.dt_proj.weight", {1536, 48});
  check_shape(m, L + "mixer.dt_proj.bias", {1536});
  check_shape(m, L + "mixer.A_log", {1536, 16});  // parameters: named by their path
  check_shape(m, L + "mixer.D", {1536});
  check_shape(m, L + "mixer.out_proj.weight", {768, 1536});
  check_shape(m, "backbone.norm_f.weight", {768});
  CHECK(find(m, L + "mixer.in_proj.bias") == nullptr);  // use_bias = false
  CHECK(find(m, "lm_head.weight") == nullptr);           // tied
  const Report report = make_report(*spec);
  CHECK(report.ssm);
  CHECK(report.kv_bytes_per_token == 0);
  // 24 layers × 1536 channels × (3 conv inputs + 16 scan values) × 4 bytes.
  CHECK(report.conv_state_bytes == 24 * 1536 * 3 * 4);
  CHECK(report.scan_state_bytes == 24 * 1536 * 16 * 4);
  // The same bytes at every context.
  REQUIRE(report.device_bytes_at_context.size() >= 2);
  CHECK(report.device_bytes_at_context.front().second == report.device_bytes_at_context.back().second);
}

TEST_CASE("mamba2-130m: Mamba-2 blocks, in_proj to [z | x | B | C | dt], a state per sequence") {
  auto spec = load("mamba2-130m.toml");
  REQUIRE(spec);
  CHECK(spec->ssm.kind == SsmKind::Mamba2);
  CHECK(spec->ssm.conv_channels() == 1536 + 2 * 128);
  const Manifest m = build_manifest(*spec);
  const std::string L = "backbone.layers.23.";
  check_shape(m, L + "mixer.in_proj.weight", {2 * 1536 + 2 * 128 + 24, 768});
  check_shape(m, L + "mixer.conv1d.weight", {1792, 1, 4});
  check_shape(m, L + "mixer.conv1d.bias", {1792});
  check_shape(m, L + "mixer.dt_bias", {24});  // parameters, one a head
  check_shape(m, L + "mixer.A_log", {24});
  check_shape(m, L + "mixer.D", {24});
  check_shape(m, L + "mixer.norm.weight", {1536});  // the gated norm
  check_shape(m, L + "mixer.out_proj.weight", {768, 1536});
  CHECK(find(m, L + "mixer.x_proj.weight") == nullptr);
  CHECK(find(m, L + "mixer.dt_proj.weight") == nullptr);
  const Report report = make_report(*spec);
  CHECK(report.kv_bytes_per_token == 0);
  // 24 layers × 1792 conv channels × 3 inputs, and 1536 channels × 128 states, f32.
  CHECK(report.conv_state_bytes == 24 * 1792 * 3 * 4);
  CHECK(report.scan_state_bytes == 24 * 1536 * 128 * 4);
}

TEST_CASE("bamba-9b: a hybrid, Mamba-2 mixers but in layers 9, 18 and 27, KV caches in those three only") {
  auto spec = load("bamba-9b.toml");
  REQUIRE(spec);
  CHECK(spec->ssm.hybrid());
  CHECK(spec->ssm.layer(0));
  CHECK_FALSE(spec->ssm.layer(9));
  CHECK(spec->cache_layers() == 3);
  CHECK(spec->cache_index(18) == 1);
  CHECK(spec->ssm.state_index(19) == 17);  // layers 0-8 and 10-17 before it
  CHECK(spec->position.rotary_dim == 64);  // half of each head of 128
  const Manifest m = build_manifest(*spec);
  check_shape(m, "model.layers.0.input_layernorm.weight", {4096});
  check_shape(m, "model.layers.0.mamba.in_proj.weight", {2 * 8192 + 2 * 128 + 128, 4096});
  check_shape(m, "model.layers.0.mamba.conv1d.weight", {8192 + 256, 1, 4});
  check_shape(m, "model.layers.0.mamba.dt_bias", {128});
  check_shape(m, "model.layers.0.mamba.norm.weight", {8192});
  check_shape(m, "model.layers.0.pre_ff_layernorm.weight", {4096});
  check_shape(m, "model.layers.0.feed_forward.gate_proj.weight", {14336, 4096});
  check_shape(m, "model.layers.9.input_layernorm.weight", {4096});
  check_shape(m, "model.layers.9.self_attn.k_proj.weight", {1024, 4096});
  check_shape(m, "model.layers.9.feed_forward.down_proj.weight", {4096, 14336});
  check_shape(m, "model.final_layernorm.weight", {4096});
  CHECK(find(m, "model.layers.9.mamba.in_proj.weight") == nullptr);
  CHECK(find(m, "model.layers.0.self_attn.q_proj.weight") == nullptr);
  const Report report = make_report(*spec);
  CHECK(report.kv_bytes_per_token == 3 * 2 * 8 * 128 * 2);  // three layers' K and V, f16
  // The table and the JSON show both: the state, and the three layers' cache.
  CHECK(report_json(report)["kv_cache"]["bytes_per_token"] == 3 * 2 * 8 * 128 * 2);
  CHECK(report_json(report)["ssm_state"]["bytes_per_sequence"] == report.conv_state_bytes + report.scan_state_bytes);
  CHECK(format_report(report).find("| KV cache (f16) | bytes |") != std::string::npos);
  CHECK(report.conv_state_bytes == 29 * (8192 + 256) * 3 * 4);
  CHECK(report.scan_state_bytes == int64_t{29} * 8192 * 128 * 4);
  // A decode token's keys: 4 FLOPs a head dimension in each of the three
  // attention layers (the Mamba-2 layers attend to nothing).
  REQUIRE(report.decode_flops_per_token.size() == 2);
  CHECK(report.decode_flops_per_token[1].second - report.decode_flops_per_token[0].second ==
        3.0 * 4 * 32 * 128 * (2048 - 128));
}
