#include "core/plan.hpp"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace lathe::plan {

std::string needs_text(const DeviceClass& c) {
  std::string out;
  if (c.cpu_only) out = "a CPU device";
  if (c.min_subgroup > 1)
    out += (out.empty() ? "" : " with ") + std::string("subgroups of ") + std::to_string(c.min_subgroup) + " lanes or more";
  if (c.min_shared > 0)
    out += (out.empty() ? "" : " and ") + std::to_string(c.min_shared) + " bytes of shared memory or more";
  if (c.attention_rows > 1) out += ", workgroups of " + std::to_string(c.attention_rows) + " subgroups";
  if (uses(c, Variant::Dot)) out += (out.empty() ? "" : ", ") + std::string("integer dot products (shaderIntegerDotProduct)");
  if (uses(c, Variant::Coop)) out += (out.empty() ? "" : ", ") + std::string("VK_NV_cooperative_matrix (16×16×16 f16 → f32)");
  if (uses(c, Variant::CoopKhr)) out += (out.empty() ? "" : ", ") + std::string("VK_KHR_cooperative_matrix (16×16×16 f16 → f32)");
  return out.empty() ? "nothing" : out;
}

std::string tile_text(const Tile& t) {
  return std::to_string(t.rows) + "×" + std::to_string(t.tokens) + "×" + std::to_string(t.texels) +
         (t.groups > 1 ? " in " + std::to_string(t.groups) + " subgroups" : "") +
         (t.variant == Variant::Plain ? "" : " (" + std::string(kernels::layout_name(t.layout())) + ")");
}

std::optional<Tile> parse_tile(std::string_view text) {
  Tile t;
  char end = 0;
  const std::string s(text);
  const int n = std::sscanf(s.c_str(), "%u,%u,%u,%u%c", &t.rows, &t.tokens, &t.texels, &t.groups, &end);
  if (n != 3 && n != 4) return std::nullopt;
  return t;
}

std::string class_text(const DeviceClass& c) {
  return "needs " + needs_text(c) + "; matmul tiles (rows×tokens×texels) decode " + tile_text(c.decode) + ", prefill " +
         (c.prefill == c.decode ? "the decode layout" : tile_text(c.prefill) + (c.prefill.tiled() ? " tiled" : "")) + ", batch " + tile_text(c.batch) +
         "; attention in " + std::to_string(c.splits) + (c.splits == 1 ? " key range" : " key ranges") +
         (c.decode_splits != c.splits ? " (a step's " + std::to_string(c.decode_splits) + ")" : "") +
         (c.flash.rows > 0 ? ", a prompt's in flash tiles of " + std::to_string(c.flash.rows) + " rows × " +
                                 std::to_string(c.flash.keys) + " keys" + (uses(c, Variant::Coop) || uses(c, Variant::CoopKhr) ? " on matrix units" : "")
          : c.attention_rows > 1 ? ", a prompt's " + std::to_string(c.attention_rows) + " rows a workgroup"
                                 : "") +
         (c.forced_only ? "; taken only when named" : "") +
         (c.verified.empty() ? "" : "; verified on " + std::string(c.verified));
}

std::optional<std::vector<int64_t>> parse_split(std::string_view text) {
  if (text == "memory") return std::nullopt;
  constexpr std::string_view kLayers = "layers:";
  if (!text.starts_with(kLayers))
    throw std::invalid_argument("--split: \"" + std::string(text) + "\" is neither memory nor layers:N,N,…");
  std::vector<int64_t> counts;
  const std::string list(text.substr(kLayers.size()));
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string item = list.substr(at, comma - at);
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || end != item.c_str() + item.size() || v < 1 || v > 1 << 20) {
      if (list.empty()) throw std::invalid_argument("--split: no layer counts after layers:");
      throw std::invalid_argument("--split: \"" + item + "\" is not a count of layers (1 or more)");
    }
    counts.push_back(v);
    at = comma + 1;
  }
  return counts;
}

}  // namespace lathe::plan
