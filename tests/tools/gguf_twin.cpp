// Test tool: writes a Hugging Face checkpoint again as llama.cpp's converter
// would, for the GGUF twin of its spec, and compares logits files.
//
//   lathe_gguf_twin convert HF_SPEC GGUF_SPEC IN OUT.gguf [--no-permute]
//     Every tensor of GGUF_SPEC's manifest is read from IN (a checkpoint of
//     HF_SPEC) under the HF name of the same role, layer and expert
//     (importer::for_each_gguf_tensor, as `lathe quantize` reads one). When
//     HF_SPEC pairs RoPE dims neox-style (i, i + d/2) and GGUF_SPEC
//     interleaved (2i, 2i+1), the rows of q and k (and their biases) are
//     permuted head by head, row 2i ← row i and row 2i+1 ← row i + d/2, as
//     llama.cpp's converter does for Llama checkpoints: the dot products of
//     rotated q and k are unchanged. Conv1D [in, out] matrices are
//     transposed to [out, in], and an LM head GGUF_SPEC has and a tied
//     HF_SPEC does not is a copy of the embedding (llama.cpp's GPT-2
//     files). Norm scales of a (1 + w) HF_SPEC that GGUF_SPEC reads plainly
//     are stored as 1 + w (llama.cpp's Gemma files), fused q/k/v rows per head
//     or per KV group as q | k | v. Tensors are stored in GGUF_SPEC's
//     dtypes (Q8_0 blocks quantized here) with GGUF_SPEC's metadata. Under
//     llama3 RoPE scaling the file also holds rope_freqs.weight, head_dim / 2
//     f32 factors computed as llama.cpp's converter does (its only record of
//     the scaling).
//     --no-permute leaves the rows as they are: the negative control.
//   lathe_gguf_twin config SPEC OUT.json
//     The Hugging Face config.json of SPEC: beside a checkpoint of SPEC, a
//     model directory as transformers writes one (for `lathe run DIR`).
//   lathe_gguf_twin random SPEC OUT.safetensors SEED
//     A checkpoint of SPEC's manifest in its dtypes, values uniform in
//     [-0.05, 0.05) (norm scales 1 + that), deterministic in SEED.
//   lathe_gguf_twin types FILE.gguf
//     general.file_type, then one line "<tensor> <dtype>" per tensor.
//   lathe_gguf_twin reference SPEC FILE.gguf TOKENS OUT.f32
//     The CPU reference's logits of every position of TOKENS (ids, comma
//     separated) for SPEC with the weights of FILE.gguf: each tensor's
//     values, block types dequantized (weights::dequantize), as raw f32 rows.
//   lathe_gguf_twin compare A.f32 B.f32 VOCAB TOLERANCE
//     The worst row's ‖a − b‖ / ‖b‖ over two logits files; exit 1 above
//     TOLERANCE.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "generator/import/gguf_convert.hpp"
#include "generator/import/gguf_import.hpp"
#include "generator/import/hf_export.hpp"
#include "core/manifest.hpp"
#include "generator/spec/parse.hpp"
#include "runtime/error.hpp"
#include "runtime/reference/reference.hpp"
#include "runtime/weights/dtype.hpp"
#include "runtime/weights/gguf.hpp"
#include "runtime/weights/quant.hpp"
#include "runtime/weights/safetensors.hpp"

using namespace lathe;

namespace {

spec::Spec load(const std::string& path) {
  spec::Diagnostics diag(path);
  auto s = spec::parse_spec_file(path, diag);
  if (!s) throw Error(ErrorKind::BadFile, diag.format());
  return *s;
}

int convert(const std::string& hf_spec_path, const std::string& gguf_spec_path, const std::string& in,
            const std::string& out, bool allow_permute) {
  const spec::Spec hf = load(hf_spec_path), gg = load(gguf_spec_path);
  std::vector<weights::GgufTensorToWrite> tensors;
  importer::for_each_gguf_tensor(hf, gg, in, allow_permute, [&](importer::GgufTensorValues& t) {
    tensors.push_back({t.name, t.dtype, t.shape, weights::encode_values(t.dtype, t.values)});
  });
  weights::write_gguf(out, importer::gguf_metadata_from_spec(gg), tensors);
  const bool permuted = allow_permute && hf.position.pairing == spec::RopePairing::Neox &&
                        gg.position.pairing == spec::RopePairing::Interleaved;
  std::cout << out << ": " << tensors.size() << " tensors" << (permuted ? ", q/k rows interleaved" : "") << "\n";
  return 0;
}

int random(const std::string& spec_path, const std::string& out, uint64_t seed) {
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  std::vector<weights::TensorToWrite> tensors;
  for (const spec::TensorSpec& t : spec::build_manifest(load(spec_path)).tensors) {
    std::vector<float> values(static_cast<size_t>(t.elements()));
    for (float& v : values) {
      state ^= state << 13, state ^= state >> 7, state ^= state << 17;  // xorshift64
      v = (is_norm(t.role) && !t.bias ? 1.0f : 0.0f) + 0.05f * (static_cast<float>(state >> 40) / (1 << 23) - 1.0f);
    }
    tensors.push_back({t.name, t.dtype, t.shape, weights::encode_values(t.dtype, values)});
  }
  weights::write_safetensors(out, tensors);
  return 0;
}

int types(const std::string& path) {
  const weights::GgufFile file(path);
  std::cout << "general.file_type " << file.integer("general.file_type").value_or(-1) << "\n";
  for (const weights::TensorInfo& t : file.tensors()) std::cout << t.name << " " << dtype_name(t.dtype) << "\n";
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

int reference_logits(const std::string& spec_path, const std::string& path, const std::string& tokens_text,
                     const std::string& out_path) {
  const spec::Spec spec = load(spec_path);
  const weights::GgufFile file(path);
  reference::Weights w;
  for (const weights::TensorInfo& t : file.tensors()) {
    std::vector<float>& values = w.tensors[t.name];
    int64_t elements = 1;
    for (int64_t d : t.shape) elements *= d;
    values.resize(static_cast<size_t>(elements));
    if (is_block_dtype(t.dtype)) weights::dequantize(t.dtype, file.data(t), values);
    else weights::convert(t.dtype, file.data(t), DType::F32, std::as_writable_bytes(std::span(values)));
  }
  std::vector<int32_t> tokens;
  for (size_t at = 0; at < tokens_text.size();) {
    const size_t comma = std::min(tokens_text.find(',', at), tokens_text.size());
    tokens.push_back(std::stoi(tokens_text.substr(at, comma - at)));
    at = comma + 1;
  }
  reference::Reference ref(spec, w);
  const std::vector<float> logits = ref.forward(tokens);
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
  if (!out.flush()) throw Error(ErrorKind::Io, out_path + ": cannot write");
  std::cout << out_path << ": " << tokens.size() << " rows of reference logits\n";
  return 0;
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
    if (args.size() == 4 && args[0] == "random") return random(args[1], args[2], std::stoull(args[3]));
    if (args.size() == 2 && args[0] == "types") return types(args[1]);
    if (args.size() == 5 && args[0] == "reference") return reference_logits(args[1], args[2], args[3], args[4]);
    if (args.size() == 5 && args[0] == "compare")
      return compare(args[1], args[2], std::stoul(args[3]), std::stod(args[4]));
  } catch (const std::exception& e) {
    std::cerr << "lathe_gguf_twin: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: lathe_gguf_twin convert HF_SPEC GGUF_SPEC IN OUT.gguf [--no-permute] | config SPEC OUT.json | "
               "random SPEC OUT.safetensors SEED | types FILE.gguf | reference SPEC FILE.gguf TOKENS OUT.f32 | compare A.f32 B.f32 VOCAB TOLERANCE\n";
  return 2;
}
