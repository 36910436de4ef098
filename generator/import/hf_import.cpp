// config.json → spec. The defaults a config leaves out are transformers'
// own, per configuration class (LlamaConfig, Gemma2Config, …), and every
// value written says in its comment where it came from: the config key, or
// "<Class> default; not in config.json", or the modeling code that hard-codes it.
#include "generator/import/hf_import.hpp"
#include "generator/import/hf_importer.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <sstream>

#include "core/manifest.hpp"
#include "generator/spec/parse.hpp"
#include "generator/spec/report.hpp"
#include "runtime/weights/checkpoint.hpp"

namespace lathe::importer {
namespace hf {

TomlDoc Importer::run() {
  c_.use("model_type");
  read_model();
  read_refusals();
  read_dtype();
  switch (f_) {
    case Family::Gpt2: read_gpt2(); break;
    case Family::GptNeox: read_gpt_neox(); break;
    case Family::Phi: read_phi(); break;
    case Family::Gptj: read_gptj(); break;
    case Family::Falcon: read_falcon(); break;
    case Family::Bloom: read_bloom(); break;
    case Family::Mpt: read_mpt(); break;
    case Family::Bert: case Family::Roberta: case Family::XlmRoberta: read_bert(); break;
    case Family::T5: read_t5(); break;
    case Family::ModernBert: read_modernbert(); break;
    case Family::Bart: case Family::MBart: read_bart(); break;
    case Family::Mamba: read_mamba(); break;
    case Family::Mamba2: read_mamba2(); break;
    case Family::Bamba: read_bamba(); break;
    case Family::DeepseekV2: case Family::DeepseekV3: read_deepseek(); break;
    default: read_llama_like();
  }
  if (!c_.errors().empty()) throw ImportError(c_.errors());
  const std::vector<std::string> unknown = c_.unknown_keys();
  if (!unknown.empty())
    warn(c_.file() + ": warning: keys not read (the spec may be missing what they change): " + join(unknown));
  return std::move(doc_);
}

void Importer::warn(const std::string& line) { warn_line(options_, line); }

void write_model(TomlTable& model, const std::string& name_or_path, const ImportOptions& options) {
  std::string name = options.name;
  if (name.empty()) name = sanitize_model_name(fs::path(name_or_path).filename().string());
  model.set("name", name);
  std::string source = options.source;
  if (source.empty()) source = name_or_path.empty() ? options.file : name_or_path + " config.json";
  model.set("source", source);
}

void refuse_quantization(Config& c) {
  if (!c.present("quantization_config")) return;
  c.use("quantization_config");
  const json& q = c.at("quantization_config");
  const std::string method =
      q.is_object() && q.contains("quant_method") ? shown(q["quant_method"]) : std::string("(no quant_method)");
  c.error("quantization_config (quant_method " + method +
          "): quantized checkpoints are not imported; the spec's weights.dtype is f32, f16, bf16 or one of "
          "ggml's block formats (GGUF files)");
}

void Importer::read_model() { write_model(t("model"), c_.string("_name_or_path").value_or(""), options_); }

void Importer::read_refusals() {
  refuse_quantization(c_);
  // (T5's and BART's configs say so; their readers import both stacks.)
  const bool encoder_decoder_family = f_ == Family::T5 || f_ == Family::Bart || f_ == Family::MBart;
  if (!encoder_decoder_family && c_.boolean("is_encoder_decoder").value_or(false))
    c_.error("is_encoder_decoder = true: encoder-decoder models (a decoder with cross-attention) are not supported yet");
  if (c_.boolean("add_cross_attention").value_or(false))
    c_.error("add_cross_attention = true: the spec has no cross-attention");
  if (c_.boolean("use_bidirectional_attention").value_or(false))
    c_.error("use_bidirectional_attention = true: the spec's attention is causal");
}

void Importer::read_dtype() {
  // transformers 5 writes "dtype", earlier versions "torch_dtype".
  const char* key = c_.has("dtype") ? "dtype" : "torch_dtype";
  c_.use("dtype");
  c_.use("torch_dtype");
  auto dtype = c_.string(key);
  std::string word = "f32";
  std::string note = "torch_dtype not in config.json: float32, as torch loads it";
  if (dtype) {
    note = key;
    if (*dtype == "float32") word = "f32";
    else if (*dtype == "float16") word = "f16";
    else if (*dtype == "bfloat16") word = "bf16";
    else c_.value_error(key, c_.at(key), "the spec's weights.dtype is f32 (float32), f16 (float16) or bf16 (bfloat16)");
  }
  t("weights").set("dtype", word, note);
}

}  // namespace hf

namespace {

using namespace hf;
using nlohmann::json;
namespace fs = std::filesystem;

// A line about the model for the header: the attention shape, norms,
// positions, MLP and head, as the hand-written specs open.
std::string summary(const spec::Spec& s) {
  std::vector<std::string> parts;
  const auto& d = s.dims;
  if (s.ssm.enabled()) {
    const spec::Ssm& m = s.ssm;
    const std::string shape =
        m.mamba2() ? std::to_string(m.heads) + " heads of " + std::to_string(m.head_dim) + " in " +
                         std::to_string(m.groups) + (m.groups == 1 ? " group" : " groups")
                   : "dt_rank " + std::to_string(m.dt_rank);
    if (m.hybrid()) {
      const int64_t attention = static_cast<int64_t>(m.attention_layers.size());
      return std::to_string(d.layers) + " layers, " + std::to_string(d.layers - attention) + (m.mamba2() ? " Mamba-2" : " Mamba") +
             " mixers (d_inner " + std::to_string(m.d_inner) + ", d_state " + std::to_string(m.d_state) + ", " + shape +
             ") and " + std::to_string(attention) + " attention (" + std::to_string(d.heads) + "/" +
             std::to_string(d.kv_heads) + " heads), each with a " + (s.mlp.gated ? "gated " : "") + "MLP; " +
             spec::name(s.norm.kind) + " pre-norms, " + (s.embedding.tied ? "tied" : "untied") +
             " LM head; a KV cache in the attention layers, a fixed state in the others.";
    }
    return std::to_string(d.layers) + (m.mamba2() ? " Mamba-2" : " Mamba") + " layers (d_inner " +
           std::to_string(m.d_inner) + ", d_state " + std::to_string(m.d_state) + ", " + std::to_string(m.d_conv) +
           " conv taps, " + shape + "), " + spec::name(s.norm.kind) + " pre-norms, " +
           (s.embedding.tied ? "tied" : "untied") + " LM head; a fixed state per sequence, no KV cache.";
  }
  if (s.encoder()) parts.push_back("bidirectional encoder");
  if (s.encoder_decoder())
    parts.push_back("encoder-decoder, " + std::to_string(d.encoder_layers) + " + " + std::to_string(d.layers) +
                    " layers, cross-attention");
  if (s.mla.enabled) {
    const spec::Mla& m = s.mla;
    parts.push_back("multi-head latent attention, " + std::to_string(d.heads) + " heads over a latent of " +
                    std::to_string(m.kv_lora_rank) + " + a rotary key of " + std::to_string(m.qk_rope_head_dim) +
                    (m.q_lora_rank > 0 ? ", a query latent of " + std::to_string(m.q_lora_rank) : std::string()));
  } else if (d.kv_heads == d.heads) parts.push_back("MHA " + std::to_string(d.heads) + ":" + std::to_string(d.kv_heads));
  else if (d.kv_heads == 1) parts.push_back("MQA " + std::to_string(d.heads) + ":1");
  else parts.push_back("GQA " + std::to_string(d.heads) + ":" + std::to_string(d.kv_heads));
  if (!s.mla.enabled && d.head_dim * d.heads != d.hidden) parts.back() += " with head_dim " + std::to_string(d.head_dim);
  std::string norm = std::string(spec::name(s.norm.kind)) + " (" + spec::name(s.norm.placement) + ")";
  if (s.norm.unit_offset) norm += " with (1 + w) scales";
  parts.push_back(norm);
  if (s.attention.qk_norm != spec::QKNorm::None) parts.push_back(std::string(spec::name(s.attention.qk_norm)) + " qk-norm");
  if (s.position.kind == spec::PositionKind::Rope) {
    std::string rope = s.position.pairing == spec::RopePairing::Neox ? "rotate-half RoPE" : "interleaved-pair RoPE";
    if (s.position.scaling.kind != spec::RopeScaling::None)
      rope += " with " + std::string(spec::name(s.position.scaling.kind)) + " scaling";
    parts.push_back(rope);
  } else {
    parts.push_back(std::string(spec::name(s.position.kind)) + " positions");
  }
  if (s.attention.sliding_window > 0)
    parts.push_back(std::string("sliding window ") + std::to_string(s.attention.sliding_window) +
                    (s.attention.window_pattern.empty() ? " on every layer" : " on some layers"));
  std::string mlp = s.mlp.gated ? std::string("gated ") + spec::name(s.mlp.activation) + " MLP"
                                : std::string(spec::name(s.mlp.activation)) + " MLP";
  if (s.moe.enabled()) {
    mlp = std::to_string(s.moe.experts) + " " + mlp + " experts, top-" + std::to_string(s.moe.top_k);
    if (s.moe.shared_experts > 0) mlp += ", " + std::to_string(s.moe.shared_experts) + " shared";
  }
  parts.push_back(mlp);
  if (s.encoder()) {
    if (s.embedding.token_types > 0) parts.push_back(std::to_string(s.embedding.token_types) + " token types");
    parts.push_back("no LM head");
  } else {
    parts.push_back(s.embedding.tied ? "tied embeddings" : "untied LM head");
    if (s.output.bias) parts.back() += " with a bias";
  }
  return join(parts) + ".";
}

// A vision tower, for the header: the tower, its widths, the images it
// takes, the hidden state its projector reads and the rows an image gives.
std::string vision_summary(const spec::Spec& s) {
  const spec::Vision& v = s.vision;
  const std::string& preset = v.weights.preset;
  const std::string tower = preset == "hf-clip"      ? "CLIP"
                            : preset == "hf-siglip"  ? "SigLIP"
                            : preset == "hf-pixtral" ? "Pixtral"
                            : preset == "hf-mllama"  ? "Mllama"
                                                     : "vision";
  const std::string images = v.longest_edge > 0 ? "images up to " + std::to_string(v.longest_edge) + " pixels a side"
                             : v.tiles > 0        ? "images cut into up to " + std::to_string(v.tiles) + " tiles of " +
                                                 std::to_string(v.image_size) + " pixels a side"
                                                  : std::to_string(v.image_size) + "-pixel square images";
  const std::string layers = std::to_string(v.dims.layers) + " layers" +
                             (v.global_layers > 0 ? " and " + std::to_string(v.global_layers) + " global ones" : "");
  const int64_t rows = v.image_features() * std::max<int64_t>(v.tiles, 1);
  return "Images: a " + tower + " tower of " + layers + " (hidden " + std::to_string(v.dims.hidden) + ", " +
         std::to_string(v.dims.heads) + " heads) over " + images + " in " + std::to_string(v.patch) +
         "-pixel patches; its hidden state " + std::to_string(v.feature_layer) + " feeds the projector (" +
         spec::name(v.projector.kind) + "), " + (v.longest_edge > 0 ? "up to " : "") + std::to_string(rows) +
         " rows an image" +
         (v.connection == spec::VisionConnection::Splice ? ", spliced over its image tokens."
                                                         : ", read by the decoder's cross-attention layers.");
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fs::exists(path) ? ErrorKind::Io : ErrorKind::NotFound, path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool is_snapshot_hash(const std::string& s) {
  return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The model's name from where its config lies: a directory's name, a
// Hugging Face cache snapshot's repository ("models--org--name/snapshots/<hash>").
std::string name_from_directory(const fs::path& dir) {
  fs::path abs = fs::absolute(dir).lexically_normal();
  if (abs.filename().empty()) abs = abs.parent_path();
  const std::string leaf = abs.filename().string();
  if (is_snapshot_hash(leaf) && abs.parent_path().filename() == "snapshots") {
    const std::string repo = abs.parent_path().parent_path().filename().string();
    const size_t last = repo.rfind("--");
    if (repo.rfind("models--", 0) == 0 && last != std::string::npos) return repo.substr(last + 2);
  }
  return leaf;
}

// "{layer}" and "{expert}" match one or more decimal digits.
bool matches_pattern(std::string_view pattern, std::string_view name) {
  if (pattern.empty()) return name.empty();
  for (std::string_view hole : {std::string_view("{layer}"), std::string_view("{expert}")}) {
    if (pattern.substr(0, hole.size()) == hole) {
      size_t digits = 0;
      while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') ++digits;
      for (size_t n = 1; n <= digits; ++n)
        if (matches_pattern(pattern.substr(hole.size()), name.substr(n))) return true;
      return false;
    }
  }
  return !name.empty() && pattern[0] == name[0] && matches_pattern(pattern.substr(1), name.substr(1));
}

bool has_weights(const fs::path& dir) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".safetensors" || ext == ".gguf" ||
                                e.path().filename() == "model.safetensors.index.json"))
      return true;
  }
  return false;
}

// The spec against the checkpoint in `dir`: equal parameter counts, or an
// ImportError naming both and the first names only one side has.
CheckpointCheck check_checkpoint(const spec::Spec& spec, const fs::path& dir, const std::string& config_file) {
  weights::Checkpoint checkpoint(dir.string());
  CheckpointCheck check;
  check.path = checkpoint.path();
  check.spec_params = spec::make_report(spec).total_params;
  std::set<std::string> seen;
  std::vector<std::string> extra;  // in the checkpoint, not in the manifest
  const spec::Manifest manifest = spec::build_manifest(spec);
  std::vector<std::string> expected;
  for (const spec::TensorSpec& t : manifest.tensors) expected.push_back(t.name);
  const spec::Manifest vision = spec::build_vision_manifest(spec);  // a vision tower's tensors
  for (const spec::TensorSpec& t : vision.tensors) expected.push_back(t.name);
  // Names as the runtime will match them (a fine-tuned GPT-2's
  // "transformer." prefix, a doubled or missing "model.").
  checkpoint.match_names(expected);
  const std::set<std::string> expected_set(expected.begin(), expected.end());
  const std::vector<std::string> ignored = spec::ignored_patterns(spec);
  for (const weights::Checkpoint::Tensor& t : checkpoint.tensors()) {
    const weights::TensorInfo& info = *t.info;
    if (!seen.insert(t.name).second) continue;  // a name held by two shards counts once
    if (std::any_of(ignored.begin(), ignored.end(),
                    [&](const std::string& p) { return matches_pattern(p, t.name); })) {
      ++check.ignored_tensors;
      continue;
    }
    int64_t n = 1;
    for (const int64_t dim : info.shape) n *= dim;
    check.checkpoint_elements += n;
    if (!expected_set.count(t.name)) extra.push_back(t.name);
  }
  if (check.checkpoint_elements == check.spec_params) return check;

  std::vector<std::string> problems;
  problems.push_back(config_file + ": the imported spec has " + format_count(check.spec_params) +
                     " parameters, but the checkpoint " + check.path + " holds " +
                     format_count(check.checkpoint_elements) + " (" +
                     (check.ignored_tensors ? std::to_string(check.ignored_tensors) + " tensors ignored by weights.ignore"
                                            : std::string("no tensor ignored")) +
                     ")");
  constexpr size_t kShown = 5;
  const auto list = [&](const std::vector<std::string>& names, const std::string& what) {
    if (names.empty()) return;
    std::vector<std::string> head(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(std::min(names.size(), kShown)));
    std::string line = config_file + ": " + std::to_string(names.size()) + " " + what + ": " + join(head);
    if (names.size() > kShown) line += ", …";
    problems.push_back(line);
  };
  list(extra, "tensors in the checkpoint that the spec's manifest does not have");
  std::vector<std::string> missing;
  for (const spec::TensorSpec& t : manifest.tensors)
    if (!seen.count(t.name)) missing.push_back(t.name);
  for (const spec::TensorSpec& t : vision.tensors)
    if (!seen.count(t.name)) missing.push_back(t.name);
  list(missing, "tensors of the spec's manifest that the checkpoint lacks");
  throw ImportError(problems);
}

// A sentence-transformers directory's pooling (modules.json: a Pooling
// module's config.json, and a Normalize module), written to the spec's
// [pooling]. Nothing when the directory has no modules.json.
void read_sentence_transformers(const fs::path& dir, TomlDoc& doc) {
  const fs::path modules_path = dir / "modules.json";
  std::error_code ec;
  if (!fs::exists(modules_path, ec)) return;
  const auto parse = [](const fs::path& path) {
    try {
      return json::parse(read_text(path.string()));
    } catch (const json::exception& e) {
      throw Error(ErrorKind::BadFile, path.string() + ": not valid JSON: " + e.what());
    }
  };
  const json modules = parse(modules_path);
  if (!modules.is_array()) throw Error(ErrorKind::BadFile, modules_path.string() + ": expected an array of modules");
  TomlTable& pooling = *doc.find("pooling");
  for (const json& m : modules) {
    const std::string type = string_in(m, "type").value_or("");
    if (type == "sentence_transformers.models.Normalize") {
      pooling.set("normalize", true, "modules.json: a Normalize module (L2)");
      continue;
    }
    if (type != "sentence_transformers.models.Pooling") continue;
    const fs::path config_path = dir / string_in(m, "path").value_or("") / "config.json";
    const json config = parse(config_path);
    const auto mode = [&](const char* key) { return config.contains(key) && config[key].is_boolean() && config[key].get<bool>(); };
    std::vector<std::string> modes;
    for (const char* key : {"pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_lasttoken",
                            "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens"})
      if (mode(key)) modes.emplace_back(key);
    if (modes.size() != 1)
      throw ImportError({config_path.string() + ": " + std::to_string(modes.size()) +
                         " pooling modes are set; the spec pools one way (cls, mean or last token)"});
    const std::string& on = modes.front();
    const char* kind = on == "pooling_mode_cls_token" ? "cls" : on == "pooling_mode_mean_tokens" ? "mean"
                       : on == "pooling_mode_lasttoken" ? "last" : nullptr;
    if (!kind)
      throw ImportError({config_path.string() + ": " + on + " is not supported; the spec pools by cls, mean or last token"});
    pooling.set("kind", kind, config_path.parent_path().filename().string() + "/config.json: " + on);
  }
}

}  // namespace

std::vector<std::string> supported_hf_model_types() {
  std::vector<std::string> out;
  for (const FamilyInfo& f : kFamilies) out.emplace_back(f.model_type);
  for (const MultimodalInfo& m : kMultimodal) out.emplace_back(m.model_type);
  return out;
}

TomlDoc import_hf_config(const json& config, const ImportOptions& options) {
  if (!config.is_object()) throw ImportError({options.file + ": expected a JSON object, found " + shown(config).substr(0, 40)});
  const std::string supported = join(supported_hf_model_types());
  if (!config.contains("model_type") || !config["model_type"].is_string())
    throw ImportError({options.file + ": no model_type (a string); supported model types: " + supported});
  const std::string model_type = config["model_type"].get<std::string>();
  const FamilyInfo* info = find_family(model_type);
  const MultimodalInfo* multimodal = nullptr;
  for (const MultimodalInfo& m : kMultimodal)
    if (model_type == m.model_type) multimodal = &m;
  if (info == nullptr && multimodal == nullptr)
    throw ImportError({options.file + ": model_type \"" + model_type + "\" is not supported; supported model types: " +
                       supported});

  TomlDoc doc = multimodal ? import_multimodal(config, *multimodal, options) : Importer(config, *info, options).run();

  // The document must read back as a valid spec: anything else is a bug here.
  const std::string text = doc.render();
  spec::Diagnostics diagnostics(options.file + " (imported spec)");
  const auto spec = spec::parse_spec_string(text, diagnostics.file(), diagnostics);
  // lathe's own size limits (262,144 tensors, 2^48 parameters) are the
  // config's problem, not the importer's.
  if (!spec && std::all_of(diagnostics.items().begin(), diagnostics.items().end(), [](const spec::Diagnostic& d) {
        return d.message.find("lathe handles at most") != std::string::npos;
      })) {
    std::vector<std::string> problems;
    for (const spec::Diagnostic& d : diagnostics.items()) problems.push_back(options.file + ": " + d.message);
    throw ImportError(problems);
  }
  if (!spec)
    throw Error(ErrorKind::InvalidArgument, "internal error: the spec imported from " + options.file +
                                                " does not read back:\n" + diagnostics.format() + "--- spec ---\n" + text);
  const std::string name_or_path = string_in(config, "_name_or_path").value_or("");
  doc.header(name_or_path.empty() ? spec->name + ", imported from " + options.file + " by `lathe import`."
                                  : spec->name + " (" + name_or_path + "), imported from its config.json by `lathe import`.");
  doc.header("model_type \"" + model_type + "\": " + summary(*spec));
  if (spec->vision.enabled) doc.header(vision_summary(*spec));
  if (multimodal)
    doc.header("The decoder's keys are text_config's (named as there); [vision]'s are vision_config's "
               "(vision_config.*) and the top level's.");
  return doc;
}

ImportResult import_hf(const std::string& path, ImportOptions options) {
  std::error_code ec;
  const bool is_dir = fs::is_directory(path, ec);
  const fs::path config_path = is_dir ? fs::path(path) / "config.json" : fs::path(path);
  const std::string text = read_text(config_path.string());
  if (options.file == ImportOptions{}.file) options.file = config_path.string();
  json config;
  try {
    config = parse_python_json(text);
  } catch (const json::exception& e) {  // what() says the line and column
    throw Error(ErrorKind::BadFile, config_path.string() + ": not valid JSON: " + e.what());
  }
  if (!config.is_object()) throw Error(ErrorKind::BadFile, config_path.string() + ": expected a JSON object");

  if (options.name.empty()) {
    std::string raw;
    if (!is_dir && config_path.filename() != "config.json") raw = config_path.stem().string();
    else raw = name_from_directory(config_path.parent_path().empty() ? fs::path(".") : config_path.parent_path());
    if (raw.empty() || raw == "." || is_snapshot_hash(raw))
      raw = fs::path(string_in(config, "_name_or_path").value_or("")).filename().string();
    options.name = sanitize_model_name(raw);
  }

  const fs::path dir = config_path.parent_path().empty() ? fs::path(".") : config_path.parent_path();
  // generation_config.json: the decoder's first token, as generate() takes it.
  if (const fs::path generation = dir / "generation_config.json"; fs::exists(generation, ec)) {
    json g;
    try {
      g = json::parse(read_text(generation.string()));
    } catch (const json::exception& e) {
      throw Error(ErrorKind::BadFile, generation.string() + ": not valid JSON: " + e.what());
    }
    if (g.is_object() && g.contains("decoder_start_token_id") && g["decoder_start_token_id"].is_number_integer())
      options.generation_decoder_start = g["decoder_start_token_id"].get<int64_t>();
  }

  ImportResult result;
  if (options.directory.empty()) options.directory = dir.string();
  result.doc = import_hf_config(config, options);
  const TomlValue* stack = result.doc.find("model")->get("stack");
  if (stack && stack->text() == "\"encoder\"") read_sentence_transformers(dir, result.doc);
  result.text = result.doc.render();
  spec::Diagnostics diagnostics(options.file);
  auto spec = spec::parse_spec_string(result.text, options.file, diagnostics);
  if (!spec) throw Error(ErrorKind::InvalidArgument, "internal error: " + diagnostics.format());
  result.spec = std::move(*spec);

  if (options.check_weights && has_weights(dir)) result.checkpoint = check_checkpoint(result.spec, dir, options.file);
  return result;
}

}  // namespace lathe::importer
