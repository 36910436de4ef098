// The Hugging Face importer's families that are not Llama's: GPT-2, GPT-NeoX,
// Phi, GPT-J, Falcon, BLOOM, MPT, the encoders (BERT, RoBERTa, ModernBERT) and
// the encoder-decoders (T5, BART).
#include "generator/import/hf_importer.hpp"

namespace lathe::importer::hf {

void Importer::read_gpt2() {
  read_core(kGpt2Core);
  c_.use("n_ctx");  // the old name of n_positions; GPT2Config does not read it
  t("norm").set("placement", "pre");

  TomlTable& a = t("attention");
  a.set("bias", true, "c_attn and c_proj carry biases");
  if (!c_.boolean_or("scale_attn_weights", true).value)
    a.set("scale", 1.0, "scale_attn_weights = false: scores are not divided by sqrt(head_dim)");
  if (c_.boolean("scale_attn_by_inverse_layer_idx").value_or(false))
    c_.error("scale_attn_by_inverse_layer_idx = true: the spec has one score scale for every layer, not "
             "1 / (layer + 1)");
  c_.use("reorder_and_upcast_attn");  // fp32 softmax during training: the same function
  for (const char* key : {"summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels",
                          "summary_first_dropout"})
    c_.use(key);  // GPT2DoubleHeadsModel's classifier head, not the LM

  t("position").set("kind", "learned", "wpe: [n_positions, n_embd]");

  read_activation("activation_function", "gelu_new");
  t("mlp").set("gated", false).set("bias", true);

  auto tied = c_.boolean_or("tie_word_embeddings", true);
  t("embedding").set("tied", tied.value, tied.note);

  t("weights")
      .set("preset", "hf-gpt2")
      .set("layout", "in_out", "Conv1D stores [in, out]")
      .set("fused_qkv", true, "c_attn: [n_embd, 3 * n_embd] = q, k, v")
      .note("The checkpoint also holds each layer's causal-mask buffers.")
      .set("ignore", std::vector<std::string>{"h.{layer}.attn.bias", "h.{layer}.attn.masked_bias"});
}

void Importer::set_names(std::initializer_list<std::pair<const char*, std::string>> names) {
  TomlTable& n = t("weights.names");
  for (const auto& [role, path] : names) n.set(role, path);
}

int64_t Importer::split_heads(const Config::Field<int64_t>& hidden, const Config::Field<int64_t>& heads,
                              const char* why) {
  if (heads.value > 0 && hidden.value % heads.value != 0)
    c_.error(hidden.note + " (" + std::to_string(hidden.value) + ") is not a multiple of " + heads.note + " (" +
             std::to_string(heads.value) + "): " +
             (why ? std::string(why) : hard_coded(" splits the width into heads")));
  const int64_t head_dim = heads.value > 0 ? hidden.value / heads.value : 0;
  head_dim_ = head_dim;
  return head_dim;
}

Importer::Core Importer::read_core(const CoreKeys& row) {
  Core core = read_core_heads(row);
  read_core_widths(row, core);
  return core;
}

Importer::Core Importer::read_core_heads(const CoreKeys& row) {
  Core core;
  core.hidden = read_dim(row.hidden, kMaxDim);
  core.layers = read_dim(row.layers, kMaxLayers);
  if (row.heads.key) core.heads = read_dim(row.heads, kMaxHeads);
  if (row.reads_first) {
    core.vocab = read_dim(row.vocab, kMaxDim);
    core.context = read_context(row);
  }
  TomlTable& d = t("dims");
  d.set("hidden", core.hidden.value, core.hidden.note).set("layers", core.layers.value, core.layers.note);
  layers_ = core.layers.value;
  if (row.heads.key && row.split) {
    d.set("heads", core.heads.value, core.heads.note);
    split_heads(core.hidden, core.heads, row.split_why);
  }
  return core;
}

void Importer::read_core_widths(const CoreKeys& row, const Core& core) {
  read_intermediate(row, core.hidden);
  const Config::Field<int64_t> vocab = core.vocab ? *core.vocab : read_dim(row.vocab, kMaxDim);
  t("dims").set("vocab", vocab.value, vocab.note);
  if (row.context.key || row.context.fallback) set_max_context(core.context ? *core.context : read_context(row));
  if (row.eps) set_layernorm(row.eps);
}

Config::Field<int64_t> Importer::read_dim(const CoreDim& dim, int64_t max) {
  if (dim.alias) return required_any({dim.key, dim.alias}, max);
  if (dim.fallback) return c_.integer_or(dim.key, dim.fallback, 1, max);
  return c_.required(dim.key, max);
}

Config::Field<int64_t> Importer::read_context(const CoreKeys& row) {
  if (!row.context.key) return {row.context.fallback, row.context_note ? row.context_note : "", false};
  auto context = read_dim(row.context, kMaxDim);
  if (row.context_note && !context.given) context.note = row.context_note;
  return context;
}

void Importer::read_intermediate(const CoreKeys& row, const Config::Field<int64_t>& hidden) {
  TomlTable& d = t("dims");
  const std::string key = row.intermediate.key ? row.intermediate.key : "";
  switch (row.width) {
    case Width::Key: {
      if (key.empty()) return;
      auto width = read_dim(row.intermediate, kMaxDim);
      d.set("intermediate", width.value, row.intermediate_note ? row.intermediate_note : width.note);
      return;
    }
    case Width::KeyElse4x:
      if (auto inner = c_.integer(key)) {
        d.set("intermediate", *inner, key);
      } else {
        const int64_t width = four_times(hidden, "4 * " + hidden.note);
        d.set("intermediate", width,
              "4 * " + hidden.note + " (" + key + (c_.is_null(key) ? " is null)" : " not in config.json)"));
      }
      return;
    case Width::KeyDefault4x: {
      auto width = c_.integer_or(key, 4 * hidden.value);
      if (!c_.present(key) || c_.is_null(key))
        width.note = "4 * " + std::string(row.hidden.key) + " (" + key + " not given)";
      d.set("intermediate", width.value, width.note);
      return;
    }
    case Width::Always4x: {
      const int64_t width = four_times(hidden, "4 * hidden");
      d.set("intermediate", width, hard_coded("MLP: 4 * ") + hidden.note);
      return;
    }
    case Width::Ratio: {
      auto ratio = c_.number_or(key, static_cast<double>(row.intermediate.fallback));
      const std::string times = " * " + std::string(row.hidden.key);
      const double width = ratio.value * static_cast<double>(hidden.value);
      if (width != std::floor(width) || width < 1 || width > static_cast<double>(kMaxDim))
        c_.error(key + " = " + shown(ratio.value) + ": the MLP width " + key + times +
                 " must be a whole number between 1 and " + std::to_string(kMaxDim));
      else
        d.set("intermediate", static_cast<int64_t>(width), ratio.note + times);
      return;
    }
  }
}

int64_t Importer::four_times(const Config::Field<int64_t>& hidden, const std::string& width) {
  if (4 * hidden.value > kMaxDim)
    c_.error(hidden.note + " = " + std::to_string(hidden.value) + ": the MLP width " + width + " exceeds " +
             std::to_string(kMaxDim));
  return 4 * hidden.value;
}

Config::Field<int64_t> Importer::required_any(std::initializer_list<const char*> keys, int64_t max) {
  for (const char* k : keys)
    if (c_.has(k)) {
      for (const char* other : keys) c_.use(other);
      return c_.required(k, max);
    }
  return c_.required(*keys.begin(), max);
}

void Importer::set_layernorm(const char* eps_key) {
  auto eps = epsilon(eps_key, 1e-5);
  t("norm").set("kind", "layernorm").set("eps", eps.value, eps.note);
}

void Importer::set_max_context(const Config::Field<int64_t>& context) {
  t("dims").set("max_context", context.value, context.note);
  max_context_ = context.value;
}

void Importer::set_rotary_fraction(double factor, const std::string& note) {
  if (factor <= 0 || factor > 1) {
    c_.error(note + " = " + shown(factor) + ": must be in (0, 1]");
    return;
  }
  const auto rotary = static_cast<int64_t>(static_cast<double>(head_dim_) * factor);
  if (rotary < 2 || rotary % 2 != 0) {
    c_.error(note + " = " + shown(factor) + ": rotates " + std::to_string(rotary) + " of head_dim " +
             std::to_string(head_dim_) + " dims, which is not a positive even number");
    return;
  }
  if (rotary != head_dim_)
    t("position").set("rotary_dim", rotary, note + " = " + shown(factor) + " of head_dim " + std::to_string(head_dim_));
}

void Importer::read_rotary_fraction(std::initializer_list<const char*> keys, double fallback) {
  for (const char* k : keys) c_.use(k);
  if (c_.has("rope_parameters") && c_.at("rope_parameters").is_object()) {
    if (auto f = number_in(c_.at("rope_parameters"), "rope_parameters", "partial_rotary_factor")) {
      set_rotary_fraction(*f, "rope_parameters.partial_rotary_factor");
      return;
    }
  }
  for (const char* k : keys)
    if (auto f = c_.number(k)) {
      set_rotary_fraction(*f, k);
      return;
    }
  set_rotary_fraction(fallback, c_.default_note(*keys.begin()));
}

void Importer::read_rope_base(std::initializer_list<const char*> theta_keys, double fallback) {
  TomlTable& p = t("position");
  c_.use("rope_parameters");
  c_.use("rope_scaling");
  for (const char* k : theta_keys) c_.use(k);
  const json* scaling = nullptr;
  std::string scaling_key = "rope_scaling";
  std::optional<double> theta;
  std::string theta_note;
  if (c_.has("rope_parameters")) {
    const json& rp = c_.at("rope_parameters");
    if (!rp.is_object()) {
      c_.value_error("rope_parameters", rp, "expected an object");
      return;
    }
    scaling = &rp;
    scaling_key = "rope_parameters";
    theta = number_in(rp, "rope_parameters", "rope_theta");
    theta_note = "rope_parameters.rope_theta";
  } else if (c_.has("rope_scaling")) {
    scaling = &c_.at("rope_scaling");
  }
  for (const char* k : theta_keys)
    if (!theta && c_.has(k)) {
      theta = c_.number(k);
      theta_note = k;
    }
  if (!theta) theta_note = c_.default_note(*theta_keys.begin());
  if (theta && *theta <= 0) c_.error(theta_note + " = " + shown(*theta) + ": must be positive");
  p.set("theta", theta.value_or(fallback), theta_note);
  if (scaling != nullptr) read_scaling(*scaling, scaling_key);
}

void Importer::set_tied(bool fallback) {
  auto tied = c_.boolean_or("tie_word_embeddings", fallback);
  t("embedding").set("tied", tied.value, tied.note);
}

void Importer::read_gpt_neox() {
  read_core(kGptNeoxCore);
  auto parallel = c_.boolean_or("use_parallel_residual", true);
  if (parallel.value)
    t("norm")
        .set("placement", "parallel", parallel.note + ": x + attention(ln1(x)) + mlp(ln2(x))")
        .set("parallel_shared", false, "input_layernorm feeds attention, post_attention_layernorm the MLP");
  else
    t("norm").set("placement", "pre", parallel.note + " = false");

  auto bias = c_.boolean_or("attention_bias", true);
  if (bias.value) t("attention").set("bias", true, bias.note + ": query_key_value and dense");
  c_.use("classifier_dropout");  // GPTNeoXForTokenClassification's head

  t("position").set("kind", "rope").set("pairing", "neox", "GPTNeoX rotates halves");
  read_rotary_fraction({"rotary_pct", "partial_rotary_factor"}, 0.25);
  read_rope_base({"rotary_emb_base", "rope_theta"}, 10000.0);

  read_activation("hidden_act", "gelu");
  t("mlp").set("gated", false).set("bias", true, "dense_h_to_4h and dense_4h_to_h carry biases");
  set_tied(false);

  t("weights")
      .set("fused_qkv", true, "query_key_value: [3 * hidden, hidden]")
      .set("qkv_layout", "per_head", "GPTNeoXAttention views it as [heads, 3, head_dim]");
  const std::string L = "gpt_neox.layers.{layer}.";
  set_names({{"embed", "gpt_neox.embed_in"},
             {"attn_norm", L + "input_layernorm"},
             {"mlp_norm", L + "post_attention_layernorm"},
             {"qkv", L + "attention.query_key_value"},
             {"o", L + "attention.dense"},
             {"up", L + "mlp.dense_h_to_4h"},
             {"down", L + "mlp.dense_4h_to_h"},
             {"final_norm", "gpt_neox.final_layer_norm"},
             {"lm_head", "embed_out"}});
  t("weights")
      .note("Older checkpoints also hold each layer's causal mask and rotary buffers.")
      .set("ignore", std::vector<std::string>{L + "attention.bias", L + "attention.masked_bias",
                                              L + "attention.rotary_emb.inv_freq"});
}

void Importer::read_phi() {
  const Core core = read_core_heads(kPhiCore);
  const Config::Field<int64_t>& heads = core.heads;
  if (c_.is_null("num_key_value_heads") || !c_.present("num_key_value_heads")) {
    c_.use("num_key_value_heads");
  } else if (auto kv = c_.integer("num_key_value_heads", 1, kMaxHeads)) {
    if (*kv != heads.value) {
      if (heads.value % *kv != 0)
        c_.error("num_attention_heads (" + std::to_string(heads.value) + ") is not a multiple of num_key_value_heads (" +
                 std::to_string(*kv) + ")");
      t("dims").set("kv_heads", *kv, "num_key_value_heads");
    }
  }
  read_core_widths(kPhiCore, core);
  t("norm")
      .set("placement", "parallel", "PhiDecoderLayer: x + attention(ln(x)) + mlp(ln(x))")
      .set("parallel_shared", true, "one input_layernorm");
  if (c_.boolean("qk_layernorm").value_or(false))
    c_.error("qk_layernorm = true: Phi's q/k LayerNorms (with biases) are not the spec's RMSNorm qk_norm");
  t("attention").set("bias", true, "PhiAttention: q/k/v_proj and dense carry biases");

  t("position").set("kind", "rope").set("pairing", "neox", "Phi rotates halves");
  read_rotary_fraction({"partial_rotary_factor"}, 0.5);
  read_rope_base({"rope_theta"}, 10000.0);

  read_activation("hidden_act", "gelu_new");
  t("mlp").set("gated", false).set("bias", true, "fc1 and fc2 carry biases");
  set_tied(false);
  t("output").set("bias", true, "PhiForCausalLM: lm_head carries a bias");

  const std::string L = "model.layers.{layer}.";
  set_names({{"embed", "model.embed_tokens"},
             {"attn_norm", L + "input_layernorm"},
             {"q", L + "self_attn.q_proj"},
             {"k", L + "self_attn.k_proj"},
             {"v", L + "self_attn.v_proj"},
             {"o", L + "self_attn.dense"},
             {"up", L + "mlp.fc1"},
             {"down", L + "mlp.fc2"},
             {"final_norm", "model.final_layernorm"},
             {"lm_head", "lm_head"}});
}

void Importer::read_gptj() {
  read_core(kGptjCore);
  t("norm")
      .set("placement", "parallel", "GPTJBlock: x + attention(ln_1(x)) + mlp(ln_1(x))")
      .set("parallel_shared", true, "one ln_1");

  TomlTable& p = t("position");
  p.set("kind", "rope").set("pairing", "interleaved", "GPTJ rotates every two dims (rotate_every_two)");
  std::optional<int64_t> rotary;
  std::string rotary_note = "rotary_dim";
  if (c_.is_null("rotary_dim")) {
    c_.use("rotary_dim");
    rotary_note = "rotary_dim = null: the whole head";
  } else if (auto r = c_.integer("rotary_dim", 1, kMaxHeads)) {
    rotary = *r;
  } else if (!c_.present("rotary_dim")) {
    rotary = 64;
    rotary_note = c_.default_note("rotary_dim");
  }
  if (rotary && (*rotary % 2 != 0 || *rotary > head_dim_))
    c_.error(rotary_note + " = " + std::to_string(*rotary) + ": must be even and at most head_dim " +
             std::to_string(head_dim_));
  else if (rotary && *rotary != head_dim_)
    p.set("rotary_dim", *rotary, rotary_note);
  p.set("theta", 10000.0, "GPTJ: create_sinusoidal_positions hard-codes base 10000");

  read_activation("activation_function", "gelu_new");
  t("mlp").set("gated", false).set("bias", true, "fc_in and fc_out carry biases");
  set_tied(false);
  t("output").set("bias", true, "GPTJForCausalLM: lm_head carries a bias");

  const std::string L = "transformer.h.{layer}.";
  set_names({{"embed", "transformer.wte"},
             {"attn_norm", L + "ln_1"},
             {"q", L + "attn.q_proj"},
             {"k", L + "attn.k_proj"},
             {"v", L + "attn.v_proj"},
             {"o", L + "attn.out_proj"},
             {"up", L + "mlp.fc_in"},
             {"down", L + "mlp.fc_out"},
             {"final_norm", "transformer.ln_f"},
             {"lm_head", "lm_head"}});
  t("weights")
      .note("The checkpoint also holds each layer's causal-mask buffers.")
      .set("ignore", std::vector<std::string>{L + "attn.bias", L + "attn.masked_bias"});
}

void Importer::read_falcon() {
  const Core core = read_core_heads(kFalconCore);
  const Config::Field<int64_t>& heads = core.heads;
  auto new_arch = c_.boolean_or("new_decoder_architecture", false);
  auto multi_query = c_.boolean_or("multi_query", true);
  auto parallel = c_.boolean_or("parallel_attn", true);
  auto kv = c_.integer_or("num_kv_heads", heads.value, 1, kMaxHeads);
  if (!c_.present("num_kv_heads") || c_.is_null("num_kv_heads")) kv.note = "num_kv_heads (null: num_attention_heads)";
  std::string layout = "per_head";
  std::string layout_note;
  if (new_arch.value) {
    if (kv.value > 0 && heads.value % kv.value != 0)  // 0: a count at fault, already an error
      c_.error("num_attention_heads (" + std::to_string(heads.value) + ") is not a multiple of " + kv.note + " (" +
               std::to_string(kv.value) + ")");
    if (kv.value != heads.value) t("dims").set("kv_heads", kv.value, kv.note);
    layout = "grouped";
    layout_note = "new_decoder_architecture: per KV head its query heads, then k, then v";
  } else if (multi_query.value) {
    t("dims").set("kv_heads", 1, multi_query.note + ": one K/V head");
    layout = "blocks";
    layout_note = "multi_query: q of every head, then k, then v";
  } else {
    if (kv.given && kv.value != heads.value)
      c_.error(kv.note + " = " + std::to_string(kv.value) + ": without new_decoder_architecture or multi_query, "
               "FalconAttention splits query_key_value into num_attention_heads [q k v] triples");
    layout_note = "multi_query = false: [q k v] per head";
  }
  read_core_widths(kFalconCore, core);
  TomlTable& n = t("norm");
  c_.use("num_ln_in_parallel_attn");
  int64_t lns = new_arch.value ? 2 : 1;
  std::string lns_note = new_arch.value ? "new_decoder_architecture: ln_attn and ln_mlp" : "";
  if (c_.has("num_ln_in_parallel_attn")) {
    if (auto v = c_.integer("num_ln_in_parallel_attn", 1, 2)) {
      lns = *v;
      lns_note = "num_ln_in_parallel_attn = " + std::to_string(lns);
    }
  }
  std::string attn_norm = "input_layernorm", mlp_norm;
  if (new_arch.value && lns == 2) {
    n.set("placement", "parallel", "new_decoder_architecture: x + attention(ln_attn(x)) + mlp(ln_mlp(x))")
        .set("parallel_shared", false, lns_note);
    attn_norm = "ln_attn";
    mlp_norm = "ln_mlp";
  } else if (new_arch.value || parallel.value) {
    n.set("placement", "parallel", (new_arch.value ? std::string("new_decoder_architecture") : parallel.note) +
                                       ": x + attention(ln(x)) + mlp(ln(x))")
        .set("parallel_shared", true, "one input_layernorm");
  } else {
    n.set("placement", "pre", "parallel_attn = false");
    mlp_norm = "post_attention_layernorm";
  }
  c_.use("apply_residual_connection_post_layernorm");  // the RW checkpoints' key; FalconModel reads none

  if (c_.boolean("alibi").value_or(false))
    c_.error("alibi = true: Falcon's ALiBi (scaled by 1/sqrt(head_dim), added before the softmax scale) is not "
             "the spec's ALiBi; the spec imports Falcon with rotary positions (alibi = false)");
  auto bias = c_.boolean_or("bias", false);
  if (bias.value) {
    t("attention").set("bias", true, bias.note + ": query_key_value and dense");
  }
  t("position").set("kind", "rope").set("pairing", "neox", "Falcon rotates halves");
  read_rope_base({"rope_theta"}, 10000.0);

  read_activation("activation", "gelu");
  t("mlp").set("gated", false);
  if (bias.value) t("mlp").set("bias", true, bias.note + ": dense_h_to_4h and dense_4h_to_h");
  set_tied(true);

  t("weights").set("fused_qkv", true, "query_key_value").set("qkv_layout", layout, layout_note);
  const std::string L = "transformer.h.{layer}.";
  set_names({{"embed", "transformer.word_embeddings"},
             {"attn_norm", L + attn_norm},
             {"qkv", L + "self_attention.query_key_value"},
             {"o", L + "self_attention.dense"},
             {"up", L + "mlp.dense_h_to_4h"},
             {"down", L + "mlp.dense_4h_to_h"},
             {"final_norm", "transformer.ln_f"},
             {"lm_head", "lm_head"}});
  if (!mlp_norm.empty()) set_names({{"mlp_norm", L + mlp_norm}});
}

void Importer::read_bloom() {
  read_core(kBloomCore);
  c_.use("n_inner");  // BloomMLP does not read it
  t("norm").set("placement", "pre");
  if (c_.boolean("apply_residual_connection_post_layernorm").value_or(false))
    c_.error("apply_residual_connection_post_layernorm = true: the residual stream would carry the normed input, "
             "which no spec placement does");
  for (const char* key : {"slow_but_exact", "attention_softmax_in_fp32", "masked_softmax_fusion",
                          "bias_dropout_fusion", "skip_bias_add", "skip_bias_add_qkv", "offset_alibi", "unk_token_id"})
    c_.use(key);  // Megatron training settings: the same function
  t("attention").set("bias", true, "BloomAttention: query_key_value and dense carry biases");
  t("position").set("kind", "alibi", "BloomModel: ALiBi slopes, no position embedding");
  t("mlp")
      .set("activation", "gelu_tanh", "BloomGelu: the tanh approximation")
      .set("gated", false)
      .set("bias", true, "dense_h_to_4h and dense_4h_to_h carry biases");
  set_tied(true);
  t("embedding").set("norm", true, "word_embeddings_layernorm");

  t("weights")
      .set("fused_qkv", true, "query_key_value: [3 * hidden, hidden]")
      .set("qkv_layout", "per_head", "BloomAttention views it as [heads, 3, head_dim]");
  const std::string L = "transformer.h.{layer}.";
  set_names({{"embed", "transformer.word_embeddings"},
             {"embed_norm", "transformer.word_embeddings_layernorm"},
             {"attn_norm", L + "input_layernorm"},
             {"qkv", L + "self_attention.query_key_value"},
             {"o", L + "self_attention.dense"},
             {"mlp_norm", L + "post_attention_layernorm"},
             {"up", L + "mlp.dense_h_to_4h"},
             {"down", L + "mlp.dense_4h_to_h"},
             {"final_norm", "transformer.ln_f"},
             {"lm_head", "lm_head"}});
}

void Importer::read_bert() {
  read_core(kBertCore);
  t("model").set("stack", "encoder", std::string(info_.model_class) + "Model: bidirectional self-attention");
  auto positions = c_.integer_or("max_position_embeddings", 512);
  const bool roberta = f_ != Family::Bert;
  int64_t offset = 0;
  if (roberta) {
    // create_position_ids_from_input_ids: padding_idx + 1 + the position.
    c_.use("pad_token_id");
    const json* pad = c_.has("pad_token_id") ? &c_.at("pad_token_id") : nullptr;
    offset = (pad && pad->is_number_integer() ? pad->get<int64_t>() : 1) + 1;
    if (offset < 1 || offset >= positions.value)
      c_.error("pad_token_id: positions start at pad_token_id + 1 = " + std::to_string(offset) +
               ", outside the position table of max_position_embeddings = " + std::to_string(positions.value));
  }
  Config::Field<int64_t> context = positions;
  context.value = positions.value - offset;
  if (roberta) context.note = positions.note + " − (pad_token_id + 1)";
  set_max_context(context);
  const std::string mode = c_.string("position_embedding_type").value_or("absolute");
  if (mode != "absolute")
    c_.error("position_embedding_type = \"" + mode + "\": only absolute positions are supported (not the relative "
             "key/query scores)");
  set_layernorm("layer_norm_eps");
  t("norm")
      .set("placement", "post", hard_coded("SelfOutput / Output: LayerNorm(x + branch)"))
      .set("final", false, "the last block's LayerNorm ends the stack");
  t("attention").set("bias", true, "query, key, value and the output dense carry biases");
  t("position").set("kind", "learned", "position_embeddings");
  if (roberta)
    t("position")
        .set("offset", offset, "position p reads row p + pad_token_id + 1")
        .set("table_size", positions.value, positions.note);
  read_activation("hidden_act", "gelu");
  t("mlp").set("gated", false).set("bias", true, "intermediate.dense and output.dense carry biases");
  auto types = c_.integer_or("type_vocab_size", 2);
  t("embedding")
      .set("token_types", types.value, types.note + ": token_type_embeddings (row 0 for one segment)")
      .set("norm", true, "embeddings.LayerNorm");
  for (const char* key : {"classifier_dropout", "gradient_checkpointing", "output_past"}) c_.use(key);
  // A task model (…ForMaskedLM, …ForSequenceClassification) holds its head
  // beside the encoder, and the base model a pooler; neither is the encoder's.
  std::vector<std::string> ignore = {"pooler.dense.weight", "pooler.dense.bias", "embeddings.position_ids",
                                     "embeddings.token_type_ids"};
  // The pre-training heads a …ForMaskedLM / …ForPreTraining checkpoint holds.
  const std::vector<std::string> task_heads =
      roberta ? std::vector<std::string>{"lm_head.dense", "lm_head.layer_norm", "lm_head.decoder"}
              : std::vector<std::string>{"cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm",
                                         "cls.predictions.decoder", "cls.seq_relationship"};
  for (const std::string& h : task_heads) ignore.insert(ignore.end(), {h + ".weight", h + ".bias"});
  ignore.push_back(roberta ? "lm_head.bias" : "cls.predictions.bias");
  t("weights")
      .set("preset", "hf-bert")
      .note("The base model's pooler and the pre-training heads are not the encoder's.")
      .set("ignore", ignore);
}

void Importer::read_t5() {
  const json* archs = c_.present("architectures") ? &c_.at("architectures") : nullptr;
  const std::string arch = archs && archs->is_array() && archs->size() == 1 && (*archs)[0].is_string()
                               ? (*archs)[0].get<std::string>()
                               : std::string();
  const bool encoder_only = arch == "T5EncoderModel";
  // No architectures: T5Config's own model, the whole T5.
  if (archs && !archs->is_null() && !encoder_only && arch != "T5ForConditionalGeneration")
    c_.error("architectures " + archs->dump() +
             ": a T5ForConditionalGeneration (encoder and decoder) or a T5EncoderModel (the encoder alone) imports");
  auto hidden = c_.required("d_model");
  auto layers = c_.required("num_layers", kMaxLayers);
  auto heads = c_.required("num_heads", kMaxHeads);
  auto head_dim = c_.required("d_kv");
  TomlTable& d = t("dims");
  d.set("hidden", hidden.value, hidden.note);
  if (encoder_only) {
    d.set("layers", layers.value, layers.note);
    layers_ = layers.value;
  } else {
    auto decoder_layers = c_.integer_or("num_decoder_layers", layers.value, 1, kMaxLayers);
    d.set("layers", decoder_layers.value,
          decoder_layers.given ? "num_decoder_layers: the decoder's"
                               : "the decoder's: num_layers (num_decoder_layers not in config.json; T5Config's default)");
    d.set("encoder_layers", layers.value, layers.note + ": the encoder's");
    layers_ = decoder_layers.value;
  }
  d.set("heads", heads.value, heads.note);
  d.set("head_dim", head_dim.value, "d_kv");
  auto ff = c_.required("d_ff");
  auto vocab = c_.required("vocab_size");
  d.set("intermediate", ff.value, ff.note).set("vocab", vocab.value, vocab.note);
  auto context = c_.integer_or("n_positions", 512);
  if (!context.given) context.note = "T5 was trained on 512 tokens (relative positions set no limit of their own)";
  set_max_context(context);
  if (encoder_only) {
    t("model").set("stack", "encoder", "T5EncoderModel: bidirectional self-attention");
  } else {
    t("model").set("stack", "encoder-decoder", "T5ForConditionalGeneration: the decoder attends to the encoder's output");
    read_decoder_start(vocab.value, std::nullopt, "pad_token_id");
  }
  auto eps = epsilon("layer_norm_epsilon", 1e-6);
  t("norm").set("kind", "rmsnorm", "T5LayerNorm: no mean, no bias").set("eps", eps.value, eps.note);
  t("attention").set("scale", 1.0, "T5Attention does not scale the scores");
  auto buckets = c_.integer_or("relative_attention_num_buckets", 32, 2, 1024);
  auto distance = c_.integer_or("relative_attention_max_distance", 128);
  // The encoder's table: half the buckets a side, half of those exact
  // distances; the decoder's (causal) table: half of them exact.
  const int64_t exact = encoder_only ? buckets.value / 4 : buckets.value / 2;
  if (buckets.value < 4 || buckets.value % 2 != 0)
    c_.error("relative_attention_num_buckets = " + std::to_string(buckets.value) +
             ": a bidirectional table needs an even number, at least 4");
  else if (distance.value <= exact)
    c_.error("relative_attention_max_distance = " + std::to_string(distance.value) + ": not above the " +
             std::to_string(exact) + " exact distances of relative_attention_num_buckets = " +
             std::to_string(buckets.value) + (encoder_only ? "" : " in the decoder's causal table"));
  t("position")
      .set("kind", "relative", encoder_only ? "relative_attention_bias of the first block"
                                            : "relative_attention_bias of each stack's first block")
      .set("buckets", buckets.value, buckets.note)
      .set("max_distance", distance.value, distance.note);
  const std::string proj = c_.string("feed_forward_proj").value_or("relu");
  const bool gated = proj.rfind("gated-", 0) == 0;
  const std::string act = gated ? proj.substr(6) : proj;
  // T5Config: "gated-gelu" runs gelu_new (the tanh approximation).
  const std::optional<std::string> word = activation_of(act == "gelu" && gated ? "gelu_new" : act);
  if (!word) c_.error("feed_forward_proj = \"" + proj + "\": unknown activation; " + kActivationHelp);
  t("mlp")
      .set("activation", word.value_or("relu"), "feed_forward_proj = \"" + proj + "\"")
      .set("gated", gated, gated ? "DenseGatedActDense: wi_0 activated, times wi_1" : "DenseActDense: wi, then wo");
  bool tied = false;
  if (!encoder_only) {
    auto tie = c_.boolean_or("tie_word_embeddings", true);
    tied = tie.value;
    t("embedding").set("tied", tie.value, tie.note);
    if (tied)
      t("output").set("scale", std::pow(static_cast<double>(hidden.value), -0.5),
                      "T5ForConditionalGeneration: a tied head reads the hidden states times d_model^-0.5");
  }
  for (const char* key : {"dense_act_fn", "is_gated_act", "is_encoder_decoder", "num_decoder_layers", "dropout_rate",
                          "classifier_dropout", "n_positions", "tie_word_embeddings", "output_past"})
    c_.use(key);  // derived from feed_forward_proj, or the decoder's and the LM head's
  std::vector<std::string> ignore = {"encoder.embed_tokens.weight"};
  if (!encoder_only) ignore.push_back("decoder.embed_tokens.weight");
  if (tied) ignore.push_back("lm_head.weight");
  t("weights")
      .set("preset", "hf-t5")
      .note(encoder_only ? "encoder.embed_tokens is shared, the same tensor."
                         : tied ? "Each stack's embed_tokens, and the tied lm_head, are shared, the same tensor."
                                : "Each stack's embed_tokens is shared, the same tensor.")
      .set("ignore", ignore);
  if (gated && encoder_only) t("weights.names").set("up", "encoder.block.{layer}.layer.1.DenseReluDense.wi_1");
  if (gated && !encoder_only) {
    t("weights.names").set("up", "decoder.block.{layer}.layer.2.DenseReluDense.wi_1");
    t("weights.encoder_names").set("up", "encoder.block.{layer}.layer.1.DenseReluDense.wi_1");
  }
}

void Importer::read_decoder_start(int64_t vocab, std::optional<int64_t> class_default, const char* fallback_key) {
  auto start = c_.integer("decoder_start_token_id", 0, kMaxDim);
  Config::Field<int64_t> f;
  if (options_.generation_decoder_start) {
    f = {*options_.generation_decoder_start, "generation_config.json: decoder_start_token_id", true};
  } else if (start) {
    f = {*start, "decoder_start_token_id", true};
  } else if (class_default) {
    f = {*class_default, c_.default_note("decoder_start_token_id"), false};
  } else if (fallback_key != nullptr) {
    f = c_.integer_or(fallback_key, 0, 0, kMaxDim);
    f.note = "decoder_start_token_id not in config.json: " + f.note;
  } else {
    c_.error("decoder_start_token_id is not set (here or in generation_config.json): " +
             std::string(info_.model_class) + "'s decoder needs the token it starts from");
    return;
  }
  if (vocab > 0 && f.value >= vocab)
    c_.error(f.note + " = " + std::to_string(f.value) + ": outside the vocabulary of " + std::to_string(vocab) +
             " tokens");
  t("model").set("decoder_start", f.value, f.note);
}

void Importer::read_bart() {
  const bool mbart = f_ == Family::MBart;
  const std::string cls = info_.model_class;
  const json* archs = c_.present("architectures") ? &c_.at("architectures") : nullptr;
  const std::string arch = archs && archs->is_array() && archs->size() == 1 && (*archs)[0].is_string()
                               ? (*archs)[0].get<std::string>()
                               : std::string();
  if (archs && !archs->is_null() && arch != cls + "ForConditionalGeneration" && arch != cls + "Model")
    c_.error("architectures " + archs->dump() + ": a " + cls + "ForConditionalGeneration or " + cls +
             "Model imports (an encoder-decoder with its LM head); task heads do not");
  auto hidden = c_.integer_or("d_model", 1024);
  auto encoder_layers = c_.integer_or("encoder_layers", 12, 1, kMaxLayers);
  auto decoder_layers = c_.integer_or("decoder_layers", 12, 1, kMaxLayers);
  auto heads = c_.integer_or("encoder_attention_heads", 16, 1, kMaxHeads);
  auto decoder_heads = c_.integer_or("decoder_attention_heads", 16, 1, kMaxHeads);
  auto ffn = c_.integer_or("encoder_ffn_dim", 4096);
  auto decoder_ffn = c_.integer_or("decoder_ffn_dim", 4096);
  auto vocab = c_.integer_or("vocab_size", 50265);
  auto positions = c_.integer_or("max_position_embeddings", 1024, 1, kMaxDim - 2);
  // The spec's two stacks share their widths.
  if (decoder_heads.value != heads.value)
    c_.error("decoder_attention_heads = " + std::to_string(decoder_heads.value) + ": differs from " + heads.note +
             " = " + std::to_string(heads.value) + "; the spec's stacks share dims.heads");
  if (decoder_ffn.value != ffn.value)
    c_.error("decoder_ffn_dim = " + std::to_string(decoder_ffn.value) + ": differs from " + ffn.note + " = " +
             std::to_string(ffn.value) + "; the spec's stacks share dims.intermediate");
  TomlTable& d = t("dims");
  d.set("hidden", hidden.value, hidden.note)
      .set("layers", decoder_layers.value, decoder_layers.note)
      .set("encoder_layers", encoder_layers.value, encoder_layers.note)
      .set("heads", heads.value, heads.note);
  layers_ = decoder_layers.value;
  split_heads(hidden, heads);
  d.set("intermediate", ffn.value, ffn.note).set("vocab", vocab.value, vocab.note);
  set_max_context(positions);

  t("model").set("stack", "encoder-decoder", cls + "ForConditionalGeneration: the decoder attends to the encoder's output");
  // MBartConfig has no default: a language code or </s>, per checkpoint.
  read_decoder_start(vocab.value, mbart ? std::nullopt : std::optional<int64_t>(2), nullptr);

  // Keys of the fairseq-era configs that transformers' classes no longer
  // read: each must say what the class builds, or the checkpoint is
  // another model's.
  const auto legacy = [&](const char* key, bool builds, const std::string& what) {
    auto v = c_.boolean(key);
    if (v && *v != builds) c_.error(std::string(key) + " = " + (*v ? "true" : "false") + ": " + cls + "Model " + what);
  };
  const std::string other = mbart ? "; post-norm blocks are BART's (model_type \"bart\")"
                                  : "; pre-norm blocks with final norms are mBART's (model_type \"mbart\")";
  legacy("normalize_before", mbart,
         (mbart ? "normalizes before each branch" : "normalizes after each residual add") + other);
  legacy("add_final_layer_norm", mbart, (mbart ? "ends each stack with a LayerNorm" : "has no final LayerNorm") + other);
  legacy("normalize_embedding", true, "normalizes the embeddings (layernorm_embedding)");
  legacy("static_position_embeddings", false, "learns its position table (embed_positions)");
  if (auto extra = c_.integer("extra_pos_embeddings", 0, kMaxDim); extra && *extra != 2)
    c_.error("extra_pos_embeddings = " + std::to_string(*extra) + ": " + cls +
             "LearnedPositionalEmbedding offsets positions by 2");
  for (const char* key : {"add_bias_logits", "do_blenderbot_90_layernorm", "force_bos_token_to_be_generated",
                          "classif_dropout", "classifier_dropout", "activation_dropout", "encoder_layerdrop",
                          "decoder_layerdrop", "init_std", "_num_labels", "num_hidden_layers", "is_encoder_decoder",
                          "gradient_checkpointing", "output_past"})
    c_.use(key);  // training, the classification head's, or derived (num_hidden_layers = encoder_layers)

  t("norm")
      .set("kind", "layernorm", "nn.LayerNorm")
      .set("eps", 1e-5, cls + " hard-codes nn.LayerNorm's default; the config has no epsilon");
  if (mbart)
    t("norm")
        .set("placement", "pre", "MBartEncoderLayer / MBartDecoderLayer: x + branch(LayerNorm(x))")
        .set("final", true, "each stack ends with layer_norm");
  else
    t("norm")
        .set("placement", "post", "BartEncoderLayer / BartDecoderLayer: LayerNorm(x + branch(x))")
        .set("final", false, "the last block's LayerNorm ends each stack");
  t("attention").set("bias", true, "q_proj, k_proj, v_proj and out_proj carry biases");
  t("position")
      .set("kind", "learned", "embed_positions of each stack")
      .set("offset", 2, cls + "LearnedPositionalEmbedding: position p reads row p + 2")
      .set("table_size", positions.value + 2, positions.note + " + 2");
  read_activation("activation_function", "gelu");
  t("mlp").set("gated", false).set("bias", true, "fc1 and fc2 carry biases");
  auto tie = c_.boolean_or("tie_word_embeddings", true);
  t("embedding").set("tied", tie.value, tie.note).set("norm", true, "layernorm_embedding of each stack");
  auto scale = c_.boolean_or("scale_embedding", false);
  if (scale.value) t("embedding").set("scale", "sqrt_hidden", "scale_embedding: the token embeddings times sqrt(d_model)");
  t("output").set("bias", true, "final_logits_bias: [1, vocab_size], added to the logits");

  std::vector<std::string> ignore = {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"};
  if (tie.value) ignore.push_back("lm_head.weight");
  t("weights")
      .set("preset", "hf-bart")
      .note(tie.value ? "Each stack's embed_tokens, and the tied lm_head, are model.shared, the same tensor."
                      : "Each stack's embed_tokens is model.shared, the same tensor.")
      .set("ignore", ignore);
}

void Importer::read_modernbert() {
  const Config::Field<int64_t> layers = read_core(kModernBertCore).layers;
  t("model").set("stack", "encoder", "ModernBertModel: bidirectional self-attention");
  auto norm_bias = c_.boolean_or("norm_bias", false);
  t("norm")
      .set("bias", norm_bias.value, norm_bias.note)
      .set("first_attn_norm", false, "layer 0's attn_norm is an Identity");
  auto attention_bias = c_.boolean_or("attention_bias", false);
  t("attention").set("bias", attention_bias.value, attention_bias.note);
  // Which layers are local: layer_types (transformers 5), else every n-th global.
  LayerKinds kinds;
  std::string kinds_note;
  if (c_.has("layer_types") && c_.at("layer_types").is_array()) {
    c_.use("layer_types");
    for (const json& k : c_.at("layer_types")) kinds.push_back(k == "sliding_attention");
    kinds_note = "layer_types";
    if (static_cast<int64_t>(kinds.size()) != layers.value)
      c_.error("layer_types names " + std::to_string(kinds.size()) + " layers; num_hidden_layers is " +
               std::to_string(layers.value));
  } else {
    auto every = c_.integer_or("global_attn_every_n_layers", 3);
    for (int64_t l = 0; l < layers.value; ++l) kinds.push_back(l % every.value != 0);
    kinds_note = every.note + " = " + std::to_string(every.value) + ": layer l is global iff l % n == 0";
  }
  auto local = c_.integer_or("local_attention", 128, 2);
  bool any_local = std::find(kinds.begin(), kinds.end(), true) != kinds.end();
  if (any_local && local.value / 2 >= max_context_) {
    warn(c_.file() + ": warning: local_attention = " + std::to_string(local.value) + " reaches past the context of " +
         std::to_string(max_context_) + " positions: every layer sees every key");
    any_local = false;
  }
  if (any_local) {
    t("attention")
        .set("sliding_window", local.value / 2, local.note + " / 2: keys at most this far on either side")
        .set("window_pattern", shortest_pattern(kinds), kinds_note);
  }
  // RoPE bases: rope_parameters by layer type (transformers 5), else the global and local thetas.
  double global_theta = 160000.0, local_theta = 10000.0;
  std::string global_note = c_.default_note("global_rope_theta"), local_note = c_.default_note("local_rope_theta");
  if (c_.has("rope_parameters") && c_.at("rope_parameters").is_object()) {
    c_.use("rope_parameters");
    const json& rp = c_.at("rope_parameters");
    if (auto v = number_in(rp.value("full_attention", json::object()), "rope_parameters.full_attention", "rope_theta"))
      global_theta = *v, global_note = "rope_parameters.full_attention.rope_theta";
    if (auto v = number_in(rp.value("sliding_attention", json::object()), "rope_parameters.sliding_attention", "rope_theta"))
      local_theta = *v, local_note = "rope_parameters.sliding_attention.rope_theta";
  } else {
    auto g = c_.number_or("global_rope_theta", global_theta);
    auto l = c_.number_or("local_rope_theta", local_theta);
    global_theta = g.value, global_note = g.note, local_theta = l.value, local_note = l.note;
  }
  for (const auto& [theta, note] : {std::pair{global_theta, global_note}, std::pair{local_theta, local_note}})
    if (!(theta > 0) || !std::isfinite(theta))
      c_.error(note + " = " + shown(json(theta)) + ": a RoPE base must be a positive number");
  t("position").set("theta", number_value(global_theta), global_note);
  if (any_local) t("position").set("local_theta", number_value(local_theta), local_note);
  read_activation("hidden_activation", "gelu");
  auto mlp_bias = c_.boolean_or("mlp_bias", false);
  t("mlp")
      .set("gated", true, "ModernBertMLP: act(input) * gate of Wi's halves")
      .set("fused_gate_up", "gate_up", "Wi: [2 * intermediate_size, hidden], the activated half first")
      .set("bias", mlp_bias.value, mlp_bias.note);
  t("embedding").set("norm", true, "embeddings.norm");
  for (const char* key : {"initializer_cutoff_factor", "embedding_dropout", "mlp_dropout", "classifier_pooling",
                          "classifier_dropout", "classifier_bias", "classifier_activation", "deterministic_flash_attn",
                          "sparse_prediction", "sparse_pred_ignore_index", "reference_compile", "decoder_bias",
                          "cls_token_id", "tie_word_embeddings", "repad_logits_with_grad", "norm_eps",
                          "layer_norm_eps", "position_embedding_type"})
    c_.use(key);  // training, the classifier's and the MLM head's
  const std::string L = "model.layers.{layer}.";
  set_names({{"embed", "model.embeddings.tok_embeddings"},
             {"embed_norm", "model.embeddings.norm"},
             {"attn_norm", L + "attn_norm"},
             {"qkv", L + "attn.Wqkv"},
             {"o", L + "attn.Wo"},
             {"mlp_norm", L + "mlp_norm"},
             {"gate_up", L + "mlp.Wi"},
             {"down", L + "mlp.Wo"},
             {"final_norm", "model.final_norm"}});
  t("weights")
      .set("fused_qkv", true, "Wqkv: [3 * hidden, hidden] = q, k, v")
      .note("ModernBertForMaskedLM's prediction head is not the encoder's.")
      .set("ignore", std::vector<std::string>{"head.dense.weight", "head.dense.bias", "head.norm.weight",
                                              "head.norm.bias", "decoder.weight", "decoder.bias"});
}

void Importer::read_mpt() {
  read_core(kMptCore);
  t("norm").set("placement", "pre").set("bias", false, "MptBlock drops the norms' biases");
  c_.use("norm_type");  // low_precision_layernorm: a LayerNorm in the activations' dtype
  for (const char* key : {"embedding_fraction", "init_device", "verbose", "init_config", "emb_pdrop"})
    c_.use(key);  // training settings
  auto no_bias = c_.boolean_or("no_bias", true);
  if (!no_bias.value) c_.error("no_bias = false: HF's MptModel has no biases (it would drop the checkpoint's)");
  if (c_.has("logit_scale")) {
    c_.use("logit_scale");
    c_.value_error("logit_scale", c_.at("logit_scale"), "the spec does not scale the logits");
  }
  c_.use("logit_scale");

  // attn_config: MptAttentionConfig, each key with its default.
  c_.use("attn_config");
  json ac = c_.has("attn_config") ? c_.at("attn_config") : json::object();
  if (!ac.is_object()) {
    c_.value_error("attn_config", ac, "expected an object");
    ac = json::object();
  }
  const auto field = [&](const char* key) { return ac.contains(key) ? ac[key] : json(); };
  if (const json v = field("attn_type"); !v.is_null() && v != "multihead_attention")
    c_.error("attn_config.attn_type = " + shown(v) + ": MptAttention is multi-head attention");
  if (const json v = field("qk_ln"); !v.is_null() && v != false)
    c_.error("attn_config.qk_ln = " + shown(v) + ": the spec has no LayerNorm on q and k");
  if (const json v = field("clip_qkv"); !v.is_null())
    c_.error("attn_config.clip_qkv = " + shown(v) + ": the spec does not clamp q, k and v");
  if (const json v = field("prefix_lm"); !v.is_null() && v != false)
    c_.error("attn_config.prefix_lm = " + shown(v) + ": the spec's attention is causal");
  if (const json v = field("alibi"); !v.is_null() && v != true)
    c_.error("attn_config.alibi = " + shown(v) + ": HF's MptModel always adds ALiBi and has no position table");
  if (const json v = field("alibi_bias_max"); !v.is_null() && !(v.is_number() && v.get<double>() == 8))
    c_.error("attn_config.alibi_bias_max = " + shown(v) + ": the spec's ALiBi slopes are the standard 2^(-8i/n)");
  if (const json v = field("softmax_scale"); !v.is_null()) {
    if (!v.is_number() || v.get<double>() <= 0) c_.value_error("attn_config.softmax_scale", v, "expected a positive number");
    else t("attention").set("scale", v.get<double>(), "attn_config.softmax_scale");
  }
  c_.use("learned_pos_emb");
  t("position").set("kind", "alibi", "MptModel: ALiBi (alibi_bias_max 8); learned_pos_emb has no table in HF's MptModel");
  t("mlp").set("activation", "gelu_erf", "MptMLP: GELU(approximate=\"none\")").set("gated", false);
  set_tied(true);

  t("weights").set("fused_qkv", true, "Wqkv: q, k, v = chunk(3)");
  const std::string L = "transformer.blocks.{layer}.";
  set_names({{"embed", "transformer.wte"},
             {"attn_norm", L + "norm_1"},
             {"qkv", L + "attn.Wqkv"},
             {"o", L + "attn.out_proj"},
             {"mlp_norm", L + "norm_2"},
             {"up", L + "ffn.up_proj"},
             {"down", L + "ffn.down_proj"},
             {"final_norm", "transformer.norm_f"},
             {"lm_head", "lm_head"}});
}

}  // namespace lathe::importer::hf
