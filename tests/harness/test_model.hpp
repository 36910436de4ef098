// The tiny model a model-test binary is linked with (its model_info() names
// the spec), its random test weights and the checks both the decoder and the
// encoder tests make: included by one test source per binary.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/manifest.hpp"
#include "generator/spec/parse.hpp"
#include "runtime/model/session.hpp"
#include "runtime/reference/reference.hpp"
#include "runtime/weights/dtype.hpp"
#include "runtime/weights/gguf.hpp"
#include "tests/harness/vulkan_harness.hpp"

namespace lathe::test {

inline const spec::Spec& test_spec() {
  static const spec::Spec s = [] {
    const std::string path = test::source_dir(LATHE_SOURCE_DIR) + "/" + std::string(model_info().spec_file);
    spec::Diagnostics diag(path);
    auto parsed = spec::parse_spec_file(path, diag);
    REQUIRE_MESSAGE(parsed, diag.format());
    return *parsed;
  }();
  return s;
}

// The tolerance of device logits against the double-precision reference:
// f32 accumulation, and an f16 KV cache where the spec asks for one.
// A class whose decode runs the dot layout quantizes every matmul's input of
// block weights to 8-bit blocks (llama.cpp's q8_1 activations): measured on
// lavapipe, the worst row of the forced-class test per tiny quantized spec
// (cpu-dot, gpu-dot): q4_0 0.049, 0.047; q4_1 0.040, 0.042; q4_k 0.041,
// 0.044; q4_k_m 0.041, 0.041; q5_0 0.032, 0.032; q5_1 0.029, 0.027; q5_k
// 0.034, 0.035; q5_k_m 0.035, 0.033; q6_k 0.027, 0.027; q8_0 0.028, 0.029.
// Random weights carry the error of each layer's inputs through the next
// (a trained model's logits move far less: bench/README.md's perplexities).
// Twice the worst.
constexpr double kDotTolerance = 0.1;
// A coop class's prompts multiply on matrix units in f16 (x and f32 or
// bf16 weights rounded to it, f32 sums). Measured on an H200 (2026-11-27,
// bench/gpu/results), the worst row of the forced-class test: llama_gqa
// 0.0027, quant_q4_k_m 0.0056, qwen3_moe 0.0012 (gpu-basic's 0.0023, 0.0020,
// 0.0005); a prompt against the same tokens decoded one at a time up to
// 0.0024. Twice the worst.
constexpr double kCoopTolerance = 0.012;
inline bool rounds_prompts_to_f16(const plan::DeviceClass& c) {
  return plan::uses(c, plan::Variant::Coop) || plan::uses(c, plan::Variant::CoopKhr);
}
inline double tolerance(const plan::DeviceClass* c) {
  if (c && plan::uses(*c, plan::Variant::Dot)) return kDotTolerance;
  if (c && rounds_prompts_to_f16(*c)) return std::max(kCoopTolerance, tolerance(nullptr));
  return model_info().cache_dtype == DType::F16 ? 5e-3 : 5e-4;
}
// A session's tolerance: its class's, as the runtime chose it (the class
// LATHE_DEVICE_CLASS or the options name, else the first the device meets:
// a dot class is a GPU's default where met; the 2026-11-27 lease found the
// default-class tests held to the exact path's tolerance).
inline double tolerance(const Session& session) { return tolerance(&session.device_class()); }

// The blocks of each block-dtype tensor, quantized from the random weights
// (test_weights() fills it).
inline std::map<std::string, std::vector<std::byte>>& quantized_blocks() {
  static std::map<std::string, std::vector<std::byte>> blocks;
  return blocks;
}

// Random weights, rounded to each tensor's manifest dtype so that the
// reference sees exactly the values the device holds.
inline const reference::Weights& test_weights() {
  static const reference::Weights w = [] {
    reference::Weights r = reference::random_weights(test_spec(), 1234, 0.25f);
    // (A vision tower's tensors too: its build uploads them from the same weights.)
    std::vector<spec::TensorSpec> tensors = spec::build_manifest(test_spec()).tensors;
    for (spec::TensorSpec& t : spec::build_vision_manifest(test_spec()).tensors) tensors.push_back(std::move(t));
    for (const spec::TensorSpec& t : tensors) {
      // Vectors go to the device as f32; matrices (a patch embedding's rank-4
      // convolution among them) in their dtype.
      if (t.shape.size() != 2 && t.shape.size() != 4) continue;
      if (t.slice > 0) continue;            // a stacked tensor is rounded whole, at its first slice
      std::vector<float>& values = r.tensors.at(t.name);
      if (is_block_dtype(t.dtype)) {  // ggml's blocks, kept on the device: the reference reads their values
        const std::vector<std::byte>& blocks = quantized_blocks()[t.name] = weights::quantize(t.dtype, values);
        weights::dequantize(t.dtype, blocks, values);
      }
      for (float& v : values) {
        if (t.dtype == DType::F16) v = weights::f16_to_f32(weights::f32_to_f16(v));
        if (t.dtype == DType::BF16) v = weights::bf16_to_f32(weights::f32_to_bf16(v));
      }
    }
    return r;
  }();
  return w;
}

// A manifest entry's test weights: its tensor, or its slice of a stacked one.
inline std::span<const float> entry_values(const ManifestEntry& e) {
  return test_weights().of(std::string(e.name), e.slice, e.elements());
}

inline void upload_all(Session& session) {
  const ModelInfo& m = session.model();
  test_weights();  // quantizes the block tensors
  for (size_t i = 0; i < m.manifest.size(); ++i) {
    const ManifestEntry& e = m.manifest[i];
    if (is_block_dtype(e.dtype)) {  // the blocks the reference's values came from (a stacked tensor's slice)
      const std::vector<std::byte>& blocks = quantized_blocks().at(std::string(e.name));
      const size_t bytes = weights::block_bytes(e.dtype, static_cast<size_t>(e.elements()));
      session.upload(i, e.dtype, std::span(blocks).subspan(static_cast<size_t>(std::max(e.slice, 0)) * bytes, bytes));
    } else {
      session.upload(i, DType::F32, std::as_bytes(entry_values(e)));
    }
  }
}

inline std::vector<int32_t> random_tokens(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(model_info().vocab - 1));
  std::vector<int32_t> out(n);
  for (int32_t& t : out) t = pick(rng);
  return out;
}

// ‖a − b‖₂ / ‖b‖₂ over one row of logits.
inline double normalized_error(const float* a, const float* b, size_t n) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < n; ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

// The worst normalized_error over the rows of two [rows][V] logit arrays.
inline double worst_row_error(const std::vector<float>& a, const std::vector<float>& b, size_t V) {
  double worst = 0;
  for (size_t t = 0; t * V < std::min(a.size(), b.size()); ++t)
    worst = std::max(worst, normalized_error(&a[t * V], &b[t * V], V));
  return worst;
}

// `steps` greedy decode steps of sequence 0 from `token`, each row against
// the reference's (whose cache holds what the session's does), the next
// token the reference's pick.
inline void check_greedy_steps(Session& session, reference::Reference& ref, int32_t token, int steps) {
  const size_t V = static_cast<size_t>(model_info().vocab);
  for (int step = 0; step < steps; ++step) {
    CAPTURE(step);
    const std::vector<float> row = session.decode(token);
    const std::vector<float> want = ref.forward({token});
    REQUIRE(want.size() == V);
    CHECK(normalized_error(row.data(), want.data(), V) < tolerance(session));
    token = static_cast<int32_t>(std::max_element(want.begin(), want.end()) - want.begin());
  }
}

}  // namespace lathe::test
