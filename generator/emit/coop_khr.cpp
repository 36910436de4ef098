#include "generator/emit/coop_khr.hpp"

#define SPV_ENABLE_UTILITY_CODE
#include <spirv/unified1/spirv.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "generator/emit/shader_compiler.hpp"

namespace lathe::emit {
namespace {

// The two extensions' encodings, from the SPIR-V registry
// (KhronosGroup/SPIRV-Headers include/spirv/unified1/spirv.core.grammar.json,
// SPIRV-Registry extensions/NV/SPV_NV_cooperative_matrix.asciidoc and
// extensions/KHR/SPV_KHR_cooperative_matrix.asciidoc). NV:
//   Capability 5357 CooperativeMatrixNV
//   5358 OpTypeCooperativeMatrixNV   <result> <component type> <scope> <rows> <columns>
//   5359 OpCooperativeMatrixLoadNV   <type> <result> <pointer> <stride> <column major> [memory access]
//   5360 OpCooperativeMatrixStoreNV  <pointer> <object> <stride> <column major> [memory access]
//   5361 OpCooperativeMatrixMulAddNV <type> <result> <A> <B> <C>
//   5362 OpCooperativeMatrixLengthNV <type> <result> <type>
// KHR (the layout moves before the stride, which becomes optional; a type
// says its use):
//   Capability 6022 CooperativeMatrixKHR
//   4456 OpTypeCooperativeMatrixKHR   <result> <component type> <scope> <rows> <columns> <use>
//   4457 OpCooperativeMatrixLoadKHR   <type> <result> <pointer> <memory layout> [stride] [memory operand]
//   4458 OpCooperativeMatrixStoreKHR  <pointer> <object> <memory layout> [stride] [memory operand]
//   4459 OpCooperativeMatrixMulAddKHR <type> <result> <A> <B> <C> [cooperative matrix operands]
//   4460 OpCooperativeMatrixLengthKHR <type> <result> <type>
// <use> and <memory layout> are ids of 32-bit integer constants:
// CooperativeMatrixUse MatrixAKHR 0, MatrixBKHR 1, MatrixAccumulatorKHR 2;
// CooperativeMatrixLayout RowMajorKHR 0, ColumnMajorKHR 1. NV's memory
// access operands and KHR's memory operands are the same enum. Debian 12's
// spirv.hpp has the NV values only.
constexpr uint32_t kCapabilityNv = 5357, kCapabilityKhr = 6022;
constexpr uint32_t kTypeNv = 5358, kLoadNv = 5359, kStoreNv = 5360, kMulAddNv = 5361, kLengthNv = 5362;
constexpr uint32_t kTypeKhr = 4456, kLoadKhr = 4457, kStoreKhr = 4458, kMulAddKhr = 4459, kLengthKhr = 4460;
constexpr std::string_view kExtensionNv = "SPV_NV_cooperative_matrix", kExtensionKhr = "SPV_KHR_cooperative_matrix";
static_assert(kTypeNv == spv::OpTypeCooperativeMatrixNV && kMulAddNv == spv::OpCooperativeMatrixMulAddNV &&
              kCapabilityNv == spv::CapabilityCooperativeMatrixNV);

enum Use : uint32_t { kMatrixA = 0, kMatrixB = 1, kAccumulator = 2 };
constexpr const char* kUseNames[] = {"A", "B", "accumulator"};

struct Inst {
  uint32_t op = 0;
  std::vector<uint32_t> w;  // the operands: the words after the one of count and opcode
};

struct Module {
  std::vector<uint32_t> header;  // magic, version, generator, bound, schema
  std::vector<Inst> code;
};

// The instruction stream, or why it does not parse.
std::optional<Module> parse(std::span<const uint32_t> words, std::string& problem) {
  if (words.size() < 5 || words[0] != 0x07230203u) {
    problem = "no SPIR-V header";
    return std::nullopt;
  }
  Module m;
  m.header.assign(words.begin(), words.begin() + 5);
  for (size_t at = 5; at < words.size();) {
    const uint32_t count = words[at] >> 16;
    if (count == 0 || at + count > words.size()) {
      problem = "word " + std::to_string(at) + ": an instruction of " + std::to_string(count) + " words past the module's end";
      return std::nullopt;
    }
    m.code.push_back({words[at] & 0xffffu, std::vector<uint32_t>(words.begin() + static_cast<ptrdiff_t>(at) + 1,
                                                                  words.begin() + static_cast<ptrdiff_t>(at + count))});
    at += count;
  }
  return m;
}

std::vector<uint32_t> serialize(const Module& m) {
  std::vector<uint32_t> out = m.header;
  for (const Inst& i : m.code) {
    out.push_back(static_cast<uint32_t>(i.w.size() + 1) << 16 | i.op);
    out.insert(out.end(), i.w.begin(), i.w.end());
  }
  return out;
}

// An instruction's result type and result id, 0 where it has none.
struct Ids {
  uint32_t type = 0, result = 0;
};
Ids ids_of(const Inst& i) {
  bool result = false, type = false;
  switch (i.op) {
    case kTypeKhr: result = true; break;
    case kLoadKhr:
    case kMulAddKhr:
    case kLengthKhr: result = type = true; break;
    case kStoreKhr: break;
    default: spv::HasResultAndType(static_cast<spv::Op>(i.op), &result, &type);
  }
  Ids out;
  size_t at = 0;
  if (type && at < i.w.size()) out.type = i.w[at++];
  if (result && at < i.w.size()) out.result = i.w[at];
  return out;
}

// A literal string operand (OpExtension's), and its words.
std::string string_of(std::span<const uint32_t> words) {
  std::string out;
  for (uint32_t w : words)
    for (int b = 0; b < 4; ++b) {
      const char c = static_cast<char>((w >> (8 * b)) & 0xffu);
      if (c == 0) return out;
      out += c;
    }
  return out;
}
std::vector<uint32_t> words_of(std::string_view s) {
  std::vector<uint32_t> out(s.size() / 4 + 1, 0);  // always a terminating zero
  for (size_t i = 0; i < s.size(); ++i) out[i / 4] |= static_cast<uint32_t>(static_cast<unsigned char>(s[i])) << (8 * (i % 4));
  return out;
}

std::string id(uint32_t v) { return "%" + std::to_string(v); }

class Rewrite {
 public:
  explicit Rewrite(Module m) : m_(std::move(m)), bound_(m_.header[3]) {}

  std::vector<uint32_t> run() {
    find_types();
    infer_uses();
    find_constants();
    // Every instruction first: the twins they ask for must be known before
    // the types are written (a function's variable may ask for one).
    std::vector<Inst> code;
    for (const Inst& i : m_.code) code.push_back(rewritten(i));
    Module out;
    out.header = m_.header;
    for (size_t at = 0; at < m_.code.size(); ++at) {
      if (at == first_type_) out.code.insert(out.code.end(), constants_.begin(), constants_.end());
      out.code.push_back(std::move(code[at]));
      if (const Ids d = ids_of(m_.code[at]); d.result != 0)
        if (auto extra = after_.find(d.result); extra != after_.end())
          out.code.insert(out.code.end(), extra->second.begin(), extra->second.end());
    }
    out.header[3] = bound_;
    return serialize(out);
  }

 private:
  // The matrix types and those that hold them (pointers, arrays), each with
  // the NV type at its bottom; every value's type.
  void find_types() {
    for (size_t at = 0; at < m_.code.size(); ++at) {
      const Inst& i = m_.code[at];
      const Ids d = ids_of(i);
      if (d.result != 0) defs_[d.result] = at;
      if (d.type != 0) type_of_[d.result] = d.type;
      const auto holds = [&](uint32_t inner) {
        matrix_of_[i.w[0]] = matrix_of_.at(inner);
        inner_[i.w[0]] = inner;
      };
      if (i.op == kTypeNv) {
        matrix_of_[i.w[0]] = i.w[0];
        first_type_ = std::min(first_type_, at);
      } else if (i.op == spv::OpTypePointer && i.w.size() >= 3 && matrix_of_.count(i.w[2])) {
        holds(i.w[2]);
      } else if ((i.op == spv::OpTypeArray || i.op == spv::OpTypeRuntimeArray) && i.w.size() >= 2 && matrix_of_.count(i.w[1])) {
        holds(i.w[1]);
      } else if (i.op == spv::OpTypeStruct || i.op == spv::OpTypeFunction) {
        for (size_t k = 1; k < i.w.size(); ++k)
          if (matrix_of_.count(i.w[k]))
            throw ShaderError("coop_khr: type " + id(i.w[0]) + " (a struct or a function's) holds a cooperative matrix: not rewritten");
      }
    }
  }
  bool holds_matrix(uint32_t type) const { return matrix_of_.count(type) > 0; }
  bool carries_matrix(uint32_t value) const {
    auto t = type_of_.find(value);
    return t != type_of_.end() && holds_matrix(t->second);
  }

  uint32_t root(uint32_t v) {
    auto p = parent_.find(v);
    if (p == parent_.end() || p->second == v) return v;
    return p->second = root(p->second);
  }
  void unite(uint32_t a, uint32_t b) { parent_[root(a)] = root(b); }

  // Each matrix value's use: the values a load, store, copy, access chain
  // or arithmetic joins take one use together, the one MulAdd gives them.
  // A literal operand equal to a matrix value's id would join them too;
  // that can only make a conflict (an error), never a wrong use.
  void infer_uses() {
    std::vector<std::pair<uint32_t, Use>> marks;
    for (const Inst& i : m_.code) {
      const Ids d = ids_of(i);
      if (i.op == kMulAddNv) {
        marks.insert(marks.end(), {{i.w[1], kAccumulator}, {i.w[2], kMatrixA}, {i.w[3], kMatrixB}, {i.w[4], kAccumulator}});
        continue;
      }
      if (i.op == spv::OpStore && i.w.size() >= 2 && carries_matrix(i.w[0]) && carries_matrix(i.w[1])) unite(i.w[0], i.w[1]);
      if (d.result == 0 || !holds_matrix(d.type)) continue;
      if (i.op == spv::OpFunctionParameter || i.op == spv::OpFunctionCall)
        throw ShaderError("coop_khr: " + id(d.result) + " passes a cooperative matrix through a function: not rewritten");
      for (size_t k = 2; k < i.w.size(); ++k)
        if (carries_matrix(i.w[k])) unite(d.result, i.w[k]);
    }
    for (const auto& [value, use] : marks) {
      uint32_t& uses = uses_[root(value)];
      uses |= 1u << use;
      if (std::popcount(uses) > 1)
        throw ShaderError("coop_khr: " + id(value) + " is a cooperative matrix used as two of A, B and accumulator: not rewritten");
      type_uses_[matrix_of_.at(type_of_.at(value))] |= 1u << use;
    }
  }

  // A value's use; one a MulAdd never reaches takes its type's, if one.
  Use use_of(uint32_t value) {
    if (auto u = uses_.find(root(value)); u != uses_.end()) return static_cast<Use>(std::countr_zero(u->second));
    const uint32_t of_type = type_uses_[matrix_of_.at(type_of_.at(value))];
    if (of_type == 0) return kAccumulator;
    if (std::popcount(of_type) > 1)
      throw ShaderError("coop_khr: " + id(value) + " is a cooperative matrix of a type used as several of A, B and "
                        "accumulator, and no MulAdd says which it is");
    return static_cast<Use>(std::countr_zero(of_type));
  }
  // The use a matrix type's own id keeps: the first of its values' uses.
  Use home(uint32_t matrix) {
    const uint32_t uses = type_uses_[matrix];
    return uses == 0 ? kAccumulator : static_cast<Use>(std::countr_zero(uses));
  }

  // The 32-bit unsigned constants 0, 1 and 2 (uses and layouts), declared
  // before the first matrix type: the module's own where it has them there.
  void find_constants() {
    uint32_t uint_type = 0;
    for (size_t at = 0; at < first_type_ && at < m_.code.size(); ++at) {
      const Inst& i = m_.code[at];
      if (i.op == spv::OpTypeInt && i.w.size() == 3 && i.w[1] == 32 && i.w[2] == 0) uint_type = i.w[0];
      if (i.op == spv::OpConstant && i.w.size() == 3 && uint_type != 0 && i.w[0] == uint_type && i.w[2] < 3 && value_[i.w[2]] == 0)
        value_[i.w[2]] = i.w[1];
    }
    if (uint_type == 0) {
      uint_type = bound_++;
      constants_.push_back({spv::OpTypeInt, {uint_type, 32, 0}});
    }
    for (uint32_t v = 0; v < 3; ++v)
      if (value_[v] == 0) {
        value_[v] = bound_++;
        constants_.push_back({spv::OpConstant, {uint_type, value_[v], v}});
      }
  }

  // Type `type` (a matrix type, or one holding one) for values of use `use`:
  // itself for its matrix type's home use, else a twin declared after it.
  uint32_t variant(uint32_t type, Use use) {
    const uint32_t matrix = matrix_of_.at(type);
    if (use == home(matrix)) return type;
    auto [at, fresh] = variants_.emplace(std::pair{type, use}, 0);
    if (!fresh) return at->second;
    Inst twin = m_.code[defs_.at(type)];
    const uint32_t twin_id = bound_++;
    if (twin.op == kTypeNv) {
      twin = {kTypeKhr, {twin_id, twin.w[1], twin.w[2], twin.w[3], twin.w[4], value_[use]}};
    } else {
      twin.w[0] = twin_id;
      twin.w[twin.op == spv::OpTypePointer ? 2 : 1] = variant(inner_.at(type), use);
    }
    variants_[{type, use}] = twin_id;
    after_[type].push_back(std::move(twin));
    return twin_id;
  }

  uint32_t layout(uint32_t column_major) const {
    const Inst& def = m_.code[defs_.at(column_major)];
    if (def.op == spv::OpConstantTrue) return value_[1];   // ColumnMajorKHR
    if (def.op == spv::OpConstantFalse) return value_[0];  // RowMajorKHR
    throw ShaderError("coop_khr: column major flag " + id(column_major) + " is not a constant: KHR's layout must be");
  }

  Inst rewritten(const Inst& i) {
    const std::vector<uint32_t>& w = i.w;
    const auto tail = [&](size_t from) { return std::vector<uint32_t>(w.begin() + static_cast<ptrdiff_t>(from), w.end()); };
    const auto join = [](std::vector<uint32_t> head, const std::vector<uint32_t>& rest) {
      head.insert(head.end(), rest.begin(), rest.end());
      return head;
    };
    switch (i.op) {
      case spv::OpCapability:
        return {i.op, {w[0] == kCapabilityNv ? kCapabilityKhr : w[0]}};
      case spv::OpExtension:
        return {i.op, string_of(w) == kExtensionNv ? words_of(kExtensionKhr) : w};
      case kTypeNv:
        return {kTypeKhr, {w[0], w[1], w[2], w[3], w[4], value_[home(w[0])]}};
      case kLoadNv:  // <type> <result> <pointer> <stride> <column major> [memory access]
        return {kLoadKhr, join({variant(w[0], use_of(w[1])), w[1], w[2], layout(w[4]), w[3]}, tail(5))};
      case kStoreNv:  // <pointer> <object> <stride> <column major> [memory access]
        return {kStoreKhr, join({w[0], w[1], layout(w[3]), w[2]}, tail(4))};
      case kMulAddNv:
        return {kMulAddKhr, {variant(w[0], kAccumulator), w[1], w[2], w[3], w[4]}};
      case kLengthNv: {
        const uint32_t uses = type_uses_[matrix_of_.at(w[2])];
        if (std::popcount(uses) > 1)
          throw ShaderError("coop_khr: the length of " + id(w[2]) + ", a type used as several of A, B and accumulator");
        return {kLengthKhr, {w[0], w[1], variant(w[2], home(w[2]))}};
      }
      default: break;
    }
    const Ids d = ids_of(i);
    if (d.result == 0 || !holds_matrix(d.type)) return i;
    Inst out = i;
    out.w[0] = variant(d.type, use_of(d.result));
    return out;
  }

  Module m_;
  uint32_t bound_;
  size_t first_type_ = SIZE_MAX;                 // the first NV matrix type's instruction
  std::map<uint32_t, size_t> defs_;              // result id → its instruction
  std::map<uint32_t, uint32_t> type_of_;         // value → its type
  std::map<uint32_t, uint32_t> matrix_of_;       // a type holding a matrix → the NV matrix type
  std::map<uint32_t, uint32_t> inner_;           // a pointer's pointee, an array's element (holding a matrix)
  std::map<uint32_t, uint32_t> parent_;          // the values' classes (union–find)
  std::map<uint32_t, uint32_t> uses_;            // a class's root → its use (a bit)
  std::map<uint32_t, uint32_t> type_uses_;       // an NV matrix type → the uses of its values (bits)
  uint32_t value_[3] = {0, 0, 0};                // the constants 0, 1, 2
  std::vector<Inst> constants_;                  // declared before the first matrix type
  std::map<std::pair<uint32_t, Use>, uint32_t> variants_;
  std::map<uint32_t, std::vector<Inst>> after_;  // twins to declare after a type
};

// The KHR module in NV's terms, for the validator here, which knows NV's
// instructions: each KHR type an NV type of its own (the twins of one NV
// type, A's and B's, told apart by a scope constant of their own of the
// same value: spirv-val refuses two identical declarations), loads and
// stores back in NV's operand order with a boolean constant for the layout.
// spirv-val then checks the type of every value the rewrite retyped.
std::vector<uint32_t> as_nv(const Module& khr) {
  uint32_t bound = khr.header[3], uint_type = 0, bool_type = 0, flags[2] = {0, 0};
  std::map<uint32_t, uint32_t> values;  // 32-bit constants' values
  for (const Inst& i : khr.code) {
    if (i.op == spv::OpTypeInt && i.w.size() == 3 && i.w[1] == 32 && i.w[2] == 0) uint_type = i.w[0];
    if (i.op == spv::OpTypeBool) bool_type = i.w[0];
    if (i.op == spv::OpConstant && i.w.size() == 3) values[i.w[1]] = i.w[2];
    if ((i.op == spv::OpConstantTrue || i.op == spv::OpConstantFalse) && i.w.size() == 2) flags[i.op == spv::OpConstantTrue] = i.w[1];
  }
  std::vector<Inst> declared;  // before the first matrix type
  if (bool_type == 0) declared.push_back({spv::OpTypeBool, {bool_type = bound++}});
  for (uint32_t f = 0; f < 2; ++f)
    if (flags[f] == 0) declared.push_back({f ? spv::OpConstantTrue : spv::OpConstantFalse, {bool_type, flags[f] = bound++}});
  std::map<std::vector<uint32_t>, std::vector<uint32_t>> uses;  // an NV type's operands → the uses declared with them
  Module out{khr.header, {}};
  bool first = true;
  for (const Inst& i : khr.code) {
    const std::vector<uint32_t>& w = i.w;
    const auto flag = [&](uint32_t layout) { return flags[values.count(layout) && values[layout] == 1]; };
    const auto tail = [&](size_t from) { return std::vector<uint32_t>(w.begin() + static_cast<ptrdiff_t>(std::min(from, w.size())), w.end()); };
    Inst nv = i;
    if (i.op == kTypeKhr && w.size() == 6) {
      if (first) out.code.insert(out.code.end(), declared.begin(), declared.end());
      first = false;
      std::vector<uint32_t>& seen = uses[{w[1], w[2], w[3], w[4]}];
      if (std::find(seen.begin(), seen.end(), w[5]) == seen.end()) seen.push_back(w[5]);
      uint32_t scope = w[2];
      if (seen.front() != w[5] && uint_type != 0) {
        scope = bound++;
        out.code.push_back({spv::OpConstant, {uint_type, scope, values[w[2]]}});
      }
      nv = {kTypeNv, {w[0], w[1], scope, w[3], w[4]}};
    } else if (i.op == kLoadKhr && w.size() >= 5) {
      nv = {kLoadNv, {w[0], w[1], w[2], w[4], flag(w[3])}};
      for (uint32_t x : tail(5)) nv.w.push_back(x);
    } else if (i.op == kStoreKhr && w.size() >= 4) {
      nv = {kStoreNv, {w[0], w[1], w[3], flag(w[2])}};
      for (uint32_t x : tail(4)) nv.w.push_back(x);
    } else if (i.op == kMulAddKhr || i.op == kLengthKhr) {
      nv.op = i.op == kMulAddKhr ? kMulAddNv : kLengthNv;
    } else if (i.op == spv::OpCapability && w.size() == 1 && w[0] == kCapabilityKhr) {
      nv.w = {kCapabilityNv};
    } else if (i.op == spv::OpExtension && string_of(w) == kExtensionKhr) {
      nv.w = words_of(kExtensionNv);
    }
    out.code.push_back(std::move(nv));
  }
  out.header[3] = bound;
  return serialize(out);
}

}  // namespace

std::vector<uint32_t> coop_khr_from_nv(std::span<const uint32_t> nv) {
  std::string problem;
  std::optional<Module> m = parse(nv, problem);
  if (!m) throw ShaderError("coop_khr: " + problem);
  return Rewrite(std::move(*m)).run();
}

std::string check_coop_khr(std::span<const uint32_t> khr) {
  std::string problem;
  const std::optional<Module> parsed = parse(khr, problem);
  if (!parsed) return problem + "\n";
  const Module& m = *parsed;
  std::string out;
  const auto fail = [&](const std::string& s) { out += s + "\n"; };
  std::map<uint32_t, const Inst*> defs;
  std::map<uint32_t, uint32_t> type_of;
  bool capability = false, extension = false, used = false;
  for (const Inst& i : m.code) {
    const Ids d = ids_of(i);
    if (d.result != 0) {
      if (d.result >= m.header[3]) fail(id(d.result) + " is not below the bound " + std::to_string(m.header[3]));
      if (!defs.emplace(d.result, &i).second) fail(id(d.result) + " is defined twice");
    }
    if (d.type != 0) type_of[d.result] = d.type;
    if (i.op >= kTypeNv && i.op <= kLengthNv) fail("an NV cooperative-matrix instruction (opcode " + std::to_string(i.op) + ") is left");
    if (i.op >= kTypeKhr && i.op <= kLengthKhr) used = true;
    if (i.op == spv::OpCapability && !i.w.empty()) {
      if (i.w[0] == kCapabilityNv) fail("the capability CooperativeMatrixNV is left");
      capability |= i.w[0] == kCapabilityKhr;
    }
    if (i.op == spv::OpExtension) {
      if (string_of(i.w) == kExtensionNv) fail("the extension SPV_NV_cooperative_matrix is left");
      extension |= string_of(i.w) == kExtensionKhr;
    }
  }
  if (used && (!capability || !extension)) fail("KHR cooperative-matrix instructions without the capability and extension");

  const auto def = [&](uint32_t v) -> const Inst* {
    auto at = defs.find(v);
    return at == defs.end() ? nullptr : at->second;
  };
  // The value of a 32-bit integer constant, or nullopt.
  const auto constant = [&](uint32_t v) -> std::optional<uint32_t> {
    const Inst* c = def(v);
    if (c == nullptr || (c->op != spv::OpConstant && c->op != spv::OpSpecConstant) || c->w.size() != 3) return std::nullopt;
    return c->w[2];
  };
  const auto matrix = [&](uint32_t type) -> const Inst* {
    const Inst* t = def(type);
    return t != nullptr && t->op == kTypeKhr && t->w.size() == 6 ? t : nullptr;
  };
  const auto pointee = [&](uint32_t value) -> uint32_t {
    auto t = type_of.find(value);
    const Inst* p = t == type_of.end() ? nullptr : def(t->second);
    return p != nullptr && p->op == spv::OpTypePointer && p->w.size() == 3 ? p->w[2] : 0;
  };
  const auto type = [&](uint32_t value) -> uint32_t {
    auto t = type_of.find(value);
    return t == type_of.end() ? 0 : t->second;
  };
  for (const Inst& i : m.code) {
    const Ids d = ids_of(i);
    if (d.type != 0 && def(d.type) == nullptr) fail(id(d.result) + " has an undefined type " + id(d.type));
    const std::vector<uint32_t>& w = i.w;
    const std::string at = d.result != 0 ? id(d.result) : "a store to " + (w.empty() ? std::string("?") : id(w[0]));
    switch (i.op) {
      case kTypeKhr: {
        if (w.size() != 6) {
          fail(at + ": OpTypeCooperativeMatrixKHR of " + std::to_string(w.size()) + " operands, not 6");
          break;
        }
        const Inst* component = def(w[1]);
        if (component == nullptr || (component->op != spv::OpTypeFloat && component->op != spv::OpTypeInt))
          fail(at + ": a component type that is no number type");
        for (size_t k = 2; k < 6; ++k)
          if (!constant(w[k])) fail(at + ": operand " + std::to_string(k) + " is no 32-bit integer constant");
        if (const auto use = constant(w[5]); use && *use > kAccumulator) fail(at + ": use " + std::to_string(*use));
        break;
      }
      case kLoadKhr:
      case kStoreKhr: {
        const bool load = i.op == kLoadKhr;
        if (w.size() < 4) {
          fail(at + ": a cooperative load or store without its layout and stride");
          break;
        }
        if (!matrix(load ? w[0] : type(w[1]))) fail(at + ": loads or stores no KHR matrix type");
        if (pointee(w[load ? 2 : 0]) == 0) fail(at + ": its pointer is no pointer");
        if (const auto layout = constant(w[load ? 3 : 2]); !layout || *layout > 1) fail(at + ": a layout that is no constant 0 or 1");
        if (def(w[load ? 4 : 3]) == nullptr) fail(at + ": an undefined stride");
        break;
      }
      case kMulAddKhr: {
        if (w.size() < 5) {
          fail(at + ": OpCooperativeMatrixMulAddKHR without A, B and C");
          break;
        }
        const Inst* r = matrix(w[0]);
        const Inst* abc[3] = {matrix(type(w[2])), matrix(type(w[3])), matrix(type(w[4]))};
        if (!r || !abc[0] || !abc[1] || !abc[2]) {
          fail(at + ": MulAdd of values that are no KHR matrices");
          break;
        }
        for (uint32_t u = 0; u < 3; ++u)
          if (constant(abc[u]->w[5]) != u) fail(at + ": its " + kUseNames[u] + " operand's type is not of use " + kUseNames[u]);
        if (type(w[4]) != w[0]) fail(at + ": C's type is not the result's");
        // A is M × K, B K × N, C and the result M × N.
        if (constant(abc[0]->w[3]) != constant(r->w[3]) || constant(abc[1]->w[4]) != constant(r->w[4]) ||
            constant(abc[0]->w[4]) != constant(abc[1]->w[3]))
          fail(at + ": shapes that do not multiply");
        break;
      }
      case kLengthKhr:
        if (w.size() != 3 || !matrix(w[2])) fail(at + ": the length of no KHR matrix type");
        break;
      case spv::OpLoad:
        if (w.size() >= 3 && matrix(w[0]) && pointee(w[2]) != w[0]) fail(at + ": a matrix loaded through a pointer to another type");
        break;
      case spv::OpStore:
        if (w.size() >= 2 && matrix(type(w[1])) && pointee(w[0]) != type(w[1]))
          fail(at + ": a matrix stored through a pointer to another type");
        break;
      default: break;
    }
  }
  if (!out.empty()) return out;
  if (const std::string problems = validate_spirv(as_nv(m)); !problems.empty())
    fail("in NV's terms, each use a type of its own, spirv-val finds: " + problems);
  return out;
}

}  // namespace lathe::emit
