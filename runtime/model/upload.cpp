// Weights into the session's buffers: each checkpoint tensor converted to its
// device dtype (block dtypes kept as blocks, repacked), GPT-2's in_out matrices transposed,
// straight into mapped memory where the device allows it.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "runtime/error.hpp"
#include "runtime/model/session_impl.hpp"
#include "runtime/weights/checkpoint.hpp"
#include "runtime/weights/dtype.hpp"
#include "runtime/weights/gguf.hpp"
#include "runtime/weights/quant.hpp"

namespace lathe {
namespace {

// A fused q/k/v weight (or its bias) stored per head or per KV group: each
// row (of whatever bytes) to its place in q | k | v, which the kernels read.
void reorder_qkv(const ModelInfo& m, const ManifestEntry& e, std::vector<std::byte>& data) {
  const size_t row_bytes = data.size() / static_cast<size_t>(e.shape[0]);
  std::vector<std::byte> reordered(data.size());
  for (int64_t row = 0; row < e.shape[0]; ++row) {
    const size_t to = static_cast<size_t>(qkv_blocks_row(m.qkv_layout, row, m.heads, m.kv_heads, m.head_dim));
    std::memcpy(&reordered[to * row_bytes], &data[static_cast<size_t>(row) * row_bytes], row_bytes);
  }
  data.swap(reordered);
}

}  // namespace

void Session::Impl::write(size_t tensor, std::span<const std::byte> bytes) {
  const DeviceTensor& t = tensors[tensor];
  if (t.home != nullptr) {
    vk::upload(device, *t.home, bytes.data(), bytes.size(), t.offset);
    return;
  }
  const std::span<DevicePart> ranges = std::span(parts).subspan(t.first_part, t.part_count);
  const DevicePart& last = ranges.back();
  if (last.begin + last.buffer.size() != bytes.size())
    throw Error(ErrorKind::InvalidArgument, std::string(model.manifest[tensor].name) + ": " + std::to_string(bytes.size()) +
                                                " bytes for a device layout of " +
                                                std::to_string(last.begin + last.buffer.size()));
  for (DevicePart& part : ranges) vk::upload(device, part.buffer, bytes.data() + part.begin, part.buffer.size(), 0);
}

void Session::Impl::store(size_t tensor, std::span<const std::byte> bytes) {
  for (Impl* stage : stages())
    if (stage->owned.tensors[tensor]) {
      stage->write(tensor, bytes);
      stage->tensors[tensor].uploaded = true;
    }
}

bool Session::Impl::store_mapped(size_t tensor, DType from, std::span<const std::byte> data) {
  for (Impl* stage : stages())
    if (stage->owned.tensors[tensor]) {
      if (!stage->convert_mapped(tensor, from, data)) return false;  // unmapped: store() then writes every stage
      stage->tensors[tensor].uploaded = true;
    }
  return true;
}

// Unified memory: values converted straight into the mapping (each row
// range's, for a split matrix: rows are whole values here), no host copy.
// False where the device memory is not mapped.
bool Session::Impl::convert_mapped(size_t tensor, DType from, std::span<const std::byte> data) {
  const DeviceTensor& t = tensors[tensor];
  const size_t size = weights::dtype_size(t.dtype), from_size = weights::dtype_size(from);
  if (t.home != nullptr) {
    if (t.home->mapped() == nullptr) return false;
    weights::convert(from, data, t.dtype,
                     std::span(static_cast<std::byte*>(t.home->mapped()) + t.offset, data.size() / from_size * size));
    return true;
  }
  const std::span<const DevicePart> ranges = std::span(parts).subspan(t.first_part, t.part_count);
  if (std::any_of(ranges.begin(), ranges.end(), [](const DevicePart& p) { return p.buffer.mapped() == nullptr; }))
    return false;
  for (const DevicePart& part : ranges) {
    const size_t values = part.buffer.size() / size, first = part.begin / size;
    weights::convert(from, data.subspan(first * from_size, values * from_size), t.dtype,
                     std::span(static_cast<std::byte*>(part.buffer.mapped()), values * size));
  }
  return true;
}

void Session::upload(size_t index, DType dtype, std::span<const std::byte> data) {
  Impl& s = *impl_;
  if (index >= s.tensors.size())
    throw Error(ErrorKind::InvalidArgument, "tensor index " + std::to_string(index) + " is outside the manifest");
  if (!s.held(index)) return;  // another process's stage holds it: nothing to convert here
  const ManifestEntry& e = s.model.manifest[index];
  const DeviceTensor& t = s.tensors[index];  // its dtype (every stage's the same)
  const size_t elements = static_cast<size_t>(e.elements());
  if (is_block_dtype(dtype)) {
    const weights::BlockFormat f = weights::block_format(dtype);
    if (elements % static_cast<size_t>(f.elements) != 0 ||
        data.size() != elements / static_cast<size_t>(f.elements) * static_cast<size_t>(f.bytes))
      throw Error(ErrorKind::InvalidArgument, std::string(e.name) + ": " + std::to_string(data.size()) +
                                                  " bytes are not the " + std::string(spelling(dtype).enumerator) +
                                                  " blocks of " + std::to_string(elements) + " values");
    if (t.dtype != dtype) {  // a build of another dtype: the values, dequantized (and quantized again)
      std::vector<float> values(elements);
      weights::dequantize(dtype, data, values);
      return upload(index, DType::F32, std::as_bytes(std::span(values)));
    }
    // Kept as blocks: each row's planes as the plan's device_row lays them
    // out (the generator checked the rows are whole blocks of out_in matrices).
    std::vector<std::byte> rows = weights::repack_blocks(dtype, e.shape[0], e.shape[1], data);
    if (e.role == Role::Qkv && s.model.qkv_layout != QkvLayout::Blocks) reorder_qkv(s.model, e, rows);
    s.store(index, rows);
    return;
  }
  if (is_block_dtype(t.dtype)) {  // values for a block tensor: quantized as ggml's reference quantizer does
    std::vector<float> values(elements);
    weights::convert(dtype, data, DType::F32, std::as_writable_bytes(std::span(values)));
    return upload(index, t.dtype, weights::quantize(t.dtype, values));
  }
  if (data.size() != elements * weights::dtype_size(dtype))
    throw Error(ErrorKind::InvalidArgument, std::string(e.name) + ": " + std::to_string(data.size()) + " bytes given, " +
                                                std::to_string(elements * weights::dtype_size(dtype)) + " expected for " +
                                                std::to_string(elements) + " " + std::string(dtype_name(dtype)) + " values");
  const size_t size = weights::dtype_size(t.dtype);
  const bool transpose = e.in_out;
  const bool reorder = e.role == Role::Qkv && s.model.qkv_layout != QkvLayout::Blocks;
  // A matrix whose rows are not whole texels (a patch embedding's 588 f16
  // columns): each row (after the transposition) padded with zeros to its
  // device row (device_cols).
  const size_t rows = static_cast<size_t>(transpose ? e.shape[1] : e.shape[0]);
  const size_t cols = static_cast<size_t>(transpose ? e.shape[0] : e.shape[1]);
  const size_t held_cols = e.rank >= 2 && read_as_matrix(e.role, e.bias, e.rank)
                               ? static_cast<size_t>(device_cols(t.dtype, static_cast<int64_t>(cols)))
                               : cols;
  const bool pad = held_cols != cols;
  if (!transpose && !reorder && !pad && s.store_mapped(index, dtype, data)) return;
  std::vector<std::byte> converted(elements * size);
  weights::convert(dtype, data, t.dtype, converted);
  if (transpose) {
    // Stored [in, out] (GPT-2's Conv1D, Gemma 3's mm_input_projection_weight):
    // the kernels read [out, in] rows.
    std::vector<std::byte> transposed(converted.size());
    for (size_t i = 0; i < cols; ++i)
      for (size_t o = 0; o < rows; ++o)
        std::memcpy(&transposed[(o * cols + i) * size], &converted[(i * rows + o) * size], size);
    converted.swap(transposed);
  }
  if (reorder) reorder_qkv(s.model, e, converted);
  if (pad) {
    std::vector<std::byte> padded(rows * held_cols * size);
    for (size_t r = 0; r < rows; ++r)
      std::memcpy(&padded[r * held_cols * size], &converted[r * cols * size], cols * size);
    converted.swap(padded);
  }
  s.store(index, converted);
}

std::unique_ptr<weights::Checkpoint> open_checkpoint(const ModelInfo& m, const std::string& path) {
  auto opened = std::make_unique<weights::Checkpoint>(path);
  weights::Checkpoint& checkpoint = *opened;
  const std::vector<std::string> ignore(m.ignored_tensors.begin(), m.ignored_tensors.end());
  // The file's prefix is chosen over the ignored tensors named exactly too:
  // a [vision] model's two builds read one checkpoint, each ignoring the
  // other's tensors, whose prefix may be theirs alone (a LLaVA checkpoint's
  // "language_model." is the decoder's).
  std::vector<std::string> names;
  for (const ManifestEntry& e : m.manifest) names.emplace_back(e.name);
  for (const std::string& p : ignore)
    if (p.find('{') == std::string::npos) names.push_back(p);
  checkpoint.match_names(names);
  std::vector<std::string> problems = checkpoint.audit(m.manifest, ignore);
  for (const auto& file : checkpoint.files())
    if (const auto* gguf = dynamic_cast<const weights::GgufFile*>(file.get()))
      for (std::string& p : weights::metadata_problems(
               *gguf, {m.hidden, m.layers, m.heads, m.kv_heads, m.head_dim, m.intermediate,
                       m.encoder_decoder ? m.encoder_layers : 0}))
        problems.push_back(std::move(p));
  if (!problems.empty())
    weights::raise_problems(checkpoint.path(), problems, checkpoint.misfit(m.name, m.hidden, m.layers));
  if (!checkpoint.renaming().empty())  // the prefix that made the names match, said once
    std::fprintf(stderr, "%s: %s\n", checkpoint.path().c_str(), checkpoint.renaming().c_str());
  return opened;
}

void Session::load(const std::string& path, const LoadOptions& options) {
  load(*open_checkpoint(impl_->model, path), options);
}

void Session::load(const weights::Checkpoint& checkpoint, const LoadOptions& options) {
  using Clock = std::chrono::steady_clock;
  const ModelInfo& m = impl_->model;
  const bool terminal = isatty(STDERR_FILENO) != 0;
  const Clock::time_point start = Clock::now();
  uint64_t done = 0, total = 0;
  for (size_t i = 0; i < m.manifest.size(); ++i)
    if (impl_->held(i)) total += checkpoint.data(m.manifest[i]).size();
  bool shown = false;
  for (size_t i = 0; i < m.manifest.size(); ++i) {
    const ManifestEntry& e = m.manifest[i];
    if (!impl_->held(i)) continue;  // a rank of a split over processes reads only its stage's tensors
    const std::span<const std::byte> data = checkpoint.data(e);
    if (options.check_finite) checkpoint.check_finite(e);  // one pass over the mapped bytes
    upload(i, checkpoint.find(e.name)->info->dtype, data);
    done += data.size();
    if (terminal && (shown || Clock::now() - start > std::chrono::seconds(1))) {
      std::fprintf(stderr, "\rloading %s: %zu/%zu tensors, %llu/%llu MiB", checkpoint.path().c_str(), i + 1,
                   m.manifest.size(), static_cast<unsigned long long>(done >> 20),
                   static_cast<unsigned long long>(total >> 20));
      shown = true;
    }
  }
  if (shown) std::fprintf(stderr, "\n");
}

}  // namespace lathe
