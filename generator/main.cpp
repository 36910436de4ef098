// lathe — the command-line front end: devices, report, …
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "generator/emit/emit_cpp.hpp"
#include "generator/spec/parse.hpp"
#include "generator/spec/report.hpp"
#include "runtime/error.hpp"
#include "runtime/vk/device_info.hpp"
#include "runtime/vk/instance.hpp"

namespace {

int cmd_devices(bool validation) {
  lathe::vk::Instance instance(lathe::vk::InstanceOptions{validation});
  const auto devices = lathe::vk::query_devices(instance.handle());
  std::cout << lathe::vk::format_device_list(devices);
  if (!devices.empty()) {
    const auto& chosen = lathe::vk::select_device(devices, lathe::vk::device_selector());
    std::cout << "selected: [" << chosen.index << "] " << chosen.name << "\n";
  }
  return 0;
}

// Parses a spec, printing every error of the file; nullopt when there were any.
std::optional<lathe::spec::Spec> load_spec(const std::string& path) {
  lathe::spec::Diagnostics diagnostics(path);
  auto spec = lathe::spec::parse_spec_file(path, diagnostics);
  if (!spec) std::cerr << diagnostics.format();
  return spec;
}

int cmd_report(const std::string& path, bool json, const std::vector<int64_t>& prefill,
               const std::vector<int64_t>& decode) {
  auto spec = load_spec(path);
  if (!spec) return 1;
  const auto report = lathe::spec::make_report(*spec, prefill, decode);
  if (json) std::cout << lathe::spec::report_json(report).dump(2) << "\n";
  else std::cout << lathe::spec::format_report(report);
  return 0;
}

// Writes <out>/model.hpp and <out>/model.cpp, each only when its text changed;
// unsupported fields are errors at the spec.
int cmd_gen(const std::string& path, const std::string& out_dir, bool quiet) {
  auto spec = load_spec(path);
  if (!spec) return 1;
  lathe::spec::Diagnostics diagnostics(path);
  if (!lathe::emit::check_supported(*spec, diagnostics)) {
    std::cerr << diagnostics.format();
    return 1;
  }
  std::filesystem::create_directories(out_dir);
  const std::filesystem::path dir(out_dir);
  const std::string header_path = (dir / "model.hpp").string();
  const std::string source_path = (dir / "model.cpp").string();
  const bool header = lathe::emit::write_if_changed(header_path, lathe::emit::emit_model_header(*spec, path, header_path));
  const bool source = lathe::emit::write_if_changed(source_path, lathe::emit::emit_model_source(*spec, path));
  if (!quiet) {
    std::cout << header_path << (header ? " (written)" : " (unchanged)") << "\n";
    std::cout << source_path << (source ? " (written)" : " (unchanged)") << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"lathe: a transformer spec in, a model-specific Vulkan inference build out"};
  app.require_subcommand(1);

  bool validation = false;
  auto* devices = app.add_subcommand("devices", "List the Vulkan devices, their memory and the limits that matter");
  devices->add_flag("--validation", validation, "Enable the Khronos validation layer");

  std::string spec_path;
  bool json = false;
  std::vector<int64_t> prefill = {128, 512};
  std::vector<int64_t> decode = {128, 2048};
  auto* report = app.add_subcommand("report", "Parameters, bytes, FLOPs per token and KV-cache size of a spec");
  report->add_option("spec", spec_path, "The architecture spec (TOML)")->required()->check(CLI::ExistingFile);
  report->add_flag("--json", json, "Print JSON for tools instead of a table");
  report->add_option("--prefill", prefill, "Prefill lengths T for FLOPs per token")->check(CLI::PositiveNumber);
  report->add_option("--decode", decode, "Decode contexts L for FLOPs per token")->check(CLI::PositiveNumber);

  std::string out_dir = ".";
  auto* gen = app.add_subcommand("gen", "Generate the model-specific build of a spec");
  gen->add_option("spec", spec_path, "The architecture spec (TOML)")->required()->check(CLI::ExistingFile);
  gen->add_option("-o,--out", out_dir, "Directory of the generated files");
  bool quiet = false;
  gen->add_flag("-q,--quiet", quiet, "Print only errors");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*devices) return cmd_devices(validation);
    if (*report) return cmd_report(spec_path, json, prefill, decode);
    if (*gen) return cmd_gen(spec_path, out_dir, quiet);
  } catch (const lathe::Error& e) {
    std::cerr << "lathe: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "lathe: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
