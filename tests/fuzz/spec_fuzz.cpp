// libFuzzer target for the spec front end: any bytes in, diagnostics or a
// spec out; an accepted spec must go through build_manifest and make_report.
// A crash, a sanitizer report, an uncaught exception, a rejection without a
// diagnostic or an inconsistent report is a finding.
//
//   cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DLATHE_FUZZ=ON
//   make -C build-fuzz lathe_spec_fuzz
//   mkdir -p build-fuzz/corpus
//   build-fuzz/tests/lathe_spec_fuzz -dict=tests/fuzz/spec.dict -max_total_time=30 \
//       build-fuzz/corpus models tests/specs/bad
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/manifest.hpp"
#include "generator/spec/parse.hpp"
#include "generator/spec/report.hpp"

using namespace lathe::spec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string file = "fuzz.toml";
  Diagnostics diag(file);
  const auto spec = parse_spec_string(text, file, diag);
  if (!spec) {
    if (diag.empty()) std::abort();  // rejected without saying why
    (void)diag.format();
    return 0;
  }
  if (!diag.empty()) std::abort();  // accepted with errors
  const Manifest manifest = build_manifest(*spec);
  if (manifest.tensors.empty() || manifest.tensors.size() > (size_t{1} << 18)) std::abort();
  // Up to the full context, as `lathe report --prefill N --decode N` would ask.
  const int64_t n = spec->dims.max_context;
  const Report report = make_report(*spec, {1, 128, n}, {1, n});
  if (report.total_params != manifest.total_elements() || report.total_params <= 0) std::abort();
  (void)format_report(report);
  (void)report_json(report).dump();
  return 0;
}
