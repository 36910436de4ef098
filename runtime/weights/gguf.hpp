// GGUF v3 checkpoints (llama.cpp's format, https://github.com/ggml-org/ggml/blob/master/docs/gguf.md),
// little-endian throughout:
//   "GGUF" u32 version u64 tensor_count u64 kv_count
//   kv_count × (key: string, u32 value type, value)
//   tensor_count × (name: string, u32 n_dims, u64 dims[n_dims], u32 ggml type, u64 offset)
//   padding to general.alignment (default 32), then the data section
// A string is u64 length + bytes; an array is u32 item type, u64 count, items.
// ggml lists dims innermost first; TensorInfo::shape is row-major (the dims
// reversed). Like SafetensorsFile, the file is mapped, not read, and every
// count, length and offset is checked before it is used: a checkpoint is
// untrusted input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/contract.hpp"
#include "runtime/weights/mapped_file.hpp"
#include "runtime/weights/quant.hpp"
#include "runtime/weights/safetensors.hpp"

namespace lathe::weights {

// GGUF metadata value types, numbered as the format numbers them.
enum class GgufType : uint32_t { U8, I8, U16, I16, U32, I32, F32, Bool, String, Array, U64, I64, F64 };

struct GgufValue;
struct GgufArray {
  GgufType item_type = GgufType::U8;  // every item holds this type (kept for empty arrays)
  std::vector<GgufValue> items;
  bool operator==(const GgufArray&) const = default;
};

struct GgufValue {
  // Alternative i holds GgufType i.
  using Variant = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool, std::string,
                               GgufArray, uint64_t, int64_t, double>;
  Variant value;

  GgufValue() = default;
  template <typename T>
    requires std::is_constructible_v<Variant, T&&>
  GgufValue(T&& v) : value(std::forward<T>(v)) {}  // NOLINT: implicit, so maps read naturally
  // An array of strings (tokenizer vocabularies), the common case.
  static GgufValue strings(const std::vector<std::string>& items);

  GgufType type() const { return static_cast<GgufType>(value.index()); }
  bool operator==(const GgufValue&) const = default;
};

std::string_view gguf_type_name(GgufType type);  // "u32", "string", "array", …

class GgufFile final : public TensorFile {
 public:
  // Maps, parses and validates the whole header. Throws Error(BadFile,
  // "<path>: …", naming the key or tensor at fault) for anything malformed
  // (version other than 3, a ggml type lathe does not read (DType lists those
  // it does), a block type whose innermost dim is not whole blocks, counts,
  // lengths or offsets that do not fit the file, overlapping tensors,
  // duplicate names), and MappedFile's NotFound / Io errors.
  explicit GgufFile(const std::string& path);

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  // tensors(): shape is row-major (ggml dims reversed); a block dtype's
  // bytes are its blocks (quant.hpp: elements / block elements × block bytes).
  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }

  // Metadata of one kind, or nullopt when the key is absent or holds another
  // kind. integer: any integer type (not bool), nullopt for a u64 above
  // 2^63 - 1. number: f32, f64 or any integer type.
  std::optional<std::string> string(std::string_view key) const;
  std::optional<int64_t> integer(std::string_view key) const;
  std::optional<double> number(std::string_view key) const;
  std::optional<std::vector<std::string>> string_array(std::string_view key) const;

 private:
  const GgufValue* value(std::string_view key) const;

  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  std::map<std::string, GgufValue, std::less<>> metadata_;
};

// The numbers a model build fixes that a GGUF file's "<arch>.*" metadata
// states too (general.architecture names <arch>): tensor shapes cannot tell
// 8 heads of 64 from 4 of 128.
struct ArchitectureNumbers {
  int64_t hidden, layers, heads, kv_heads, head_dim, intermediate;
  // An encoder-decoder's encoder layers (llama.cpp's t5: block_count is the
  // encoder's, decoder_block_count the decoder's); 0 for one stack.
  int64_t encoder_layers = 0;
};
// One problem per key whose value differs from the build's, e.g.
// "llama.attention.head_count is 8, the build has 4 heads"; absent keys are
// none (nor is a file without general.architecture).
std::vector<std::string> metadata_problems(const GgufFile& file, const ArchitectureNumbers& build);

// f32 values as a tensor of `dtype` stores them: converted little-endian
// elements, or blocks as ggml's reference quantizer writes them. For writers
// (tests, tools, lathe quantize).
std::vector<std::byte> encode_values(DType dtype, std::span<const float> values);

struct GgufTensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;   // row-major; a block dtype needs the last dim whole blocks
  std::vector<std::byte> data;  // little-endian elements, or blocks (quant.hpp)
};

// Writes a valid GGUF v3 file: the metadata in key order (every GgufValue
// kind), the tensors in the order given, alignment 32 (a "general.alignment"
// in `metadata` must be u32 32). For tests and tools. Throws
// Error(InvalidArgument) for a bad tensor (shape, size, duplicate name) or
// value (mixed array item types) and Error(Io) when the file cannot be written.
void write_gguf(const std::string& path, const std::map<std::string, GgufValue>& metadata,
                const std::vector<GgufTensorToWrite>& tensors);

}  // namespace lathe::weights
