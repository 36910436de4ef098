#include "generator/import/gguf_convert.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>

#include "core/manifest.hpp"
#include "generator/import/gguf_import.hpp"
#include "runtime/error.hpp"
#include "runtime/weights/checkpoint.hpp"
#include "runtime/weights/dtype.hpp"

namespace lathe::importer {

namespace {


// [in, out] → [out, in] (square ones too).
std::vector<float> transpose(const std::vector<float>& v, int64_t rows, int64_t cols) {
  std::vector<float> out(v.size());
  for (int64_t i = 0; i < cols; ++i)
    for (int64_t o = 0; o < rows; ++o) out[static_cast<size_t>(o * cols + i)] = v[static_cast<size_t>(i * rows + o)];
  return out;
}

// GPT-NeoX's and BLOOM's per-head, Falcon's grouped q/k/v rows: q | k | v.
std::vector<float> qkv_blocks(const std::vector<float>& v, int64_t rows, int64_t cols, const spec::Spec& hf) {
  std::vector<float> out(v.size());
  for (int64_t r = 0; r < rows; ++r)
    std::copy_n(&v[static_cast<size_t>(r * cols)], cols,
                &out[static_cast<size_t>(
                    qkv_blocks_row(hf.weights.qkv_layout, r, hf.dims.heads, hf.dims.kv_heads, hf.dims.head_dim) * cols)]);
  return out;
}

// deepseek2's kv_b_proj [H·(nope + v)][rank] (each head's W_UK rows, then
// its W_UV rows) as llama.cpp's converter splits it: k_b [H][rank][nope],
// each W_UK transposed (`keys`), or v_b [H][v][rank].
std::vector<float> split_kv_b(const std::vector<float>& kv, bool keys, const spec::Mla& m, int64_t heads) {
  const int64_t nope = m.qk_nope_head_dim, rank = m.kv_lora_rank, vd = m.v_head_dim;
  std::vector<float> out(static_cast<size_t>(heads * rank * (keys ? nope : vd)));
  for (int64_t h = 0; h < heads; ++h) {
    const float* head = kv.data() + h * (nope + vd) * rank;
    if (keys) {
      for (int64_t j = 0; j < rank; ++j)
        for (int64_t i = 0; i < nope; ++i) out[static_cast<size_t>((h * rank + j) * nope + i)] = head[i * rank + j];
    } else {
      std::copy_n(head + nope * rank, vd * rank, out.begin() + h * vd * rank);
    }
  }
  return out;
}

}  // namespace

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

void for_each_gguf_tensor(const spec::Spec& hf, const spec::Spec& gg, const std::string& in, bool permute,
                          const std::function<void(GgufTensorValues&)>& emit) {
  permute = permute && hf.position.pairing == spec::RopePairing::Neox &&
            gg.position.pairing == spec::RopePairing::Interleaved;
  if (permute && hf.position.rotary_dim != hf.dims.head_dim)
    throw Error(ErrorKind::InvalidArgument,
                "the q/k permutation covers whole heads: rotary_dim must be head_dim (llama.cpp's converter permutes "
                "whole heads also for a partial rotary, as Bamba's; its adjacent pairs then join rotated dims to "
                "unrotated ones, which is no rotate-half model)");
  using Key = std::tuple<Role, bool, int64_t, int64_t>;
  std::map<Key, spec::TensorSpec> hf_tensors;
  for (const spec::TensorSpec& t : spec::build_manifest(hf).tensors) hf_tensors[{t.role, t.bias, t.layer, t.expert}] = t;

  const weights::Checkpoint checkpoint(in);
  // Stacked experts (llama.cpp's ffn_*_exps): each layer's slices gathered,
  // [experts][rows][cols], and emitted with the last one.
  std::map<std::string, GgufTensorValues> stacks;
  for (const spec::TensorSpec& t : spec::build_manifest(gg).tensors) {
    // deepseek2's k_b and v_b: halves of the HF checkpoint's kv_b_proj.
    const bool split = t.role == Role::KB || t.role == Role::VB;
    auto it = hf_tensors.find({split ? Role::KvB : t.role, t.bias, t.layer, t.expert});
    if (it == hf_tensors.end() && t.role == Role::LmHead && hf.embedding.tied) it = hf_tensors.find({Role::Embed, false, -1, -1});
    if (it == hf_tensors.end()) throw Error(ErrorKind::InvalidArgument, t.name + ": the HF spec has no such tensor");
    const weights::Checkpoint::Tensor* source = checkpoint.find(it->second.name);
    if (source == nullptr) throw Error(ErrorKind::NotFound, in + ": no tensor " + it->second.name);
    GgufTensorValues out{t.name, t.shape, t.dtype, std::vector<float>(static_cast<size_t>(t.elements()))};
    std::vector<float>& values = out.values;
    if (split) {
      std::vector<float> kv(static_cast<size_t>(it->second.elements()));
      weights::convert(source->info->dtype, source->file->data(*source->info), DType::F32,
                       std::as_writable_bytes(std::span(kv)));
      values = split_kv_b(kv, t.role == Role::KB, hf.mla, hf.dims.heads);
      out.shape = {hf.dims.heads, t.shape[0] / hf.dims.heads, t.shape[1]};  // a head a slice, as the converter writes them
    } else {
      weights::convert(source->info->dtype, source->file->data(*source->info), DType::F32,
                       std::as_writable_bytes(std::span(values)));
    }
    const int64_t rows = t.shape[0], cols = t.shape.size() == 2 ? t.shape[1] : 1;
    if (is_linear(t.role) && t.shape.size() == 2 && hf.weights.layout != gg.weights.layout) {
      if (it->second.shape != std::vector<int64_t>{cols, rows})
        throw Error(ErrorKind::InvalidArgument, t.name + ": the HF shape is not this one transposed");
      values = transpose(values, rows, cols);
    }
    if (permute && (t.role == Role::Q || t.role == Role::K)) values = interleave_rows(values, rows, cols, hf.dims.head_dim);
    if (t.role == Role::Qkv && hf.weights.qkv_layout != gg.weights.qkv_layout) values = qkv_blocks(values, rows, cols, hf);
    if (hf.norm.unit_offset && !gg.norm.unit_offset && is_norm(t.role) && !t.bias)
      for (float& v : values) v += 1.0f;
    // llama.cpp's Mamba files: A itself (−exp(A_log)); Mamba-2's A and D
    // as [heads, 1], its grouped norm as [groups, d_inner / groups].
    if (t.role == Role::SsmA && hf.ssm.a_log && !gg.ssm.a_log)
      for (float& v : values) v = -std::exp(v);
    if (gg.weights.preset == "gguf" && gg.ssm.mamba2()) {
      if (t.role == Role::SsmA || t.role == Role::SsmD) out.shape = {rows, 1};
      if (t.role == Role::SsmGateNorm) out.shape = {gg.ssm.groups, gg.ssm.d_inner / gg.ssm.groups};
    }
    if (t.slice < 0) {
      emit(out);
      continue;
    }
    GgufTensorValues& stack = stacks[t.name];
    if (t.slice == 0) {
      stack = std::move(out);
      stack.shape.insert(stack.shape.begin(), 1);
    } else {
      if (stack.shape.empty() || stack.shape[0] != t.slice)
        throw std::logic_error("gguf_convert: " + t.name + ": the experts' slices out of order");
      stack.values.insert(stack.values.end(), values.begin(), values.end());
      ++stack.shape[0];
    }
    if (stack.shape[0] == gg.moe.experts) {
      emit(stack);
      stacks.erase(t.name);
    }
  }
  if (gg.position.kind == spec::PositionKind::Rope && gg.position.scaling.kind == spec::RopeScaling::Llama3) {
    // The converter's dim is head_dim (not rope.dimension_count).
    std::vector<float> factors = llama3_rope_freqs(gg.position.scaling, gg.position.theta, gg.dims.head_dim);
    GgufTensorValues freqs{"rope_freqs.weight", {static_cast<int64_t>(factors.size())}, DType::F32, std::move(factors)};
    emit(freqs);
  }
}

}  // namespace lathe::importer
