#include "runtime/weights/checkpoint.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "runtime/error.hpp"
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
    for (const TensorInfo& t : f->tensors()) {
      first_.emplace(t.name, tensors_.size());
      tensors_.push_back({f.get(), &t});
    }
}

void Checkpoint::open_index(const std::string& index) {
  auto bad = [&](const std::string& what) { throw Error(ErrorKind::BadFile, index + ": " + what); };
  std::ifstream in(index, std::ios::binary);
  if (!in) throw Error(fs::exists(index) ? ErrorKind::Io : ErrorKind::NotFound, index + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  const nlohmann::json json = nlohmann::json::parse(text.str(), nullptr, false);
  if (json.is_discarded()) bad("not valid JSON");
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
  std::map<std::string_view, const TensorFile*> holder;
  std::vector<const TensorInfo*> infos;
  for (const Tensor& t : tensors_) {
    auto [it, added] = holder.emplace(t.info->name, t.file);
    if (!added) {
      problems.push_back(t.info->name + ": held by both " + it->second->path() + " and " + t.file->path());
      continue;
    }
    infos.push_back(t.info);
  }
  const std::vector<std::string> manifest_problems = weights::audit(infos, manifest, ignore);
  problems.insert(problems.end(), manifest_problems.begin(), manifest_problems.end());
  return problems;
}

void Checkpoint::require_matches(std::span<const ManifestEntry> manifest, std::span<const std::string> ignore) const {
  raise_problems(path_, audit(manifest, ignore));
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t n = 0;
  for (const Tensor& t : tensors_) n += t.info->bytes;
  return n;
}

}  // namespace lathe::weights
