#include "core/plan.hpp"

#include <cstdio>
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
  return out.empty() ? "nothing" : out;
}

std::string tile_text(const Tile& t) {
  return std::to_string(t.rows) + "×" + std::to_string(t.tokens) + "×" + std::to_string(t.texels) +
         (t.groups > 1 ? " in " + std::to_string(t.groups) + " subgroups" : "");
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
         (c.attention_rows > 1 ? ", a prompt's " + std::to_string(c.attention_rows) + " rows a workgroup" : "");
}

}  // namespace lathe::plan
