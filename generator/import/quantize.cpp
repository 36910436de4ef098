#include "generator/import/quantize.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>
#include <memory>

#include "core/manifest.hpp"
#include "generator/import/gguf_convert.hpp"
#include "generator/import/gguf_import.hpp"
#include "generator/import/import.hpp"
#include "generator/spec/parse.hpp"
#include "runtime/error.hpp"
#include "runtime/text/tokenize/vocab_export.hpp"
#include "runtime/weights/dtype.hpp"
#include "runtime/weights/gguf.hpp"

namespace lathe::importer {

const MixtureInfo& mixture_info(Mixture m) {
  for (const MixtureInfo& info : kMixtures)
    if (info.mixture == m) return info;
  return kMixtures[0];  // unreachable: every mixture is in the table
}

std::optional<Mixture> mixture_from_key(std::string_view key) {
  for (const MixtureInfo& info : kMixtures)
    if (info.key == key) return info.mixture;
  return std::nullopt;
}

namespace {

// llama.cpp's broad tensor categories (llama-quant.cpp, tensor_get_category).
enum class Category { TokenEmbd, Output, AttnV, AttnK, AttnQ, AttnOutput, FfnUp, FfnGate, FfnDown, Other };

Category category_of(const std::string& name) {
  const auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  if (name == "output.weight") return Category::Output;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Category::TokenEmbd;
  // attn_qkv and attn_kv_b count as attn_v (llama.cpp's category_is_attn_v).
  if (has("attn_qkv.weight") || has("attn_kv_b.weight") || has("attn_v.weight")) return Category::AttnV;
  if (has("attn_k.weight")) return Category::AttnK;
  if (has("attn_q.weight")) return Category::AttnQ;
  if (has("attn_output.weight")) return Category::AttnOutput;
  if (has("ffn_up")) return Category::FfnUp;
  if (has("ffn_gate")) return Category::FfnGate;
  if (has("ffn_down")) return Category::FfnDown;
  return Category::Other;
}

// llama.cpp's tensor_allows_quantization, for the tensors of the
// architectures lathe imports.
bool quantizable(const TensorShape& t) {
  const std::string& n = t.name;
  const auto has = [&](const char* part) { return n.find(part) != std::string::npos; };
  return t.shape.size() >= 2 && n.ends_with("weight") && !has("_norm.weight") && !has("ffn_gate_inp.weight") &&
         n != "position_embd.weight" && n != "token_types.weight";
}

// The layer of "blk.<i>.…", -1 for the others.
int64_t layer_of(const std::string& name) {
  if (!name.starts_with("blk.")) return -1;
  int64_t layer = 0;
  size_t i = 4;
  if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i) layer = layer * 10 + (name[i] - '0');
  return i < name.size() && name[i] == '.' ? layer : -1;
}

// The layers llama.cpp gives more bits in its _M mixtures: the first and
// last eighth, and every third between.
bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// The state llama.cpp's choice carries from tensor to tensor.
struct Counters {
  int64_t attn_v = 0, attn_v_total = 0;
  int64_t ffn_down = 0;
  bool tied = true;  // until output.weight is seen
};

// llama_tensor_get_type_impl for the mixtures offered: the type before the
// fallback for row lengths.
DType mixture_type(Mixture mixture, const QuantizeModel& model, const TensorShape& t, Counters& c) {
  const DType base = mixture_info(mixture).base;
  if (!is_block_dtype(base)) return base;
  const bool falcon = model.arch == "falcon", k_m = mixture == Mixture::Q4_K_M || mixture == Mixture::Q5_K_M;
  const int64_t row = t.shape.back();
  const Category category = category_of(t.name);
  switch (category) {
    case Category::Output:
    case Category::TokenEmbd: {
      if (category == Category::TokenEmbd && !c.tied) return base;
      if (falcon || row % dtype_layout(base).elements != 0) return DType::Q8_0;
      return base == DType::Q8_0 ? base : DType::Q6_K;
    }
    case Category::AttnV: {
      DType type = base;
      if (k_m && use_more_bits(c.attn_v, c.attn_v_total)) type = DType::Q6_K;
      // llama.cpp's LLM_TYPE_70B: attn_v is 8× smaller than attn_q there.
      const bool llama_70b = model.arch == "llama" && model.layers == 80 && model.heads != model.kv_heads;
      if (llama_70b && type == DType::Q4_K) type = DType::Q5_K;
      if (model.experts == 8) type = DType::Q8_0;
      ++c.attn_v;
      return type;
    }
    case Category::AttnK: return model.experts == 8 ? DType::Q8_0 : base;
    case Category::FfnDown: {
      // MoE files: the layer from the name (experts are not in layer order).
      const int64_t i = model.experts > 1 ? layer_of(t.name) : c.ffn_down, n = model.layers;
      ++c.ffn_down;
      if (mixture == Mixture::Q4_K_M && falcon)
        return i < n / 16 ? DType::Q6_K : use_more_bits(i, n) ? DType::Q5_K : DType::Q4_K;
      return k_m && use_more_bits(i, n) ? DType::Q6_K : base;
    }
    case Category::AttnOutput:
      return mixture == Mixture::Q4_K_M && !falcon && model.experts == 8 ? DType::Q5_K : base;
    default: return base;
  }
}

// llama.cpp's tensor_type_fallback: a type whose block does not divide the rows.
DType fallback(const TensorShape& t, DType type) {
  const int64_t row = t.shape.back();
  if (row % dtype_layout(type).elements == 0) return type;
  DType next;
  switch (type) {
    case DType::Q4_K: next = DType::Q5_0; break;
    case DType::Q5_K: next = DType::Q5_1; break;
    case DType::Q6_K: next = DType::Q8_0; break;
    default:
      throw Error(ErrorKind::InvalidArgument, t.name + ": rows of " + std::to_string(row) + " values are not whole " +
                                                  std::string(spelling(type).enumerator) + " blocks of " +
                                                  std::to_string(dtype_layout(type).elements) +
                                                  " (llama.cpp has no fallback for this type either)");
  }
  return row % dtype_layout(next).elements == 0 ? next : DType::F16;
}

// llama.cpp's loader order: by layer (non-layer tensors first), then name.
bool loader_order(const TensorShape* a, const TensorShape* b) {
  const int64_t la = layer_of(a->name), lb = layer_of(b->name);
  return la != lb ? la < lb : a->name < b->name;
}

}  // namespace

std::map<std::string, DType> choose_dtypes(Mixture mixture, const QuantizeModel& model,
                                           const std::vector<TensorShape>& tensors) {
  std::vector<const TensorShape*> order;
  Counters c;
  for (const TensorShape& t : tensors) {
    order.push_back(&t);
    if (category_of(t.name) == Category::AttnV) ++c.attn_v_total;
    if (category_of(t.name) == Category::Output) c.tied = false;
  }
  std::sort(order.begin(), order.end(), loader_order);
  std::map<std::string, DType> chosen;
  for (const TensorShape* t : order) {
    if (t->shape.size() < 2) chosen[t->name] = DType::F32;
    else if (!quantizable(*t)) chosen[t->name] = t->dtype;
    else chosen[t->name] = fallback(*t, mixture_type(mixture, model, *t, c));
  }
  return chosen;
}

namespace {

using Metadata = std::map<std::string, weights::GgufValue>;

int64_t metadata_count(const Metadata& m, const std::string& key) {
  const auto it = m.find(key);
  if (it == m.end()) return 0;
  return std::visit(
      [](const auto& v) -> int64_t {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) return static_cast<int64_t>(v);
        else return 0;
      },
      it->second.value);
}

QuantizeModel model_of(const Metadata& m) {
  QuantizeModel model;
  if (const auto it = m.find("general.architecture"); it != m.end())
    if (const auto* s = std::get_if<std::string>(&it->second.value)) model.arch = *s;
  const std::string a = model.arch + ".";
  model.layers = metadata_count(m, a + "block_count");
  model.experts = metadata_count(m, a + "expert_count");
  model.heads = metadata_count(m, a + "attention.head_count");
  model.kv_heads = metadata_count(m, a + "attention.head_count_kv");
  return model;
}

// A model about to be quantized: its metadata, its tensors' shapes, and a
// way to read them as f32 one at a time.
struct Source {
  Metadata metadata;
  std::vector<TensorShape> tensors;
  std::function<void(const std::function<void(importer::GgufTensorValues&)>&)> for_each;
  std::string vocabulary;  // the tokenizer written into the metadata, or why none
};

Source gguf_source(const std::string& path) {
  // Shared with the reader below, which outlives this function.
  const auto file = std::make_shared<const weights::GgufFile>(path);
  Source s;
  for (const auto& [key, value] : file->metadata())
    if (key != "general.alignment") s.metadata[key] = value;  // written at 32
  for (const weights::TensorInfo& t : file->tensors()) {
    if (is_block_dtype(t.dtype))
      throw Error(ErrorKind::Unsupported, path + ": " + t.name + " is " + std::string(dtype_name(t.dtype)) +
                                              " already; lathe quantize reads f32, f16 and bf16 tensors");
    s.tensors.push_back({t.name, t.shape, t.dtype});
  }
  s.for_each = [file](const std::function<void(importer::GgufTensorValues&)>& emit) {
    for (const weights::TensorInfo& t : file->tensors()) {
      importer::GgufTensorValues v{t.name, t.shape, t.dtype, std::vector<float>(t.bytes / weights::dtype_size(t.dtype))};
      weights::convert(t.dtype, file->data(t), DType::F32, std::as_writable_bytes(std::span(v.values)));
      emit(v);
    }
  };
  return s;
}

// A checkpoint of `hf` as llama.cpp's converter writes it (gguf_twin,
// gguf_metadata_from_spec, for_each_gguf_tensor), with the tokenizer of
// the checkpoint's directory.
Source checkpoint_source(const spec::Spec& hf, const std::string& checkpoint) {
  const spec::Spec gg = gguf_twin(hf);
  Source s;
  s.metadata = gguf_metadata_from_spec(gg);
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::is_directory(checkpoint, ec)
                                        ? std::filesystem::path(checkpoint)
                                        : std::filesystem::path(checkpoint).parent_path();
  text::GgufVocabulary vocabulary = text::gguf_vocabulary(dir.empty() ? "." : dir.string(), hf.dims.vocab);
  s.metadata.merge(vocabulary.metadata);
  s.vocabulary = std::move(vocabulary.summary);
  for (const spec::TensorSpec& t : spec::build_manifest(gg).tensors) s.tensors.push_back({t.name, t.shape, t.dtype});
  s.for_each = [hf, gg, checkpoint](const std::function<void(importer::GgufTensorValues&)>& emit) {
    for_each_gguf_tensor(hf, gg, checkpoint, /*permute=*/true, emit);
  };
  return s;
}

// A Hugging Face directory (or its config.json): the spec lathe import
// reads from the config, the checkpoint beside it.
Source hf_source(const std::string& path) {
  const ImportResult imported = import_model_config(path);  // its warnings go to stderr
  if (!imported.checkpoint)
    throw Error(ErrorKind::NotFound, path + ": no checkpoint (model.safetensors or its index) beside the config");
  return checkpoint_source(imported.spec, imported.checkpoint->path);
}

// A spec of lathe's and a checkpoint of it.
Source spec_source(const std::string& path, const std::string& weights) {
  spec::Diagnostics diag(path);
  const std::optional<spec::Spec> spec = spec::parse_spec_file(path, diag);
  if (!spec) throw Error(ErrorKind::BadFile, diag.format());
  return checkpoint_source(*spec, weights);
}

}  // namespace

QuantizeResult quantize_model(const std::string& in, const std::string& out, Mixture mixture,
                              const std::string& weights, const QuantizeProgress& progress) {
  const std::string extension = std::filesystem::path(in).extension().string();
  if ((extension == ".toml") == weights.empty())
    throw Error(ErrorKind::InvalidArgument, extension == ".toml" ? in + ": a spec needs its checkpoint (--weights)"
                                                                 : "--weights goes with a spec (.toml), not " + in);
  Source source = extension == ".gguf" ? gguf_source(in) : extension == ".toml" ? spec_source(in, weights) : hf_source(in);
  const QuantizeModel model = model_of(source.metadata);
  if (model.layers <= 0 && (mixture == Mixture::Q4_K_M || mixture == Mixture::Q5_K_M))
    throw Error(ErrorKind::InvalidArgument, in + ": no general.architecture / <arch>.block_count: the " +
                                                std::string(mixture_info(mixture).key) +
                                                " mixture picks its Q6_K layers by the layer count");
  const std::map<std::string, DType> chosen = choose_dtypes(mixture, model, source.tensors);
  source.metadata["general.file_type"] = mixture_info(mixture).file_type;
  source.metadata["general.quantization_version"] = uint32_t{2};  // GGML_QNT_VERSION

  QuantizeResult result;
  result.vocabulary = source.vocabulary;
  std::vector<weights::GgufTensorToWrite> tensors;
  source.for_each([&](importer::GgufTensorValues& t) {
    if (progress) progress(tensors.size(), source.tensors.size(), t.name);
    const auto it = chosen.find(t.name);
    const DType dtype = it != chosen.end() ? it->second : DType::F32;  // rope_freqs.weight: 1-D, f32
    tensors.push_back({t.name, dtype, t.shape, weights::encode_values(dtype, t.values)});
    ++result.tensors[dtype];
    result.bytes += tensors.back().data.size();
  });
  weights::write_gguf(out, source.metadata, tensors);
  return result;
}

}  // namespace lathe::importer
