#include "runtime/weights/gguf.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <utility>

#include "runtime/error.hpp"
#include "runtime/weights/dtype.hpp"

namespace lathe::weights {

static_assert(std::endian::native == std::endian::little, "GGUF stores numbers little-endian");

namespace {

constexpr uint64_t kMaxTensors = 1'000'000;
constexpr uint64_t kMaxKeys = 1'000'000;
constexpr uint64_t kMaxString = uint64_t{1} << 30;
constexpr int kMaxNesting = 4;  // arrays inside arrays
// All array items of all metadata together: real files hold a few vocabulary
// arrays of ~10^5 items; the cap bounds the heap a hostile file can claim
// (each item is a GgufValue, ~40 bytes, however small its bytes in the file).
constexpr uint64_t kMaxArrayItems = uint64_t{1} << 24;
constexpr uint32_t kMaxDims = 4;
constexpr uint32_t kDefaultAlignment = 32;

std::string ggml_type_name(uint32_t type) {
  static const std::map<uint32_t, std::string_view> names = {
      {0, "F32"},      {1, "F16"},      {2, "Q4_0"},     {3, "Q4_1"},    {6, "Q5_0"},    {7, "Q5_1"},
      {8, "Q8_0"},     {9, "Q8_1"},     {10, "Q2_K"},    {11, "Q3_K"},   {12, "Q4_K"},   {13, "Q5_K"},
      {14, "Q6_K"},    {15, "Q8_K"},    {16, "IQ2_XXS"}, {17, "IQ2_XS"}, {18, "IQ3_XXS"}, {19, "IQ1_S"},
      {20, "IQ4_NL"},  {21, "IQ3_S"},   {22, "IQ2_S"},   {23, "IQ4_XS"}, {24, "I8"},     {25, "I16"},
      {26, "I32"},     {27, "I64"},     {28, "F64"},     {29, "IQ1_M"},  {30, "BF16"},   {34, "TQ1_0"},
      {35, "TQ2_0"},   {39, "MXFP4"}};
  const auto it = names.find(type);
  return it != names.end() ? std::string(it->second) : "type " + std::to_string(type);
}

// Bytes of `elements` values of `dtype` (for a block dtype, the innermost
// dim already checked to be whole blocks); nullopt when the count does not
// fit in 64 bits.
std::optional<uint64_t> byte_size(DType dtype, uint64_t elements) {
  const DTypeLayout layout = dtype_layout(dtype);
  const auto per_block = static_cast<uint64_t>(layout.elements), block = static_cast<uint64_t>(layout.bytes);
  const uint64_t blocks = elements / per_block;
  if (blocks > std::numeric_limits<uint64_t>::max() / block) return std::nullopt;
  return blocks * block;
}

// The dtypes lathe reads, as a message lists them.
std::string readable_types() {
  std::string out;
  for (const Spelling<DType>& s : kDTypeSpellings) out += (out.empty() ? "" : ", ") + std::string(s.enumerator);
  return out;
}

// Smallest size in the file of one value of `type` (arrays and strings: their
// headers), so that a count can be checked against the bytes left.
uint64_t min_value_bytes(GgufType type) {
  switch (type) {
    case GgufType::U8: case GgufType::I8: case GgufType::Bool: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: case GgufType::String: return 8;
    case GgufType::Array: return 12;
  }
  return 1;
}

// Reads the header front to back; every read is bounds-checked and every
// failure is Error(BadFile, "<path>: <context>: …").
class Reader {
 public:
  Reader(const std::string& path, std::span<const std::byte> bytes) : path_(path), bytes_(bytes) {}

  [[noreturn]] void fail(const std::string& what) const { throw Error(ErrorKind::BadFile, path_ + ": " + what); }

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return bytes_.size() - pos_; }

  template <typename T>
  T read(const std::string& context) {
    if (left() < sizeof(T))
      fail(context + ": the file ends (at " + std::to_string(bytes_.size()) + " bytes) in the middle of it");
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const std::string& context) {
    const uint64_t n = read<uint64_t>(context + " (string length)");
    if (n > kMaxString) fail(context + ": string length " + std::to_string(n) + " exceeds the limit of 1 GiB");
    if (n > left())
      fail(context + ": string length " + std::to_string(n) + " reaches beyond the end of the file (" +
           std::to_string(bytes_.size()) + " bytes)");
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }

  GgufType read_type(const std::string& context) {
    const uint32_t t = read<uint32_t>(context + " (value type)");
    if (t > static_cast<uint32_t>(GgufType::F64)) fail(context + ": unknown value type " + std::to_string(t));
    return static_cast<GgufType>(t);
  }

  GgufValue read_value(GgufType type, const std::string& context, int depth) {
    switch (type) {
      case GgufType::U8: return read<uint8_t>(context);
      case GgufType::I8: return read<int8_t>(context);
      case GgufType::U16: return read<uint16_t>(context);
      case GgufType::I16: return read<int16_t>(context);
      case GgufType::U32: return read<uint32_t>(context);
      case GgufType::I32: return read<int32_t>(context);
      case GgufType::F32: return read<float>(context);
      case GgufType::Bool: return read<uint8_t>(context) != 0;
      case GgufType::String: return read_string(context);
      case GgufType::U64: return read<uint64_t>(context);
      case GgufType::I64: return read<int64_t>(context);
      case GgufType::F64: return read<double>(context);
      case GgufType::Array: {
        if (depth >= kMaxNesting) fail(context + ": arrays are nested more than 4 deep");
        GgufArray array;
        array.item_type = read_type(context + " (array item type)");
        const uint64_t count = read<uint64_t>(context + " (array length)");
        if (count > left() / min_value_bytes(array.item_type))
          fail(context + ": array of " + std::to_string(count) + " " +
               std::string(gguf_type_name(array.item_type)) + " items cannot fit in the " +
               std::to_string(left()) + " bytes left in the file");
        if (count > kMaxArrayItems - items_)
          fail(context + ": array of " + std::to_string(count) + " items exceeds the limit of " +
               std::to_string(kMaxArrayItems) + " array items in all metadata");
        items_ += count;
        array.items.reserve(count);
        for (uint64_t i = 0; i < count; ++i)
          array.items.push_back(read_value(array.item_type, context + "[" + std::to_string(i) + "]", depth + 1));
        return array;
      }
    }
    fail(context + ": unknown value type");
  }

  void skip_to(uint64_t pos) { pos_ = pos; }

 private:
  const std::string& path_;
  std::span<const std::byte> bytes_;
  uint64_t pos_ = 0;
  uint64_t items_ = 0;  // array items read so far
};

}  // namespace

std::string_view gguf_type_name(GgufType type) {
  static constexpr std::string_view names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                               "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(type);
  return i < std::size(names) ? names[i] : "unknown";
}

GgufValue GgufValue::strings(const std::vector<std::string>& items) {
  GgufArray array{GgufType::String, {}};
  array.items.reserve(items.size());
  for (const std::string& s : items) array.items.emplace_back(s);
  return array;
}

GgufFile::GgufFile(const std::string& path) : TensorFile(path) {
  const std::span<const std::byte> bytes = file_.bytes();
  Reader r(path, bytes);
  if (bytes.size() < 4 || std::memcmp(bytes.data(), "GGUF", 4) != 0) r.fail("not a GGUF file (no \"GGUF\" magic)");
  r.skip_to(4);
  version_ = r.read<uint32_t>("version");
  if (version_ != 3) {
    std::string why = "GGUF version " + std::to_string(version_) + " is not supported (only version 3)";
    if (version_ == 0x03000000u || version_ == 0x02000000u)
      why += "; the file looks big-endian";
    r.fail(why);
  }
  const uint64_t tensor_count = r.read<uint64_t>("tensor count");
  const uint64_t kv_count = r.read<uint64_t>("metadata count");
  if (tensor_count > kMaxTensors)
    r.fail("tensor count " + std::to_string(tensor_count) + " exceeds the limit of 1000000");
  if (kv_count > kMaxKeys) r.fail("metadata count " + std::to_string(kv_count) + " exceeds the limit of 1000000");

  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string key = r.read_string("metadata key " + std::to_string(i));
    const std::string context = "metadata \"" + key + "\"";
    const GgufType type = r.read_type(context);
    GgufValue value = r.read_value(type, context, 0);
    if (!metadata_.emplace(std::move(key), std::move(value)).second) r.fail(context + ": the key appears twice");
  }
  if (const auto it = metadata_.find("general.alignment"); it != metadata_.end()) {
    const auto* a = std::get_if<uint32_t>(&it->second.value);
    if (!a)
      r.fail("metadata \"general.alignment\": a " + std::string(gguf_type_name(it->second.type())) +
             ", not a u32");
    if (!std::has_single_bit(*a))
      r.fail("metadata \"general.alignment\": " + std::to_string(*a) + " is not a power of two");
    alignment_ = *a;
  }

  struct Raw {
    uint64_t offset;  // relative to the data section
  };
  std::vector<Raw> raw;
  raw.reserve(std::min<uint64_t>(tensor_count, r.left() / 24 + 1));  // a tensor info takes >= 24 bytes
  for (uint64_t i = 0; i < tensor_count; ++i) {
    std::string name = r.read_string("tensor " + std::to_string(i) + " name");
    const std::string& ctx = name;
    const uint32_t n_dims = r.read<uint32_t>(ctx + ": n_dims");
    if (n_dims < 1 || n_dims > kMaxDims) r.fail(ctx + ": n_dims " + std::to_string(n_dims) + " is not 1 to 4");
    std::vector<uint64_t> dims(n_dims);
    for (uint64_t& d : dims) d = r.read<uint64_t>(ctx + ": dims");
    const uint32_t type = r.read<uint32_t>(ctx + ": type");
    const uint64_t offset = r.read<uint64_t>(ctx + ": offset");

    std::vector<int64_t> shape;  // row-major: ggml's dims reversed
    uint64_t elements = 1;
    for (size_t k = dims.size(); k-- > 0;) {
      const uint64_t d = dims[k];
      if (d < 1) r.fail(ctx + ": dimension " + std::to_string(k) + " is 0");
      if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / d) {
        std::string ds;
        for (uint64_t x : dims) ds += (ds.empty() ? "" : ", ") + std::to_string(x);
        r.fail(ctx + ": ggml dims {" + ds + "} hold more than 2^63 - 1 elements");
      }
      elements *= d;
      shape.push_back(static_cast<int64_t>(d));
    }
    const std::optional<DType> dtype = dtype_of_ggml_type(type);
    if (!dtype) r.fail(ctx + ": ggml type " + ggml_type_name(type) + " is not supported (" + readable_types() + ")");
    const auto per_block = static_cast<uint64_t>(dtype_layout(*dtype).elements);
    if (dims[0] % per_block != 0)
      r.fail(ctx + ": " + std::string(spelling(*dtype).enumerator) + " needs the innermost dimension a multiple of " +
             std::to_string(per_block) + ", shape " + shape_string(shape) + " has " + std::to_string(dims[0]));
    const std::optional<uint64_t> size = byte_size(*dtype, elements);
    if (!size || *size > bytes.size())
      r.fail(ctx + ": shape " + shape_string(shape) + " of " + std::string(dtype_name(*dtype)) +
             " is larger than the file (" + std::to_string(bytes.size()) + " bytes)");
    if (offset % alignment_ != 0)
      r.fail(ctx + ": offset " + std::to_string(offset) + " is not a multiple of the alignment " +
             std::to_string(alignment_));
    if (index_.contains(name)) r.fail(ctx + ": two tensors have this name");
    index_.emplace(name, tensors_.size());
    tensors_.push_back(TensorInfo{std::move(name), *dtype, std::move(shape), 0, *size});
    raw.push_back({offset});
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t data_start = (r.pos() + alignment_ - 1) / alignment_ * alignment_;  // pos < 2^62: no overflow
  for (size_t i = 0; i < tensors_.size(); ++i) {
    TensorInfo& t = tensors_[i];
    const uint64_t offset = raw[i].offset;
    if (data_start > bytes.size() || offset > bytes.size() - data_start ||
        t.bytes > bytes.size() - data_start - offset)
      r.fail(t.name + ": bytes [" + std::to_string(offset) + ", " + std::to_string(offset) + " + " +
             std::to_string(t.bytes) + ") of the data section (at byte " + std::to_string(data_start) +
             ") reach beyond the end of the file (" + std::to_string(bytes.size()) + " bytes)");
    t.offset = data_start + offset;
  }

  // Overlapping tensors share bytes: corrupt or hostile, never what a writer meant.
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo &a = *by_offset[i - 1], &b = *by_offset[i];
    if (b.offset < a.offset + a.bytes)
      r.fail(a.name + " and " + b.name + ": data at offsets " + std::to_string(a.offset - data_start) + " (" +
             std::to_string(a.bytes) + " bytes) and " + std::to_string(b.offset - data_start) + " overlap");
  }
}

const GgufValue* GgufFile::value(std::string_view key) const {
  const auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

std::optional<std::string> GgufFile::string(std::string_view key) const {
  const GgufValue* v = value(key);
  if (!v) return std::nullopt;
  if (const auto* s = std::get_if<std::string>(&v->value)) return *s;
  return std::nullopt;
}

std::optional<int64_t> GgufFile::integer(std::string_view key) const {
  const GgufValue* v = value(key);
  if (!v || v->type() == GgufType::Bool) return std::nullopt;
  return std::visit(
      [](const auto& x) -> std::optional<int64_t> {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, uint64_t>) {
          if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
          return static_cast<int64_t>(x);
        } else if constexpr (std::is_integral_v<T>) {
          return static_cast<int64_t>(x);
        } else {
          return std::nullopt;
        }
      },
      v->value);
}

std::optional<double> GgufFile::number(std::string_view key) const {
  const GgufValue* v = value(key);
  if (!v || v->type() == GgufType::Bool) return std::nullopt;
  return std::visit(
      [](const auto& x) -> std::optional<double> {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_arithmetic_v<T>)
          return static_cast<double>(x);
        else
          return std::nullopt;
      },
      v->value);
}

std::optional<std::vector<std::string>> GgufFile::string_array(std::string_view key) const {
  const GgufValue* v = value(key);
  if (!v) return std::nullopt;
  const auto* a = std::get_if<GgufArray>(&v->value);
  if (!a || a->item_type != GgufType::String) return std::nullopt;
  std::vector<std::string> out;
  out.reserve(a->items.size());
  for (const GgufValue& item : a->items) {
    const auto* s = std::get_if<std::string>(&item.value);
    if (!s) return std::nullopt;
    out.push_back(*s);
  }
  return out;
}

namespace {

class Writer {
 public:
  explicit Writer(const std::string& path) : path_(path) {}
  std::string out;

  template <typename T>
  void put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.append(b, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    out += s;
  }
  void put_value(const GgufValue& v, const std::string& key) {
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::string>) {
            put_string(x);
          } else if constexpr (std::is_same_v<T, GgufArray>) {
            put<uint32_t>(static_cast<uint32_t>(x.item_type));
            put<uint64_t>(x.items.size());
            for (const GgufValue& item : x.items) {
              if (item.type() != x.item_type)
                throw Error(ErrorKind::InvalidArgument,
                            path_ + ": metadata \"" + key + "\": an array of " +
                                std::string(gguf_type_name(x.item_type)) + " holds a " +
                                std::string(gguf_type_name(item.type())));
              put_value(item, key);
            }
          } else if constexpr (std::is_same_v<T, bool>) {
            put<uint8_t>(x ? 1 : 0);
          } else {
            put<T>(x);
          }
        },
        v.value);
  }
  void pad(size_t alignment) { out.append((alignment - out.size() % alignment) % alignment, '\0'); }

 private:
  const std::string& path_;
};

}  // namespace

std::vector<std::byte> encode_values(DType dtype, std::span<const float> values) {
  if (is_block_dtype(dtype)) return quantize(dtype, values);
  std::vector<std::byte> bytes(values.size() * dtype_size(dtype));
  convert(DType::F32, std::as_bytes(values), dtype, bytes);
  return bytes;
}

std::vector<std::string> metadata_problems(const GgufFile& file, const ArchitectureNumbers& build) {
  std::vector<std::string> problems;
  const std::optional<std::string> arch = file.string("general.architecture");
  if (!arch) return problems;
  const bool two_stacks = build.encoder_layers > 0;
  const std::pair<const char*, int64_t> checks[] = {
      {"embedding_length", build.hidden},
      {"block_count", two_stacks ? build.encoder_layers : build.layers},
      {"attention.head_count", build.heads},
      {"attention.head_count_kv", build.kv_heads},
      {"attention.key_length", build.head_dim},
      {"feed_forward_length", build.intermediate},
      {"decoder_block_count", two_stacks ? build.layers : -1},
  };
  static const char* const what[] = {"hidden",   "layers",       "heads", "kv_heads",
                                     "head_dim", "intermediate", "layers"};
  for (size_t i = 0; i < std::size(checks); ++i) {
    if (checks[i].second < 0) continue;  // a key of the other stack shape
    const std::string key = *arch + "." + checks[i].first;
    const std::optional<int64_t> v = file.integer(key);
    if (v && *v != checks[i].second)
      problems.push_back(key + " is " + std::to_string(*v) + ", the build has " +
                         (two_stacks && i == 1 ? "encoder_layers" : what[i]) + " = " + std::to_string(checks[i].second));
  }
  return problems;
}

void write_gguf(const std::string& path, const std::map<std::string, GgufValue>& metadata,
                const std::vector<GgufTensorToWrite>& tensors) {
  constexpr uint64_t alignment = kDefaultAlignment;
  if (const auto it = metadata.find("general.alignment"); it != metadata.end()) {
    const auto* a = std::get_if<uint32_t>(&it->second.value);
    if (!a || *a != alignment)
      throw Error(ErrorKind::InvalidArgument, path + ": metadata \"general.alignment\" must be u32 32");
  }
  Writer w(path);
  w.out = "GGUF";
  w.put<uint32_t>(3);
  w.put<uint64_t>(tensors.size());
  w.put<uint64_t>(metadata.size());
  for (const auto& [key, value] : metadata) {
    w.put_string(key);
    w.put<uint32_t>(static_cast<uint32_t>(value.type()));
    w.put_value(value, key);
  }
  std::set<std::string_view> names;
  uint64_t offset = 0;
  for (const GgufTensorToWrite& t : tensors) {
    auto fail = [&](const std::string& what) {
      throw Error(ErrorKind::InvalidArgument, path + ": " + t.name + ": " + what);
    };
    if (!names.insert(t.name).second) fail("two tensors have this name");
    if (t.shape.empty() || t.shape.size() > kMaxDims) fail("shape " + shape_string(t.shape) + " is not 1 to 4 dims");
    uint64_t elements = 1;
    for (int64_t d : t.shape) {
      if (d < 1 || static_cast<uint64_t>(d) > (uint64_t{1} << 62) / elements)
        fail("shape " + shape_string(t.shape) + " has a dimension below 1 or too many elements");
      elements *= static_cast<uint64_t>(d);
    }
    const int64_t per_block = dtype_layout(t.dtype).elements;
    if (t.shape.back() % per_block != 0)
      fail(std::string(spelling(t.dtype).enumerator) + " needs the last dimension a multiple of " +
           std::to_string(per_block) + ", shape " + shape_string(t.shape));
    const std::optional<uint64_t> size = byte_size(t.dtype, elements);
    if (!size || *size != t.data.size())
      fail("shape " + shape_string(t.shape) + " of " + std::string(dtype_name(t.dtype)) + " does not match the " +
           std::to_string(t.data.size()) + " bytes given");
    w.put_string(t.name);
    w.put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (size_t k = t.shape.size(); k-- > 0;) w.put<uint64_t>(static_cast<uint64_t>(t.shape[k]));
    w.put<uint32_t>(dtype_layout(t.dtype).ggml_type);
    w.put<uint64_t>(offset);
    offset += (t.data.size() + alignment - 1) / alignment * alignment;
  }
  w.pad(alignment);
  for (const GgufTensorToWrite& t : tensors) {
    w.out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
    w.pad(alignment);
  }

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(ErrorKind::Io, path + ": cannot open for writing");
  out.write(w.out.data(), static_cast<std::streamsize>(w.out.size()));
  out.close();
  if (!out) throw Error(ErrorKind::Io, path + ": cannot write");
}

}  // namespace lathe::weights
