// The Hugging Face importer's state-space families: Mamba, Mamba-2 and Bamba.
#include "generator/import/hf_importer.hpp"

namespace lathe::importer::hf {

void Importer::read_mamba() {
  const Config::Field<int64_t> hidden = read_core(kMambaCore).hidden;
  c_.use("n_layer");  // mamba_ssm's name of num_hidden_layers, written beside it
  c_.use("d_model");
  c_.use("pad_vocab_size_multiple");  // vocab_size is the padded count already

  TomlTable& m = t("ssm");
  m.set("kind", "mamba", info_.model_class + std::string("Mixer"));
  auto state = c_.integer_or("state_size", 16, 1, 4096);
  auto conv = c_.integer_or("conv_kernel", 4, 1, 64);
  auto expand = c_.integer_or("expand", 2, 1, 64);
  m.set("d_state", state.value, state.note).set("d_conv", conv.value, conv.note).set("expand", expand.value, expand.note);
  // intermediate_size: MambaConfig computes expand · hidden_size and writes it.
  if (auto inner = c_.integer("intermediate_size")) {
    if (*inner != expand.value * hidden.value)
      c_.error("intermediate_size = " + std::to_string(*inner) + ": MambaConfig sets it to expand · hidden_size = " +
               std::to_string(expand.value * hidden.value));
  }
  // time_step_rank: an integer, or "auto" = ceil(hidden_size / 16).
  c_.use("time_step_rank");
  if (c_.has("time_step_rank") && c_.at("time_step_rank").is_string()) {
    if (c_.at("time_step_rank").get<std::string>() != "auto")
      c_.value_error("time_step_rank", c_.at("time_step_rank"), "expected an integer or \"auto\"");
    m.set("dt_rank", (hidden.value + 15) / 16, "time_step_rank = \"auto\": ceil(hidden_size / 16)");
  } else if (auto rank = c_.integer("time_step_rank")) {
    m.set("dt_rank", *rank, "time_step_rank");
  } else {
    m.set("dt_rank", (hidden.value + 15) / 16, c_.default_note("time_step_rank") + ": \"auto\", ceil(hidden_size / 16)");
  }
  auto conv_bias = c_.boolean_or("use_conv_bias", true);
  auto bias = c_.boolean_or("use_bias", false);
  m.set("conv_bias", conv_bias.value, conv_bias.note).set("bias", bias.value, bias.note + ": in_proj and out_proj");
  // Training-time settings: the initialization of dt and A, the residual's
  // dtype (the runtime adds in f32 anyway), mamba_ssm's fused kernels.
  for (const char* key : {"time_step_scale", "time_step_min", "time_step_max", "time_step_init_scheme", "time_step_floor",
                          "rescale_prenorm_residual", "residual_in_fp32", "fused_add_norm", "use_mambapy", "ssm_cfg",
                          "use_associative_scan"})
    c_.use(key);
  read_ssm_blocks("MambaRMSNorm", true);
}

void Importer::read_ssm_blocks(const char* norm_class, bool tied_default) {
  if (auto act = c_.string("hidden_act"); act && *act != "silu")
    c_.value_error("hidden_act", c_.at("hidden_act"), std::string("the ") + info_.model_class +
                                                          " mixer's activation is SiLU (\"silu\")");
  if (auto rms = c_.boolean("rms_norm"); rms && !*rms)
    c_.error(std::string("rms_norm = false: transformers' ") + info_.model_class + "Block normalizes with " +
             norm_class + " whatever it says");
  auto eps = epsilon("layer_norm_epsilon", 1e-5);
  t("norm").set("kind", "rmsnorm", norm_class).set("eps", eps.value, eps.note);
  set_tied(tied_default);
  t("weights").set("preset", "hf-mamba");
}

void Importer::read_mamba2() {
  const Config::Field<int64_t> hidden = read_core(kMamba2Core).hidden;

  read_mamba2_mixer({"state_size", "conv_kernel", "expand", "head_dim", "num_heads", "n_groups", "use_conv_bias",
                     "use_bias"},
                    hidden.value, 8, "Mamba2Mixer");
  // Training-time settings (dt's and A's initialization, the residual's
  // dtype: the runtime adds in f32 anyway), the chunk of mamba_ssm's
  // chunked scan (a kernel's tiling, not the model's), time_step_rank
  // (Mamba2Mixer has no dt_proj).
  for (const char* key : {"time_step_rank", "time_step_min", "time_step_max", "time_step_floor", "rescale_prenorm_residual",
                          "residual_in_fp32", "chunk_size", "initializer_range"})
    c_.use(key);
  read_ssm_blocks("Mamba2RMSNorm", false);
}

void Importer::read_mamba2_mixer(std::array<const char*, 8> keys, int64_t hidden, int64_t default_groups, const char* mixer) {
  TomlTable& m = t("ssm");
  m.set("kind", "mamba2", mixer);
  auto state = c_.integer_or(keys[0], 128, 1, 4096);
  auto conv = c_.integer_or(keys[1], 4, 1, 64);
  auto expand = c_.integer_or(keys[2], 2, 1, 64);
  auto heads = c_.integer_or(keys[4], 128);
  Config::Field<int64_t> head_dim;
  // A hybrid's "auto" head dim (BambaConfig's default): d_inner / heads.
  const bool automatic = !c_.has(keys[3]) ? std::string_view(keys[3]) == "mamba_d_head"
                                          : c_.at(keys[3]).is_string();
  if (automatic) {
    c_.use(keys[3]);
    if (c_.has(keys[3]) && c_.at(keys[3]).get<std::string>() != "auto")
      c_.value_error(keys[3], c_.at(keys[3]), "expected an integer or \"auto\"");
    head_dim = {heads.value > 0 ? expand.value * hidden / heads.value : 0,
                std::string(keys[3]) + " \"auto\": d_inner / heads", true};
  } else {
    head_dim = c_.integer_or(keys[3], 64);
  }
  auto groups = c_.integer_or(keys[5], default_groups);
  m.set("d_state", state.value, state.note).set("d_conv", conv.value, conv.note).set("expand", expand.value, expand.note);
  // The mixer's widths: intermediate_size = expand · hidden_size, split
  // into heads of head_dim, in groups of B and C.
  const int64_t inner = expand.value * hidden;
  if (heads.value * head_dim.value != inner)
    c_.error(std::string(keys[4]) + " (" + std::to_string(heads.value) + ") × " + keys[3] + " (" +
             std::to_string(head_dim.value) + ") is not expand × hidden_size = " + std::to_string(inner) + ": " +
             mixer + "'s heads split d_inner");
  else if (heads.value % groups.value != 0)
    c_.error(std::string(keys[4]) + " (" + std::to_string(heads.value) + ") is not a multiple of " + keys[5] + " (" +
             std::to_string(groups.value) + "): each group's B and C serve heads / groups heads");
  m.set("heads", heads.value, heads.note).set("head_dim", head_dim.value, head_dim.note);
  m.set("groups", groups.value, groups.note);
  // time_step_limit: the range dt is clamped to, (0, Infinity) by default.
  if (c_.has("time_step_limit") && !c_.is_null("time_step_limit")) {
    c_.use("time_step_limit");
    const json& lim = c_.at("time_step_limit");
    if (!lim.is_array() || lim.size() != 2 || !lim[0].is_number() || !lim[1].is_number() ||
        std::isnan(lim[0].get<double>()) || std::isnan(lim[1].get<double>()) || lim[0].get<double>() < 0 ||
        !std::isfinite(lim[0].get<double>()) || lim[1].get<double>() <= lim[0].get<double>())
      c_.value_error("time_step_limit", lim, "expected [min, max] with 0 <= min < max (max may be Infinity)");
    else {
      if (lim[0].get<double>() > 0) m.set("dt_min", lim[0].get<double>(), "time_step_limit[0]");
      if (std::isfinite(lim[1].get<double>())) m.set("dt_max", lim[1].get<double>(), "time_step_limit[1]");
    }
  }
  auto conv_bias = c_.boolean_or(keys[6], true);
  auto bias = c_.boolean_or(keys[7], false);
  m.set("conv_bias", conv_bias.value, conv_bias.note).set("bias", bias.value, bias.note + ": in_proj and out_proj");
  if (auto before = c_.boolean("norm_before_gate"); before && *before)
    c_.error(std::string("norm_before_gate = true: ") + mixer + " gates before its norm (norm(y · SiLU(z)))");
}

void Importer::read_bamba() {
  read_llama_like();
  // BambaConfig sets partial_rotary_factor to 0.5 whatever the config says;
  // mamba_ssm's attn_rotary_emb, where a config keeps it, must agree.
  c_.use("partial_rotary_factor");
  set_rotary_fraction(0.5, "partial_rotary_factor (BambaConfig hard-codes it)");
  if (auto rotary = c_.integer("attn_rotary_emb"); rotary && *rotary != head_dim_ / 2)
    c_.error("attn_rotary_emb = " + std::to_string(*rotary) + ": transformers' Bamba rotates half of each head (" +
             std::to_string(head_dim_ / 2) + " of head_dim " + std::to_string(head_dim_) + ")");
  const int64_t hidden = c_.integer_or("hidden_size", 4096).value;
  read_mamba2_mixer({"mamba_d_state", "mamba_d_conv", "mamba_expand", "mamba_d_head", "mamba_n_heads", "mamba_n_groups",
                     "mamba_conv_bias", "mamba_proj_bias"},
                    hidden, 1, "BambaMixer");
  std::vector<int64_t> attention;
  if (c_.has("attn_layer_indices")) {
    c_.use("attn_layer_indices");
    const json& list = c_.at("attn_layer_indices");
    bool ok = list.is_array();
    for (const json& v : ok ? list : json::array()) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= layers_) {
        ok = false;
        break;
      }
      if (std::find(attention.begin(), attention.end(), v.get<int64_t>()) == attention.end())
        attention.push_back(v.get<int64_t>());
    }
    if (!ok)
      c_.value_error("attn_layer_indices", list,
                     "expected layer numbers from 0 to num_hidden_layers - 1 (" + std::to_string(layers_ - 1) + ")");
    std::sort(attention.begin(), attention.end());
  }
  if (attention.empty())
    c_.error("attn_layer_indices: none given; a Bamba model without attention layers is a Mamba-2 model "
             "(model_type \"mamba2\")");
  else if (static_cast<int64_t>(attention.size()) >= layers_)
    c_.error("attn_layer_indices: every layer is an attention layer; a Bamba model without Mamba layers is a Llama");
  else
    t("ssm").set("attention_layers", attention, "attn_layer_indices: these layers' mixer is attention");
  // The chunk of the chunked scan (a kernel's tiling), the training-time
  // initialization of dt, the z-loss of training; num_logits_to_keep is
  // a generation setting.
  for (const char* key : {"mamba_chunk_size", "time_step_min", "time_step_max", "time_step_floor", "z_loss_coefficient",
                          "num_logits_to_keep", "initializer_range"})
    c_.use(key);
  t("weights").set("preset", "hf-bamba");
}

}  // namespace lathe::importer::hf
