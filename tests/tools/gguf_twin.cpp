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
//   lathe_gguf_twin mmproj HF_SPEC IN OUT.gguf DTYPE
//     The mmproj file llama.cpp's converter writes from IN (a checkpoint
//     directory of HF_SPEC, a [vision] splice of LLaVA's, Gemma 3's or
//     Pixtral's kind, its preprocessor_config.json giving the mean and std):
//     clip.* metadata and the tower's and projector's tensors under
//     llama.cpp's names, matrices in DTYPE with the converter's exceptions
//     (importer::for_each_mmproj_tensor).
//   lathe_gguf_twin pair HF_SPEC TEXT_DTYPE DTYPE IMPORTED.toml
//     The spec `lathe import TEXT.gguf --mmproj MMPROJ.gguf` wrote
//     (IMPORTED.toml) against HF_SPEC as the pair states it
//     (importer::mmproj_twin, the text file's matrices in TEXT_DTYPE, the
//     mmproj's in DTYPE): every difference a line, exit 1 when any.
//   lathe_gguf_twin edit IN.gguf OUT.gguf EDIT...
//     A copy of IN.gguf with each EDIT made: KEY=TEXT sets a string key,
//     KEY:bool=true|false a bool key, KEY:vocab=TOKENIZER.json an array of
//     the tokenizer's token texts by id (a text file's tokenizer.ggml.tokens,
//     where lathe quantize writes no vocabulary), -TENSOR leaves the tensor
//     out (the tests of what a bad mmproj file is told).
//   lathe_gguf_twin config SPEC OUT.json
//     The Hugging Face config.json of SPEC: beside a checkpoint of SPEC, a
//     model directory as transformers writes one (for `lathe run DIR`).
//   lathe_gguf_twin random SPEC OUT.safetensors SEED
//     A checkpoint of SPEC's manifest (and its tower's) in its dtypes, values uniform in
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
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "generator/import/gguf_convert.hpp"
#include "generator/import/gguf_import.hpp"
#include "generator/import/gguf_mmproj.hpp"
#include "generator/spec/compare.hpp"
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

DType dtype_of(const std::string& key) {
  if (const std::optional<DType> d = from_key<DType>(key)) return *d;
  throw Error(ErrorKind::InvalidArgument, "'" + key + "' is not a dtype (f32, f16, bf16)");
}

int mmproj(const std::string& hf_spec_path, const std::string& in, const std::string& out, const std::string& dtype_key) {
  const spec::Spec hf = load(hf_spec_path);
  const DType dtype = dtype_of(dtype_key);
  // The image processor's statistics, which the converter copies.
  std::ifstream config((std::filesystem::path(in) / "preprocessor_config.json").string());
  const nlohmann::json processor = nlohmann::json::parse(config, nullptr, false);
  if (!processor.is_object() || !processor.contains("image_mean") || !processor.contains("image_std"))
    throw Error(ErrorKind::BadFile, in + ": no preprocessor_config.json with image_mean and image_std");
  const auto triple = [&](const char* key) {
    const auto v = processor[key].get<std::vector<double>>();
    return std::array<double, 3>{v.at(0), v.at(1), v.at(2)};
  };
  std::vector<weights::GgufTensorToWrite> tensors;
  importer::for_each_mmproj_tensor(hf, dtype, in, [&](importer::GgufTensorValues& t) {
    tensors.push_back({t.name, t.dtype, t.shape, weights::encode_values(t.dtype, t.values)});
  });
  weights::write_gguf(out, importer::mmproj_metadata_from_spec(hf, dtype, triple("image_mean"), triple("image_std")),
                      tensors);
  std::cout << out << ": " << tensors.size() << " tensors\n";
  return 0;
}

int pair(const std::string& hf_spec_path, const std::string& text_dtype, const std::string& dtype,
         const std::string& imported_path) {
  spec::Spec twin = importer::mmproj_twin(load(hf_spec_path), dtype_of(dtype));
  twin.weights.dtype = dtype_of(text_dtype);
  const std::vector<std::string> differences = spec::spec_differences(load(imported_path), twin);
  for (const std::string& d : differences) std::cout << d << "\n";
  std::cout << imported_path << ": " << differences.size() << " differences from the pair's twin of " << hf_spec_path
            << "\n";
  return differences.empty() ? 0 : 1;
}

// A tokenizer.json's token texts by id: its model's vocabulary, then its added tokens.
weights::GgufValue vocab_texts(const std::string& path) {
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("model") || !j["model"].contains("vocab") || !j["model"]["vocab"].is_object())
    throw Error(ErrorKind::BadFile, path + ": no model.vocab object");
  std::map<int64_t, std::string> by_id;
  for (const auto& [text, id] : j["model"]["vocab"].items()) by_id[id.get<int64_t>()] = text;
  if (j.contains("added_tokens"))
    for (const nlohmann::json& t : j["added_tokens"]) by_id[t["id"].get<int64_t>()] = t["content"].get<std::string>();
  std::vector<std::string> texts;
  for (const auto& [id, text] : by_id) {
    if (id != static_cast<int64_t>(texts.size())) throw Error(ErrorKind::BadFile, path + ": token ids have a gap");
    texts.push_back(text);
  }
  return weights::GgufValue::strings(texts);
}

int edit(const std::string& in, const std::string& out, const std::vector<std::string>& edits) {
  const weights::GgufFile file(in);
  std::map<std::string, weights::GgufValue> metadata(file.metadata().begin(), file.metadata().end());
  std::set<std::string> dropped;
  for (const std::string& e : edits) {
    const size_t eq = e.find('=');
    if (e.starts_with("-")) dropped.insert(e.substr(1));
    else if (eq != std::string::npos && e.substr(0, eq).ends_with(":bool")) metadata[e.substr(0, eq - 5)] = e.substr(eq + 1) == "true";
    else if (eq != std::string::npos && e.substr(0, eq).ends_with(":vocab")) metadata[e.substr(0, eq - 6)] = vocab_texts(e.substr(eq + 1));
    else if (eq != std::string::npos) metadata[e.substr(0, eq)] = e.substr(eq + 1);
    else throw Error(ErrorKind::InvalidArgument, "edit: '" + e + "' is not KEY=TEXT, KEY:bool=VALUE or -TENSOR");
  }
  std::vector<weights::GgufTensorToWrite> tensors;
  for (const weights::TensorInfo& t : file.tensors()) {
    if (dropped.erase(t.name)) continue;
    const std::span<const std::byte> data = file.data(t);
    tensors.push_back({t.name, t.dtype, t.shape, std::vector<std::byte>(data.begin(), data.end())});
  }
  if (!dropped.empty()) throw Error(ErrorKind::InvalidArgument, in + ": no tensor " + *dropped.begin());
  metadata.erase("general.alignment");
  weights::write_gguf(out, metadata, tensors);
  return 0;
}

int random(const std::string& spec_path, const std::string& out, uint64_t seed) {
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  std::vector<weights::TensorToWrite> tensors;
  const spec::Spec spec = load(spec_path);
  std::vector<spec::TensorSpec> manifest = spec::build_manifest(spec).tensors;
  for (spec::TensorSpec& t : spec::build_vision_manifest(spec).tensors) manifest.push_back(std::move(t));
  for (const spec::TensorSpec& t : manifest) {
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
    if (args.size() == 5 && args[0] == "mmproj") return mmproj(args[1], args[2], args[3], args[4]);
    if (args.size() >= 4 && args[0] == "edit") return edit(args[1], args[2], {args.begin() + 3, args.end()});
    if (args.size() == 5 && args[0] == "pair") return pair(args[1], args[2], args[3], args[4]);
    if (args.size() == 4 && args[0] == "random") return random(args[1], args[2], std::stoull(args[3]));
    if (args.size() == 2 && args[0] == "types") return types(args[1]);
    if (args.size() == 5 && args[0] == "reference") return reference_logits(args[1], args[2], args[3], args[4]);
    if (args.size() == 5 && args[0] == "compare")
      return compare(args[1], args[2], std::stoul(args[3]), std::stod(args[4]));
  } catch (const std::exception& e) {
    std::cerr << "lathe_gguf_twin: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: lathe_gguf_twin convert HF_SPEC GGUF_SPEC IN OUT.gguf [--no-permute] | mmproj HF_SPEC IN OUT.gguf DTYPE | pair "
               "HF_SPEC TEXT_DTYPE DTYPE IMPORTED.toml | edit IN.gguf OUT.gguf EDIT... | config SPEC OUT.json | "
               "random SPEC OUT.safetensors SEED | types FILE.gguf | reference SPEC FILE.gguf TOKENS OUT.f32 | compare A.f32 B.f32 VOCAB TOLERANCE\n";
  return 2;
}
