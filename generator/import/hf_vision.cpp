// The Hugging Face importer's multimodal configs: LLaVA (llava), Mistral 3
// (mistral3), Gemma 3 (gemma3) and Llama 3.2 Vision (mllama). The decoder is
// text_config's, read by its family's reader; the vision tower (CLIP,
// Pixtral, SigLIP or Mllama's tiled one) is vision_config's, and the
// projector and the image tokens are the top-level keys', all into [vision].
#include "generator/import/hf_importer.hpp"
#include "runtime/text/tokenize/json_file.hpp"

namespace lathe::importer::hf {
namespace {

enum class Tower { Clip, Pixtral, Siglip, Mllama };

// A vision tower's config class, its defaults, and the model types that take it.
struct TowerInfo {
  Tower tower;
  const char* model_type;
  const char* config_class;  // names the defaults in comments
  const char* preset;        // [vision.weights] preset
  int64_t hidden, intermediate, layers, heads, image_size, patch;
  const char* hidden_act;
  double eps;  // layer_norm_eps (Pixtral has no key: its RMS norms hard-code 1e-5)
  const char* taken_by[2];  // the multimodal model types whose vision_config it may be
};

const TowerInfo kTowers[] = {
    {Tower::Clip, "clip_vision_model", "CLIPVisionConfig", "hf-clip", 768, 3072, 12, 12, 224, 32, "quick_gelu", 1e-5,
     {"llava", nullptr}},
    {Tower::Pixtral, "pixtral", "PixtralVisionConfig", "hf-pixtral", 1024, 4096, 24, 16, 1024, 16, "gelu", 1e-5,
     {"llava", "mistral3"}},
    {Tower::Siglip, "siglip_vision_model", "SiglipVisionConfig", "hf-siglip", 768, 3072, 12, 12, 224, 16,
     "gelu_pytorch_tanh", 1e-6, {"gemma3", nullptr}},
    {Tower::Mllama, "mllama_vision_model", "MllamaVisionConfig", "hf-mllama", 1280, 5120, 32, 16, 448, 14, "gelu",
     1e-5, {"mllama", nullptr}},
};

// Llama 3.2 Vision's text_config: a Llama decoder (read by the Llama reader
// with MllamaTextConfig's defaults) whose listed layers cross-attend.
constexpr FamilyInfo kMllamaText = {Family::MllamaText, "mllama_text_model", "MllamaTextConfig", "MllamaText"};
// MllamaTextModel's token table: vocab_size + 8 rows, the image token's among them.
constexpr int64_t kMllamaExtraRows = 8;

// The vision_config a config class builds when a config has none: LLaVA's a
// CLIP ViT-L/14 at 336 pixels, Mistral 3's Mistral Small 3.1's Pixtral,
// Gemma 3's SiglipVisionConfig(), Mllama's MllamaVisionConfig().
json default_vision_config(std::string_view model_type) {
  if (model_type == "mllama") return {{"model_type", "mllama_vision_model"}};
  if (model_type == "llava")
    return json::parse(R"({"model_type": "clip_vision_model", "intermediate_size": 4096, "hidden_size": 1024,
      "patch_size": 14, "image_size": 336, "num_hidden_layers": 24, "num_attention_heads": 16})");
  if (model_type == "mistral3")
    return json::parse(R"({"model_type": "pixtral", "intermediate_size": 4096, "hidden_size": 1024, "patch_size": 14,
      "image_size": 1540, "num_hidden_layers": 24, "num_attention_heads": 16, "hidden_act": "gelu"})");
  return {{"model_type", "siglip_vision_model"}};
}

// The class defaults of the core keys a text config.json always writes,
// for the text families the multimodal config classes default to: a
// sub-config saved as its differences from them may leave them out.
std::map<std::string, int64_t, std::less<>> implied_core(Family family) {
  struct Row {
    Family family;
    int64_t hidden, layers, heads, intermediate, vocab, context;
  };
  static constexpr Row kRows[] = {
      {Family::Llama, 4096, 32, 32, 11008, 32000, 2048},         // LlamaConfig
      {Family::Mistral, 4096, 32, 32, 14336, 32000, 4096 * 32},  // MistralConfig
      {Family::Gemma3Text, 2304, 26, 8, 9216, 262208, 131072},   // Gemma3TextConfig
      {Family::MllamaText, 4096, 40, 32, 14336, 128256, 131072},  // MllamaTextConfig
  };
  for (const Row& r : kRows)
    if (r.family == family)
      return {{kLlamaCore.hidden.key, r.hidden}, {kLlamaCore.layers.key, r.layers},
              {kLlamaCore.heads.key, r.heads},   {kLlamaCore.intermediate.key, r.intermediate},
              {kLlamaCore.vocab.key, r.vocab},   {kLlamaCore.context.key, r.context}};
  return {};
}

// Top-level keys that say nothing the spec holds: the training loss's
// label to skip, the processor's count of image tokens, and copies of the
// text config's (transformers ties the LM head by text_config's
// tie_word_embeddings; older LlavaConfigs repeat its vocab_size).
const std::set<std::string, std::less<>> kTopBookkeeping = {"ignore_index", "image_seq_length", "tie_word_embeddings",
                                                            "vocab_size"};

// vision_config keys the tower does not read: CLIP's and SigLIP's projection
// into their text towers' joint space, a text vocabulary's size some saved
// vision configs carry along, the tie of a model with no LM head, the dtype
// a saved sub-config repeats (the whole model's is the top level's).
const std::set<std::string, std::less<>> kVisionBookkeeping = {"projection_dim", "vocab_size", "tie_word_embeddings",
                                                               "torch_dtype"};

class Multimodal {
 public:
  Multimodal(const json& config, const MultimodalInfo& info, const ImportOptions& options)
      : info_(info), type_(info.model_type), options_(options), top_(config, options.file, info.config_class) {}

  TomlDoc run() {
    top_.use("model_type");
    refuse_quantization(top_);
    read_text();
    read_vision();
    std::vector<std::string> problems = top_.errors();
    problems.insert(problems.end(), text_problems_.begin(), text_problems_.end());
    if (v_) problems.insert(problems.end(), v_->errors().begin(), v_->errors().end());
    if (!problems.empty()) throw ImportError(problems);
    std::vector<std::string> unknown = top_.unknown_keys(kTopBookkeeping);
    if (v_)
      for (std::string& key : v_->unknown_keys(kVisionBookkeeping)) unknown.push_back(std::move(key));
    if (!unknown.empty())
      warn_line(options_, options_.file + ": warning: keys not read (the spec may be missing what they change): " +
                              join(unknown));
    return std::move(doc_);
  }

 private:
  bool is(std::string_view model_type) const { return type_ == model_type; }
  std::string hard_coded(const std::string& what) const { return std::string(info_.model_class) + what; }

  // ---- the decoder -----------------------------------------------------------
  // A sub-config: its object (`fallback` when the config has none) and its
  // model_type (`type`, the config class's default, when it names none);
  // false after an error.
  bool sub_config(const char* key, json fallback, const char* what, json& out, std::string& type) {
    top_.use(key);
    out = std::move(fallback);
    if (top_.has(key)) {
      if (!top_.at(key).is_object()) {
        top_.value_error(key, top_.at(key), std::string("expected an object (") + what + ")");
        return false;
      }
      out = top_.at(key);
    }
    if (out.contains("model_type")) {
      if (!out["model_type"].is_string()) {
        top_.value_error(std::string(key) + ".model_type", out["model_type"], "expected a string");
        return false;
      }
      type = out["model_type"].get<std::string>();
    }
    return true;
  }

  void read_text() {
    json text;
    std::string type = info_.text_model_type;
    if (!sub_config("text_config", json::object(), "the decoder's config", text, type)) return;
    const FamilyInfo* family = is("mllama") && type == info_.text_model_type ? &kMllamaText : find_family(type);
    if (is("mllama") && family != &kMllamaText) {
      top_.error("text_config.model_type = \"" + type + "\": MllamaConfig reads text_config as a MllamaTextConfig (\"" +
                 info_.text_model_type + "\")");
      return;
    }
    if (is("mllama")) take_cross_layers(text);
    if (is("gemma3") && type != info_.text_model_type) {
      top_.error("text_config.model_type = \"" + type + "\": Gemma3Config reads text_config as a Gemma3TextConfig (\"" +
                 info_.text_model_type + "\")");
      return;
    }
    if (family == nullptr) {
      std::vector<std::string> types;
      for (const FamilyInfo& f : kFamilies) types.emplace_back(f.model_type);
      top_.error("text_config.model_type = \"" + type + "\" is not supported; supported model types: " + join(types));
      return;
    }
    text["model_type"] = type;
    // The text model's own origin (llava-1.5's "lmsys/vicuna-7b-v1.5"):
    // [model] names the whole model.
    text.erase("_name_or_path");
    // The dtype the whole model was saved in, over text_config's own.
    const char* dtype_key = top_.has("dtype") ? "dtype" : top_.has("torch_dtype") ? "torch_dtype" : nullptr;
    top_.use("dtype");
    top_.use("torch_dtype");
    if (dtype_key) {
      text.erase("dtype");
      text.erase("torch_dtype");
      text[dtype_key] = top_.at(dtype_key);
    }
    ImportOptions text_options = options_;
    text_options.file = options_.file + ": text_config";
    try {
      doc_ = Importer(text, *family, text_options, Nesting{"text_config", "", implied_core(family->family)}).run();
    } catch (const ImportError& e) {
      text_problems_ = e.problems();
      return;
    }
    write_model(doc_.table("model"), top_.string("_name_or_path").value_or(""), options_);
    if (dtype_key) {
      TomlTable& w = doc_.table("weights");
      if (const TomlValue* dtype = w.get("dtype"))
        w.set("dtype", *dtype, std::string(dtype_key) + " (the top level's)");
    }
    if (const TomlValue* v = doc_.table("dims").get("vocab"); v && std::holds_alternative<int64_t>(v->get()))
      vocab_ = std::get<int64_t>(v->get());
    if (const TomlValue* v = doc_.table("norm").get("eps"); v && std::holds_alternative<double>(v->get()))
      text_eps_ = std::get<double>(v->get());
    if (is("mllama")) write_cross_decoder();
  }

  // MllamaTextConfig's keys the Llama reader does not know: the layers that
  // cross-attend (kept for [vision]) and the training dropout, taken out of
  // text_config before it reads it.
  void take_cross_layers(json& text) {
    const std::string key = "text_config.cross_attention_layers";
    if (text.contains("dropout")) {
      if (!text["dropout"].is_number()) top_.value_error("text_config.dropout", text["dropout"], "expected a number");
      text.erase("dropout");
    }
    if (!text.contains("cross_attention_layers") || text["cross_attention_layers"].is_null()) {
      cross_layers_ = {3, 8, 13, 18, 23, 28, 33, 38};
      cross_note_ = "cross_attention_layers (MllamaTextConfig default; not in text_config)";
    } else {
      const json& list = text["cross_attention_layers"];
      bool ok = list.is_array() && !list.empty();
      if (ok)
        for (const json& l : list) ok = ok && l.is_number_integer() && l.get<int64_t>() >= 0 && l.get<int64_t>() < kMaxLayers;
      if (!ok) top_.value_error(key, list, "expected a list of decoder layer indices");
      else for (const json& l : list) cross_layers_.push_back(l.get<int64_t>());
      cross_note_ = key;
    }
    text.erase("cross_attention_layers");
  }

  // The decoder's side of Llama 3.2 Vision: the layers that cross-attend
  // and their tensors' names, and the token table's 8 rows past the vocabulary.
  void write_cross_decoder() {
    if (const TomlValue* v = doc_.table("dims").get("layers"); v && std::holds_alternative<int64_t>(v->get())) {
      const int64_t layers = std::get<int64_t>(v->get());
      std::set<int64_t> seen;
      for (int64_t l : cross_layers_)
        if (l >= layers || !seen.insert(l).second)
          top_.error(cross_note_ + ": layer " + std::to_string(l) +
                     (l >= layers ? " is not a decoder layer (num_hidden_layers = " + std::to_string(layers) + ")"
                                  : " is listed twice"));
    }
    if (vocab_) {
      doc_.table("embedding").set("rows", *vocab_ + kMllamaExtraRows,
                                  "MllamaTextModel: embed_tokens holds vocab_size + 8 rows, the image token's among them");
    }
    const std::string L = "model.layers.{layer}.";
    doc_.table("weights.names")
        .set("cross_q", L + "cross_attn.q_proj")
        .set("cross_k", L + "cross_attn.k_proj")
        .set("cross_v", L + "cross_attn.v_proj")
        .set("cross_o", L + "cross_attn.o_proj")
        .set("cross_q_norm", L + "cross_attn.q_norm")
        .set("cross_k_norm", L + "cross_attn.k_norm")
        .set("attn_gate", L + "cross_attn_attn_gate")
        .set("mlp_gate", L + "cross_attn_mlp_gate");
    doc_.table("weights.names").note("MllamaCrossAttentionDecoderLayer: its cross_attn, the gates of its two branches.");
  }

  // ---- the tower -------------------------------------------------------------
  void read_vision() {
    const bool given = top_.has("vision_config");
    std::string type = info_.vision_model_type;
    if (!sub_config("vision_config", default_vision_config(type_), "the vision tower's config", vision_, type)) return;
    std::vector<std::string> taken;
    for (const TowerInfo& t : kTowers) {
      const bool takes = std::any_of(std::begin(t.taken_by), std::end(t.taken_by),
                                     [&](const char* m) { return m != nullptr && type_ == m; });
      if (takes) taken.emplace_back(t.model_type);
      if (takes && type == t.model_type) tower_ = &t;
    }
    if (tower_ == nullptr) {
      top_.error("vision_config.model_type = \"" + type + "\": the " + info_.model_class +
                 " vision towers lathe imports are " + join(taken));
      return;
    }
    v_.emplace(vision_, options_.file, tower_->config_class, Nesting{"vision_config", "vision_config.", {}});
    v_->use("model_type");
    for (const char* table : {"vision", "vision.norm", "vision.attention", "vision.mlp", "vision.projector",
                              "vision.tokens", "vision.weights"})
      doc_.table(table);
    TomlTable& vt = doc_.table("vision");
    if (!given) vt.note(std::string("config.json has no vision_config: ") + info_.config_class + "'s default one.");
    if (is("mllama")) {
      vt.set("connection", "cross_attention",
             hard_coded(": the decoder's cross-attention layers read the projected features"));
      vt.set("cross_layers", cross_layers_, cross_note_);
    } else {
      vt.set("connection", "splice", hard_coded(": the projected features replace the image tokens' rows"));
    }
    read_geometry();
    switch (tower_->tower) {
      case Tower::Clip: read_clip(); break;
      case Tower::Pixtral: read_pixtral(); break;
      case Tower::Siglip: read_siglip(); break;
      case Tower::Mllama: read_mllama(); break;
    }
    read_features();
    read_projector();
    read_tokens();
    doc_.table("vision.weights").set("preset", tower_->preset);
  }

  // The patch grid, the widths.
  void read_geometry() {
    Config& v = *v_;
    const TowerInfo& d = *tower_;
    TomlTable& vt = doc_.table("vision");
    const auto patch = v.integer_or("patch_size", d.patch, 1, 1024);
    const auto size = v.integer_or("image_size", d.image_size, 1, 1 << 16);
    const auto hidden = v.integer_or("hidden_size", d.hidden);
    const auto layers = v.integer_or("num_hidden_layers", d.layers, 1, kMaxLayers);
    // (MllamaVisionConfig keeps num_attention_heads as attention_heads, the
    // name its saved configs write.)
    const char* heads_key = d.tower == Tower::Mllama && v.present("attention_heads") ? "attention_heads"
                                                                                     : "num_attention_heads";
    if (d.tower == Tower::Mllama) v.use("attention_heads");
    const auto heads = v.integer_or(heads_key, d.heads, 1, kMaxHeads);
    const auto intermediate = v.integer_or("intermediate_size", d.intermediate);
    const auto channels = v.integer_or("num_channels", 3, 1, 16);
    vt.set("patch", patch.value, patch.note);
    if (d.tower == Tower::Pixtral) {
      vt.set("longest_edge", size.value, size.note + ": an image keeps its aspect, its longer side at most this");
    } else {
      vt.set("image_size", size.value, size.note);
      if (size.value % patch.value != 0)
        v.error(v.name("image_size") + " (" + std::to_string(size.value) + ") is not a multiple of " +
                v.name("patch_size") + " (" + std::to_string(patch.value) +
                "): the spec's learned position table has a row per whole patch");
    }
    if (size.value / patch.value > 4096)
      v.error(v.name("image_size") + " / " + v.name("patch_size") + " is more than 4096 patches a side");
    vt.set("hidden", hidden.value, hidden.note)
        .set("layers", layers.value, layers.note)
        .set("heads", heads.value, heads.note);
    vt.set("intermediate", intermediate.value, intermediate.note);
    if (channels.value != 3) vt.set("channels", channels.value, channels.note);
    if (hidden.value % heads.value != 0)
      v.error(v.name("hidden_size") + " (" + std::to_string(hidden.value) + ") is not a multiple of " +
              v.name(heads_key) + " (" + std::to_string(heads.value) + "): the tower's attention splits " +
              "the width into heads");
    layers_ = layers.value;
    hidden_ = hidden.value;
    grid_ = size.value / patch.value;
    head_dim_ = hidden.value / heads.value;
  }

  // A LayerNorm tower's [vision.norm]: its epsilon, which Gemma 3's
  // projector norm takes too.
  void read_layernorm() {
    eps_ = v_->number_or("layer_norm_eps", tower_->eps);
    if (eps_.value <= 0 || eps_.value > 1)
      v_->value_error("layer_norm_eps", v_->at("layer_norm_eps"), "must be in (0, 1]");
    doc_.table("vision.norm").set("kind", "layernorm").set("eps", eps_.value, eps_.note);
  }

  void read_tower_activation(bool gated, const std::string& note) {
    TomlTable& m = doc_.table("vision.mlp");
    if (auto act = read_activation_key(*v_, "hidden_act", tower_->hidden_act))
      m.set("activation", act->value, act->note);
    m.set("gated", gated, note);
  }

  // CLIPVisionModel: the class token and the patches, a learned position
  // each, a LayerNorm (pre_layrnorm), pre-norm LayerNorm blocks with biases
  // everywhere, an fc1–act–fc2 MLP.
  void read_clip() {
    TomlTable& vt = doc_.table("vision");
    vt.set("positions", "learned", "CLIPVisionEmbeddings: a learned position for the class token and each patch");
    vt.set("class_token", true, "CLIPVisionEmbeddings.class_embedding");
    vt.set("pre_norm", true, "CLIP's pre_layrnorm");
    read_layernorm();
    // (CLIP's post_layernorm, in the checkpoint and off the path of the
    // hidden state the projector reads, is ignored as the spec's post_norm
    // = false says.)
    read_tower_activation(false, "CLIPMLP: fc1, the activation, fc2");
  }

  // PixtralVisionModel: the patches (no class token, no bias), an RMS norm
  // of them (ln_pre), 2D RoPE, RMS pre-norm blocks without biases, a gated MLP.
  void read_pixtral() {
    Config& v = *v_;
    TomlTable& vt = doc_.table("vision");
    vt.set("positions", "rope_2d", "PixtralRotaryEmbedding: 2D RoPE, each head's pairs split between the patch's row "
                                   "and its column");
    // The base: transformers 5's rope_parameters.rope_theta, else rope_theta.
    auto theta = v.number_or("rope_theta", 10000.0);
    if (theta.given && !(theta.value > 0)) v.value_error("rope_theta", v.at("rope_theta"), "must be positive");
    v.use("rope_parameters");
    if (v.has("rope_parameters")) {
      const json& rp = v.at("rope_parameters");
      if (!rp.is_object()) {
        v.value_error("rope_parameters", rp, "expected an object");
      } else {
        if (const std::string type = string_in(rp, "rope_type").value_or("default"); type != "default")
          v.value_error("rope_parameters.rope_type", rp["rope_type"],
                        "PixtralRotaryEmbedding has only the default RoPE");
        if (rp.contains("rope_theta")) {
          if (rp["rope_theta"].is_number() && rp["rope_theta"].get<double>() > 0)
            theta = {rp["rope_theta"].get<double>(), v.name("rope_parameters.rope_theta"), true};
          else
            v.value_error("rope_parameters.rope_theta", rp["rope_theta"], "expected a positive number");
        }
      }
    }
    vt.set("rope_theta", theta.value, theta.note);
    if (head_dim_ % 4 != 0)
      v.error(v.name("hidden_size") + " / " + v.name("num_attention_heads") + " = " + std::to_string(head_dim_) +
              ": 2D RoPE splits each head's rotary pairs between rows and columns, so the head width must be a "
              "multiple of 4");
    if (auto hd = v.integer("head_dim", 1, kMaxHeads); hd && *hd != head_dim_)
      warn_line(options_, options_.file + ": warning: " + v.name("head_dim") + " = " + std::to_string(*hd) +
                              " is not hidden_size / num_attention_heads (" + std::to_string(head_dim_) +
                              "): PixtralVisionConfig sets head_dim to the latter, as the spec does");
    vt.set("pre_norm", true, "PixtralVisionModel.ln_pre, an RMS norm");
    doc_.table("vision.norm")
        .set("kind", "rmsnorm")
        .set("eps", 1e-5, "PixtralRMSNorm(eps=1e-5) hard-coded, every norm of the tower");
    doc_.table("vision.attention").set("bias", false, "PixtralAttention: q/k/v/o_proj without biases");
    read_tower_activation(true, "PixtralMLP: gate_proj, up_proj, down_proj");
    doc_.table("vision.mlp").set("bias", false, "PixtralMLP: without biases");
  }

  // SiglipVisionModel: the patches (a bias on their embedding), a learned
  // position each, pre-norm LayerNorm blocks with biases everywhere, a final
  // LayerNorm (post_layernorm), which Gemma 3's features pass through.
  void read_siglip() {
    TomlTable& vt = doc_.table("vision");
    vt.set("positions", "learned", "SiglipVisionEmbeddings: a learned position for each patch");
    vt.set("patch_bias", true, "SiglipVisionEmbeddings.patch_embedding has a bias");
    vt.set("post_norm", true, "post_layernorm: " + hard_coded(" reads the tower's last_hidden_state"));
    read_layernorm();
    read_tower_activation(false, "SiglipMLP: fc1, the activation, fc2");
    // SiglipVisionTransformer builds the attention-pooling head unless the
    // config says vision_use_head = false; Gemma 3 does not use it.
    const auto head = v_->boolean("vision_use_head");
    if (head.value_or(true)) {
      ignore(siglip_head_tensors(),
             std::string(head ? "vision_config.vision_use_head" : "vision_config.vision_use_head not given") +
                 ": SigLIP's attention-pooling head, which " + info_.model_class + " does not use");
    }
  }

  // MllamaVisionModel: each tile's patches (no bias) with the tile's
  // pre-tile embedding, a class token, the gated position tables, a
  // LayerNorm (layernorm_pre), the local layers (pre-norm LayerNorm blocks,
  // the attention without biases, an fc1–GELU–fc2 MLP with them), a
  // LayerNorm (layernorm_post) and the post-tile embedding, the gated
  // global layers; the features are the last state and the listed local
  // hidden states side by side, every tile's rows with the class token's.
  void read_mllama() {
    Config& v = *v_;
    TomlTable& vt = doc_.table("vision");
    const auto tiles = v.integer_or("max_num_tiles", 4, 1, 64);
    vt.set("tiles", tiles.value, tiles.note + ": an image is cut into up to this many tiles of image_size²");
    // The arrangements the spec numbers aspect ratio ids by.
    const json arrangements = spec::tile_arrangements(tiles.value);
    v.use("supported_aspect_ratios");
    if (v.has("supported_aspect_ratios") && v.at("supported_aspect_ratios") != arrangements)
      v.value_error("supported_aspect_ratios", v.at("supported_aspect_ratios"),
                    "the spec numbers aspect ratio ids by every arrangement of at most max_num_tiles tiles, " +
                        arrangements.dump() + ", as MllamaImageProcessor lists them");
    vt.set("positions", "learned", "MllamaPrecomputedPositionEmbedding: a gated learned table, and one a tile");
    vt.set("class_token", true, "MllamaVisionModel.class_embedding");
    vt.set("drop_class_token", false, hard_coded(": the class token's row of each tile is a feature too"));
    vt.set("pre_norm", true, "layernorm_pre");
    vt.set("post_norm", true, "layernorm_post, before the post-tile embedding and the global layers");
    const auto global = v.integer_or("num_global_layers", 8, 0, kMaxLayers);
    if (global.value > 0) vt.set("global_layers", global.value, global.note + ": gated, after the local layers");
    // intermediate_layers_indices: hidden states of the local layers, 0 their input.
    std::vector<int64_t> extra = {3, 7, 15, 23, 30};
    std::string extra_note = v.default_note("intermediate_layers_indices");
    v.use("intermediate_layers_indices");
    if (v.has("intermediate_layers_indices")) {
      const json& list = v.at("intermediate_layers_indices");
      bool ok = list.is_array();
      if (ok)
        for (const json& l : list) ok = ok && l.is_number_integer() && l.get<int64_t>() >= 0 && l.get<int64_t>() <= layers_;
      if (!ok) {
        v.value_error("intermediate_layers_indices", list,
                      "expected hidden states of the local layers, 0 … " + std::to_string(layers_));
      } else {
        extra.clear();
        for (const json& l : list) extra.push_back(l.get<int64_t>());
        extra_note = v.name("intermediate_layers_indices");
      }
    }
    for (int64_t l : extra)
      if (l > layers_)
        v.error(extra_note + ": hidden state " + std::to_string(l) + " of a " + std::to_string(layers_) +
                "-layer tower (0 … " + std::to_string(layers_) + ")");
    if (!extra.empty()) vt.set("extra_feature_layers", extra, extra_note + ": beside the last state, channel by channel");
    const auto out = v.integer_or("vision_output_dim", 7680);
    if (out.value != hidden_ * (1 + static_cast<int64_t>(extra.size())))
      v.error(v.name("vision_output_dim") + " (" + std::to_string(out.value) + ") is not hidden_size × (1 + the " +
              "intermediate layers), " + std::to_string(hidden_ * (1 + static_cast<int64_t>(extra.size()))) +
              ": the features are the last state and the intermediate ones side by side");
    eps_ = v.number_or("norm_eps", tower_->eps);
    if (eps_.value != 1e-5)
      v.value_error("norm_eps", v.at("norm_eps"),
                    "the layers' LayerNorms take it, but layernorm_pre and layernorm_post hard-code 1e-5, and the "
                    "spec's tower has one epsilon");
    doc_.table("vision.norm").set("kind", "layernorm").set("eps", eps_.value, eps_.note);
    doc_.table("vision.attention").set("bias", false, "MllamaVisionAttention: q/k/v/o_proj without biases");
    read_tower_activation(false, "MllamaVisionMLP: fc1, the activation, fc2");
  }

  // Names the checkpoint holds beyond the manifest, added to weights.ignore.
  void ignore(const std::vector<std::string>& names, const std::string& note) {
    TomlTable& w = doc_.table("weights");
    std::vector<std::string> all;
    std::string all_note = note;
    if (const TomlValue* old = w.get("ignore")) {
      all = std::get<std::vector<std::string>>(old->get());
      for (const TomlEntry& e : w.entries())
        if (e.value && e.key == "ignore" && !e.comment.empty()) all_note = e.comment + "; " + note;
    }
    all.insert(all.end(), names.begin(), names.end());
    w.set("ignore", all, all_note);
  }

  // ---- the features, the projector, the tokens ----------------------------
  // Which hidden state the projector reads, and (LLaVA) whether the class
  // token's row goes with it.
  void read_features() {
    TomlTable& vt = doc_.table("vision");
    if (is("gemma3")) {
      vt.set("feature_layer", -1, hard_coded(": the tower's last_hidden_state"));
      return;
    }
    if (is("mllama")) {
      vt.set("feature_layer", -1, hard_coded(": every local layer, then the global ones"));
      return;
    }
    if (top_.has("vision_feature_layer") && top_.at("vision_feature_layer").is_array()) {
      top_.use("vision_feature_layer");
      top_.value_error("vision_feature_layer", top_.at("vision_feature_layer"),
                       "features of several hidden states side by side are not imported; the spec's [vision] reads "
                       "one here (its extra_feature_layers are Llama 3.2 Vision's)");
    } else {
      const auto layer = top_.integer_or("vision_feature_layer", is("llava") ? -2 : -1, -(layers_ + 1), layers_);
      vt.set("feature_layer", layer.value, layer.note);
    }
    if (!is("llava")) return;
    const auto strategy = top_.string("vision_feature_select_strategy");
    const std::string word = strategy.value_or("default");
    const std::string note = (strategy ? std::string("vision_feature_select_strategy")
                                       : top_.default_note("vision_feature_select_strategy")) +
                             " \"" + word + "\"";
    if (word == "full") {
      vt.set("drop_class_token", false, note);
    } else if (word != "default") {
      top_.value_error(
          "vision_feature_select_strategy", top_.at("vision_feature_select_strategy"),
          "must be \"default\" (the class token's row dropped) or \"full\"; LlavaConfig raises on any other");
    } else if (tower_->tower == Tower::Clip) {
      vt.set("drop_class_token", true, note);
    } else {
      top_.error(std::string(strategy ? "" : "no vision_feature_select_strategy: ") +
                 "vision_feature_select_strategy \"default\" drops each image's first row, which a " +
                 tower_->model_type + " tower has no class token for (a patch's row would be lost); the spec drops "
                 "only a class token's, and " + tower_->model_type + " configs say \"full\"");
    }
  }

  void read_projector() {
    TomlTable& p = doc_.table("vision.projector");
    if (is("gemma3")) {
      const auto tokens = top_.integer_or("mm_tokens_per_image", 256, 1, int64_t{1} << 24);
      p.set("kind", "pooled",
            "Gemma3MultiModalProjector: average pooling, mm_soft_emb_norm, mm_input_projection_weight");
      p.set("tokens", tokens.value, tokens.note);
      int64_t side = 0;
      while ((side + 1) * (side + 1) <= tokens.value) ++side;
      if (side * side != tokens.value || grid_ % side != 0)
        top_.error("mm_tokens_per_image = " + std::to_string(tokens.value) + ": Gemma3MultiModalProjector pools the " +
                   std::to_string(grid_) + " × " + std::to_string(grid_) +
                   " patches to a square of sqrt(mm_tokens_per_image) a side, which must divide the grid");
      p.set("norm", "rmsnorm", "mm_soft_emb_norm, a Gemma3RMSNorm");
      p.set("norm_unit_offset", true, "Gemma3RMSNorm scales by (1 + weight)");
      p.set("eps", eps_.value, eps_.note + ": mm_soft_emb_norm's too");
      return;
    }
    if (is("mllama")) {
      p.set("kind", "linear", hard_coded(".multi_modal_projector: one Linear(vision_output_dim, hidden_size)"));
      p.set("bias", true, hard_coded(".multi_modal_projector has a bias"));
      return;
    }
    if (is("mistral3")) {
      p.set("kind", "merge_mlp", "Mistral3MultiModalProjector: norm, patch_merger, linear_1, the activation, linear_2");
      const auto merge = top_.integer_or("spatial_merge_size", 2, 1, 64);
      p.set("merge", merge.value, merge.note);
      p.set("norm", "rmsnorm", "Mistral3RMSNorm");
      p.set("eps", text_eps_, "text_config.rms_norm_eps: Mistral3MultiModalProjector's norm takes the decoder's");
    } else {
      p.set("kind", "mlp", "LlavaMultiModalProjector: linear_1, the activation, linear_2");
    }
    if (auto act = read_activation_key(top_, "projector_hidden_act", "gelu"))
      p.set("activation", act->value, act->note);
    const auto bias = top_.boolean_or("multimodal_projector_bias", is("llava"));
    p.set("bias", bias.value, bias.note);
  }

  // A top-level token id, by its key or the attribute_map's other name
  // (image_token_id for image_token_index), within the decoder's vocabulary.
  Config::Field<int64_t> token(const char* key, const char* alias, int64_t fallback) {
    const char* read = top_.present(alias) && !top_.present(key) ? alias : key;
    top_.use(key);
    top_.use(alias);
    const auto id = top_.integer_or(read, fallback, 0, kMaxDim);
    check_token(id.value, id.note);
    return id;
  }

  void check_token(int64_t id, const std::string& note) {
    // (Mllama's image token is one of the 8 rows past the vocabulary.)
    const int64_t rows = vocab_ ? *vocab_ + (is("mllama") ? kMllamaExtraRows : 0) : 0;
    if (vocab_ && id >= rows)
      top_.error(note + " = " + std::to_string(id) + " is not a token of the decoder's " +
                 (is("mllama") ? "token table (text_config's vocab_size " + std::to_string(*vocab_) + " + 8 rows)"
                               : "vocabulary (text_config's vocab_size " + std::to_string(*vocab_) + ")"));
  }

  void read_tokens() {
    TomlTable& k = doc_.table("vision.tokens");
    if (is("gemma3")) {
      const auto boi = token("boi_token_index", "boi_token_id", 255999);
      const auto image = token("image_token_index", "image_token_id", 262144);
      const auto eoi = token("eoi_token_index", "eoi_token_id", 256000);
      k.set("marker", boi.value, boi.note + ": <start_of_image>, where a prompt holds an image");
      k.set("image", image.value, image.note + ": <image_soft_token>, a feature row each");
      doc_.table("vision").set("image_bidirectional", true,
                               "Gemma3ForConditionalGeneration: token_type_ids let an image's tokens attend to each "
                               "other both ways in the prompt pass");
      // Gemma3Processor writes "\n\n" + boi + the image tokens + eoi + "\n\n"
      // in place of each boi.
      if (const auto newline = token_in_tokenizer("\n\n")) {
        check_token(*newline, "tokenizer.json's \"\\n\\n\"");
        const std::string note = "Gemma3Processor: \"\\n\\n\" (" + std::to_string(*newline) + ", tokenizer.json) and ";
        k.set("prefix", std::vector<int64_t>{*newline, boi.value}, note + "<start_of_image>");
        k.set("suffix", std::vector<int64_t>{eoi.value, *newline}, "<end_of_image> (" + eoi.note + ") and \"\\n\\n\"");
      } else {
        k.set("prefix", std::vector<int64_t>{boi.value}, "<start_of_image>");
        k.set("suffix", std::vector<int64_t>{eoi.value}, "<end_of_image> (" + eoi.note + ")");
        k.note("Gemma3Processor also writes \"\\n\\n\" before and after these, left out: " + tokenizer_status_ + ".");
        warn_line(options_, options_.file + ": warning: vision.tokens: the \"\\n\\n\" Gemma3Processor writes around " +
                                "an image is left out of prefix and suffix: " + tokenizer_status_);
      }
      return;
    }
    if (is("mllama")) {
      const auto image = token("image_token_index", "image_token_id", 128256);
      k.set("marker", image.value, image.note + ": <|image|>, one token an image; the cross-attention layers read it");
      return;
    }
    const auto image = token("image_token_index", "image_token_id", is("llava") ? 32000 : 10);
    k.set("marker", image.value, image.note);
    if (tower_->tower != Tower::Pixtral) return;
    // PixtralProcessor: a row of [IMG] per row of features, each row followed
    // by [IMG_BREAK], the last one's by [IMG_END] instead.
    k.set("image", image.value, image.note + ": [IMG], a feature row each");
    struct RowToken {
      const char* spec_key;
      const char* config_key;       // a config that names it
      const char* processor_key;    // processor_config.json's name of its text
      const char* processor_default;
    };
    std::vector<std::string> missing;
    for (const RowToken& r : {RowToken{"row_end", "image_break_token_id", "image_break_token", "[IMG_BREAK]"},
                              RowToken{"end", "image_end_token_id", "image_end_token", "[IMG_END]"}}) {
      if (top_.has(r.config_key)) {
        const auto id = top_.integer_or(r.config_key, 0, 0, kMaxDim);
        check_token(id.value, id.note);
        k.set(r.spec_key, id.value, id.note);
        continue;
      }
      top_.use(r.config_key);
      const std::string text = processor_string(r.processor_key).value_or(r.processor_default);
      if (const auto id = token_in_tokenizer(text)) {
        check_token(*id, "tokenizer.json's " + text);
        k.set(r.spec_key, *id, "tokenizer.json: " + text);
      } else {
        missing.push_back(std::string(r.spec_key) + " (" + text + ")");
      }
    }
    if (!missing.empty()) {
      k.note("Left out: " + join(missing) + "; config.json does not give them, and " + tokenizer_status_ + ".");
      warn_line(options_, options_.file + ": warning: vision.tokens: " + join(missing) +
                              " left out: config.json does not give them, and " + tokenizer_status_);
    }
  }

  // ---- the tokenizer beside the config ------------------------------------------
  std::optional<json> read_json_file(const std::string& file) {
    if (options_.directory.empty()) return std::nullopt;
    const fs::path path = fs::path(options_.directory) / file;
    std::error_code ec;
    if (!fs::exists(path, ec)) return std::nullopt;
    try {
      return text::detail::parse_json_file(path);
    } catch (const Error& e) {  // unreadable, or not JSON: said, and left out
      warn_line(options_, std::string(e.what()) + " (warning: the image tokens it would give are left out)");
      return std::nullopt;
    }
  }

  // A token's id: tokenizer.json's added_tokens, else its model's vocab (a
  // BPE's object, a Unigram's array of [piece, score]).
  std::optional<int64_t> token_in_tokenizer(const std::string& text) {
    if (!tokenizer_loaded_) {
      tokenizer_loaded_ = true;
      tokenizer_ = read_json_file("tokenizer.json");
      if (options_.directory.empty()) tokenizer_status_ = "no tokenizer.json is at hand (no model directory)";
      else if (!tokenizer_) tokenizer_status_ = "no tokenizer.json in " + options_.directory;
    }
    if (!tokenizer_ || !tokenizer_->is_object()) return std::nullopt;
    const json& tok = *tokenizer_;
    if (tok.contains("added_tokens") && tok["added_tokens"].is_array())
      for (const json& t : tok["added_tokens"])
        if (string_in(t, "content") == text && t.contains("id") && t["id"].is_number_integer())
          return t["id"].get<int64_t>();
    if (!tok.contains("model") || !tok["model"].is_object() || !tok["model"].contains("vocab")) return std::nullopt;
    const json& vocab = tok["model"]["vocab"];
    if (vocab.is_object() && vocab.contains(text) && vocab[text].is_number_integer()) return vocab[text].get<int64_t>();
    if (vocab.is_array())
      for (size_t i = 0; i < vocab.size(); ++i)
        if (vocab[i].is_array() && !vocab[i].empty() && vocab[i][0] == text) return static_cast<int64_t>(i);
    tokenizer_status_ = "tokenizer.json does not hold " + json(text).dump();
    return std::nullopt;
  }

  // processor_config.json's string `key` (PixtralProcessor's token texts).
  std::optional<std::string> processor_string(const char* key) {
    if (!processor_loaded_) {
      processor_loaded_ = true;
      processor_ = read_json_file("processor_config.json");
    }
    return processor_ ? string_in(*processor_, key) : std::nullopt;
  }

  const MultimodalInfo& info_;
  std::string_view type_;
  const ImportOptions& options_;
  Config top_;
  json vision_;
  std::optional<Config> v_;  // over vision_
  const TowerInfo* tower_ = nullptr;
  TomlDoc doc_;
  std::vector<std::string> text_problems_;
  std::optional<int64_t> vocab_;  // the decoder's, once read
  double text_eps_ = 1e-6;        // the decoder's RMS norm epsilon
  int64_t layers_ = 1, grid_ = 1, head_dim_ = 1, hidden_ = 1;
  std::vector<int64_t> cross_layers_;  // mllama: text_config's cross_attention_layers
  std::string cross_note_;
  Config::Field<double> eps_{1e-6, "", false};  // a LayerNorm tower's epsilon
  bool tokenizer_loaded_ = false, processor_loaded_ = false;
  std::optional<json> tokenizer_, processor_;
  std::string tokenizer_status_;  // why a token was not found there
};

}  // namespace

TomlDoc import_multimodal(const json& config, const MultimodalInfo& info, const ImportOptions& options) {
  return Multimodal(config, info, options).run();
}

}  // namespace lathe::importer::hf
