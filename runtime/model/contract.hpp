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

// The dtype a stored matrix has on the device, as the kernels read it: Q8_0
// blocks are dequantized to f16 at upload, every other dtype is kept.
// (Vectors, norm scales and biases, are f32 on the device whatever stored.)
constexpr DType device_dtype(DType stored) { return stored == DType::Q8_0 ? DType::F16 : stored; }

// A matrix multiplied with activations: the projections of attention, MLP
// and experts (an in_out layout stores these transposed). Norms, the
// embedding tables and the router's peers are not.
constexpr bool is_linear(Role r) {
  switch (r) {
    case Role::Q: case Role::K: case Role::V: case Role::Qkv: case Role::O:
    case Role::Gate: case Role::Up: case Role::GateUp: case Role::Down:
    case Role::Router: case Role::ExpertGate: case Role::ExpertUp: case Role::ExpertDown:
    case Role::SharedGate: case Role::SharedUp: case Role::SharedDown: case Role::SharedExpertGate:
      return true;
    default:
      return false;
  }
}

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

// Each role's spec key ("attn_norm", the weights.names key) and C++
// enumerator ("AttnNorm", as generated code spells it): the one table both
// the generator and the generated code read.
struct RoleSpelling {
  Role role;
  std::string_view key;
  std::string_view enumerator;
};
inline constexpr RoleSpelling kRoleSpellings[] = {
    {Role::Embed, "embed", "Embed"},
    {Role::PosEmbed, "pos_embed", "PosEmbed"},
    {Role::AttnNorm, "attn_norm", "AttnNorm"},
    {Role::AttnPostNorm, "attn_post_norm", "AttnPostNorm"},
    {Role::MlpNorm, "mlp_norm", "MlpNorm"},
    {Role::MlpPostNorm, "mlp_post_norm", "MlpPostNorm"},
    {Role::Q, "q", "Q"},
    {Role::K, "k", "K"},
    {Role::V, "v", "V"},
    {Role::Qkv, "qkv", "Qkv"},
    {Role::O, "o", "O"},
    {Role::QNorm, "q_norm", "QNorm"},
    {Role::KNorm, "k_norm", "KNorm"},
    {Role::Gate, "gate", "Gate"},
    {Role::Up, "up", "Up"},
    {Role::GateUp, "gate_up", "GateUp"},
    {Role::Down, "down", "Down"},
    {Role::Router, "router", "Router"},
    {Role::ExpertGate, "expert_gate", "ExpertGate"},
    {Role::ExpertUp, "expert_up", "ExpertUp"},
    {Role::ExpertDown, "expert_down", "ExpertDown"},
    {Role::SharedGate, "shared_gate", "SharedGate"},
    {Role::SharedUp, "shared_up", "SharedUp"},
    {Role::SharedDown, "shared_down", "SharedDown"},
    {Role::SharedExpertGate, "shared_expert_gate", "SharedExpertGate"},
    {Role::FinalNorm, "final_norm", "FinalNorm"},
    {Role::LmHead, "lm_head", "LmHead"},
};

constexpr const RoleSpelling& spelling(Role r) {
  for (const RoleSpelling& s : kRoleSpellings)
    if (s.role == r) return s;
  return kRoleSpellings[0];  // unreachable: every enumerator is in the table
}

struct DTypeSpelling {
  DType dtype;
  std::string_view key;         // "bf16", as specs and reports spell it
  std::string_view enumerator;  // "BF16"
};
inline constexpr DTypeSpelling kDTypeSpellings[] = {
    {DType::F32, "f32", "F32"}, {DType::F16, "f16", "F16"}, {DType::BF16, "bf16", "BF16"}, {DType::Q8_0, "q8_0", "Q8_0"}};

constexpr const DTypeSpelling& spelling(DType d) {
  for (const DTypeSpelling& s : kDTypeSpellings)
    if (s.dtype == d) return s;
  return kDTypeSpellings[0];
}

constexpr std::string_view dtype_name(DType v) { return spelling(v).key; }

}  // namespace lathe
