#include "runtime/weights/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "runtime/error.hpp"
#include "runtime/weights/dtype.hpp"

namespace lathe::weights {

static_assert(std::endian::native == std::endian::little, "safetensors stores lengths and data little-endian");

std::string shape_string(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {

// The upstream reader's limit: a larger header is corruption or an attack.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// Real checkpoints have rank <= 5; the cap keeps a header of "[1,1,1,…]" from
// growing one shape vector to gigabytes.
constexpr size_t kMaxRank = 64;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

std::string range_string(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// The product of the dims; nullopt when a dim is negative or the product
// overflows int64 (a zero dim anywhere makes it 0).
std::optional<int64_t> element_count(std::span<const int64_t> shape) {
  if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; })) return std::nullopt;
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (n > kInt64Max / d) return std::nullopt;
    n *= d;
  }
  return n;
}

std::optional<DType> parse_dtype(std::string_view s) {
  if (s == "F32") return DType::F32;
  if (s == "F16") return DType::F16;
  if (s == "BF16") return DType::BF16;
  return std::nullopt;
}

// What the header parses into.
struct Header {
  std::vector<TensorInfo> tensors;                   // header order
  std::map<std::string, size_t, std::less<>> index;  // name → position in tensors
  std::map<std::string, std::string> metadata;
};

// Reads the header from the JSON parser's events straight into TensorInfo
// records: memory stays proportional to what is kept (no JSON DOM), nesting
// is bounded, header order is kept, and each error names the tensor. The
// accepted structure, by depth:
//   0 {  1 "name": {  2 "dtype": "F32", "shape": [  3 dims ], "data_offsets": [  3 begin, end ] }
//        1 "__metadata__": {  2 "key": "value" }  }
// Unknown fields of a tensor entry are skipped if no deeper than that.
class HeaderReader final : public nlohmann::json_sax<nlohmann::json> {
 public:
  HeaderReader(const std::string& path, uint64_t data_start, uint64_t data_size)
      : path_(path), data_start_(data_start), data_size_(data_size) {}

  Header take() { return std::move(header_); }

  bool null() override { return scalar({}); }
  bool boolean(bool) override { return scalar({}); }
  bool number_integer(int64_t v) override {
    return scalar({v < 0 ? Scalar::Negative : Scalar::Unsigned, static_cast<uint64_t>(v)});
  }
  bool number_unsigned(uint64_t v) override { return scalar({Scalar::Unsigned, v}); }
  bool number_float(double, const std::string&) override { return scalar({}); }
  bool string(std::string& v) override { return scalar({Scalar::String, 0, &v}); }
  bool binary(binary_t&) override { return scalar({}); }

  bool key(std::string& k) override {
    if (depth_ == 1) {
      entry_ = k;
      in_metadata_ = k == "__metadata__";
    } else if (depth_ == 2) {
      field_name_ = k;
      field_ = in_metadata_          ? Field::Other
               : k == "dtype"        ? Field::DType
               : k == "shape"        ? Field::Shape
               : k == "data_offsets" ? Field::Offsets
                                     : Field::Other;
    }
    return true;
  }

  bool start_object(size_t) override {
    if (depth_ == 1 && !in_metadata_) pending_ = {};
    if (depth_ == 2) {
      if (in_metadata_) fail("__metadata__: the value of \"" + field_name_ + "\" is not a string");
      if (field_ != Field::Other) fail_field_type();
    }
    if (depth_ >= 3) fail(entry_ + ": " + field_name_ + " is nested too deeply");
    ++depth_;
    return true;
  }
  bool end_object() override {
    if (--depth_ == 1 && !in_metadata_) finish_tensor();
    return true;
  }

  bool start_array(size_t) override {
    if (depth_ == 0) fail("header is not a JSON object");
    if (depth_ == 1) fail_entry_type();
    if (depth_ == 2) {
      if (in_metadata_) fail("__metadata__: the value of \"" + field_name_ + "\" is not a string");
      if (field_ == Field::DType) fail_field_type();
      if (field_ == Field::Shape) pending_.shape.emplace();  // a repeated field: the last one counts
      if (field_ == Field::Offsets) pending_.offsets.emplace();
    }
    if (depth_ >= 3) fail(entry_ + ": " + field_name_ + " is nested too deeply");
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }

  bool parse_error(size_t, const std::string&, const nlohmann::json::exception& e) override {
    fail(std::string("header is not valid JSON: ") + e.what());
  }

 private:
  enum class Field { Other, DType, Shape, Offsets };
  struct Scalar {
    enum Kind { Other, Negative, Unsigned, String } kind = Other;  // Other: null, bool, float
    uint64_t u = 0;
    const std::string* s = nullptr;
  };
  // The tensor entry being read; fields absent until seen.
  struct Pending {
    std::optional<std::string> dtype;
    std::optional<std::vector<int64_t>> shape;
    std::optional<std::vector<uint64_t>> offsets;
  };

  [[noreturn]] void fail(const std::string& what) const { throw Error(ErrorKind::BadFile, path_ + ": " + what); }
  [[noreturn]] void fail_entry_type() const {
    fail(entry_ + (in_metadata_ ? " is not an object of strings" : ": the entry is not a JSON object"));
  }
  [[noreturn]] void fail_field_type() const {
    fail(entry_ + ": " + field_name_ + (field_ == Field::DType ? " is not a string" : " is not an array"));
  }

  bool scalar(const Scalar& v) {
    if (depth_ == 0) fail("header is not a JSON object");
    if (depth_ == 1) fail_entry_type();
    if (depth_ == 2) {
      if (in_metadata_) {
        if (v.kind != Scalar::String) fail("__metadata__: the value of \"" + field_name_ + "\" is not a string");
        header_.metadata[field_name_] = *v.s;
      } else if (field_ == Field::DType) {
        if (v.kind != Scalar::String) fail_field_type();
        pending_.dtype = *v.s;
      } else if (field_ != Field::Other) {
        fail_field_type();
      }
    } else if (field_ == Field::Shape) {  // depth 3: an item of an array at depth 2
      if (v.kind == Scalar::Negative) fail(entry_ + ": shape has a negative dimension");
      if (v.kind != Scalar::Unsigned) fail(entry_ + ": shape holds a value that is not an integer");
      if (v.u > static_cast<uint64_t>(kInt64Max)) fail(entry_ + ": shape has a dimension above 2^63 - 1");
      if (pending_.shape->size() == kMaxRank) fail(entry_ + ": shape has more than 64 dimensions");
      pending_.shape->push_back(static_cast<int64_t>(v.u));
    } else if (field_ == Field::Offsets) {
      if (v.kind != Scalar::Unsigned || pending_.offsets->size() == 2)
        fail(entry_ + ": data_offsets is not [begin, end] of non-negative integers");
      pending_.offsets->push_back(v.u);
    }
    return true;
  }

  void finish_tensor() {
    const std::string& name = entry_;
    if (!pending_.dtype) fail(name + ": no dtype");
    if (!pending_.shape) fail(name + ": no shape");
    if (!pending_.offsets) fail(name + ": no data_offsets");
    const std::optional<DType> dtype = parse_dtype(*pending_.dtype);
    if (!dtype) fail(name + ": dtype " + *pending_.dtype + " is not supported (F32, F16, BF16)");
    const std::vector<int64_t>& shape = *pending_.shape;
    const std::vector<uint64_t>& offsets = *pending_.offsets;
    if (offsets.size() != 2) fail(name + ": data_offsets is not [begin, end] of non-negative integers");
    const uint64_t begin = offsets[0], end = offsets[1];
    if (begin > end) fail(name + ": data_offsets " + range_string(begin, end) + " end before they begin");
    if (end > data_size_)
      fail(name + ": data_offsets " + range_string(begin, end) + " reach beyond the data section (" +
           std::to_string(data_size_) + " bytes)");
    const std::optional<int64_t> count = element_count(shape);  // negative dims were refused above
    if (!count) fail(name + ": shape " + shape_string(shape) + " has more than 2^63 - 1 elements");
    const int64_t elements = *count;
    // Compared by division: elements * size may not fit in 64 bits.
    const uint64_t size = dtype_size(*dtype), bytes = end - begin;
    if (bytes % size != 0 || bytes / size != static_cast<uint64_t>(elements))
      fail(name + ": shape " + shape_string(shape) + " is " + std::to_string(elements) + " elements of " +
           std::string(dtype_name(*dtype)) + ", but data_offsets " + range_string(begin, end) + " hold " +
           std::to_string(bytes) + " bytes");
    TensorInfo info{name, *dtype, shape, data_start_ + begin, bytes};
    // A repeated name: the last entry wins, as in nlohmann's and Python's json.
    auto [it, inserted] = header_.index.try_emplace(name, header_.tensors.size());
    if (inserted)
      header_.tensors.push_back(std::move(info));
    else
      header_.tensors[it->second] = std::move(info);
  }

  const std::string& path_;
  const uint64_t data_start_, data_size_;  // the data section, in file bytes
  Header header_;
  int depth_ = 0;      // open objects and arrays
  std::string entry_;  // the depth-1 key: a tensor name or "__metadata__"
  bool in_metadata_ = false;
  std::string field_name_;  // the depth-2 key
  Field field_ = Field::Other;
  Pending pending_;
};

// "{layer}" matches one or more decimal digits; everything else literally.
bool matches(std::string_view pattern, std::string_view name) {
  constexpr std::string_view kLayer = "{layer}";
  const size_t at = pattern.find(kLayer);
  if (at == std::string_view::npos) return pattern == name;
  if (!name.starts_with(pattern.substr(0, at))) return false;
  const std::string_view rest = pattern.substr(at + kLayer.size());
  for (size_t end = at; end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]));)
    if (matches(rest, name.substr(++end))) return true;
  return false;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : TensorFile(path) {
  // bytes: [8: header length N][N: JSON header][data section]
  const std::span<const std::byte> bytes = file_.bytes();
  if (bytes.size() < 8)
    throw Error(ErrorKind::BadFile, path + ": the file is " + std::to_string(bytes.size()) +
                                        " bytes, too short for the 8-byte header length");
  uint64_t header_size;
  std::memcpy(&header_size, bytes.data(), 8);
  if (header_size > kMaxHeaderBytes)
    throw Error(ErrorKind::BadFile,
                path + ": header length " + std::to_string(header_size) + " exceeds the limit of 100 MB");
  if (header_size > bytes.size() - 8)
    throw Error(ErrorKind::BadFile, path + ": header length " + std::to_string(header_size) +
                                        " reaches beyond the end of the file (" + std::to_string(bytes.size()) +
                                        " bytes)");
  const uint64_t data_start = 8 + header_size;
  const char* header = reinterpret_cast<const char*>(bytes.data() + 8);
  // nlohmann's lexer takes a NUL for the end of input and would accept
  // "{}\0<anything>"; JSON allows no raw NUL anywhere.
  if (std::memchr(header, 0, header_size))
    throw Error(ErrorKind::BadFile, path + ": header holds a NUL byte, which JSON does not allow");
  HeaderReader reader(path, data_start, bytes.size() - data_start);
  try {
    nlohmann::json::sax_parse(header, header + header_size, &reader);
  } catch (const nlohmann::json::exception& e) {  // the reader reports parse errors itself; this is a safety net
    throw Error(ErrorKind::BadFile, path + ": header is not valid JSON: " + e.what());
  }
  Header parsed = reader.take();
  tensors_ = std::move(parsed.tensors);
  index_ = std::move(parsed.index);
  metadata_ = std::move(parsed.metadata);

  // Overlapping tensors share bytes: a corrupt or hostile header, never what
  // a checkpoint writer meant. Empty tensors overlap nothing.
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : tensors_)
    if (t.bytes) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  // Sorted and overlap-free so far means each range need only be compared with the one before it.
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo &a = *by_offset[i - 1], &b = *by_offset[i];
    if (b.offset < a.offset + a.bytes) {
      auto relative = [&](const TensorInfo& x) {
        return range_string(x.offset - data_start, x.offset - data_start + x.bytes);
      };
      throw Error(ErrorKind::BadFile, path + ": " + a.name + " and " + b.name + ": data_offsets " + relative(a) +
                                          " and " + relative(b) + " overlap");
    }
  }
}

const TensorInfo* TensorFile::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const std::byte> TensorFile::data(const TensorInfo& info) const {
  const std::span<const std::byte> bytes = file_.bytes();
  if (info.offset > bytes.size() || info.bytes > bytes.size() - info.offset)
    throw Error(ErrorKind::InvalidArgument, path() + ": " + info.name + ": the tensor lies outside this file");
  return bytes.subspan(info.offset, info.bytes);
}

std::vector<std::string> audit(std::span<const TensorInfo* const> tensors, std::span<const ManifestEntry> manifest,
                               std::span<const std::string> ignore) {
  std::map<std::string_view, const TensorInfo*> by_name;
  for (const TensorInfo* t : tensors) by_name.emplace(t->name, t);
  std::vector<std::string> problems;
  std::set<std::string_view> expected;
  std::map<std::string_view, int64_t> stacked;  // a stacked tensor's name → the entries it holds
  for (const ManifestEntry& e : manifest)
    if (e.slice >= 0) stacked[e.name] = std::max<int64_t>(stacked[e.name], int64_t{e.slice} + 1);
  for (const ManifestEntry& e : manifest) {
    if (!expected.insert(e.name).second) continue;  // a stacked tensor is checked once
    const std::string name(e.name);
    const auto found = by_name.find(e.name);
    if (found == by_name.end()) {
      problems.push_back(name + ": missing");
      continue;
    }
    const TensorInfo* t = found->second;
    std::vector<int64_t> shape = e.stored_shape();
    if (e.slice >= 0) shape.insert(shape.begin(), stacked[e.name]);  // [entries][shape…]
    // A vector may be stored as a row ([1, n]: BART's final_logits_bias),
    // or in llama.cpp's reshapes of the same values (core/contract.hpp).
    if (!same_values(shape, t->shape))
      problems.push_back(name + ": shape " + shape_string(shape) + " expected, " + shape_string(t->shape) + " found");
    if (t->dtype != e.dtype)
      problems.push_back(name + ": dtype " + std::string(dtype_name(e.dtype)) + " expected, " +
                         std::string(dtype_name(t->dtype)) + " found");
  }
  for (const TensorInfo* t : tensors) {
    const bool ignored =
        std::any_of(ignore.begin(), ignore.end(), [&](const std::string& p) { return matches(p, t->name); });
    if (!expected.contains(t->name) && !ignored)
      problems.push_back(t->name + ": unexpected tensor (not in the manifest)");
  }
  return problems;
}

std::vector<std::string> audit(const SafetensorsFile& file, std::span<const ManifestEntry> manifest,
                               std::span<const std::string> ignore) {
  std::vector<const TensorInfo*> tensors;
  for (const TensorInfo& t : file.tensors()) tensors.push_back(&t);
  return audit(tensors, manifest, ignore);
}

void raise_problems(const std::string& path, const std::vector<std::string>& problems, const std::string& headline) {
  if (problems.empty()) return;
  std::string message = path + ": " + (headline.empty() ? "" : headline + "\n") + std::to_string(problems.size()) +
                        (problems.size() == 1 ? " problem:" : " problems:");
  for (const std::string& p : problems) message += "\n  " + p;
  throw Error(ErrorKind::BadFile, message);
}

void require_matches(const SafetensorsFile& file, std::span<const ManifestEntry> manifest,
                     std::span<const std::string> ignore) {
  raise_problems(file.path(), audit(file, manifest, ignore));
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // ordered_json: tensors appear in the header in the order given.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    auto fail = [&](const std::string& what) {
      throw Error(ErrorKind::InvalidArgument, path + ": " + t.name + ": " + what);
    };
    if (t.name == "__metadata__") fail("the name is reserved for metadata");
    if (header.contains(t.name)) fail("two tensors have this name");
    if (is_block_dtype(t.dtype))
      fail("dtype " + std::string(dtype_name(t.dtype)) + " cannot be written (safetensors has no block dtypes)");
    const std::optional<int64_t> elements = element_count(t.shape);
    if (!elements) fail("shape " + shape_string(t.shape) + " has a negative dimension or too many elements");
    const uint64_t size = dtype_size(t.dtype);
    if (t.data.size() % size != 0 || t.data.size() / size != static_cast<uint64_t>(*elements))
      fail("shape " + shape_string(t.shape) + " of " + std::string(dtype_name(t.dtype)) + " does not match the " +
           std::to_string(t.data.size()) + " bytes given");
    header[t.name] = {{"dtype", std::string(spelling(t.dtype).enumerator)},
                      {"shape", t.shape},
                      {"data_offsets", nlohmann::ordered_json::array({offset, offset + t.data.size()})}};
    offset += t.data.size();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // a name or metadata string that is not UTF-8
    throw Error(ErrorKind::InvalidArgument, path + ": " + e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-aligned

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(ErrorKind::Io, path + ": cannot open for writing");
  const uint64_t header_size = text.size();
  out.write(reinterpret_cast<const char*>(&header_size), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const TensorToWrite& t : tensors)
    out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
  out.close();
  if (!out) throw Error(ErrorKind::Io, path + ": write failed");
}

}  // namespace lathe::weights
