#include "runtime/weights/checkpoint.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "runtime/error.hpp"
#include "runtime/weights/finite.hpp"
#include "runtime/weights/gguf.hpp"

namespace lathe::weights {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The file a directory holds: the index, else model.safetensors, else its
// only .safetensors file.
std::string pick_in_directory(const fs::path& dir) {
  for (const char* name : {"model.safetensors.index.json", "model.safetensors"})
    if (fs::is_regular_file(dir / name)) return (dir / name).string();
  std::vector<fs::path> found, gguf;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".safetensors") found.push_back(e.path());
    if (e.is_regular_file() && e.path().extension() == ".gguf") gguf.push_back(e.path());
  }
  if (found.size() == 1) return found.front().string();
  if (found.empty() && gguf.size() == 1) return gguf.front().string();
  throw Error(ErrorKind::NotFound,
              dir.string() + ": no model.safetensors.index.json or model.safetensors" +
                  (found.empty() ? std::string(", and no .safetensors file")
                                 : ", and " + std::to_string(found.size()) + " .safetensors files without an index"));
}

}  // namespace

Checkpoint::Checkpoint(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) path_ = pick_in_directory(path);
  else path_ = path;
  if (ends_with(path_, ".json")) open_index(path_);
  else if (ends_with(path_, ".gguf")) files_.push_back(std::make_unique<GgufFile>(path_));
  else files_.push_back(std::make_unique<SafetensorsFile>(path_));
  for (const auto& f : files_)
    for (const TensorInfo& t : f->tensors()) tensors_.push_back({f.get(), &t, t.name});
  index_names();
}

void Checkpoint::index_names() {
  first_.clear();
  for (size_t i = 0; i < tensors_.size(); ++i) first_.emplace(tensors_[i].name, i);
}

std::string Checkpoint::match_names(std::span<const ManifestEntry> manifest) {
  std::vector<std::string> names;
  for (const ManifestEntry& e : manifest) names.emplace_back(e.name);
  return match_names(names);
}

std::string Checkpoint::match_names(const std::vector<std::string>& manifest_names) {
  const std::set<std::string, std::less<>> wanted(manifest_names.begin(), manifest_names.end());
  std::set<std::string_view> present;
  for (const Tensor& t : tensors_) present.insert(t.info->name);
  // A prefix the file's names have more (strip) or fewer (add) than the manifest's.
  struct Prefix {
    bool strip;
    std::string text;
    std::string apply(const std::string& name, const std::set<std::string, std::less<>>& wanted) const {
      if (strip) return name.starts_with(text) ? name.substr(text.size()) : name;
      return wanted.contains(text + name) ? text + name : name;
    }
  };
  const auto matched = [&](const Prefix& p) {
    std::set<std::string> hit;
    for (const Tensor& t : tensors_)
      if (std::string n = p.apply(t.info->name, wanted); wanted.contains(n)) hit.insert(std::move(n));
    return hit.size();
  };
  // Candidates, from a few manifest names the file lacks: a file name that
  // ends with one after a '.', or a manifest name whose tail after a '.' the
  // file holds.
  std::vector<Prefix> candidates;
  size_t looked = 0;
  for (const std::string& m : manifest_names) {
    if (present.contains(m) || ++looked > 8) continue;
    for (const std::string_view n : present)
      if (n.size() > m.size() && n.ends_with(m) && n[n.size() - m.size() - 1] == '.')
        candidates.push_back({true, std::string(n.substr(0, n.size() - m.size()))});
    for (size_t dot = m.find('.'); dot != std::string::npos && dot + 1 < m.size(); dot = m.find('.', dot + 1))
      if (present.contains(std::string_view(m).substr(dot + 1))) candidates.push_back({false, m.substr(0, dot + 1)});
  }
  const Prefix* best = nullptr;
  size_t best_count = matched({true, ""});
  for (const Prefix& p : candidates)
    if (const size_t n = matched(p); n > best_count) best = &p, best_count = n;
  renaming_.clear();
  for (Tensor& t : tensors_) t.name = best ? best->apply(t.info->name, wanted) : t.info->name;
  index_names();
  if (best)
    renaming_ = best->strip ? "tensor names carry the prefix \"" + best->text + "\": matched without it"
                            : "tensor names lack the prefix \"" + best->text + "\": matched with it";
  return renaming_;
}

void Checkpoint::open_index(const std::string& index) {
  auto bad = [&](const std::string& what) { throw Error(ErrorKind::BadFile, index + ": " + what); };
  std::ifstream in(index, std::ios::binary);
  if (!in) throw Error(fs::exists(index) ? ErrorKind::Io : ErrorKind::NotFound, index + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {  // what() says the line and column
    bad(std::string("not valid JSON: ") + e.what());
  }
  if (!json.is_object() || !json.contains("weight_map") || !json["weight_map"].is_object())
    bad("no \"weight_map\" object (a Hugging Face index maps every tensor name to its shard)");
  // Shards in order of first mention; each a plain file name beside the index.
  std::map<std::string, size_t> shard_of_file;
  std::vector<std::pair<std::string, size_t>> placed;  // tensor name → shard
  for (const auto& [name, value] : json["weight_map"].items()) {
    if (!value.is_string()) bad("weight_map[\"" + name + "\"] is not a file name");
    const std::string shard = value.get<std::string>();
    const fs::path p(shard);
    if (shard.empty() || p.is_absolute() || p.has_parent_path() || shard == "." || shard == "..")
      bad("weight_map[\"" + name + "\"] = \"" + shard + "\" is not a file name beside the index");
    auto [it, added] = shard_of_file.emplace(shard, files_.size());
    if (added) files_.push_back(std::make_unique<SafetensorsFile>((fs::path(index).parent_path() / shard).string()));
    placed.emplace_back(name, it->second);
  }
  if (files_.empty()) bad("the weight_map is empty");
  for (const auto& [name, shard] : placed)
    if (!files_[shard]->find(name))
      index_problems_.push_back(name + ": the index places it in " + files_[shard]->path() + ", which does not hold it");
}

const Checkpoint::Tensor* Checkpoint::find(std::string_view name) const {
  const auto it = first_.find(name);
  return it == first_.end() ? nullptr : &tensors_[it->second];
}

std::vector<std::string> Checkpoint::audit(std::span<const ManifestEntry> manifest,
                                           std::span<const std::string> ignore) const {
  std::vector<std::string> problems = index_problems_;
  if (!renaming_.empty()) problems.insert(problems.begin(), renaming_);
  std::map<std::string_view, const TensorFile*> holder;
  std::vector<TensorInfo> renamed;  // each held tensor under its manifest name
  for (const Tensor& t : tensors_) {
    auto [it, added] = holder.emplace(t.name, t.file);
    if (!added) {
      problems.push_back(t.name + ": held by both " + it->second->path() + " and " + t.file->path());
      continue;
    }
    renamed.push_back(*t.info);
    renamed.back().name = t.name;
  }
  std::vector<const TensorInfo*> infos;
  for (const TensorInfo& t : renamed) infos.push_back(&t);
  const std::vector<std::string> manifest_problems = weights::audit(infos, manifest, ignore);
  if (manifest_problems.empty() && index_problems_.empty()) return {};  // a renaming alone is no problem
  problems.insert(problems.end(), manifest_problems.begin(), manifest_problems.end());
  return problems;
}

void Checkpoint::require_matches(std::span<const ManifestEntry> manifest, std::span<const std::string> ignore) const {
  // A file that names its tensors as llama.cpp does (blk.N.…) for a build
  // that expects other names: one line that says so, not a line for each of
  // its hundreds of tensors.
  const auto llama_cpp = [](std::string_view name) { return name.starts_with("blk.") || name == "token_embd.weight"; };
  size_t file_llama_cpp = 0, found = 0;
  for (const Tensor& t : tensors_) file_llama_cpp += llama_cpp(t.name);
  bool build_llama_cpp = false;
  for (const ManifestEntry& e : manifest) {
    build_llama_cpp = build_llama_cpp || llama_cpp(e.name);
    found += find(e.name) != nullptr;
  }
  if (!build_llama_cpp && !tensors_.empty() && file_llama_cpp * 2 > tensors_.size() && found * 2 < manifest.size())
    throw Error(ErrorKind::BadFile,
                path_ + ": this file names its tensors as llama.cpp does (" + tensors_.front().name + ", …), and this "
                "build expects other names (" + std::string(manifest.empty() ? "" : manifest.front().name) +
                ", …): `lathe run " + path_ + "` runs it as it is, or `lathe import " + path_ +
                " -o spec.toml` writes its spec (weights.preset = \"gguf\")");
  raise_problems(path_, audit(manifest, ignore));
}

Checkpoint::Shape Checkpoint::shape() const {
  Shape shape;
  // GGUF metadata says it outright.
  if (const auto* gguf = files_.size() == 1 ? dynamic_cast<const GgufFile*>(files_[0].get()) : nullptr)
    if (const std::optional<std::string> arch = gguf->string("general.architecture")) {
      shape.architecture = *arch;
      shape.hidden = gguf->integer(*arch + ".embedding_length").value_or(0);
      shape.layers = gguf->integer(*arch + ".block_count").value_or(0);
      shape.source = "GGUF metadata";
      return shape;
    }
  // A Hugging Face config.json beside it, when it parses.
  const fs::path config = fs::path(path_).parent_path() / "config.json";
  if (std::ifstream in(config, std::ios::binary); in) {
    std::ostringstream text;
    text << in.rdbuf();
    const nlohmann::json json = nlohmann::json::parse(text.str(), nullptr, false);
    const auto integer = [&](std::initializer_list<const char*> keys) -> int64_t {
      for (const char* k : keys)
        if (json.contains(k) && json[k].is_number_integer()) return json[k].get<int64_t>();
      return 0;
    };
    if (json.is_object() && json.contains("model_type") && json["model_type"].is_string()) {
      shape.architecture = json["model_type"].get<std::string>();
      shape.hidden = integer({"hidden_size", "n_embd", "d_model"});
      shape.layers = integer({"num_hidden_layers", "n_layer", "num_layers"});
      shape.source = "config.json";
      return shape;
    }
  }
  // The tensors: the first dotted number of a name is its layer; the
  // embedding's rows are hidden wide.
  shape.source = "tensors";
  for (const Tensor& t : tensors_) {
    const std::string& name = t.info->name;
    for (size_t at = 0; at < name.size();) {
      const size_t end = std::min(name.find('.', at), name.size());
      const std::string_view part = std::string_view(name).substr(at, end - at);
      if (!part.empty() && part.size() < 6 && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        shape.layers = std::max<int64_t>(shape.layers, std::stoll(std::string(part)) + 1);
        if (shape.architecture.empty()) shape.architecture = name.substr(0, at) + "N" + name.substr(end);
        break;
      }
      at = end + 1;
    }
    if (shape.hidden == 0 && t.info->shape.size() == 2)
      for (const char* embedding : {"embed_tokens", "wte", "token_embd", "tok_embeddings", "word_embeddings"})
        if (name.find(embedding) != std::string::npos) shape.hidden = t.info->shape[1];
  }
  return shape;
}

std::string Checkpoint::misfit(std::string_view build, int64_t hidden, int64_t layers) const {
  const Shape s = shape();
  if ((s.hidden == 0 || s.hidden == hidden) && (s.layers == 0 || s.layers == layers)) return "";
  std::string looks = s.source == "tensors" ? "its tensors are named like " + s.architecture
                                            : "its " + s.source + " says " + s.architecture;
  if (s.hidden > 0) looks += ", hidden " + std::to_string(s.hidden);
  if (s.layers > 0) looks += ", " + std::to_string(s.layers) + " layers";
  const fs::path file(path_);
  const std::string import = ends_with(path_, ".gguf")  ? "`lathe import " + path_ + "`"
                             : s.source == "config.json" ? "`lathe import " + file.parent_path().string() + "`"
                                                         : "`lathe import` of its config.json";
  return "not a checkpoint of " + std::string(build) + " (hidden " + std::to_string(hidden) + ", " +
         std::to_string(layers) + " layers): " + looks + "; " + import + " writes a spec that fits it";
}

std::span<const std::byte> Checkpoint::data(const ManifestEntry& e) const {
  const Tensor* t = find(e.name);
  if (t == nullptr) throw Error(ErrorKind::BadFile, path_ + ": " + std::string(e.name) + ": missing");
  const std::span<const std::byte> bytes = t->file->data(*t->info);
  if (e.slice < 0) return bytes;
  const std::vector<int64_t>& shape = t->info->shape;
  if (shape.empty() || shape[0] <= e.slice || bytes.size() % static_cast<size_t>(shape[0]) != 0)
    throw Error(ErrorKind::BadFile, path_ + ": " + std::string(e.name) + ": no slice " + std::to_string(e.slice) +
                                        " of dim 0 in shape " + shape_string(shape));
  const size_t part = bytes.size() / static_cast<size_t>(shape[0]);
  return bytes.subspan(static_cast<size_t>(e.slice) * part, part);
}

void Checkpoint::check_finite(const ManifestEntry& entry) const {
  const Tensor* tensor = find(entry.name);
  if (tensor == nullptr) throw Error(ErrorKind::BadFile, path_ + ": " + std::string(entry.name) + ": missing");
  const std::string name =
      entry.slice < 0 ? tensor->info->name : tensor->info->name + "[" + std::to_string(entry.slice) + "]";
  weights::check_finite(tensor->info->dtype, data(entry), std::span(entry.shape.data(), std::min<size_t>(entry.rank, 2)),
                        tensor->file->path(), name);
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t n = 0;
  for (const Tensor& t : tensors_) n += t.info->bytes;
  return n;
}

}  // namespace lathe::weights
