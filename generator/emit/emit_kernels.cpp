#include "generator/emit/emit_kernels.hpp"

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>

#include "generator/emit/emit_cpp.hpp"
#include "generator/spec/manifest.hpp"
#include "runtime/model/kernel_names.hpp"

namespace lathe::emit {
namespace {

using namespace lathe::spec;

std::string define(const std::string& name, const std::string& value) { return "#define " + name + " " + value + "\n"; }
std::string define(const std::string& name, int64_t value) { return define(name, std::to_string(value) + "u"); }
std::string flag(const std::string& name, bool value) { return define(name, value ? "1" : "0"); }

int wdtype(DType d) {
  switch (d) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::BF16: return 2;
    case DType::Q8_0: break;
  }
  throw std::runtime_error(std::string("kernels: no kernel reads weights of dtype ") + name(d));
}

// The manifest's view of the roles: dtype of a role's weight, and whether
// the role carries a bias.
struct Roles {
  explicit Roles(const Spec& s) {
    for (const TensorSpec& t : build_sample_manifest(s).tensors) {
      if (t.bias) biased.insert(t.role);
      else dtypes[t.role] = device_dtype(t.dtype);
    }
  }
  DType dtype(Role r) const { return dtypes.count(r) ? dtypes.at(r) : DType::F32; }
  bool bias(Role r) const { return biased.count(r) > 0; }
  std::map<Role, DType> dtypes;
  std::set<Role> biased;
};

typed::Activation activation(spec::Activation a) {
  switch (a) {
    case spec::Activation::SiLU: return typed::Activation::SiLU;
    case spec::Activation::GeluErf: return typed::Activation::GeluErf;
    case spec::Activation::GeluTanh: return typed::Activation::GeluTanh;
    case spec::Activation::ReLU: return typed::Activation::ReLU;
  }
  return typed::Activation::SiLU;
}

int act_constant(const kernels::Epilogue& e) {
  if (!e.gated && !e.activation) return 0;
  return 1 + static_cast<int>(e.act);  // ACT_* in common.glsl: SiLU 1, GeluErf 2, GeluTanh 3, ReLU 4
}

KernelInstance instance(std::string name, const char* file, const PushLayout& push, std::string constants) {
  KernelInstance k;
  k.name = std::move(name);
  k.source.file = file;
  k.push = &push;
  k.source.constants = std::move(constants) + glsl_block(push);
  return k;
}

KernelInstance norm_kernel(const Spec& s, int64_t width) {
  return instance(kernels::norm(width), "norm.comp", rows_push_layout(),
                  define("N", width) + define("EPS", number_literal(s.norm.eps, 9)) +
                      flag("LAYER_NORM", s.norm.kind == NormKind::LayerNorm) + flag("HAS_BIAS", s.norm.bias) +
                      flag("UNIT_OFFSET", s.norm.unit_offset));
}

KernelInstance matmul_kernel(const Spec& s, int64_t cols, DType dtype, const kernels::Epilogue& e) {
  const int norm = !e.norm ? 0 : s.norm.kind == NormKind::RMSNorm ? 1 : 2;
  return instance(kernels::matmul(cols, dtype, e), "matmul.comp", matmul_push_layout(),
                  define("K", cols) + define("WDTYPE", std::to_string(wdtype(dtype))) + flag("HAS_BIAS", e.bias) +
                      flag("GATED", e.gated) + define("ACT", std::to_string(act_constant(e))) +
                      flag("RESIDUAL", e.residual) + define("NORM", std::to_string(norm)) +
                      define("NORM_EPS", number_literal(s.norm.eps, 9)) + flag("NORM_BIAS", e.norm && s.norm.bias) +
                      flag("NORM_UNIT_OFFSET", e.norm && s.norm.unit_offset));
}

std::string head_constants(const Spec& s) {
  return define("HQ", s.dims.heads) + define("HKV", s.dims.kv_heads) + define("DH", s.dims.head_dim) +
         define("G", s.dims.heads / s.dims.kv_heads) +
         flag("CACHE_F16", s.cache.dtype == DType::F16);
}

KernelInstance rope_kv_kernel(const Spec& s) {
  const bool rope = s.position.kind == PositionKind::Rope;
  const int64_t rot = rope ? s.position.rotary_dim : 0;
  const bool neox = s.position.pairing == RopePairing::Neox;
  std::string constants = head_constants(s) + flag("ROPE", rot > 0) + define("ROT", rot) + flag("NEOX", neox);
  if (rot > 0) {
    // inv_freq_i = theta^(-2i/rot), in double here: the shader multiplies by the position in f32.
    constants += "const float INV_FREQ[" + std::to_string(rot / 2) + "] = float[](";
    for (int64_t i = 0; i < rot / 2; ++i)
      constants += (i ? ", " : "") +
                   number_literal(std::pow(s.position.theta, -2.0 * static_cast<double>(i) / static_cast<double>(rot)), 9);
    constants += ");\n";
  }
  return instance(kernels::rope_kv(rot, neox ? typed::RopePairing::Neox : typed::RopePairing::Interleaved),
                  "rope_kv.comp", attention_push_layout(), constants);
}

}  // namespace

std::vector<KernelInstance> kernel_instances(const Spec& s) {
  const Dims& d = s.dims;
  const Roles roles(s);
  std::vector<KernelInstance> out;
  std::set<std::string> names;
  auto add = [&](KernelInstance k) {
    if (names.insert(k.name).second) out.push_back(std::move(k));
  };
  // The dispatches of runtime/model/lowering.cpp for the pre-norm Llama and
  // GPT-2 families: one instance per distinct name.
  add(instance(kernels::embed(d.hidden, roles.dtype(Role::Embed), s.position.kind == PositionKind::Learned),
               "embed.comp", rows_push_layout(),
               define("D", d.hidden) + define("WDTYPE", std::to_string(wdtype(roles.dtype(Role::Embed)))) +
                   define("SCALE", number_literal(s.embedding.scale, 9)) +
                   flag("POSITIONS", s.position.kind == PositionKind::Learned) +
                   define("POS_OFFSET", s.position.offset)));
  add(norm_kernel(s, d.hidden));
  // Projections that read a norm's output come with the norm folded in
  // (the lowering's usual plan) and without (its fallback).
  for (bool norm : {false, true}) {
    if (s.weights.fused_qkv) {
      add(matmul_kernel(s, d.hidden, roles.dtype(Role::Qkv), {.bias = roles.bias(Role::Qkv), .norm = norm}));
    } else {
      for (Role r : {Role::Q, Role::K, Role::V})
        add(matmul_kernel(s, d.hidden, roles.dtype(r), {.bias = roles.bias(r), .norm = norm}));
    }
  }
  add(rope_kv_kernel(s));
  add(instance(kernels::attention(), "attention.comp", attention_push_layout(),
               head_constants(s) + define("SCALE", number_literal(s.attention.effective_scale(d.head_dim), 9))));
  add(instance(kernels::attention_combine(), "attention_combine.comp", rows_push_layout(),
               define("HQ", d.heads) + define("DH", d.head_dim)));
  add(matmul_kernel(s, d.heads * d.head_dim, roles.dtype(Role::O), {.bias = roles.bias(Role::O), .residual = true}));
  const typed::Activation act = activation(s.mlp.activation);
  for (bool norm : {false, true}) {
    if (s.mlp.gated) {
      const Role gate = s.mlp.fused_gate_up != FusedGateUp::None ? Role::GateUp : Role::Gate;
      add(matmul_kernel(s, d.hidden, roles.dtype(gate),
                        {.bias = roles.bias(gate), .gated = true, .act = act, .norm = norm}));
    } else {
      add(matmul_kernel(s, d.hidden, roles.dtype(Role::Up),
                        {.bias = roles.bias(Role::Up), .activation = true, .act = act, .norm = norm}));
    }
  }
  add(matmul_kernel(s, d.intermediate, roles.dtype(Role::Down), {.bias = roles.bias(Role::Down), .residual = true}));
  const DType head = roles.dtype(s.embedding.tied ? Role::Embed : Role::LmHead);
  add(matmul_kernel(s, d.hidden, head, {}));
  if (s.norm.final_norm) add(matmul_kernel(s, d.hidden, head, {.norm = true}));
  add(instance(kernels::argmax(), "argmax.comp", rows_push_layout(), define("V", d.vocab)));
  return out;
}

std::vector<CompiledKernel> compile_kernels(const Spec& s) {
  std::vector<CompiledKernel> out;
  for (KernelInstance& k : kernel_instances(s)) {
    std::vector<uint32_t> spirv = compile_kernel(k.source);
    out.push_back({std::move(k), std::move(spirv)});
  }
  return out;
}

std::string emit_kernels_source(const Spec& s, const std::string& spec_path, const std::vector<CompiledKernel>& kernels) {
  std::string out = "// Generated by lathe from " + spec_path +
                    " — do not edit. SPIR-V of every kernel instance of the model.\n"
                    "#include <cstddef>\n#include <cstdint>\n#include <iterator>\n\n"
                    "#include \"runtime/model/model_info.hpp\"\n\n"
                    "namespace lathe::models::" + model_namespace(s.name) + " {\n\n";
  std::set<std::string> structs;
  for (const CompiledKernel& c : kernels)
    if (structs.insert(c.instance.push->name).second) out += cpp_struct(*c.instance.push) + "\n";
  out += "namespace {\n";
  for (const CompiledKernel& c : kernels) {
    const KernelInstance& k = c.instance;
    const std::vector<uint32_t>& words = c.spirv;
    out += "// shaders/" + k.source.file + "\nconstexpr uint32_t " + k.name + "_spirv[] = {";
    for (size_t i = 0; i < words.size(); ++i) {
      if (i % 8 == 0) out += "\n   ";
      char word[16];
      std::snprintf(word, sizeof word, " 0x%08x,", words[i]);
      out += word;
    }
    out += "\n};\n";
  }
  out += "}  // namespace\n\nextern const KernelBinary kernels[] = {\n";
  for (const CompiledKernel& c : kernels) {
    const KernelInstance& k = c.instance;
    out += "    {\"" + k.name + "\", \"" + k.source.file + "\", " + k.name + "_spirv, std::size(" + k.name +
           "_spirv), sizeof(" + k.push->name + ")},\n";
  }
  out += "};\nextern const size_t kernel_count = std::size(kernels);\n\n}  // namespace lathe::models::" +
         model_namespace(s.name) + "\n";
  return out;
}

std::string dump_kernels(const std::vector<CompiledKernel>& kernels) {
  std::string out;
  for (const CompiledKernel& c : kernels) {
    const KernelInstance& k = c.instance;
    out += "==== " + k.name + " (shaders/" + k.source.file + ")\n" + assemble_glsl(k.source) + "\n";
    out += "==== " + k.name + " SPIR-V\n" + disassemble_spirv(c.spirv) + "\n";
  }
  return out;
}

}  // namespace lathe::emit
