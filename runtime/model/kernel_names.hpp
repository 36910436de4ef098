// Names of kernel instances. The generator compiles one instance per name a
// model needs (generator/emit/emit_kernels.cpp) and the runtime's lowering
// looks each dispatch's kernel up by the same name (runtime/model/lowering.cpp),
// so both sides spell names through these functions. A name holds every
// constant that can differ between two instances of one model; constants that
// are single-valued per model (eps, theta, scale) are not in it.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/model/contract.hpp"
#include "runtime/model/typed.hpp"

namespace lathe::kernels {

// What matmul.comp does with W·x before it stores it.
struct Epilogue {
  bool bias = false;
  bool residual = false;  // y += …
  bool gated = false;     // φ(W·x + b) ⊙ (W2·x + b2)
  bool activation = false;
  typed::Activation act = typed::Activation::SiLU;  // φ, when gated or activation
  bool norm = false;      // the model's norm applied to x as it is read
};

inline const char* activation_name(typed::Activation a) {
  switch (a) {
    case typed::Activation::SiLU: return "silu";
    case typed::Activation::GeluErf: return "gelu_erf";
    case typed::Activation::GeluTanh: return "gelu_tanh";
    case typed::Activation::ReLU: return "relu";
  }
  return "?";
}

inline std::string dtype_suffix(DType d) { return std::string(dtype_name(d)); }

inline std::string embed(int64_t width, DType table, bool positions) {
  return "embed_" + std::to_string(width) + "_" + dtype_suffix(table) + (positions ? "_pos" : "");
}

inline std::string norm(int64_t width) { return "norm_" + std::to_string(width); }

inline std::string matmul(int64_t cols, DType weights, const Epilogue& e) {
  std::string name = "matmul_" + std::to_string(cols) + "_" + dtype_suffix(weights);
  if (e.gated) name += std::string("_gated_") + activation_name(e.act);
  else if (e.activation) name += std::string("_") + activation_name(e.act);
  if (e.bias) name += "_bias";
  if (e.residual) name += "_residual";
  if (e.norm) name += "_norm";
  return name;
}

// rotary == 0: no rotation (the KV append alone).
inline std::string rope_kv(int64_t rotary, typed::RopePairing pairing) {
  if (rotary == 0) return "kv_append";
  return "rope_kv_" + std::to_string(rotary) + (pairing == typed::RopePairing::Neox ? "_neox" : "_interleaved");
}

inline std::string attention() { return "attention"; }
inline std::string attention_combine() { return "attention_combine"; }
inline std::string argmax() { return "argmax"; }

}  // namespace lathe::kernels
