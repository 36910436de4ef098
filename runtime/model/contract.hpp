// Vocabulary shared by the generator and the generated code: tensor roles,
// dtypes, layouts and the weight-manifest entry. Header-only, no dependencies,
// usable in constant expressions.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace lathe {

enum class DType : uint8_t { F32, F16, BF16, Q8_0 };
// out_in: torch.nn.Linear's [out, in]; in_out: GPT-2's Conv1D [in, out].
enum class Layout : uint8_t { OutIn, InOut };

// Tensor roles: each names one tensor (or a bias beside a weight) per layer.
enum class Role : uint8_t {
  Embed, PosEmbed,
  AttnNorm, AttnPostNorm, MlpNorm, MlpPostNorm,
  Q, K, V, Qkv, O, QNorm, KNorm,
  Gate, Up, GateUp, Down,
  Router, ExpertGate, ExpertUp, ExpertDown,
  SharedGate, SharedUp, SharedDown, SharedExpertGate,
  FinalNorm, LmHead,
};

// One tensor of a checkpoint, as the generated manifest lists it.
struct ManifestEntry {
  Role role;
  bool bias;       // "<path>.bias" rather than "<path>.weight"
  int32_t layer;   // -1: not per layer
  int32_t expert;  // -1: not per expert
  std::string_view name;
  uint8_t rank;
  std::array<int64_t, 2> shape;  // as stored; shape[1] is 1 for rank 1
  DType dtype;

  constexpr int64_t elements() const { return shape[0] * shape[1]; }
};

constexpr std::string_view dtype_name(DType v) {
  switch (v) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::Q8_0: return "q8_0";
  }
  return "?";
}

}  // namespace lathe
