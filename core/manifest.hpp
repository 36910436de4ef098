// The weight manifest: every tensor the spec's checkpoint holds, with its
// exact name, stored shape and dtype. The report counts it, the emitter writes
// it as constexpr data, the loaders audit checkpoints against it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/spec.hpp"

namespace lathe::spec {

struct TensorSpec {
  Role role;
  bool bias = false;    // "<path>.bias" rather than "<path>.weight"
  int64_t layer = -1;   // -1: not per layer
  int64_t expert = -1;  // -1: not per expert
  std::string name;     // the checkpoint's tensor name
  // ≥ 0: index `slice` of dim 0 of the stacked tensor `name`, when the
  // expert role's name has no {expert} (llama.cpp's ffn_*_exps).
  int64_t slice = -1;
  std::vector<int64_t> shape;  // as stored: [out, in], or [in, out] where in_out
  // A matrix stored [in, out] (an in_out layout's linears, Gemma 3's
  // mm_input_projection_weight): the device holds it transposed.
  bool in_out = false;
  DType dtype = DType::F32;
  int64_t elements() const;
};

// Vision: a vision tower's own tensors (patch embedding, class token, tile
// positions) and its projector's.
enum class Component { Embedding, Attention, Mlp, Experts, Norms, LmHead, Ssm, Vision };
const char* name(Component);
Component component_of(Role);
using lathe::is_linear;  // core/contract.hpp: the roles in_out layouts store transposed

struct Manifest {
  std::vector<TensorSpec> tensors;
  int64_t total_elements() const;
};

// The tensors of `spec` in checkpoint order (globals, then layer by layer).
// A role without a name gets "<unnamed role>"; validate() reports those.
Manifest build_manifest(const Spec& spec);

// The manifest as a build's constexpr one reads it (core/contract.hpp), for
// the checkpoint audits of the runtime's loaders. The names point into
// `manifest`, which must outlive the entries.
std::vector<ManifestEntry> manifest_entries(const Manifest& manifest);

// The tensors of `spec`'s vision tower and projector ([vision]; empty
// without one) in checkpoint order: the patch embedding, the class token and
// positions, the layers (of vision_tower(spec)), the norms, Llama 3.2
// Vision's global layers, the projector. A tower's model runs from its own
// manifest, as the text model from build_manifest's.
Manifest build_vision_manifest(const Spec& spec);

// The global tensors and those of layer 0 and expert 0 only: enough to know
// which roles and shapes a model has without building it at full size.
Manifest build_sample_manifest(const Spec& spec);

// The tensor-name patterns a checkpoint may hold beyond the manifest:
// weights.ignore, and under tied embeddings the LM head's own name (Qwen3's
// released checkpoints store a copy of the tied embedding as lm_head.weight,
// which transformers does not read; neither do we), and a vision tower's
// vision.weights.ignore and its output norm when the features skip it
// (CLIP's post_layernorm under LLaVA). The load's audit and the
// importer's parameter check both go by it.
std::vector<std::string> ignored_patterns(const Spec& spec);

// "{layer}" and "{expert}" replaced.
std::string expand_name(const std::string& pattern, int64_t layer, int64_t expert);

}  // namespace lathe::spec
