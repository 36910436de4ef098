// Test tool: writes a Hugging Face checkpoint again as llama.cpp's converter
// would, for the GGUF twin of its spec, and compares logits files.
//
//   lathe_gguf_twin convert HF_SPEC GGUF_SPEC IN OUT.gguf [--no-permute]
//     Every tensor of GGUF_SPEC's manifest is read from IN (a checkpoint of
//     HF_SPEC) under the HF name of the same role, layer and expert. When
//     HF_SPEC pairs RoPE dims neox-style (i, i + d/2) and GGUF_SPEC
//     interleaved (2i, 2i+1), the rows of q and k (and their biases) are
//     permuted head by head, row 2i ← row i and row 2i+1 ← row i + d/2, as
//     llama.cpp's converter does for Llama checkpoints: the dot products of
//     rotated q and k are unchanged. Conv1D [in, out] matrices are
//     transposed to [out, in], and an LM head GGUF_SPEC has and a tied
//     HF_SPEC does not is a copy of the embedding (llama.cpp's GPT-2
//     files). Norm scales of a (1 + w) HF_SPEC that GGUF_SPEC reads plainly
//     are stored as 1 + w (llama.cpp's Gemma files), fused q/k/v rows per head
//     or per KV group as q | k | v; the experts of a layer stacked in one
//     tensor per role, [experts][rows][cols]. Tensors are stored in GGUF_SPEC's
//     dtypes (Q8_0 blocks quantized here) with GGUF_SPEC's metadata. Under
//     llama3 RoPE scaling the file also holds rope_freqs.weight, head_dim / 2
//     f32 factors computed as llama.cpp's converter does (its only record of
//     the scaling).
//     --no-permute leaves the rows as they are: the negative control.
//   lathe_gguf_twin config SPEC OUT.json
//     The Hugging Face config.json of SPEC: beside a checkpoint of SPEC, a
//     model directory as transformers writes one (for `lathe run DIR`).
//   lathe_gguf_twin compare A.f32 B.f32 VOCAB TOLERANCE
//     The worst row's ‖a − b‖ / ‖b‖ over two logits files; exit 1 above
//     TOLERANCE.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <tuple>

#include "generator/import/gguf_import.hpp"
#include "generator/import/hf_export.hpp"
#include "core/manifest.hpp"
#include "generator/spec/parse.hpp"
#include "runtime/error.hpp"
#include "runtime/weights/checkpoint.hpp"
#include "runtime/weights/dtype.hpp"
#include "runtime/weights/gguf.hpp"

using namespace lathe;

namespace {

spec::Spec load(const std::string& path) {
  spec::Diagnostics diag(path);
  auto s = spec::parse_spec_file(path, diag);
  if (!s) throw Error(ErrorKind::BadFile, diag.format());
  return *s;
}

// Rows [h·d + 2i + j] ← [h·d + j·d/2 + i] for every head h, i < d/2, j < 2.
std::vector<float> interleave_rows(const std::vector<float>& v, int64_t rows, int64_t cols, int64_t head_dim) {
  std::vector<float> out(v.size());
  const int64_t half = head_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t h = r / head_dim, within = r % head_dim;
    const int64_t from = h * head_dim + (within % 2) * half + within / 2;
    std::copy_n(&v[static_cast<size_t>(from * cols)], cols, &out[static_cast<size_t>(r * cols)]);
  }
  return out;
}

int convert(const std::string& hf_spec_path, const std::string& gguf_spec_path, const std::string& in,
            const std::string& out, bool allow_permute) {
  const spec::Spec hf = load(hf_spec_path), gg = load(gguf_spec_path);
  const bool permute = allow_permute && hf.position.pairing == spec::RopePairing::Neox &&
                       gg.position.pairing == spec::RopePairing::Interleaved;
  if (permute && hf.position.rotary_dim != hf.dims.head_dim)
    throw Error(ErrorKind::InvalidArgument, "the q/k permutation covers whole heads: rotary_dim must be head_dim");
  using Key = std::tuple<Role, bool, int64_t, int64_t>;
  std::map<Key, spec::TensorSpec> hf_tensors;
  for (const spec::TensorSpec& t : spec::build_manifest(hf).tensors) hf_tensors[{t.role, t.bias, t.layer, t.expert}] = t;

  const weights::Checkpoint checkpoint(in);
  std::vector<weights::GgufTensorToWrite> tensors;
  for (const spec::TensorSpec& t : spec::build_manifest(gg).tensors) {
    auto it = hf_tensors.find({t.role, t.bias, t.layer, t.expert});
    if (it == hf_tensors.end() && t.role == Role::LmHead && hf.embedding.tied) it = hf_tensors.find({Role::Embed, false, -1, -1});
    if (it == hf_tensors.end()) throw Error(ErrorKind::InvalidArgument, t.name + ": the HF spec has no such tensor");
    const weights::Checkpoint::Tensor* source = checkpoint.find(it->second.name);
    if (source == nullptr) throw Error(ErrorKind::NotFound, in + ": no tensor " + it->second.name);
    std::vector<float> values(static_cast<size_t>(t.elements()));
    weights::convert(source->info->dtype, source->file->data(*source->info), DType::F32,
                     std::as_writable_bytes(std::span(values)));
    const int64_t rows = t.shape[0], cols = t.shape.size() == 2 ? t.shape[1] : 1;
    if (is_linear(t.role) && t.shape.size() == 2 && hf.weights.layout != gg.weights.layout) {
      // [in, out] → [out, in] (square ones too)
      if (it->second.shape != std::vector<int64_t>{cols, rows})
        throw Error(ErrorKind::InvalidArgument, t.name + ": the HF shape is not this one transposed");
      std::vector<float> transposed(values.size());
      for (int64_t i = 0; i < cols; ++i)
        for (int64_t o = 0; o < rows; ++o) transposed[static_cast<size_t>(o * cols + i)] = values[static_cast<size_t>(i * rows + o)];
      values.swap(transposed);
    }
    if (permute && (t.role == Role::Q || t.role == Role::K)) values = interleave_rows(values, rows, cols, hf.dims.head_dim);
    // GPT-NeoX's and BLOOM's per-head, Falcon's grouped q/k/v rows: llama.cpp's
    // converter stores them q | k | v.
    if (t.role == Role::Qkv && hf.weights.qkv_layout != gg.weights.qkv_layout) {
      std::vector<float> blocks(values.size());
      for (int64_t r = 0; r < rows; ++r)
        std::copy_n(&values[static_cast<size_t>(r * cols)], cols,
                    &blocks[static_cast<size_t>(qkv_blocks_row(hf.weights.qkv_layout, r, hf.dims.heads, hf.dims.kv_heads,
                                                               hf.dims.head_dim) * cols)]);
      values.swap(blocks);
    }
    // Gemma's (1 + w) norm scales: llama.cpp's converter stores 1 + w.
    if (hf.norm.unit_offset && !gg.norm.unit_offset && is_norm(t.role) && !t.bias)
      for (float& v : values) v += 1.0f;
    std::vector<std::byte> data = weights::encode_values(t.dtype, values);
    if (t.slice > 0) {  // the next expert of a stacked tensor ([experts][rows][cols], llama.cpp's ffn_*_exps)
      auto stack_of = [&] {
        for (weights::GgufTensorToWrite& w : tensors)
          if (w.name == t.name) return &w;
        throw Error(ErrorKind::InvalidArgument, t.name + ": slice " + std::to_string(t.slice) + " before slice 0");
      };
      weights::GgufTensorToWrite& stack = *stack_of();
      if (stack.shape[0] != t.slice) throw Error(ErrorKind::InvalidArgument, t.name + ": slices out of order");
      stack.data.insert(stack.data.end(), data.begin(), data.end());
      ++stack.shape[0];
      continue;
    }
    std::vector<int64_t> shape = t.shape;
    if (t.slice == 0) shape.insert(shape.begin(), 1);
    tensors.push_back({t.name, t.dtype, shape, std::move(data)});
  }
  if (gg.position.kind == spec::PositionKind::Rope && gg.position.scaling.kind == spec::RopeScaling::Llama3) {
    // The converter's dim is head_dim (not rope.dimension_count).
    const std::vector<float> factors =
        importer::llama3_rope_freqs(gg.position.scaling, gg.position.theta, gg.dims.head_dim);
    const std::vector<int64_t> shape{static_cast<int64_t>(factors.size())};
    tensors.push_back({"rope_freqs.weight", DType::F32, shape, weights::encode_values(DType::F32, factors)});
  }
  weights::write_gguf(out, importer::gguf_metadata_from_spec(gg), tensors);
  std::cout << out << ": " << tensors.size() << " tensors" << (permute ? ", q/k rows interleaved" : "") << "\n";
  return 0;
}

std::vector<float> read_f32(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) throw Error(ErrorKind::NotFound, path + ": cannot open");
  std::vector<float> v(static_cast<size_t>(f.tellg()) / sizeof(float));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

int config(const std::string& spec_path, const std::string& out_path) {
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  out << importer::hf_config_from_spec(load(spec_path)).dump(2) << "\n";
  if (!out.flush()) throw Error(ErrorKind::Io, out_path + ": cannot write");
  return 0;
}

int compare(const std::string& a_path, const std::string& b_path, size_t vocab, double tolerance) {
  const std::vector<float> a = read_f32(a_path), b = read_f32(b_path);
  if (a.size() != b.size() || a.empty() || a.size() % vocab != 0) {
    std::cerr << "compare: " << a.size() << " and " << b.size() << " values, not equal rows of " << vocab << "\n";
    return 1;
  }
  double worst = 0;
  for (size_t row = 0; row < a.size() / vocab; ++row) {
    double diff = 0, norm = 0;
    for (size_t i = row * vocab; i < (row + 1) * vocab; ++i) {
      diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
      norm += double(b[i]) * b[i];
    }
    worst = std::max(worst, std::sqrt(diff / std::max(norm, 1e-30)));
  }
  std::cout << a.size() / vocab << " rows, worst normalized error " << worst << " (tolerance " << tolerance << ")\n";
  return worst <= tolerance ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if ((args.size() == 5 || (args.size() == 6 && args[5] == "--no-permute")) && args[0] == "convert")
      return convert(args[1], args[2], args[3], args[4], args.size() == 5);
    if (args.size() == 3 && args[0] == "config") return config(args[1], args[2]);
    if (args.size() == 5 && args[0] == "compare")
      return compare(args[1], args[2], std::stoul(args[3]), std::stod(args[4]));
  } catch (const std::exception& e) {
    std::cerr << "lathe_gguf_twin: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: lathe_gguf_twin convert HF_SPEC GGUF_SPEC IN OUT.gguf [--no-permute] | config SPEC OUT.json | compare A.f32 B.f32 VOCAB TOLERANCE\n";
  return 2;
}
