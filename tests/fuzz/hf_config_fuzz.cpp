// libFuzzer target for `lathe import` of a Hugging Face config.json: any
// bytes in, as a checkpoint directory's config.json, must give a spec or
// throw lathe::Error (ImportError for what a spec cannot say, BadFile for
// JSON that is not an object, with its line and column). An imported spec
// must go through build_manifest and make_report. A crash, a sanitizer
// report, a hang, any other exception, an "internal error" (the rendered
// spec not parsing back: the importer wrote a spec it should have refused)
// or an inconsistent report is a finding.
//
// scripts/fuzz builds and runs it with the others; `scripts/fuzz -t 300 hf_config`
// fuzzes it alone for five minutes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/manifest.hpp"
#include "fuzz.hpp"
#include "generator/import/hf_import.hpp"
#include "generator/spec/report.hpp"
#include "runtime/error.hpp"

using namespace lathe;

void lathe::fuzz::hf_config(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input(data, size, "config.json");
  importer::ImportOptions options;
  options.name = "fuzz";
  options.warn = [](const std::string&) {};
  try {
    const importer::ImportResult result = importer::import_hf(path, options);
    if (result.text.empty()) finding("an import without a spec text");
    const spec::Manifest manifest = spec::build_manifest(result.spec);
    if (manifest.tensors.empty()) finding("an imported spec without tensors");
    const int64_t n = result.spec.dims.max_context;
    const spec::Report report = spec::make_report(result.spec, {1, n}, {1, n});
    // (A multimodal config's vision tower is a manifest of its own.)
    const int64_t elements = manifest.total_elements() + spec::build_vision_manifest(result.spec).total_elements();
    if (report.total_params != elements || report.total_params <= 0)
      finding("the report's parameters are not the manifests' elements");
  } catch (const Error& e) {
    // The message's start only: a bad config's messages quote the config.
    if (std::string_view(e.what()).starts_with("internal error")) finding(e.what());
  }
}

LATHE_FUZZ_TARGET(lathe::fuzz::hf_config)
