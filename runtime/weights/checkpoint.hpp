// A checkpoint as users have it: one safetensors file, a sharded one
// (model.safetensors.index.json naming the shard of every tensor), a GGUF
// file, or a directory holding one of these. Every file is memory-mapped; a
// tensor's bytes are read from its mapping when it is uploaded, so loading
// never holds a copy of the checkpoint.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/contract.hpp"
#include "runtime/weights/safetensors.hpp"

namespace lathe::weights {

class Checkpoint {
 public:
  // `path`: a .safetensors, .index.json or .gguf file, or a directory with
  // model.safetensors.index.json, model.safetensors, or exactly one
  // *.safetensors or (failing those) one *.gguf file. Throws Error(NotFound) naming what was looked for,
  // Error(BadFile) for a malformed index (naming the index and the entry).
  explicit Checkpoint(const std::string& path);

  const std::string& path() const { return path_; }  // the file or index opened
  const std::vector<std::unique_ptr<TensorFile>>& files() const { return files_; }

  struct Tensor {
    const TensorFile* file;
    const TensorInfo* info;
  };
  // Every tensor of every file, in file order (a name held by two shards appears twice).
  const std::vector<Tensor>& tensors() const { return tensors_; }
  const Tensor* find(std::string_view name) const;  // the first holder; null when absent

  // Problems of the index (a tensor its weight_map places in a shard that
  // does not hold it, a tensor held by two shards), then audit()'s.
  std::vector<std::string> audit(std::span<const ManifestEntry> manifest, std::span<const std::string> ignore = {}) const;
  // Throws Error(BadFile, "<path>: N problems:\n  …") when audit() finds any.
  void require_matches(std::span<const ManifestEntry> manifest, std::span<const std::string> ignore = {}) const;

  uint64_t total_bytes() const;  // of every tensor's data

 private:
  void open_index(const std::string& index);

  std::string path_;
  std::vector<std::unique_ptr<TensorFile>> files_;
  std::vector<Tensor> tensors_;
  std::vector<std::string> index_problems_;
  std::map<std::string_view, size_t> first_;  // name → its first entry in tensors_
};

}  // namespace lathe::weights
