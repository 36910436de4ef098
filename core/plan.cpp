#include "core/plan.hpp"

#include <string>

namespace lathe::plan {

std::string needs_text(const DeviceClass& c) {
  std::string out;
  if (c.cpu_only) out = "a CPU device";
  if (c.min_subgroup > 1)
    out += (out.empty() ? "" : " with ") + std::string("subgroups of ") + std::to_string(c.min_subgroup) + " lanes or more";
  return out.empty() ? "nothing" : out;
}

namespace {
std::string tile_text(const Tile& t) {
  return std::to_string(t.rows) + "×" + std::to_string(t.tokens) + "×" + std::to_string(t.texels);
}
}  // namespace

std::string class_text(const DeviceClass& c) {
  return "needs " + needs_text(c) + "; matmul tiles (rows×tokens×texels) decode " + tile_text(c.decode) + ", prefill " +
         (c.prefill == c.decode ? "the decode layout" : tile_text(c.prefill)) + ", batch " + tile_text(c.batch) +
         "; attention in " + std::to_string(c.splits) + (c.splits == 1 ? " key range" : " key ranges");
}

}  // namespace lathe::plan
