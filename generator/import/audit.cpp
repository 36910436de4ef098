#include "generator/import/audit.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "core/manifest.hpp"
#include "generator/import/import.hpp"
#include "generator/spec/report.hpp"
#include "runtime/error.hpp"
#include "runtime/text/jinja/chat_template.hpp"
#include "runtime/text/tokenize/json_file.hpp"
#include "runtime/text/tokenize/tokenizer.hpp"
#include "runtime/weights/checkpoint.hpp"
#include "runtime/weights/gguf.hpp"

namespace lathe::importer {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* name(AuditStatus s) {
  switch (s) {
    case AuditStatus::Ok: return "ok";
    case AuditStatus::Warning: return "warning";
    case AuditStatus::Error: return "error";
  }
  return "error";
}

const AuditCheck* AuditResult::find(const std::string& id) const {
  for (const AuditCheck& c : checks)
    if (c.id == id) return &c;
  return nullptr;
}

size_t AuditResult::count(AuditStatus status) const {
  return static_cast<size_t>(std::count_if(checks.begin(), checks.end(), [&](const AuditCheck& c) { return c.status == status; }));
}

namespace {

std::string num(int64_t v) { return std::to_string(v); }

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

// The checks' topics, in the order they are reported (docs/audit.md).
constexpr const char* kTopics[] = {"files",    "config", "attention", "latent",    "norms",          "mlp",
                                   "moe",      "ssm",    "embedding", "lm_head",   "vision",         "unexpected",     "tokenizer",
                                   "vocab",    "special_tokens",      "chat_template", "rope",   "context"};

// What one check found: its errors and warnings (each a phrase with the
// numbers and what is at fault); with neither, the ok line says what holds.
struct Findings {
  std::vector<std::string> errors, warnings;
  bool applies = false;  // reported even when nothing was found wrong
  std::string ok;        // the ok line

  std::vector<std::string> tensor_errors;  // after the rules' errors, which explain them

  void error(std::string s) { errors.push_back(std::move(s)), applies = true; }
  void tensor_error(std::string s) { tensor_errors.push_back(std::move(s)), applies = true; }
  // A rule's error, unless the importer's words already name `key` (the
  // same fault said once).
  void error_unless_named(const std::string& key, std::string s) {
    if (std::none_of(errors.begin(), errors.end(), [&](const std::string& e) { return e.find(key) != std::string::npos; }))
      error(std::move(s));
  }
  void warn(std::string s) { warnings.push_back(std::move(s)), applies = true; }
  void holds(std::string s) { ok = std::move(s), applies = true; }
};

// At most four of a check's problems in its line (every layer's copy of a
// dropped tensor would be a screenful), then how many more.
std::string first_few(const std::vector<std::string>& items) {
  constexpr size_t kShown = 4;
  std::vector<std::string> head(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(std::min(items.size(), kShown)));
  std::string out = join(head, "; ");
  if (items.size() > kShown) out += "; … (" + num(static_cast<int64_t>(items.size() - kShown)) + " more)";
  return out;
}

// The last module of a tensor name: "model.layers.0.mlp.gate_proj.weight" → "gate_proj".
std::string short_name(const std::string& name) {
  std::string s = name;
  for (const char* suffix : {".weight", ".bias"})
    if (s.size() > std::string_view(suffix).size() && s.ends_with(suffix)) {
      const bool bias = std::string_view(suffix) == ".bias";
      s.resize(s.size() - std::string_view(suffix).size());
      const size_t dot = s.rfind('.');
      return (dot == std::string::npos ? s : s.substr(dot + 1)) + (bias ? ".bias" : "");
    }
  const size_t dot = s.rfind('.');
  return dot == std::string::npos ? s : s.substr(dot + 1);
}

std::string topic_of(Role r) {
  switch (r) {
    case Role::QA:
    case Role::QANorm:
    case Role::QB:
    case Role::KvA:
    case Role::KvANorm:
    case Role::KvB: return "latent";
    case Role::SsmGateNorm: return "ssm";
    default: break;
  }
  switch (spec::component_of(r)) {
    case spec::Component::Embedding: return "embedding";
    case spec::Component::Attention: return "attention";
    case spec::Component::Mlp: return "mlp";
    case spec::Component::Experts: return "moe";
    case spec::Component::Norms: return "norms";
    case spec::Component::LmHead: return "lm_head";
    case spec::Component::Ssm: return "ssm";
    case spec::Component::Vision: return "vision";
  }
  return "norms";
}

// An importer's problem goes to the check whose keys it names; the rest stay
// with "config". The key is what the line starts with, after the file's name
// ("mamba/config.json: …"); failing that, what it says before any list
// ("model_type \"xlnet\" is not supported; supported model types: …, mamba"
// is config's).
std::string topic_of_problem(const std::string& line) {
  const size_t colon = line.find(": ");
  const std::string p = colon != std::string::npos && line.substr(0, colon).find(' ') == std::string::npos
                            ? line.substr(colon + 2)
                            : line;
  const auto topic_in = [](const std::string& text) -> std::string {
    const auto has = [&](std::initializer_list<const char*> words) {
      return std::any_of(words.begin(), words.end(), [&](const char* w) { return text.find(w) != std::string::npos; });
    };
    if (has({"rope_scaling", "rope_parameters", "rope.scaling", "position.scaling", "rope_type"})) return "rope";
    if (has({"kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "mla."})) return "latent";
    if (has({"expert", "top_k", "topk", "moe."})) return "moe";
    if (has({"state_size", "conv_kernel", "time_step", "ssm.", "ssm_", "mamba"})) return "ssm";
    if (has({"heads", "head_dim", "head_count", "key_length", "d_kv"})) return "attention";
    if (has({"max_position_embeddings", "context_length", "max_context"})) return "context";
    return "config";
  };
  if (const std::string t = topic_in(p.substr(0, p.find(' '))); t != "config") return t;
  return topic_in(p.substr(0, p.find(';')));
}

// A value of the config as it is, before the importer, and the key it came from.
struct Keyed {
  int64_t value;
  std::string key;
};

// config.json's keys (each name a family uses), or the GGUF metadata's
// <arch>.* keys.
struct RawConfig {
  json hf = json::object();
  // A directory's generation_config.json and tokenizer_config.json (null: absent or unreadable).
  json generation, tokenizer;
  const weights::GgufFile* gguf = nullptr;
  std::string arch;  // general.architecture

  std::optional<Keyed> integer(std::initializer_list<const char*> hf_keys, const char* gguf_key) const {
    if (gguf) {
      if (!gguf_key) return std::nullopt;
      const std::string key = arch + "." + gguf_key;
      if (const std::optional<int64_t> v = gguf->integer(key)) return Keyed{*v, key};
      return std::nullopt;
    }
    for (const char* k : hf_keys)
      if (hf.contains(k) && hf[k].is_number_integer()) return Keyed{hf[k].get<int64_t>(), k};
    return std::nullopt;
  }
  std::optional<std::string> model_type() const {
    if (hf.contains("model_type") && hf["model_type"].is_string()) return hf["model_type"].get<std::string>();
    return std::nullopt;
  }
};

// "bos_token_id": 1, [1, 2] or null.
std::vector<int64_t> ids_of(const json& v) {
  std::vector<int64_t> out;
  if (v.is_number_integer()) out.push_back(v.get<int64_t>());
  if (v.is_array())
    for (const json& x : v)
      if (x.is_number_integer()) out.push_back(x.get<int64_t>());
  return out;
}

// tokenizer_config.json's "eos_token": "</s>" or {"content": "</s>", …}.
std::optional<std::string> token_text_of(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

// A string member, or "" (a config's value of another type is the importer's to name).
std::string string_at(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

// A token's text quoted as JSON, bytes that are not UTF-8 replaced.
std::string quoted(const std::string& text) { return json(text).dump(-1, ' ', false, json::error_handler_t::replace); }

// A JSON file of the checkpoint, or nullopt when it is absent or not JSON
// (config.json's errors are the importer's to name; the other files'
// values are read where they are valid).
std::optional<json> read_json(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  try {
    return text::detail::parse_json_file(path);
  } catch (const Error&) {
    return std::nullopt;
  }
}

class Auditor {
 public:
  explicit Auditor(std::string path) { result_.path = std::move(path); }

  AuditResult run() {
    using Step = void (Auditor::*)();
    // Each step in turn; a step that throws (a file that reads wrong in a way
    // the readers did not foresee) is an error of its check, never a crash.
    static constexpr std::pair<const char*, Step> kSteps[] = {
        {"config", &Auditor::import_spec},          {"files", &Auditor::check_tensors},
        {"attention", &Auditor::check_attention},   {"latent", &Auditor::check_latent},
        {"norms", &Auditor::check_norms},           {"mlp", &Auditor::check_mlp},
        {"moe", &Auditor::check_moe},               {"ssm", &Auditor::check_ssm},
        {"embedding", &Auditor::check_embedding},   {"lm_head", &Auditor::check_head},
        {"vision", &Auditor::check_vision},
        {"tokenizer", &Auditor::load_tokenizer},    {"vocab", &Auditor::check_vocab},
        {"special_tokens", &Auditor::check_special_tokens}, {"chat_template", &Auditor::check_chat_template},
        {"rope", &Auditor::check_rope},             {"context", &Auditor::check_context},
    };
    if (open())
      for (const auto& [id, step] : kSteps) {
        try {
          (this->*step)();
        } catch (const std::exception& e) {
          topic(id).error(e.what());
        }
      }
    for (const char* id : kTopics) {
      auto it = topics_.find(id);
      if (it == topics_.end() || !it->second.applies) continue;
      const Findings& f = it->second;
      AuditCheck c{id, AuditStatus::Ok, f.ok};
      if (!f.errors.empty() || !f.tensor_errors.empty()) {
        c.status = AuditStatus::Error;
        std::vector<std::string> all = f.errors;
        all.insert(all.end(), f.tensor_errors.begin(), f.tensor_errors.end());
        all.insert(all.end(), f.warnings.begin(), f.warnings.end());
        c.message = first_few(all);
      } else if (!f.warnings.empty()) {
        c.status = AuditStatus::Warning;
        c.message = first_few(f.warnings);
      }
      // One line a check: a multi-line message (the GGUF importer's list of
      // keys) joined.
      for (size_t at = c.message.find('\n'); at != std::string::npos; at = c.message.find('\n', at)) {
        size_t end = at + 1;
        while (end < c.message.size() && c.message[end] == ' ') ++end;
        c.message.replace(at, end - at, at > 0 && c.message[at - 1] == ':' ? " " : "; ");
      }
      result_.checks.push_back(std::move(c));
    }
    return std::move(result_);
  }

 private:
  Findings& topic(const std::string& id) { return topics_[id]; }

  // The files: what the path is, and whether its weights open.
  bool open() {
    const std::string& path = result_.path;
    std::error_code ec;
    Findings& f = topic("files");
    if (!fs::exists(path, ec)) {
      f.error(path + ": no such file or directory");
      return false;
    }
    fs::path gguf_path;
    if (fs::path(path).extension() == ".gguf") {
      gguf_path = path;
    } else if (fs::is_directory(path, ec) && !fs::exists(fs::path(path) / "config.json", ec)) {
      for (const auto& e : fs::directory_iterator(path, ec))
        if (e.path().extension() == ".gguf") {
          if (!gguf_path.empty()) {
            f.error(path + ": no config.json, and more than one .gguf file: name one");
            return false;
          }
          gguf_path = e.path();
        }
      if (gguf_path.empty()) {
        f.error(path + ": neither config.json nor a .gguf file: not a Hugging Face directory or a GGUF checkpoint");
        return false;
      }
    }
    gguf_ = !gguf_path.empty();
    dir_ = gguf_ ? gguf_path.parent_path() : fs::is_directory(path, ec) ? fs::path(path) : fs::path(path).parent_path();
    if (dir_.empty()) dir_ = ".";
    result_.format = gguf_ ? "GGUF file" : "Hugging Face directory";
    import_path_ = gguf_ ? gguf_path.string() : path;

    std::vector<std::string> found;
    try {
      checkpoint_.emplace(gguf_ ? gguf_path.string() : dir_.string());
    } catch (const Error& e) {
      if (gguf_) {  // a GGUF file that does not open has nothing else to check
        f.error(e.what());
        return false;
      }
      f.error(std::string("no weights that open: ") + e.what());
    }
    if (!gguf_) {
      config_file_ = (dir_ / "config.json").string();
      if (std::optional<json> c = read_json(config_file_); c && c->is_object()) raw_.hf = *c;
      raw_.generation = read_json(dir_ / "generation_config.json").value_or(json());
      raw_.tokenizer = read_json(dir_ / "tokenizer_config.json").value_or(json());
      found.push_back("config.json");
    }
    if (checkpoint_) {
      std::map<std::string, int64_t> dtypes;
      for (const weights::Checkpoint::Tensor& t : checkpoint_->tensors()) ++dtypes[std::string(dtype_name(t.info->dtype))];
      std::vector<std::string> counts;
      for (const auto& [dtype, n] : dtypes) counts.push_back(dtype + " " + num(n));
      const size_t files = checkpoint_->files().size();
      found.push_back(fs::path(checkpoint_->path()).filename().string() + " (" +
                      (files > 1 ? num(static_cast<int64_t>(files)) + " files, " : "") +
                      num(static_cast<int64_t>(checkpoint_->tensors().size())) + " tensors: " + join(counts, ", ") + ")");
      if (gguf_) {
        gguf_file_ = dynamic_cast<const weights::GgufFile*>(checkpoint_->files().front().get());
        raw_.gguf = gguf_file_;
        raw_.arch = gguf_file_ ? gguf_file_->string("general.architecture").value_or("") : "";
      }
    }
    if (!gguf_)
      for (const char* name : {"tokenizer.json", "tokenizer.model", "tokenizer_config.json", "generation_config.json",
                               "chat_template.jinja"})
        if (fs::exists(dir_ / name, ec)) found.push_back(name);
    f.holds(join(found, ", "));
    return true;
  }

  // The spec the config (or the GGUF metadata) imports as; each problem of
  // the importer under the check whose keys it names.
  void import_spec() {
    Findings& config = topic("config");
    ImportOptions options;
    options.check_weights = false;
    std::vector<std::string> unknown;
    options.warn = [&](const std::string& line) { unknown.push_back(line); };
    std::vector<std::string> problems;
    try {
      ImportResult imported = import_model_config(import_path_, options);
      spec_ = std::move(imported.spec);
    } catch (const ImportError& e) {
      problems = e.problems();
    } catch (const Error& e) {
      // A config whose numbers break the spec's contract (heads that do not
      // divide) is refused by the spec's parser after the import, as
      // "<headline>:" then a line per problem (the GGUF importer's keys, the
      // parser's diagnostics; not the spec text it read): each line a problem.
      std::string what = e.what();
      if (const size_t cut = what.find("--- spec ---"); cut != std::string::npos) what.resize(cut);
      std::vector<std::string> lines;
      for (size_t start = 0; start < what.size();) {
        const size_t end = std::min(what.find('\n', start), what.size());
        size_t first = start;
        while (first < end && what[first] == ' ') ++first;
        if (end > first) lines.push_back(what.substr(first, end - first));
        start = end + 1;
      }
      if (lines.size() > 1 && lines.front().ends_with(":")) lines.erase(lines.begin());
      problems = lines;
    }
    size_t routed = 0;
    for (const std::string& p : problems) {
      const std::string t = topic_of_problem(p);
      if (t == "config") config.error(p);
      else topic(t).error(p), ++routed;
    }
    for (const std::string& w : unknown) config.warn(w);
    if (spec_) {
      manifest_ = spec::build_manifest(*spec_);
      // A vision tower's tensors are the checkpoint's too (topic "vision").
      for (spec::TensorSpec& t : spec::build_vision_manifest(*spec_).tensors) {
        vision_names_.insert(t.name);
        manifest_.tensors.push_back(std::move(t));
      }
      for (const spec::TensorSpec& t : manifest_.tensors) by_name_.emplace(t.name, &t);
      const std::string what = gguf_ ? "general.architecture \"" + raw_.arch + "\""
                                     : "model_type \"" + raw_.model_type().value_or("?") + "\"";
      config.holds(what + " imports: " + num(spec_->dims.layers) + " layers, hidden " + num(spec_->dims.hidden) +
                   ", vocab " + num(spec_->dims.vocab) + ", " + num(manifest_.total_elements()) + " parameters");
    } else if (config.errors.empty()) {
      // Every problem is another check's: the spec is still missing.
      config.warn("no spec: the config does not import (" + num(static_cast<int64_t>(routed)) +
                  (routed == 1 ? " problem" : " problems") + " named by the checks below), so its tensors are not checked");
    }
  }

  // The checkpoint against the spec's manifest (the runtime's audit at
  // load), each problem under the check of its tensor's role.
  void check_tensors() {
    if (!spec_ || !checkpoint_) return;
    const std::vector<ManifestEntry> entries = spec::manifest_entries(manifest_);
    checkpoint_->match_names(entries);
    const std::vector<std::string> ignore = spec::ignored_patterns(*spec_);
    for (const std::string& p : checkpoint_->audit(entries, ignore)) {
      if (p == checkpoint_->renaming()) continue;  // said by files
      const size_t colon = p.find(": ");
      const std::string name = p.substr(0, colon);
      const auto it = by_name_.find(name);
      if (it != by_name_.end()) {
        const std::string hint = rule_of(*it->second);
        topic(topic_for(*it->second)).tensor_error(p + (hint.empty() || p.ends_with("missing") ? "" : " (" + hint + ")"));
      } else if (p.find("unexpected tensor") != std::string::npos) {
        topic("unexpected").warn(p);
      } else {
        topic("files").tensor_error(p);
      }
    }
    if (!checkpoint_->renaming().empty()) topic("files").ok += "; " + checkpoint_->renaming();
    if (topic("unexpected").warnings.empty()) topic("unexpected").holds("every tensor is one the spec names or ignores");
  }

  // Why a tensor has its rows: the config numbers its shape comes from.
  std::string rule_of(const spec::TensorSpec& t) const {
    const spec::Dims& d = spec_->dims;
    switch (t.role) {
      case Role::Q: return "rows = heads × head_dim = " + num(d.heads) + " × " + num(d.head_dim);
      case Role::K:
      case Role::V: return "rows = kv_heads × head_dim = " + num(d.kv_heads) + " × " + num(d.head_dim);
      case Role::Gate:
      case Role::Up: return "rows = intermediate " + num(d.intermediate);
      case Role::Down: return "columns = intermediate " + num(d.intermediate);
      case Role::Embed: return "rows = vocab " + num(d.vocab);
      case Role::LmHead: return "rows = vocab " + num(d.vocab);
      case Role::Router: return "rows = experts " + num(spec_->moe.experts);
      default: return "";
    }
  }

  // The tensors of a topic as one phrase: the first layer's, then the
  // globals ("q_proj [64, 64], k_proj [32, 64] × 2 layers; norm [64]"),
  // each by its last module name, or by its path inside the layer where two
  // share it (BERT's attention.output.LayerNorm and output.LayerNorm).
  std::string tensors_of(const std::string& id) const {
    struct Shown {
      const spec::TensorSpec* t;
      std::string label;
    };
    std::vector<Shown> shown;
    std::map<std::string, int> uses;
    std::set<int64_t> layers;
    int64_t first = -1;
    for (const spec::TensorSpec& t : manifest_.tensors) {
      if (topic_for(t) != id || t.expert > 0 || t.slice > 0) continue;
      if (t.layer >= 0) {
        layers.insert(t.layer);
        if (first < 0) first = t.layer;
        if (t.layer != first) continue;
      }
      shown.push_back({&t, short_name(t.name)});
      ++uses[shown.back().label];
    }
    std::vector<std::string> per_layer, global;
    for (Shown& s : shown) {
      if (uses[s.label] > 1) {
        // The path after the layer's number ("model.layers.0.") or, for a
        // global, the whole name, less ".weight".
        std::string path = s.t->name;
        if (path.ends_with(".weight")) path.resize(path.size() - 7);
        const std::string marker = std::string(".").append(num(s.t->layer)).append(".");  // (GCC 12 -Wrestrict misfires on "." + s)
        if (const size_t at = s.t->layer >= 0 ? path.find(marker) : std::string::npos; at != std::string::npos)
          path = path.substr(at + marker.size());
        s.label = path;
      }
      (s.t->layer >= 0 ? per_layer : global).push_back(s.label + " " + weights::shape_string(s.t->shape));
    }
    std::string out = join(per_layer, ", ");
    if (!per_layer.empty())
      out += " × " + num(static_cast<int64_t>(layers.size())) + (layers.size() == 1 ? " layer" : " layers");
    if (!global.empty()) out += (out.empty() ? "" : "; ") + join(global, ", ");
    return out;
  }

  bool topic_has_tensors(const std::string& id) const {
    return std::any_of(manifest_.tensors.begin(), manifest_.tensors.end(),
                       [&](const spec::TensorSpec& t) { return topic_for(t) == id; });
  }

  // The ok line of a topic with tensors: its rule, then its tensors.
  void holds_with_tensors(const std::string& id, const std::string& rule) {
    Findings& f = topic(id);
    const std::string tensors = spec_ ? tensors_of(id) : "";
    f.holds(rule + (tensors.empty() ? "" : (rule.empty() ? "" : ": ") + tensors));
  }

  // d = H_q·d_h (or an explicit head_dim), H_q mod H_kv, and the KV cache on H_kv.
  void check_attention() {
    Findings& f = topic("attention");
    const bool latent = (spec_ && spec_->mla.enabled) || raw_.integer({"kv_lora_rank"}, nullptr);
    const std::optional<Keyed> heads =
        raw_.integer({"num_attention_heads", "n_head", "num_heads", "n_heads", "encoder_attention_heads"}, "attention.head_count");
    const bool attends = spec_ ? (spec_->dims.heads > 0 && topic_has_tensors("attention")) || latent : heads.has_value();
    if (!attends) return;  // a state-space model; the importer's problems, if any, stand alone
    // The numbers as the config states them, else as the spec has them.
    Keyed hidden = raw_.integer({"hidden_size", "n_embd", "d_model", "dim"}, "embedding_length")
                       .value_or(Keyed{spec_ ? spec_->dims.hidden : 0, "dims.hidden"});
    Keyed h = heads.value_or(Keyed{spec_ ? spec_->dims.heads : 0, "dims.heads"});
    std::optional<Keyed> kv = raw_.integer({"num_key_value_heads", "num_kv_heads", "n_head_kv"}, "attention.head_count_kv");
    if (!kv && raw_.hf.contains("multi_query") && raw_.hf["multi_query"] == true) kv = Keyed{1, "multi_query"};
    if (!kv && spec_) kv = Keyed{spec_->dims.kv_heads, "dims.kv_heads"};
    if (!kv) kv = Keyed{h.value, h.key + " (no KV head count: MHA)"};
    const std::optional<Keyed> head_dim = raw_.integer({"head_dim", "d_kv"}, "attention.key_length");  // d_kv: T5's
    std::vector<std::string> facts;
    if (h.value <= 0) {
      f.error(h.key + " = " + num(h.value) + ": no attention heads");
      return;
    }
    if (kv->value <= 0 || h.value % kv->value != 0) {
      f.error_unless_named(kv->key, h.key + " (" + num(h.value) + ") is not a multiple of " + kv->key + " (" + num(kv->value) +
              "): each KV head must serve a whole group of query heads");
    }
    int64_t d_h = 0;
    if (latent) {
      facts.push_back("latent attention: " + num(h.value) + " heads, the cache holds the latent (see latent)");
    } else if (head_dim && !(spec_ && !spec_->dims.head_dim_explicit && head_dim->value == hidden.value / h.value)) {
      d_h = head_dim->value;
      facts.push_back(head_dim->key + " " + num(d_h) + " given: " +
                      (hidden.value == h.value * d_h ? hidden.key + " " + num(hidden.value) + " = " + num(h.value) +
                                                           " heads × " + num(d_h)
                                                     : "q/o map " + hidden.key + " " + num(hidden.value) + " to " +
                                                           num(h.value) + " × " + num(d_h) + " = " +
                                                           num(h.value * d_h)));
    } else if (hidden.value % h.value != 0) {
      // transformers floors d / H_q (LlamaAttention's head_dim), and so
      // does the importer: the projections then map d to H_q · d_h < d.
      d_h = hidden.value / h.value;
      f.warn(hidden.key + " (" + num(hidden.value) + ") is not a multiple of " + h.key + " (" + num(h.value) +
             ") and no head_dim is given: d_h is floored to " + num(d_h) + ", q/o map " + num(hidden.value) + " to " +
             num(h.value * d_h));
    } else {
      d_h = hidden.value / h.value;
      facts.push_back(hidden.key + " " + num(hidden.value) + " = " + num(h.value) + " heads × head_dim " + num(d_h));
    }
    // An encoder attends over its input in one pass: no cache.
    const bool caches = !spec_ || spec_->stack != spec::Stack::Encoder;
    if (caches && d_h > 0 && kv->value > 0 && h.value % kv->value == 0) {
      const int64_t group = h.value / kv->value;
      facts.push_back(std::string(group == 1 ? "MHA" : kv->value == 1 ? "MQA" : "GQA") + ", the KV cache on " +
                      num(kv->value) + " KV heads × " + num(d_h) + " = " + num(kv->value * d_h) +
                      " values a token and layer for K and for V" +
                      (group > 1 ? " (" + num(group) + " query heads a KV head)" : ""));
    }
    // The cache the build allocates (report.cpp's accounting, what the
    // runtime holds) must be the one of H_kv heads: 2 · layers · H_kv · d_h.
    if (spec_ && spec_->stack == spec::Stack::Decoder && !latent && d_h > 0 && kv->value > 0) {
      std::set<int64_t> kv_layers;
      for (const spec::TensorSpec& t : manifest_.tensors)
        if (t.role == Role::K || t.role == Role::Qkv) kv_layers.insert(t.layer);
      const spec::Report report = spec::make_report(*spec_);
      const auto expected = static_cast<int64_t>(2.0 * static_cast<double>(kv_layers.size()) *
                                                 static_cast<double>(kv->value * d_h) * spec::bytes_per_element(report.kv_dtype));
      const std::string cache = std::string(dtype_name(report.kv_dtype)) + " cache";
      if (report.kv_bytes_per_token != expected)
        f.error("the build's " + cache + " holds " + num(report.kv_bytes_per_token) + " bytes a token, not 2 × " +
                num(static_cast<int64_t>(kv_layers.size())) + " layers × " + num(kv->value) + " KV heads × " +
                num(d_h) + " = " + num(expected));
      else facts.push_back("the build's " + cache + ": " + num(expected) + " bytes a token");
    }
    holds_with_tensors("attention", join(facts, "; "));
  }

  // Multi-head latent attention (DeepSeek-V2/V3): the ranks, and the
  // latent's norm (kv_a_layernorm) among the tensors.
  void check_latent() {
    if (!spec_ || !spec_->mla.enabled) return;
    const spec::Mla& m = spec_->mla;
    Findings& f = topic("latent");
    const int64_t d = spec_->dims.hidden;
    if (m.kv_lora_rank >= d) f.warn("kv_lora_rank " + num(m.kv_lora_rank) + " is not below hidden " + num(d) + ": the latent compresses nothing");
    if (m.q_lora_rank >= d) f.warn("q_lora_rank " + num(m.q_lora_rank) + " is not below hidden " + num(d));
    if (m.qk_rope_head_dim % 2 != 0) f.error("qk_rope_head_dim " + num(m.qk_rope_head_dim) + " is odd: RoPE rotates pairs");
    const bool norm = std::any_of(manifest_.tensors.begin(), manifest_.tensors.end(),
                                  [](const spec::TensorSpec& t) { return t.role == Role::KvANorm; });
    if (!norm) f.error("the spec has no latent norm (kv_a_layernorm)");
    holds_with_tensors("latent", "kv_lora_rank " + num(m.kv_lora_rank) +
                                     (m.q_lora_rank ? ", q_lora_rank " + num(m.q_lora_rank) : ", no q latent") +
                                     ", heads of nope " + num(m.qk_nope_head_dim) + " + rope " +
                                     num(m.qk_rope_head_dim) + ", v " + num(m.v_head_dim) + ", the cache one latent of " +
                                     num(m.kv_lora_rank + m.qk_rope_head_dim) + " a token and layer");
  }

  void check_norms() {
    if (!spec_ || !topic_has_tensors("norms")) return;
    const spec::Norm& n = spec_->norm;
    std::string rule = std::string(spec::name(n.placement)) + "-norm " + spec::name(n.kind);
    if (!n.final_norm) rule += ", no final norm (norm.final_norm = false)";
    else if (!std::any_of(manifest_.tensors.begin(), manifest_.tensors.end(),
                          [](const spec::TensorSpec& t) { return t.role == Role::FinalNorm; }))
      rule += ", the final norm in the encoder";
    else rule += " with a final norm";
    holds_with_tensors("norms", rule);
  }

  void check_mlp() {
    if (!spec_ || !topic_has_tensors("mlp")) return;
    const spec::Mlp& m = spec_->mlp;
    holds_with_tensors("mlp", std::string(m.gated ? "gated " : "") + spec::name(m.activation) + ", intermediate " +
                                  num(spec_->dims.intermediate));
  }

  // Routing: the expert count, top-k within it, and the fields each family's
  // router reads.
  void check_moe() {
    Findings& f = topic("moe");
    const std::optional<Keyed> experts =
        raw_.integer({"num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"}, "expert_count");
    const std::optional<Keyed> top_k =
        raw_.integer({"num_experts_per_tok", "moe_top_k", "top_k", "moe_k"}, "expert_used_count");
    const bool moe = (experts && experts->value > 0) || (spec_ && spec_->moe.enabled());
    if (!moe) return;
    if (!experts) f.error("no expert count (num_local_experts / num_experts / n_routed_experts)");
    if (!top_k) f.error("no top-k (num_experts_per_tok)");
    if (experts && top_k && (top_k->value < 1 || top_k->value > experts->value))
      f.error_unless_named(top_k->key, top_k->key + " (" + num(top_k->value) + ") must be between 1 and " + experts->key + " (" +
              num(experts->value) + ")");
    // Fields transformers' router reads with a default when they are absent:
    // a config without them routes as the default says, which may not be
    // how the model was trained.
    static const std::map<std::string, std::vector<const char*>> kRouting = {
        {"qwen2_moe", {"norm_topk_prob", "shared_expert_intermediate_size", "moe_intermediate_size"}},
        {"qwen3_moe", {"norm_topk_prob", "moe_intermediate_size"}},
        {"deepseek_v2", {"norm_topk_prob", "topk_method", "n_group", "topk_group", "routed_scaling_factor", "moe_intermediate_size"}},
        {"deepseek_v3", {"norm_topk_prob", "n_group", "topk_group", "routed_scaling_factor", "scoring_func", "moe_intermediate_size"}},
    };
    if (const std::optional<std::string> type = raw_.model_type())
      if (const auto it = kRouting.find(*type); it != kRouting.end())
        for (const char* key : it->second)
          if (!raw_.hf.contains(key))
            f.warn(std::string(key) + " is absent: transformers' default for " + *type + " applies" +
                   (spec_ && std::string_view(key) == "norm_topk_prob"
                        ? std::string(spec_->moe.norm_topk_prob ? " (true" : " (false") + ": top-k weights " +
                              (spec_->moe.norm_topk_prob ? "renormalized)" : "as scored)")
                        : ""));
    std::string rule;
    if (experts && top_k) rule = num(experts->value) + " experts, top " + num(top_k->value);
    if (spec_) {
      rule += std::string(spec_->moe.norm_topk_prob ? ", top-k weights renormalized" : ", top-k weights as scored");
      if (spec_->moe.shared_experts) rule += ", " + num(spec_->moe.shared_experts) + " shared";
    }
    holds_with_tensors("moe", rule);
  }

  // A state-space layer's parameters: A_log, D, dt_bias, the conv's taps.
  void check_ssm() {
    if (!spec_ || !spec_->ssm.enabled()) return;
    const spec::Ssm& s = spec_->ssm;
    Findings& f = topic("ssm");
    for (const Role r : {Role::SsmA, Role::SsmD, Role::SsmConv})
      if (!std::any_of(manifest_.tensors.begin(), manifest_.tensors.end(), [&](const spec::TensorSpec& t) { return t.role == r; }))
        f.error(std::string("the spec names no ") + (r == Role::SsmA ? "A_log" : r == Role::SsmD ? "D" : "conv1d") + " tensor");
    std::string rule = std::string(s.kind == spec::SsmKind::Mamba2 ? "Mamba-2" : "Mamba") + ": d_inner " + num(s.d_inner) +
                       ", d_state " + num(s.d_state) + ", d_conv " + num(s.d_conv);
    if (s.kind == spec::SsmKind::Mamba2) rule += ", " + num(s.heads) + " heads of " + num(s.head_dim) + ", " + num(s.groups) + " groups";
    else rule += ", dt_rank " + num(s.dt_rank);
    holds_with_tensors("ssm", rule);
  }

  // A vision tower: its geometry, and its tensors (checked by check_tensors).
  void check_vision() {
    if (!spec_ || !spec_->vision.enabled) return;
    const spec::Vision& v = spec_->vision;
    holds_with_tensors("vision", std::string(spec::name(v.connection)) + ": " + num(v.dims.layers) + " layers, hidden " +
                                     num(v.dims.hidden) + ", patch " + num(v.patch) + ", " + num(v.grid()) +
                                     " patches a side, " + spec::name(v.projector.kind) + " projector");
  }

  void check_embedding() {
    if (!spec_ || !topic_has_tensors("embedding")) return;
    holds_with_tensors("embedding", "vocab " + num(spec_->dims.vocab) + " × hidden " + num(spec_->dims.hidden));
  }

  const weights::Checkpoint::Tensor* tensor_of(Role role) const {
    if (!checkpoint_) return nullptr;
    for (const spec::TensorSpec& t : manifest_.tensors)
      if (t.role == role && !t.bias) return checkpoint_->find(t.name);
    return nullptr;
  }

  static bool same_bytes(const weights::Checkpoint::Tensor& a, const weights::Checkpoint::Tensor& b) {
    if (a.info->shape != b.info->shape || a.info->dtype != b.info->dtype) return false;
    const std::span<const std::byte> x = a.file->data(*a.info), y = b.file->data(*b.info);
    return std::equal(x.begin(), x.end(), y.begin(), y.end());
  }

  // Tied or untied as the tensors really are.
  void check_head() {
    if (!spec_ || !checkpoint_) return;
    const auto head_name = spec_->weights.names.find(Role::LmHead);
    const weights::Checkpoint::Tensor* embed = tensor_of(Role::Embed);
    Findings& f = topic("lm_head");
    const std::string tie_key = gguf_ ? "no output.weight" : "tie_word_embeddings";
    if (spec_->embedding.tied) {
      const weights::Checkpoint::Tensor* head =
          head_name == spec_->weights.names.end() ? nullptr : checkpoint_->find(head_name->second + ".weight");
      if (!head) {
        f.holds("tied (" + tie_key + "): the head is the embedding" + (embed ? " " + embed->name : ""));
      } else if (embed && same_bytes(*head, *embed)) {
        f.holds("tied (" + tie_key + "); " + head->name + " is a byte-identical copy of " + embed->name +
                ", ignored as transformers ignores it");
      } else {
        f.error(tie_key + " is true, but the checkpoint holds " + head->name + " " +
                weights::shape_string(head->info->shape) + ", which differs from the embedding" +
                (embed ? " " + embed->name : std::string()) +
                ": a tied model (here and in transformers) throws that head away; if it is the model's, the "
                "config should say tie_word_embeddings = false");
      }
      return;
    }
    const weights::Checkpoint::Tensor* head = tensor_of(Role::LmHead);
    if (head && embed && same_bytes(*head, *embed)) {
      f.warn("untied (" + std::string(gguf_ ? "output.weight present" : "tie_word_embeddings false") + "), but " +
             head->name + " is byte-identical to " + embed->name + ": tied, the model would hold " +
             num(static_cast<int64_t>(spec_->dims.vocab * spec_->dims.hidden)) + " parameters fewer");
      return;
    }
    if (topic_has_tensors("lm_head"))
      holds_with_tensors("lm_head", "untied (" + std::string(gguf_ ? "output.weight present" : "tie_word_embeddings false") +
                                        "), a head of its own");
  }

  void load_tokenizer() {
    Findings& f = topic("tokenizer");
    try {
      if (gguf_) {
        if (!gguf_file_ || !gguf_file_->string("tokenizer.ggml.model")) {
          f.warn("the file holds no vocabulary (tokenizer.ggml.model): text cannot be encoded, only token ids");
          return;
        }
        tokenizer_.emplace(text::Tokenizer::from_gguf(*gguf_file_));
        tokenizer_file_ = "the GGUF vocabulary";
      } else if (std::error_code ec; fs::exists(dir_ / "tokenizer.json", ec)) {
        tokenizer_.emplace(text::Tokenizer::from_hf((dir_ / "tokenizer.json").string()));
        tokenizer_file_ = "tokenizer.json";
      } else if (fs::exists(dir_ / "tokenizer.model", ec)) {
        tokenizer_.emplace(text::Tokenizer::from_sentencepiece((dir_ / "tokenizer.model").string()));
        tokenizer_file_ = "tokenizer.model";
      } else {
        f.warn("no tokenizer.json or tokenizer.model: text cannot be encoded, only token ids");
        return;
      }
    } catch (const Error& e) {
      f.error(e.what());
      return;
    }
    f.holds(tokenizer_file_ + ": " + tokenizer_->description() + ", " + num(tokenizer_->vocab_size()) + " tokens");
    for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) by_text_.emplace(tokenizer_->token_text(id), id);
  }

  // The rows of the embedding: the model's vocabulary.
  std::optional<Keyed> embedding_rows() const {
    if (const weights::Checkpoint::Tensor* embed = tensor_of(Role::Embed); embed && !embed->info->shape.empty())
      return Keyed{embed->info->shape[0], embed->name};
    if (spec_) return Keyed{spec_->dims.vocab, "the embedding (the config's vocab)"};
    if (const auto v = raw_.integer({"vocab_size", "n_vocab", "padded_vocab_size"}, "vocab_size"))
      return Keyed{v->value, "the embedding (" + v->key + ")"};
    return std::nullopt;
  }

  void check_vocab() {
    if (!tokenizer_) return;
    const std::optional<Keyed> rows = embedding_rows();
    if (!rows) return;
    Findings& f = topic("vocab");
    const int64_t n = tokenizer_->vocab_size();
    if (rows->value < n)
      f.error(tokenizer_file_ + " has " + num(n) + " tokens, " + rows->key + " only " + num(rows->value) +
              " rows: ids " + num(rows->value) + "–" + num(n - 1) + " have no embedding");
    else if (rows->value > n)
      f.holds(rows->key + " has " + num(rows->value) + " rows for " + num(n) + " tokens of " + tokenizer_file_ +
              " (" + num(rows->value - n) + " rows of padding, never produced by the tokenizer)");
    else
      f.holds(rows->key + " has " + num(rows->value) + " rows, one for each token of " + tokenizer_file_);
  }

  // BOS/EOS/pad ids, wherever the checkpoint states them: inside the
  // vocabulary and known to the tokenizer.
  void check_special_tokens() {
    Findings& f = topic("special_tokens");
    const std::optional<Keyed> rows = embedding_rows();
    const int64_t vocab = rows ? rows->value : 0;
    const int64_t known = tokenizer_ ? tokenizer_->vocab_size() : vocab;
    std::vector<std::string> seen;
    const auto check_id = [&](const std::string& where, int64_t id) {
      if (vocab > 0 && (id < 0 || id >= vocab)) {
        f.error(where + " " + num(id) + " is outside the vocabulary [0, " + num(vocab) + ")");
      } else if (tokenizer_ && id >= known) {
        f.error(where + " " + num(id) + " is beyond the tokenizer's " + num(known) + " tokens (a padding row)");
      } else {
        const std::string text = tokenizer_ ? tokenizer_->token_text(static_cast<int32_t>(id)) : "";
        seen.push_back(where + " " + num(id) + (text.empty() ? "" : " " + quoted(text)));
      }
    };
    if (gguf_) {
      if (!gguf_file_) return;
      for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id"})
        if (const std::optional<int64_t> id = gguf_file_->integer(key)) check_id(key, *id);
    } else {
      const auto from_ids = [&](const json& j, const std::string& file) {
        if (!j.is_object()) return;
        for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"})
          if (j.contains(key))
            for (int64_t id : ids_of(j[key])) check_id(file + " " + key, id);
      };
      from_ids(raw_.hf, "config.json");
      from_ids(raw_.generation, "generation_config.json");
      if (const json* t = &raw_.tokenizer; t->is_object())
        for (const char* key : {"bos_token", "eos_token", "pad_token", "unk_token"}) {
          if (!t->contains(key)) continue;
          const std::optional<std::string> text = token_text_of((*t)[key]);
          if (!text) continue;
          const std::string where = std::string("tokenizer_config.json ") + key + " " + quoted(*text);
          if (!tokenizer_) continue;
          const auto it = by_text_.find(*text);
          if (it == by_text_.end()) f.error(where + " is not a token of " + tokenizer_file_);
          else if (vocab > 0 && it->second >= vocab)
            f.error(where + " is id " + num(it->second) + ", outside the vocabulary [0, " + num(vocab) + ")");
          else seen.push_back(where + " = " + num(it->second));
        }
    }
    if (seen.empty() && f.errors.empty()) {
      f.warn("no BOS, EOS or pad id anywhere: generation cannot stop at an end-of-sequence token");
      return;
    }
    f.holds(join(seen, ", ") + (vocab > 0 ? ", inside [0, " + num(vocab) + ")" : ""));
  }

  void check_chat_template() {
    Findings& f = topic("chat_template");
    std::optional<text::ChatTemplateSource> source;
    try {
      if (gguf_) {
        if (gguf_file_) source = text::find_chat_template(*gguf_file_);
      } else {
        source = text::find_chat_template(dir_.string());
      }
    } catch (const Error& e) {
      f.error(e.what());
      return;
    }
    if (!source) {
      f.holds("no chat template (a base model: prompts are plain text)");
      return;
    }
    const nlohmann::ordered_json messages = nlohmann::ordered_json::array(
        {{{"role", "user"}, {"content", "Hello, who are you?"}}, {{"role", "assistant"}, {"content", "A model."}}});
    try {
      const text::ChatTemplate t = text::ChatTemplate::parse(source->text, source->origin);
      const std::string prompt = t.render_chat(messages, false, source->bos_token, source->eos_token);
      f.holds(source->origin + " renders a user/assistant conversation (" + num(static_cast<int64_t>(prompt.size())) +
              " characters)");
    } catch (const Error& e) {
      f.error(source->origin + " does not render a user/assistant conversation: " + e.what());
    }
  }

  // RoPE scaling: the fields its type needs (the importer names what is
  // missing), and a trained context below the extended one.
  void check_rope() {
    Findings& f = topic("rope");
    std::string type;
    std::optional<double> factor;
    std::optional<Keyed> original;
    const std::optional<Keyed> max = raw_.integer({"max_position_embeddings", "n_positions", "max_seq_len"}, "context_length");
    if (gguf_) {
      if (!gguf_file_) return;
      type = gguf_file_->string(raw_.arch + ".rope.scaling.type").value_or("");
      factor = gguf_file_->number(raw_.arch + ".rope.scaling.factor");
      original = raw_.integer({}, "rope.scaling.original_context_length");
      if ((type == "linear" || type == "yarn") && !factor)
        f.error(raw_.arch + ".rope.scaling.type \"" + type + "\" without " + raw_.arch + ".rope.scaling.factor");
    } else {
      const char* key = raw_.hf.contains("rope_scaling") ? "rope_scaling" : nullptr;
      if (key && raw_.hf[key].is_object()) {
        const json& s = raw_.hf[key];
        type = s.contains("rope_type") ? string_at(s, "rope_type") : string_at(s, "type");
        if (s.contains("factor") && s["factor"].is_number()) factor = s["factor"].get<double>();
        if (s.contains("original_max_position_embeddings") && s["original_max_position_embeddings"].is_number_integer())
          original = Keyed{s["original_max_position_embeddings"].get<int64_t>(), "rope_scaling.original_max_position_embeddings"};
      }
    }
    const bool rope = spec_ ? spec_->position.kind == spec::PositionKind::Rope : !type.empty() || f.applies;
    if (!rope) return;
    if (type.empty() || type == "none" || type == "default") {
      f.holds("no RoPE scaling" + (spec_ ? ", theta " + json(spec_->position.theta).dump() : std::string()));
      return;
    }
    std::string rule = "rope scaling \"" + type + "\"" + (factor ? " ×" + json(*factor).dump() : "");
    if (original && max) {
      if (original->value >= max->value)
        f.warn(original->key + " (" + num(original->value) + ") is not below " + max->key + " (" + num(max->value) +
               "): the scaling extends nothing");
      rule += ", trained at " + num(original->value) + " (" + original->key + "), " + max->key + " " + num(max->value);
    }
    f.holds(rule);
  }

  // The longest context as config.json, generation_config.json and
  // tokenizer_config.json state it.
  void check_context() {
    Findings& f = topic("context");
    const std::optional<Keyed> max = raw_.integer({"max_position_embeddings", "n_positions", "max_seq_len"}, "context_length");
    if (!max) {
      if (spec_ && spec_->dims.max_context > 0) f.holds("max context " + num(spec_->dims.max_context) + " (the spec's)");
      return;
    }
    std::vector<std::string> agree = {max->key + " " + num(max->value)};
    if (!gguf_) {
      const auto compare = [&](const json& j, const char* file, const char* key) {
        if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return;
        const double v = j[key].get<double>();
        if (v >= 1e9) return;  // transformers' "no limit" (VERY_LARGE_INTEGER)
        const std::string where = std::string(file) + " " + key + " " + num(static_cast<int64_t>(v));
        if (v > static_cast<double>(max->value))
          f.warn(where + " is beyond " + max->key + " " + num(max->value) + ": positions past it were never trained");
        else agree.push_back(where);
      };
      compare(raw_.generation, "generation_config.json", "max_length");
      compare(raw_.tokenizer, "tokenizer_config.json", "model_max_length");
    }
    if (spec_ && spec_->dims.max_context != max->value)
      agree.push_back("the spec's max_context " + num(spec_->dims.max_context) + " (scaled)");
    f.holds(join(agree, ", "));
  }

  AuditResult result_;
  std::map<std::string, Findings> topics_;
  bool gguf_ = false;
  fs::path dir_;
  std::string import_path_, config_file_;
  RawConfig raw_;
  std::optional<weights::Checkpoint> checkpoint_;
  const weights::GgufFile* gguf_file_ = nullptr;
  std::optional<spec::Spec> spec_;
  spec::Manifest manifest_;
  std::map<std::string, const spec::TensorSpec*> by_name_;
  std::set<std::string> vision_names_;  // the vision tower's and projector's tensors

  std::string topic_for(const spec::TensorSpec& t) const {
    return vision_names_.count(t.name) ? "vision" : topic_of(t.role);
  }
  std::optional<text::Tokenizer> tokenizer_;
  std::string tokenizer_file_;
  std::map<std::string, int32_t> by_text_;
};

}  // namespace

AuditResult audit_checkpoint(const std::string& path) { return Auditor(path).run(); }

std::string format_audit(const AuditResult& result) {
  std::string out;
  for (const AuditCheck& c : result.checks) {
    std::string status = name(c.status);
    status.resize(8, ' ');
    out += status + c.id + ": " + c.message + "\n";
  }
  out += result.path + (result.format.empty() ? "" : " (" + result.format + ")") + ": " +
         num(static_cast<int64_t>(result.checks.size())) + " checks, " +
         num(static_cast<int64_t>(result.count(AuditStatus::Ok))) + " ok, " +
         num(static_cast<int64_t>(result.count(AuditStatus::Warning))) + " warnings, " +
         num(static_cast<int64_t>(result.count(AuditStatus::Error))) + " errors\n";
  return out;
}

nlohmann::ordered_json audit_json(const AuditResult& result) {
  nlohmann::ordered_json j;
  j["path"] = result.path;
  j["format"] = result.format;
  j["checks"] = nlohmann::ordered_json::array();
  for (const AuditCheck& c : result.checks)
    j["checks"].push_back({{"id", c.id}, {"status", name(c.status)}, {"message", c.message}});
  j["ok"] = result.count(AuditStatus::Ok);
  j["warnings"] = result.count(AuditStatus::Warning);
  j["errors"] = result.count(AuditStatus::Error);
  return j;
}

}  // namespace lathe::importer
