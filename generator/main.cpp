// lathe — the command-line front end: devices, report, gen, check, …
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "generator/clang/check.hpp"
#include "generator/clang/format.hpp"
#include "generator/emit/emit_cpp.hpp"
#include "generator/emit/emit_kernels.hpp"
#include "generator/import/import.hpp"
#include "generator/lower/model_plan.hpp"
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

// The generated header as `gen` writes it (formatted with libFormat, as is
// model.cpp), named `header_name` for its #line resets.
std::string model_header(const lathe::spec::Spec& spec, const lathe::lower::ModelPlan& model, const std::string& path,
                         const std::string& header_name) {
  return lathe::clang::format_cpp(lathe::emit::emit_model_header(spec, model, path, header_name), header_name);
}

// A spec the kernels can run, and its plan: parse errors, fields the runtime
// cannot run yet and graphs the lowering cannot turn into dispatches are all
// errors at the spec.
struct Planned {
  lathe::spec::Spec spec;
  lathe::lower::ModelPlan model;
};
std::optional<Planned> load_planned(const std::string& path) {
  auto spec = load_spec(path);
  if (!spec) return std::nullopt;
  lathe::spec::Diagnostics diagnostics(path);
  if (!lathe::emit::check_supported(*spec, diagnostics)) {
    std::cerr << diagnostics.format();
    return std::nullopt;
  }
  auto model = lathe::lower::plan_model(*spec, diagnostics);
  if (!model) {
    std::cerr << diagnostics.format();
    return std::nullopt;
  }
  return Planned{std::move(*spec), std::move(*model)};
}

// Writes <out>/model.hpp, model.cpp and kernels.cpp, each only when its text
// changed; unsupported fields and graphs the kernels cannot run are errors at
// the spec. `dump`: also the plan as text (<out>/plan.dump) and the GLSL and
// SPIR-V disassembly of every kernel instance (<out>/kernels.dump).
int cmd_gen(const std::string& path, const std::string& out_dir, bool quiet, bool dump) {
  auto planned = load_planned(path);
  if (!planned) return 1;
  const lathe::spec::Spec* spec = &planned->spec;
  std::filesystem::create_directories(out_dir);
  const std::filesystem::path dir(out_dir);
  const std::string header_path = (dir / "model.hpp").string();
  const std::string source_path = (dir / "model.cpp").string();
  const std::vector<lathe::emit::CompiledKernel> kernels = lathe::emit::compile_kernels(*spec, planned->model.plan);
  const std::vector<std::pair<std::string, std::string>> files = {
      {header_path, model_header(*spec, planned->model, path, header_path)},
      {source_path, lathe::clang::format_cpp(lathe::emit::emit_model_source(*spec, path), source_path)},
      {(dir / "kernels.cpp").string(), lathe::emit::emit_kernels_source(*spec, path, kernels)},
  };
  for (const auto& [file, text] : files) {
    const bool written = lathe::emit::write_if_changed(file, text);
    if (!quiet) std::cout << file << (written ? " (written)" : " (unchanged)") << "\n";
  }
  if (dump) {
    const std::string plan_path = (dir / "plan.dump").string();
    lathe::emit::write_if_changed(plan_path, lathe::lower::describe(planned->model));
    const std::string dump_path = (dir / "kernels.dump").string();
    lathe::emit::write_if_changed(dump_path, lathe::emit::dump_kernels(kernels));
    if (!quiet) std::cout << plan_path << "\n" << dump_path << "\n";
  }
  return 0;
}

// Generates the model header in memory and compiles it in process (Clang):
// the contract's static_asserts, and the typed API's through the instantiated
// schedule, are reported at the spec. `inject` is C++ appended to the
// translation unit (debugging, tests of the check itself).
int cmd_check(const std::string& path, const std::string& root, const std::string& inject) {
  auto planned = load_planned(path);
  if (!planned) return 1;
  const lathe::spec::Spec* spec = &planned->spec;
  lathe::clang::CheckOptions options;
  options.model_namespace = lathe::emit::model_namespace(spec->name);
  options.include_dirs = {root};
  options.extra_code = inject;
  const auto result = lathe::clang::check_generated(model_header(*spec, planned->model, path, options.header_name), options);
  std::cerr << result.format();
  if (!result.ok) {
    const int errors = result.errors();
    std::cerr << path << ": the generated code does not compile (" << errors << (errors == 1 ? " error)" : " errors)")
              << "\n";
    return 1;
  }
  std::cout << path << ": ok (generated code compiles)\n";
  return 0;
}

// Writes the spec imported from a Hugging Face config (a directory or a
// config.json) to stdout or `out`; warnings and the checkpoint check go to stderr.
int cmd_import(const std::string& path, const std::string& out, const std::string& name) {
  lathe::importer::ImportOptions options;
  options.name = name;
  const lathe::importer::ImportResult result = lathe::importer::import_model_config(path, options);
  if (result.checkpoint)
    std::cerr << path << ": " << result.checkpoint->spec_params << " parameters, as in " << result.checkpoint->path
              << "\n";
  if (out.empty()) {
    std::cout << result.text;
    return 0;
  }
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  file << result.text;
  file.close();
  if (!file) {
    std::cerr << "lathe: " << out << ": cannot write\n";
    return 1;
  }
  std::cerr << out << " (written)\n";
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
  bool dump = false;
  gen->add_flag("--dump", dump, "Also write plan.dump (every dispatch of the plan) and kernels.dump (the GLSL and SPIR-V disassembly of every kernel)");

  std::string root = LATHE_SOURCE_DIR;
  std::string inject;
  auto* check = app.add_subcommand(
      "check", "Generate the model header and compile it in process (Clang); failed contracts point at the spec");
  check->add_option("spec", spec_path, "The architecture spec (TOML)")->required()->check(CLI::ExistingFile);
  check->add_option("--root", root, "The lathe source tree, for runtime/model/*.hpp")
      ->capture_default_str()
      ->check(CLI::ExistingDirectory);
  check->add_option("--inject", inject, "C++ appended to the checked translation unit")->group("");

  std::string import_path;
  std::string import_out;
  std::string import_name;
  auto* import = app.add_subcommand(
      "import", "Write a commented TOML spec from a Hugging Face config.json or a GGUF file's metadata (checked against "
                "the checkpoint's tensors)");
  import->add_option("path", import_path, "A model directory holding config.json (or one .gguf file), a config file, or a .gguf file")
      ->required()
      ->check(CLI::ExistingPath);
  import->add_option("-o,--out", import_out, "The spec file to write (default: stdout)");
  import->add_option("--name", import_name, "[model] name (default: the directory's name, else _name_or_path)");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*devices) return cmd_devices(validation);
    if (*report) return cmd_report(spec_path, json, prefill, decode);
    if (*gen) return cmd_gen(spec_path, out_dir, quiet, dump);
    if (*check) return cmd_check(spec_path, root, inject);
    if (*import) return cmd_import(import_path, import_out, import_name);
  } catch (const lathe::importer::ImportError& e) {
    std::cerr << e.what() << "\n";  // every line already names the config
    return 1;
  } catch (const lathe::Error& e) {
    std::cerr << "lathe: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "lathe: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
