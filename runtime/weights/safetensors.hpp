// safetensors checkpoints (https://github.com/huggingface/safetensors):
//   [u64 LE header length N][N bytes of JSON header][data section]
// The header maps each tensor name to {"dtype", "shape", "data_offsets":
// [begin, end]} (offsets relative to the data section) and may hold a
// "__metadata__" object of strings. The file is mapped, not read; every
// offset is checked before any tensor byte is handed out, because a
// checkpoint is untrusted input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/contract.hpp"
#include "runtime/weights/mapped_file.hpp"

namespace lathe::weights {

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t offset;  // absolute byte offset in the file
  uint64_t bytes;   // elements * dtype_size(dtype)
};

// A weights file of any format, as a checkpoint reads it: the mapping and
// its named tensors (row-major shapes). Each format's class parses its
// header into tensors_ and index_; finding and reading are the same for all.
class TensorFile {
 public:
  virtual ~TensorFile() = default;
  const std::string& path() const { return file_.path(); }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in header order
  const TensorInfo* find(std::string_view name) const;                 // null when absent
  // The tensor's bytes inside the mapping. `info` must come from this file.
  std::span<const std::byte> data(const TensorInfo& info) const;

 protected:
  explicit TensorFile(const std::string& path) : file_(path) {}

  MappedFile file_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> index_;  // name → position in tensors_
};

class SafetensorsFile final : public TensorFile {
 public:
  // Maps, parses and validates the whole header. Throws Error(BadFile,
  // "<path>: …", naming the tensor at fault) for any malformed header, and
  // MappedFile's NotFound / Io errors.
  explicit SafetensorsFile(const std::string& path);

  // Tensor bytes are not aligned: the format does not align tensors.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }  // "__metadata__"

 private:
  std::map<std::string, std::string> metadata_;
};

// "[2, 3]": a shape in messages.
std::string shape_string(std::span<const int64_t> shape);

// Audits the file against a generated manifest: every problem, one string
// each, naming the tensor with what was expected and what was found, e.g.
//   "model.layers.3.self_attn.q_proj.weight: shape [576, 576] expected, [576, 192] found"
//   "model.norm.weight: missing"
//   "lm_head.weight: unexpected tensor (not in the manifest)"
//   "x: dtype f16 expected, bf16 found"
// Manifest problems come in manifest order, then unexpected tensors in file
// order. `ignore`: name patterns where "{layer}" matches a decimal number
// (GPT-2 checkpoints carry "h.{layer}.attn.bias" mask buffers); tensors
// matching one are not unexpected.
std::vector<std::string> audit(const SafetensorsFile& file, std::span<const ManifestEntry> manifest,
                               std::span<const std::string> ignore = {});
// The same over the tensors of several files (a sharded checkpoint), in order.
std::vector<std::string> audit(std::span<const TensorInfo* const> tensors, std::span<const ManifestEntry> manifest,
                               std::span<const std::string> ignore = {});

// Throws Error(BadFile, "<path>: N problems:\n  <problem>\n  <problem>…")
// ("1 problem:" for one) when audit() finds any.
// Throws Error(BadFile, "<path>: N problems:\n  <problem>…") when `problems` is not empty.
// `headline`, when given, is said first, on the message's first line: what
// the problems mean together.
void raise_problems(const std::string& path, const std::vector<std::string>& problems,
                    const std::string& headline = "");

void require_matches(const SafetensorsFile& file, std::span<const ManifestEntry> manifest,
                     std::span<const std::string> ignore = {});

struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;  // elements * dtype_size(dtype) bytes, little-endian
};

// Writes a valid safetensors file: the header padded with spaces to a
// multiple of 8 bytes (so the data section starts 8-aligned), tensors in the
// order given, packed. For tests and the demo model. Throws
// Error(InvalidArgument) for a bad tensor (size, shape, dtype, duplicate or
// reserved name) and Error(Io) when the file cannot be written.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace lathe::weights
