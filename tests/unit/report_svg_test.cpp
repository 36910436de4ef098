// The report's per-layer breakdown and cache curves, which `lathe report
// --svg` draws.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "generator/spec/parse.hpp"
#include "generator/spec/report.hpp"

using namespace lathe::spec;
using nlohmann::json;

namespace {

Report report_of(const std::string& file, const std::vector<int64_t>& decode = {128, 2048}) {
  const std::string path = (std::filesystem::path(LATHE_SOURCE_DIR) / "models" / file).string();
  Diagnostics diag(path);
  auto spec = parse_spec_file(path, diag);
  INFO(diag.format());
  REQUIRE(spec);
  return make_report(*spec, {128, 512}, decode);
}

}  // namespace

TEST_CASE("report: the per-layer breakdown adds up to the whole model's parameters and FLOPs") {
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(LATHE_SOURCE_DIR) / "models")) {
    if (entry.path().extension() != ".toml") continue;
    CAPTURE(entry.path().filename().string());
    const Report r = report_of(entry.path().filename().string());
    int64_t params = 0, active = 0;
    double flops = 0;
    std::vector<const ComponentCost*> all;
    for (const ComponentCost& c : r.global_costs) all.push_back(&c);
    for (const auto& layer : r.layer_costs)
      for (const ComponentCost& c : layer) all.push_back(&c);
    for (const ComponentCost* c : all) {
      params += c->params;
      active += c->active_params;
      flops += c->flops;
    }
    CHECK(params == r.total_params);
    CHECK(active == r.active_params);
    const auto& entries = r.encoder ? r.prefill_flops_per_token : r.decode_flops_per_token;
    REQUIRE(!entries.empty());
    CHECK(r.breakdown_context == entries.back().first);
    CHECK(flops == doctest::Approx(entries.back().second).epsilon(1e-12));
  }
}

TEST_CASE("report: the cache curves of llama-3-8b, mamba-130m and bamba-9b") {
  // Llama 3 8B: 32 layers × K and V × 8 heads × 128, two bytes (f16) or four
  // a value; the first context past the weights is theirs over a token's.
  const Report llama = report_of("llama-3-8b.toml");
  REQUIRE(llama.cache_curves.size() == 2);
  for (const CacheCurve& c : llama.cache_curves) {
    const int64_t per_token = 32 * 2 * 8 * 128 * (c.dtype == DType::F16 ? 2 : 4);
    CHECK(c.spec_dtype == (c.dtype == DType::F16));
    for (const auto& [L, bytes] : c.bytes_at_context) CHECK(bytes == per_token * L);
    CHECK(c.passes_weights_at == (llama.device_weight_bytes + per_token - 1) / per_token);
    CHECK(c.bytes_at_context.back().first >= 2 * c.passes_weights_at);  // the crossing is on the picture
  }
  // Mamba: the state alone, the same at every context.
  const Report mamba = report_of("mamba-130m.toml");
  REQUIRE(mamba.cache_curves.size() == 1);
  for (const auto& [L, bytes] : mamba.cache_curves[0].bytes_at_context)
    CHECK(bytes == mamba.conv_state_bytes + mamba.scan_state_bytes);
  CHECK(mamba.cache_curves[0].passes_weights_at == 0);
  // Bamba: the state, then three attention layers' KV cache on top of it.
  const Report bamba = report_of("bamba-9b.toml");
  REQUIRE(bamba.cache_curves.size() == 3);
  const int64_t state = bamba.conv_state_bytes + bamba.scan_state_bytes;
  for (const auto& [L, bytes] : bamba.cache_curves[1].bytes_at_context)
    CHECK(bytes == state + 3 * 2 * 8 * 128 * 2 * L);
  CHECK(bamba.cache_curves[1].label == "KV cache (f16) + state");
}
