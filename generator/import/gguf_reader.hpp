// Reading a GGUF file's metadata for an import: typed values, each problem
// a line naming the file and the key or tensor at fault (gguf_import.cpp's
// text models, gguf_mmproj.cpp's vision towers).
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "runtime/weights/gguf.hpp"

namespace lathe::importer::gguf_families {

// f32 metadata back to the decimal it was written from: 1e-05, not 9.99999975e-06.
inline double from_f32(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.7g", v);
  return std::strtod(text, nullptr);
}

class Reader {
 public:
  Reader(const std::map<std::string, weights::GgufValue, std::less<>>& m, const std::vector<weights::TensorInfo>& tensors, std::string file)
      : m_(m), file_(std::move(file)) {
    for (const weights::TensorInfo& t : tensors) tensors_[t.name] = &t;
  }

  void problem(const std::string& what) { problems_.push_back(file_ + ": " + what); }
  const std::vector<std::string>& problems() const { return problems_; }

  const weights::GgufValue* value(std::string_view key) const {
    auto it = m_.find(key);
    return it == m_.end() ? nullptr : &it->second;
  }
  std::optional<std::string> string(std::string_view key) {
    const weights::GgufValue* v = value(key);
    if (v == nullptr) return std::nullopt;
    if (const auto* s = std::get_if<std::string>(&v->value)) return *s;
    problem(std::string(key) + ": a string expected, a " + std::string(weights::gguf_type_name(v->type())) + " found");
    return std::nullopt;
  }
  std::optional<double> number(std::string_view key) {
    const weights::GgufValue* v = value(key);
    if (v == nullptr) return std::nullopt;
    return std::visit(
        [&](const auto& x) -> std::optional<double> {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, float>) return from_f32(x);
          else if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) return static_cast<double>(x);
          else {
            problem(std::string(key) + ": a number expected, a " + std::string(weights::gguf_type_name(v->type())) +
                    " found");
            return std::nullopt;
          }
        },
        v->value);
  }
  std::optional<int64_t> integer(std::string_view key) {
    auto v = number(key);
    if (!v) return std::nullopt;
    if (*v != std::floor(*v) || *v < 0 || *v > 1e15) {
      problem(std::string(key) + ": " + std::to_string(*v) + " is not a count");
      return std::nullopt;
    }
    return static_cast<int64_t>(*v);
  }
  int64_t required(std::string_view key) {
    auto v = integer(key);
    if (!v && value(key) == nullptr) problem(std::string(key) + ": missing");
    return v.value_or(0);
  }

  const weights::TensorInfo* tensor(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : it->second;
  }
  bool has(const std::string& name) const { return tensor(name) != nullptr; }
  const std::map<std::string, const weights::TensorInfo*>& tensors() const { return tensors_; }

 private:
  const std::map<std::string, weights::GgufValue, std::less<>>& m_;
  std::map<std::string, const weights::TensorInfo*> tensors_;
  std::string file_;
  std::vector<std::string> problems_;
};

}  // namespace lathe::importer::gguf_families
