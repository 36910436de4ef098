// libFuzzer target for the spec front end: any bytes in, diagnostics or a
// spec out; an accepted spec must go through build_manifest (and a tower's
// build_vision_manifest) and make_report.
// A crash, a sanitizer report, an uncaught exception, a rejection without a
// diagnostic or an inconsistent report is a finding.
//
// scripts/fuzz builds and runs it with the others; `scripts/fuzz -t 300 spec`
// fuzzes it alone for five minutes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/manifest.hpp"
#include "fuzz.hpp"
#include "generator/spec/parse.hpp"
#include "generator/spec/report.hpp"

using namespace lathe::spec;

void lathe::fuzz::spec(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string file = "fuzz.toml";
  Diagnostics diag(file);
  const auto spec = parse_spec_string(text, file, diag);
  if (!spec) {
    if (diag.empty()) finding("a spec rejected without a diagnostic");
    (void)diag.format();
    return;
  }
  if (!diag.empty()) finding("a spec accepted with errors");
  const Manifest manifest = build_manifest(*spec);
  if (manifest.tensors.empty() || manifest.tensors.size() > (size_t{1} << 18))
    finding("an accepted spec with no tensors or too many");
  // Up to the full context, as `lathe report --prefill N --decode N` would ask.
  const int64_t n = spec->dims.max_context;
  const Report report = make_report(*spec, {1, 128, n}, {1, n});
  // (A vision tower's tensors are the checkpoint's too: its own manifest.)
  const Manifest vision = build_vision_manifest(*spec);
  if (vision.tensors.size() > (size_t{1} << 18)) finding("an accepted spec whose tower has too many tensors");
  if (report.total_params != manifest.total_elements() + vision.total_elements() || report.total_params <= 0)
    finding("the report's parameters are not the manifests' elements");
  (void)format_report(report);
  (void)report_json(report).dump();
}

LATHE_FUZZ_TARGET(lathe::fuzz::spec)
