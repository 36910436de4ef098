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
    std::string name;  // as the manifest spells it: info->name, less or plus match_names()'s prefix
  };
  // Every tensor of every file, in file order (a name held by two shards appears twice).
  const std::vector<Tensor>& tensors() const { return tensors_; }
  const Tensor* find(std::string_view name) const;  // by its manifest name; the first holder; null when absent
  // The bytes of a manifest entry: its tensor's, or for a slice of a stacked
  // tensor ([n][…]) the slice's n-th part. Throws Error(BadFile) when the
  // tensor is absent or has no such slice (audit() reports both first).
  std::span<const std::byte> data(const ManifestEntry& entry) const;
  // Throws Error(BadFile, "<file>: tensor '<name>' holds NaN at index 12345
  // (row 16, column 57): refusing to load (--no-check skips this check)")
  // when data(entry) holds a NaN or an infinity, or a block dtype's scale
  // does (weights/finite.hpp). The file is the shard holding the tensor,
  // the name the file's own; a stacked tensor's slice is "name[slice]".
  void check_finite(const ManifestEntry& entry) const;

  // Matches the tensor names to `manifest` when they differ from it by one
  // prefix: every name carries one more than the manifest's
  // ("transformer.h.0.attn.c_attn.weight" of GPT2LMHeadModel.save_pretrained
  // for "h.0.attn.c_attn.weight"; a doubled "model."), or the manifest's
  // names carry one the file lacks (a bare LlamaModel's "layers.0…" for
  // "model.layers.0…"). The prefix is the one that matches the most manifest
  // entries, and only one that matches more than the names as they are;
  // find(), audit() and tensors()[i].name then use the matched names.
  // Returns what was done, for a log line ("tensor names carry the prefix
  // \"transformer.\": matched without it"), or "" when the names match as
  // they are.
  std::string match_names(std::span<const ManifestEntry> manifest);
  std::string match_names(const std::vector<std::string>& manifest_names);
  const std::string& renaming() const { return renaming_; }  // match_names()'s answer

  // What the file looks like, for when it does not fit a build: the naming
  // of its layer tensors, hidden size and layer count, from GGUF metadata or
  // a config.json beside it, else from the tensors themselves. Fields it
  // cannot tell are 0 / empty.
  struct Shape {
    std::string architecture;  // "llama" (metadata), or a layer tensor's name with N for the layer
    int64_t hidden = 0, layers = 0;
    std::string source;        // "GGUF metadata", "config.json", "tensors"
  };
  Shape shape() const;
  // One line for when shape() is not the build's (its hidden size or layer
  // count differs from `hidden` / `layers`): what the file looks like and
  // the `lathe import` that writes a spec fitting it; "" otherwise.
  std::string misfit(std::string_view build, int64_t hidden, int64_t layers) const;

  // Problems of the index (a tensor its weight_map places in a shard that
  // does not hold it, a tensor held by two shards), then audit()'s.
  std::vector<std::string> audit(std::span<const ManifestEntry> manifest, std::span<const std::string> ignore = {}) const;
  // Throws Error(BadFile, "<path>: N problems:\n  …") when audit() finds any.
  void require_matches(std::span<const ManifestEntry> manifest, std::span<const std::string> ignore = {}) const;

  uint64_t total_bytes() const;  // of every tensor's data

 private:
  void open_index(const std::string& index);
  void index_names();  // first_ from tensors_[i].name

  std::string path_;
  std::vector<std::unique_ptr<TensorFile>> files_;
  std::vector<Tensor> tensors_;
  std::vector<std::string> index_problems_;
  std::map<std::string, size_t, std::less<>> first_;  // manifest name → its first entry in tensors_
  std::string renaming_;
};

}  // namespace lathe::weights
