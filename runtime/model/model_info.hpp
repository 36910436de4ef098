// What a generated model library tells the generic runtime about itself.
// Each library built by lathe_add_model defines lathe::model_info().
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "runtime/model/contract.hpp"
#include "runtime/model/typed.hpp"

namespace lathe {

struct ModelInfo {
  std::string_view name;
  std::string_view spec_file;
  int64_t hidden, layers, heads, kv_heads, head_dim, intermediate, vocab, max_context;
  int64_t total_params;
  Layout layout;
  std::span<const ManifestEntry> manifest;
  typed::Schedule (*schedule)();
};

const ModelInfo& model_info();

}  // namespace lathe
