// The naming presets: module paths per role, as each checkpoint family names them.
#include "generator/spec/parse.hpp"

namespace lathe::spec {

std::vector<std::string> preset_list() { return {"hf-llama", "hf-gpt2", "hf-bert", "hf-t5", "hf-bart", "hf-mamba", "hf-bamba", "gguf"};
}

namespace {

// A T5 stack's layers ("encoder" or "decoder"): pre-norm blocks of
// T5LayerNorm (RMS); a decoder block's sub-layers are self-attention,
// cross-attention (EncDecAttention) and the MLP, an encoder's the first and last.
void t5_layers(std::map<Role, std::string>& n, const std::string& stack) {
  const std::string L = stack + ".block.{layer}.layer.";
  const std::string mlp = stack == "decoder" ? "2" : "1";
  n[Role::AttnNorm] = L + "0.layer_norm";
  n[Role::Q] = L + "0.SelfAttention.q";
  n[Role::K] = L + "0.SelfAttention.k";
  n[Role::V] = L + "0.SelfAttention.v";
  n[Role::O] = L + "0.SelfAttention.o";
  if (stack == "decoder") {
    n[Role::CrossNorm] = L + "1.layer_norm";
    n[Role::CrossQ] = L + "1.EncDecAttention.q";
    n[Role::CrossK] = L + "1.EncDecAttention.k";
    n[Role::CrossV] = L + "1.EncDecAttention.v";
    n[Role::CrossO] = L + "1.EncDecAttention.o";
  }
  n[Role::MlpNorm] = L + mlp + ".layer_norm";
  // T5 v1.0's MLP is wi then wo; a gated one (v1.1, Flan-T5) is wi_0 (the
  // activated half) and wi_1, whose spec names up as wi_1.
  n[Role::Gate] = L + mlp + ".DenseReluDense.wi_0";
  n[Role::Up] = L + mlp + ".DenseReluDense.wi";
  n[Role::Down] = L + mlp + ".DenseReluDense.wo";
}

// A BART stack's layers (transformers' BartForConditionalGeneration):
// post-norm blocks, each branch's LayerNorm after its residual add.
void bart_layers(std::map<Role, std::string>& n, const std::string& stack) {
  const std::string L = "model." + stack + ".layers.{layer}.";
  n[Role::Q] = L + "self_attn.q_proj";
  n[Role::K] = L + "self_attn.k_proj";
  n[Role::V] = L + "self_attn.v_proj";
  n[Role::O] = L + "self_attn.out_proj";
  n[Role::AttnNorm] = L + "self_attn_layer_norm";
  if (stack == "decoder") {
    n[Role::CrossQ] = L + "encoder_attn.q_proj";
    n[Role::CrossK] = L + "encoder_attn.k_proj";
    n[Role::CrossV] = L + "encoder_attn.v_proj";
    n[Role::CrossO] = L + "encoder_attn.out_proj";
    n[Role::CrossNorm] = L + "encoder_attn_layer_norm";
  }
  n[Role::Up] = L + "fc1";
  n[Role::Down] = L + "fc2";
  n[Role::MlpNorm] = L + "final_layer_norm";
}

}  // namespace

std::map<Role, std::string> preset_encoder_names(const std::string& preset, NormPlacement) {
  std::map<Role, std::string> n;
  if (preset == "hf-t5") t5_layers(n, "encoder");
  if (preset == "hf-bart") bart_layers(n, "encoder");
  return n;
}

std::map<Role, std::string> preset_names(const std::string& preset, NormPlacement placement, Stack stack) {
  std::map<Role, std::string> n;
  const bool four_norms = placement == NormPlacement::Sandwich || placement == NormPlacement::BranchOutput;
  if (preset == "hf-llama" || preset == "hf-bamba") {
    const std::string L = "model.layers.{layer}.";
    n[Role::Embed] = "model.embed_tokens";
    n[Role::AttnNorm] = L + "input_layernorm";
    if (four_norms) {
      // Gemma 2/3 and OLMo 2 give post_attention_layernorm to the attention branch.
      n[Role::AttnPostNorm] = L + "post_attention_layernorm";
      n[Role::MlpNorm] = L + "pre_feedforward_layernorm";
      n[Role::MlpPostNorm] = L + "post_feedforward_layernorm";
    } else {
      n[Role::MlpNorm] = L + "post_attention_layernorm";
    }
    n[Role::Q] = L + "self_attn.q_proj";
    n[Role::K] = L + "self_attn.k_proj";
    n[Role::V] = L + "self_attn.v_proj";
    n[Role::Qkv] = L + "self_attn.qkv_proj";
    n[Role::O] = L + "self_attn.o_proj";
    n[Role::QNorm] = L + "self_attn.q_norm";
    n[Role::KNorm] = L + "self_attn.k_norm";
    n[Role::Gate] = L + "mlp.gate_proj";
    n[Role::Up] = L + "mlp.up_proj";
    n[Role::GateUp] = L + "mlp.gate_up_proj";
    n[Role::Down] = L + "mlp.down_proj";
    n[Role::Router] = L + "block_sparse_moe.gate";
    n[Role::ExpertGate] = L + "block_sparse_moe.experts.{expert}.w1";
    n[Role::ExpertUp] = L + "block_sparse_moe.experts.{expert}.w3";
    n[Role::ExpertDown] = L + "block_sparse_moe.experts.{expert}.w2";
    n[Role::SharedGate] = L + "mlp.shared_expert.gate_proj";
    n[Role::SharedUp] = L + "mlp.shared_expert.up_proj";
    n[Role::SharedDown] = L + "mlp.shared_expert.down_proj";
    n[Role::SharedExpertGate] = L + "mlp.shared_expert_gate";
    n[Role::RouterBias] = L + "mlp.gate.e_score_correction_bias";  // DeepSeek-V3
    // DeepSeek-V2/V3's multi-head latent attention.
    n[Role::QA] = L + "self_attn.q_a_proj";
    n[Role::QANorm] = L + "self_attn.q_a_layernorm";
    n[Role::QB] = L + "self_attn.q_b_proj";
    n[Role::KvA] = L + "self_attn.kv_a_proj_with_mqa";
    n[Role::KvANorm] = L + "self_attn.kv_a_layernorm";
    n[Role::KvB] = L + "self_attn.kv_b_proj";
    n[Role::FinalNorm] = "model.norm";
    n[Role::LmHead] = "lm_head";
    if (preset == "hf-bamba") {
      // transformers' BambaForCausalLM: Llama's attention; the Mamba-2 mixer
      // (its own parameters and gated norm) as `mamba`, behind the same
      // input_layernorm; the MLP as feed_forward behind pre_ff_layernorm.
      n[Role::SsmNorm] = L + "input_layernorm";
      n[Role::SsmIn] = L + "mamba.in_proj";
      n[Role::SsmConv] = L + "mamba.conv1d";
      n[Role::SsmDtBias] = L + "mamba.dt_bias";
      n[Role::SsmA] = L + "mamba.A_log";
      n[Role::SsmD] = L + "mamba.D";
      n[Role::SsmGateNorm] = L + "mamba.norm";
      n[Role::SsmOut] = L + "mamba.out_proj";
      n[Role::MlpNorm] = L + "pre_ff_layernorm";
      n[Role::Gate] = L + "feed_forward.gate_proj";
      n[Role::Up] = L + "feed_forward.up_proj";
      n[Role::Down] = L + "feed_forward.down_proj";
      n[Role::FinalNorm] = "model.final_layernorm";
    }
  } else if (preset == "hf-gpt2") {
    const std::string L = "h.{layer}.";
    n[Role::Embed] = "wte";
    n[Role::PosEmbed] = "wpe";
    n[Role::AttnNorm] = L + "ln_1";
    n[Role::Qkv] = L + "attn.c_attn";
    n[Role::O] = L + "attn.c_proj";
    n[Role::MlpNorm] = L + "ln_2";
    n[Role::Up] = L + "mlp.c_fc";
    n[Role::Down] = L + "mlp.c_proj";
    n[Role::FinalNorm] = "ln_f";
    n[Role::LmHead] = "lm_head";
  } else if (preset == "hf-bert") {
    // transformers' BertModel (and RoBERTa's): post-norm blocks, the
    // attention's norm after its output projection, the MLP's after its down.
    const std::string L = "encoder.layer.{layer}.";
    n[Role::Embed] = "embeddings.word_embeddings";
    n[Role::PosEmbed] = "embeddings.position_embeddings";
    n[Role::TokenTypes] = "embeddings.token_type_embeddings";
    n[Role::EmbedNorm] = "embeddings.LayerNorm";
    n[Role::Q] = L + "attention.self.query";
    n[Role::K] = L + "attention.self.key";
    n[Role::V] = L + "attention.self.value";
    n[Role::O] = L + "attention.output.dense";
    n[Role::AttnNorm] = L + "attention.output.LayerNorm";
    n[Role::Up] = L + "intermediate.dense";
    n[Role::Down] = L + "output.dense";
    n[Role::MlpNorm] = L + "output.LayerNorm";
  } else if (preset == "hf-t5") {
    // transformers' T5EncoderModel, or a whole T5ForConditionalGeneration:
    // the relative bias in each stack's first block's attention, shared by all.
    n[Role::Embed] = "shared";
    if (stack == Stack::EncoderDecoder) {
      t5_layers(n, "decoder");
      n[Role::EncoderRelBias] = "encoder.block.0.layer.0.SelfAttention.relative_attention_bias";
      n[Role::EncoderFinalNorm] = "encoder.final_layer_norm";
      n[Role::RelBias] = "decoder.block.0.layer.0.SelfAttention.relative_attention_bias";
      n[Role::FinalNorm] = "decoder.final_layer_norm";
      n[Role::LmHead] = "lm_head";
    } else {
      t5_layers(n, "encoder");
      n[Role::RelBias] = "encoder.block.0.layer.0.SelfAttention.relative_attention_bias";
      n[Role::FinalNorm] = "encoder.final_layer_norm";
    }
  } else if (preset == "hf-bart") {
    // BART's shared table, each stack's learned positions and embedding
    // norm; the LM head's bias is final_logits_bias ([1, vocab]).
    bart_layers(n, "decoder");
    n[Role::Embed] = "model.shared";
    n[Role::EncoderPosEmbed] = "model.encoder.embed_positions";
    n[Role::EncoderEmbedNorm] = "model.encoder.layernorm_embedding";
    n[Role::EncoderFinalNorm] = "model.encoder.layer_norm";
    n[Role::PosEmbed] = "model.decoder.embed_positions";
    n[Role::EmbedNorm] = "model.decoder.layernorm_embedding";
    n[Role::FinalNorm] = "model.decoder.layer_norm";
    n[Role::LmHead] = "lm_head";
    n[Role::LogitsBias] = "final_logits_bias";
  } else if (preset == "hf-mamba") {
    // transformers' MambaForCausalLM and Mamba2ForCausalLM:
    // backbone.layers.{layer} = MambaBlock or Mamba2Block (norm, mixer);
    // A_log, D and (Mamba-2) dt_bias are the mixer's own parameters.
    const std::string L = "backbone.layers.{layer}.";
    n[Role::Embed] = "backbone.embeddings";
    n[Role::SsmNorm] = L + "norm";
    n[Role::SsmIn] = L + "mixer.in_proj";
    n[Role::SsmConv] = L + "mixer.conv1d";
    n[Role::SsmX] = L + "mixer.x_proj";
    n[Role::SsmDt] = L + "mixer.dt_proj";
    n[Role::SsmA] = L + "mixer.A_log";
    n[Role::SsmD] = L + "mixer.D";
    n[Role::SsmOut] = L + "mixer.out_proj";
    n[Role::SsmDtBias] = L + "mixer.dt_bias";
    n[Role::SsmGateNorm] = L + "mixer.norm";
    n[Role::FinalNorm] = "backbone.norm_f";
    n[Role::LmHead] = "lm_head";
  } else if (preset == "gguf") {
    const std::string L = "blk.{layer}.";
    n[Role::Embed] = "token_embd";
    n[Role::PosEmbed] = "position_embd";
    n[Role::EmbedNorm] = "token_embd_norm";  // BLOOM, BERT
    n[Role::TokenTypes] = "token_types";      // BERT
    n[Role::AttnNorm] = L + "attn_norm";
    n[Role::AttnPostNorm] = L + "post_attention_norm";
    n[Role::MlpNorm] = L + "ffn_norm";
    n[Role::MlpPostNorm] = L + "post_ffw_norm";
    n[Role::Q] = L + "attn_q";
    n[Role::K] = L + "attn_k";
    n[Role::V] = L + "attn_v";
    n[Role::Qkv] = L + "attn_qkv";
    n[Role::O] = L + "attn_output";
    n[Role::QNorm] = L + "attn_q_norm";
    n[Role::KNorm] = L + "attn_k_norm";
    n[Role::Gate] = L + "ffn_gate";
    n[Role::Up] = L + "ffn_up";
    // Experts: each layer's stacked in one tensor per role (no {expert}).
    n[Role::Router] = L + "ffn_gate_inp";
    n[Role::ExpertGate] = L + "ffn_gate_exps";
    n[Role::ExpertUp] = L + "ffn_up_exps";
    n[Role::ExpertDown] = L + "ffn_down_exps";
    n[Role::SharedGate] = L + "ffn_gate_shexp";
    n[Role::SharedUp] = L + "ffn_up_shexp";
    n[Role::SharedDown] = L + "ffn_down_shexp";
    n[Role::SharedExpertGate] = L + "ffn_gate_inp_shexp";  // a vector [hidden] (core/manifest.cpp)
    n[Role::RouterBias] = L + "exp_probs_b.bias";  // llama.cpp's deepseek2
    // deepseek2's latent attention: kv_b_proj whole (older files) or split
    // into attn_k_b and attn_v_b (mla.split_kv_b: what its converter writes).
    n[Role::QA] = L + "attn_q_a";
    n[Role::QANorm] = L + "attn_q_a_norm";
    n[Role::QB] = L + "attn_q_b";
    n[Role::KvA] = L + "attn_kv_a_mqa";
    n[Role::KvANorm] = L + "attn_kv_a_norm";
    n[Role::KvB] = L + "attn_kv_b";
    n[Role::KB] = L + "attn_k_b";
    n[Role::VB] = L + "attn_v_b";
    n[Role::GateUp] = L + "ffn_up";  // Phi-3: gate and up in one tensor
    // mamba and mamba2: the mixer's norm is attn_norm; A (stored as A, not
    // A_log) and D have no suffix, Mamba-2's dt_bias is ssm_dt's bias.
    n[Role::SsmNorm] = L + "attn_norm";
    n[Role::SsmIn] = L + "ssm_in";
    n[Role::SsmConv] = L + "ssm_conv1d";
    n[Role::SsmX] = L + "ssm_x";
    n[Role::SsmDt] = L + "ssm_dt";
    n[Role::SsmA] = L + "ssm_a";
    n[Role::SsmD] = L + "ssm_d";
    n[Role::SsmDtBias] = L + "ssm_dt.bias";
    n[Role::SsmGateNorm] = L + "ssm_norm";
    n[Role::SsmOut] = L + "ssm_out";
    n[Role::Down] = L + "ffn_down";
    n[Role::Router] = L + "ffn_gate_inp";
    n[Role::FinalNorm] = "output_norm";
    n[Role::LmHead] = "output";
    if (placement == NormPlacement::Post) {
      // llama.cpp's bert and nomic-bert, the post-norm families it reads:
      // the norm after the attention's residual add, then the block's last.
      n[Role::AttnNorm] = L + "attn_output_norm";
      n[Role::MlpNorm] = L + "layer_output_norm";
    }
  }
  return n;
}

}  // namespace lathe::spec

namespace lathe::spec {

std::vector<std::string> vision_preset_list() { return {"hf-clip", "hf-siglip", "hf-pixtral", "hf-mllama", "gguf"}; }

// transformers' module paths. The towers: CLIPVisionModel and
// SiglipVisionModel under a llava or Gemma 3 model's vision_tower.vision_model
// (encoder.layers, layer_norm1/2, mlp.fc1/fc2), PixtralVisionModel under
// vision_tower (transformer.layers, attention_norm, feed_forward's gated
// MLP), MllamaVisionModel under vision_model (transformer.layers and
// global_transformer.layers, input_layernorm, post_attention_layernorm). The
// projectors: LlavaMultiModalProjector (linear_1, linear_2), Mistral3's (its
// norm and patch_merger.merging_layer before them), Gemma3's
// (mm_soft_emb_norm, the parameter mm_input_projection_weight), Mllama's (one
// linear). gguf: llama.cpp's mmproj files (tools/mtmd/clip-impl.h's names),
// the tower under v., the projector under mm.: LLaVA's mlp as mm.0 and mm.2,
// Pixtral's and Mistral 3's as mm.1 and mm.2 (with mm.input_norm and
// mm.patch_merger), Gemma 3's mm.soft_emb_norm and mm.input_projection.
namespace {

// A tower layer's module paths under L: its norms, the attention's
// projections (q/k/v_proj and the output's own name) and the MLP's (a gated
// one with its gate).
struct TowerLayer {
  const char* attn_norm;
  const char* attention;
  const char* out;
  const char* mlp_norm;
  const char* gate;  // null: not gated
  const char* up;
  const char* down;
};
constexpr TowerLayer kClipLayer = {"layer_norm1", "self_attn.", "out_proj", "layer_norm2", nullptr, "mlp.fc1", "mlp.fc2"};
constexpr TowerLayer kPixtralLayer = {"attention_norm", "attention.", "o_proj", "ffn_norm",
                                      "feed_forward.gate_proj", "feed_forward.up_proj", "feed_forward.down_proj"};
constexpr TowerLayer kMmprojLayer = {"ln1", "attn_", "out", "ln2", "ffn_gate", "ffn_up", "ffn_down"};
constexpr TowerLayer kMllamaLayer = {"input_layernorm", "self_attn.", "o_proj", "post_attention_layernorm",
                                     nullptr, "mlp.fc1", "mlp.fc2"};

void tower_layer(std::map<Role, std::string>& n, const std::string& L, const TowerLayer& t) {
  n[Role::AttnNorm] = L + t.attn_norm;
  n[Role::Q] = L + t.attention + "q_proj";
  n[Role::K] = L + t.attention + "k_proj";
  n[Role::V] = L + t.attention + "v_proj";
  n[Role::O] = L + t.attention + t.out;
  n[Role::MlpNorm] = L + t.mlp_norm;
  if (t.gate) n[Role::Gate] = L + t.gate;
  n[Role::Up] = L + t.up;
  n[Role::Down] = L + t.down;
}

}  // namespace

std::map<Role, std::string> vision_preset_names(const std::string& preset, const Vision& v) {
  std::map<Role, std::string> n;
  if (preset == "hf-clip" || preset == "hf-siglip") {
    const std::string T = "vision_tower.vision_model.";
    n[Role::PatchEmbed] = T + "embeddings.patch_embedding";
    n[Role::PosEmbed] = T + "embeddings.position_embedding";
    if (preset == "hf-clip") {
      n[Role::ClassEmbed] = T + "embeddings.class_embedding";
      n[Role::EmbedNorm] = T + "pre_layrnorm";  // sic
    }
    n[Role::FinalNorm] = T + "post_layernorm";
    tower_layer(n, T + "encoder.layers.{layer}.", kClipLayer);
  } else if (preset == "hf-pixtral") {
    const std::string T = "vision_tower.";
    n[Role::PatchEmbed] = T + "patch_conv";
    n[Role::EmbedNorm] = T + "ln_pre";
    tower_layer(n, T + "transformer.layers.{layer}.", kPixtralLayer);
  } else if (preset == "hf-mllama") {
    const std::string T = "vision_model.";
    n[Role::PatchEmbed] = T + "patch_embedding";
    n[Role::ClassEmbed] = T + "class_embedding";
    n[Role::PosEmbed] = T + "gated_positional_embedding.embedding";
    n[Role::PosGate] = T + "gated_positional_embedding.gate";
    n[Role::TilePosEmbed] = T + "gated_positional_embedding.tile_embedding";
    n[Role::PreTileEmbed] = T + "pre_tile_positional_embedding.embedding";
    n[Role::PreTileGate] = T + "pre_tile_positional_embedding.gate";
    n[Role::PostTileEmbed] = T + "post_tile_positional_embedding.embedding";
    n[Role::PostTileGate] = T + "post_tile_positional_embedding.gate";
    n[Role::EmbedNorm] = T + "layernorm_pre";
    n[Role::FinalNorm] = T + "layernorm_post";
    tower_layer(n, T + "transformer.layers.{layer}.", kMllamaLayer);
  } else if (preset == "gguf") {
    n[Role::PatchEmbed] = "v.patch_embd";
    n[Role::PosEmbed] = "v.position_embd";
    n[Role::ClassEmbed] = "v.class_embd";
    n[Role::EmbedNorm] = "v.pre_ln";
    n[Role::FinalNorm] = "v.post_ln";
    tower_layer(n, "v.blk.{layer}.", kMmprojLayer);
    n[Role::Q] = "v.blk.{layer}.attn_q";
    n[Role::K] = "v.blk.{layer}.attn_k";
    n[Role::V] = "v.blk.{layer}.attn_v";
    // LLaVA's mlp is mm.0 and mm.2 (the indices of its nn.Sequential);
    // Pixtral's converter names linear_1 and linear_2 mm.1 and mm.2.
    const bool pixtral = v.positions == VisionPositions::Rope2D;
    switch (v.projector.kind) {
      case ProjectorKind::MergeMlp:
        n[Role::ProjNorm] = "mm.input_norm";
        n[Role::PatchMerge] = "mm.patch_merger";
        [[fallthrough]];
      case ProjectorKind::Mlp:
        n[Role::ProjIn] = pixtral ? "mm.1" : "mm.0";
        n[Role::ProjOut] = "mm.2";
        break;
      case ProjectorKind::Pooled:
        n[Role::ProjNorm] = "mm.soft_emb_norm";
        n[Role::ProjIn] = "mm.input_projection.weight";  // stored [vision hidden, hidden], as Gemma 3's parameter
        break;
      case ProjectorKind::Linear: n[Role::ProjIn] = "mm.0"; break;
    }
    return n;
  } else {
    return {};
  }
  const std::string P = "multi_modal_projector.";
  switch (v.projector.kind) {
    case ProjectorKind::MergeMlp:
      n[Role::ProjNorm] = P + "norm";
      n[Role::PatchMerge] = P + "patch_merger.merging_layer";
      [[fallthrough]];
    case ProjectorKind::Mlp:
      n[Role::ProjIn] = P + "linear_1";
      n[Role::ProjOut] = P + "linear_2";
      break;
    case ProjectorKind::Pooled:
      n[Role::ProjNorm] = P + "mm_soft_emb_norm";
      n[Role::ProjIn] = P + "mm_input_projection_weight";  // a parameter [vision hidden, hidden]
      break;
    case ProjectorKind::Linear: n[Role::ProjIn] = "multi_modal_projector"; break;
  }
  return n;
}

std::map<Role, std::string> vision_preset_global_names(const std::string& preset) {
  std::map<Role, std::string> n;
  if (preset != "hf-mllama") return n;
  const std::string L = "vision_model.global_transformer.layers.{layer}.";
  tower_layer(n, L, kMllamaLayer);
  n[Role::AttnGate] = L + "gate_attn";
  n[Role::MlpGate] = L + "gate_ffn";
  return n;
}

}  // namespace lathe::spec
