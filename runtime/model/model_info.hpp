// What a generated model library tells the generic runtime about itself.
// Each library built by lathe_add_model defines lathe::model_info().
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "core/contract.hpp"
#include "core/plan.hpp"

namespace lathe {

// One SPIR-V module of a kernel instance.
struct KernelModule {
  std::string_view file;  // its shaders/ source
  const uint32_t* spirv;
  size_t words;
};

// One compiled kernel instance of the model: a module, or a matmul's one
// per layout its plan's device classes run.
struct KernelBinary {
  static constexpr uint8_t kNone = 0xff;
  std::string_view name;  // "norm_576"
  std::span<const KernelModule> modules;
  // Matmul: the module of each layout (kernels::Layout; kNone: no class
  // runs it). Every other family: module 0 for all.
  std::array<uint8_t, kernels::kLayouts> layout_module{};
  size_t push_size;  // bytes of its push-constant struct
  // The module a pass in `layout` runs; throws std::logic_error where the
  // generator compiled none (a plan's class runs a layout it did not plan).
  const KernelModule& module(kernels::Layout layout) const;
};

struct ModelInfo {
  std::string_view name;
  std::string_view spec_file;
  int64_t hidden, layers, heads, kv_heads, head_dim, intermediate, vocab, max_context;
  int64_t experts, top_k;  // a mixture of experts' routed experts and experts per token (0, 0: dense)
  int64_t total_params;
  Layout layout;
  QkvLayout qkv_layout;  // the fused q/k/v tensor's rows as stored (the upload reorders them)
  DType cache_dtype;  // KV cache elements: F16 or F32
  std::span<const ManifestEntry> manifest;
  std::span<const std::string_view> ignored_tensors;  // name patterns the audit tolerates
  // Tensors the checkpoint holds that no build reads (a vision tower's
  // layers past its feature layer), with their shapes: random weights write
  // them, so that a random checkpoint is laid out as a real one.
  std::span<const ManifestEntry> unread_tensors;
  plan::Plan plan;                        // what the session allocates, binds, records and submits
  std::span<const KernelBinary> kernels;  // the SPIR-V of plan.kernels, index for index
  // An encoder (model.stack = "encoder"): bidirectional attention over one
  // input a pass, and an output of the final hidden states, not logits.
  bool encoder = false;
  int64_t output_width = 0;  // an output row's values: vocab (logits), or hidden (an encoder's states)
  Pooling pooling = Pooling::None;  // an encoder's sentence embedding (embed, /v1/embeddings)
  bool pool_normalize = false;      // … divided by its L2 norm
  // An encoder–decoder (model.stack = "encoder-decoder"): `layers` decoder
  // layers after `encoder_layers` encoder layers; encode() fills a
  // sequence's cross-attention caches from its source, then prefill and
  // decode run the decoder, starting from decoder_start.
  bool encoder_decoder = false;
  int64_t encoder_layers = 0;
  int64_t cache_layers = 0;  // the KV caches of a sequence: the plan's cache layers (core/spec.hpp)
  int32_t decoder_start = -1;
  // A state-space model's checkpoint holds A_log (A = −exp(A_log)), or A
  // itself (llama.cpp's ssm_a): what random weights must draw.
  bool ssm_a_log = true;
  // A decoder of a [vision] splice: how its prompts hold the rows of its
  // tower's build (vision_info()). Null: it takes no images.
  const plan::VisionLink* vision = nullptr;
};

const ModelInfo& model_info();
// The build of its vision tower ([vision] splice): an encoder whose input
// rows are an image's unfolded patches and whose output rows, of the
// decoder's width, are spliced into its prompt. Null: the model has none.
const ModelInfo* vision_info();
// The build of its draft (`lathe gen --draft`, `lathe build --draft`): a
// smaller decoder of the same vocabulary whose proposals the model verifies
// (speculative decoding, docs/speculative.md). Null: the build has none.
const ModelInfo* draft_info();

}  // namespace lathe
