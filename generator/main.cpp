// lathe — the command-line front end: devices, report, gen, check, …
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "generator/clang/check.hpp"
#include "generator/clang/format.hpp"
#include "generator/driver/cache.hpp"
#include "generator/driver/model_build.hpp"
#include "generator/driver/process.hpp"
#include "generator/emit/emit_cpp.hpp"
#include "generator/emit/emit_kernels.hpp"
#include "generator/import/audit.hpp"
#include "generator/import/import.hpp"
#include "generator/import/quantize.hpp"
#include "generator/lower/device_report.hpp"
#include "generator/lower/model_plan.hpp"
#include "generator/spec/design.hpp"
#include "generator/spec/parse.hpp"
#include "generator/spec/lint.hpp"
#include "generator/spec/placement.hpp"
#include "generator/spec/report.hpp"
#include "core/manifest.hpp"
#include "runtime/cache_dir.hpp"
#include "runtime/error.hpp"
#include "runtime/version.hpp"
#include "runtime/vk/device_info.hpp"
#include "runtime/vk/instance.hpp"
#include "runtime/weights/checkpoint.hpp"

namespace {

int cmd_devices(bool validation) {
  lathe::vk::Instance instance(lathe::vk::InstanceOptions{validation});
  const auto devices = lathe::vk::query_devices(instance);
  std::cout << lathe::vk::format_device_list(devices);
  if (!devices.empty()) {
    const auto& chosen = lathe::vk::select_device(devices, lathe::vk::device_selector());
    std::cout << "selected: [" << chosen.index << "] " << chosen.name << "\n";
    std::cout << lathe::lower::device_class_report(devices);
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

// Writes `text` to `path`; false (and why, naming the file and the option)
// when it cannot.
bool write_file(const std::string& path, const std::string& text, const char* option) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (file) file << text;
  if (file) file.close();
  if (!file) {
    std::cerr << "lathe report: " << option << " " << path << ": cannot write: " << std::strerror(errno) << "\n";
    return false;
  }
  return true;
}

// The report's pictures as a PNG: rsvg-convert (librsvg) renders the SVG,
// read from a temporary file beside nothing else lathe writes.
bool write_png(const std::string& path, const std::string& svg) {
  // The PNG's path is checked first, so that its error names it rather
  // than leaving rsvg-convert's to explain.
  if (!write_file(path, "", "--png")) return false;
  std::string temp = (std::filesystem::temp_directory_path() / "lathe-report-XXXXXX.svg").string();
  const int fd = mkstemps(temp.data(), 4);
  if (fd < 0) {
    std::cerr << "lathe report: --png: cannot create a temporary file in "
              << std::filesystem::temp_directory_path().string() << ": " << std::strerror(errno) << "\n";
    return false;
  }
  close(fd);
  const bool written = write_file(temp, svg, "--png");
  const lathe::driver::Command command = {"rsvg-convert", "--format", "png", "--output", path, temp};
  const int status = written ? lathe::driver::run_all({command}).front() : 1;
  std::filesystem::remove(temp);
  std::error_code ignored;
  if (status != 0) std::filesystem::remove(path, ignored);  // no empty PNG left behind
  if (!written) return false;
  if (status == 127) {
    std::cerr << "lathe report: --png needs rsvg-convert on the PATH (Debian and Ubuntu: the librsvg2-bin package); "
                 "--svg writes the SVG without it\n";
    return false;
  }
  if (status != 0) {
    std::cerr << "lathe report: --png " << path << ": rsvg-convert failed (exit status " << status << ")\n";
    return false;
  }
  return true;
}

// --devices (and --split, --context, --sequences): where a pipeline split
// would put the model's layers, each device's bytes (placement.hpp).
struct SplitOptions {
  std::string devices, split = "memory";
  int64_t context = 0, sequences = 1;  // context 0: the spec's max_context
};

// --devices: amounts of memory (24GiB) or devices of this machine by index
// or name (0, llvmpipe): a device's memory as a session counts it
// (vk::device_memory; said on stderr). Throws PlacementError naming an item
// that is neither.
std::vector<int64_t> device_capacities(const std::string& text) {
  std::vector<int64_t> out;
  std::unique_ptr<lathe::vk::Instance> instance;  // opened at the first device named
  std::vector<lathe::vk::DeviceInfo> devices;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    try {
      out.push_back(lathe::spec::parse_capacities(item).front());
      continue;
    } catch (const lathe::spec::PlacementError& e) {
      if (item.empty()) throw;
    }
    try {
      if (!instance) {
        instance = std::make_unique<lathe::vk::Instance>();
        devices = lathe::vk::query_devices(*instance);
      }
      const lathe::vk::DeviceInfo& d = lathe::vk::select_device(devices, item);
      const lathe::vk::DeviceMemory memory = lathe::vk::device_memory(d);
      std::cerr << "--devices: " << item << " is [" << d.index << "] " << d.name << ", " << (memory.bytes >> 20) << " MiB"
                << (memory.host ? " (the host's memory)" : "")
                << (memory.available > 0 ? ", " + std::to_string(memory.available >> 20) + " MiB of it available now" : "")
                << "\n";
      out.push_back(static_cast<int64_t>(memory.bytes));
    } catch (const lathe::Error& e) {
      throw lathe::spec::PlacementError("--devices: \"" + item + "\" is neither an amount of memory (24GiB) nor a device of " +
                                        "this machine (" + e.what() + ")");
    }
  }
  return out;
}

int cmd_report(const std::string& path, bool json, const std::vector<int64_t>& prefill,
               const std::vector<int64_t>& decode, const std::string& svg_path, const std::string& png_path,
               const SplitOptions& split) {
  auto spec = load_spec(path);
  if (!spec) return 1;
  const auto report = lathe::spec::make_report(*spec, prefill, decode);
  std::optional<lathe::spec::Placement> placement;
  if (!split.devices.empty()) {
    try {
      placement = lathe::spec::place(*spec, report, device_capacities(split.devices),
                                     lathe::spec::parse_split(split.split),
                                     split.context ? split.context : spec->dims.max_context, split.sequences);
    } catch (const lathe::spec::PlacementError& e) {
      std::cerr << "lathe report: " << e.what() << "\n";
      return 2;
    }
  }
  if (json) {
    nlohmann::json j = lathe::spec::report_json(report);
    if (placement) j["placement"] = lathe::spec::placement_json(*placement);
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << lathe::spec::format_report(report);
    if (placement) std::cout << lathe::spec::format_placement(*placement);
  }
  const int status = placement && !placement->fits() ? 1 : 0;
  if (svg_path.empty() && png_path.empty()) return status;
  const std::string svg = lathe::spec::report_svg(report, placement ? &*placement : nullptr);
  if (!svg_path.empty() && !write_file(svg_path, svg, "--svg")) return 1;
  if (!png_path.empty() && !write_png(png_path, svg)) return 1;
  return status;
}

// Advice on the spec's hyperparameters (warnings at their lines; never an
// error: the exit status is 0 for any spec that parses).
int cmd_lint(const std::string& path) {
  auto spec = load_spec(path);
  if (!spec) return 1;
  const std::vector<lathe::spec::Advice> advice = lathe::spec::lint(*spec);
  std::cout << lathe::spec::format_advice(path, advice);
  if (advice.empty()) std::cout << path << ": every hyperparameter lint knows is within practice\n";
  return 0;
}

// The checkpoint's contract checked, a line per check (audit.hpp): exit 1
// when a check errs, 0 with warnings alone. A path that cannot be read is an
// error check naming it.
int cmd_audit(const std::string& path, bool json) {
  const lathe::importer::AuditResult result = lathe::importer::audit_checkpoint(path);
  if (json) std::cout << lathe::importer::audit_json(result).dump(2) << "\n";
  else std::cout << lathe::importer::format_audit(result);
  return result.count(lathe::importer::AuditStatus::Error) > 0 ? 1 : 0;
}

// A spec from a budget: to stdout or `out`; the derivation (--explain) to
// stderr, so that the spec alone goes down a pipe. Bad options exit 2.
int cmd_design(lathe::spec::DesignArgs args, const std::string& out, bool explain, int argc, char** argv) {
  // The command quoted in the spec: its options, not where it was written
  // or whether it explained itself.
  args.command = "lathe";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-o" || a == "--out") ++i;
    else if (!a.starts_with("--out=") && !(a.starts_with("-o") && a.size() > 2) && a != "--explain") args.command += " " + a;
  }
  lathe::spec::Design design;
  try {
    design = lathe::spec::design(lathe::spec::design_options(args));
  } catch (const lathe::spec::DesignError& e) {
    std::cerr << "lathe design: " << e.what() << "\n";
    return 2;
  }
  if (explain)
    for (const std::string& line : design.explanation) std::cerr << line << "\n";
  if (out.empty()) {
    std::cout << design.spec;
    return 0;
  }
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  if (file) file << design.spec;
  if (file) file.close();
  if (!file) {
    std::cerr << "lathe design: -o " << out << ": cannot write: " << std::strerror(errno) << "\n";
    return 1;
  }
  std::cerr << out << " (written)\n";
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
// the spec (load_planned). `dump`: also the plan as text (<out>/plan.dump) and
// the GLSL and SPIR-V disassembly of every kernel instance (<out>/kernels.dump).
void write_build(const Planned& planned, const std::string& path, const std::string& out_dir, bool quiet, bool dump) {
  const lathe::spec::Spec* spec = &planned.spec;
  std::filesystem::create_directories(out_dir);
  const std::filesystem::path dir(out_dir);
  const std::string header_path = (dir / "model.hpp").string();
  const std::string source_path = (dir / "model.cpp").string();
  const std::vector<lathe::emit::CompiledKernel> kernels = lathe::emit::compile_kernels(*spec, planned.model.plan);
  const std::vector<std::pair<std::string, std::string>> files = {
      {header_path, model_header(*spec, planned.model, path, header_path)},
      {source_path, lathe::clang::format_cpp(lathe::emit::emit_model_source(*spec, path), source_path)},
      {(dir / "kernels.cpp").string(), lathe::emit::emit_kernels_source(*spec, path, kernels)},
  };
  for (const auto& [file, text] : files) {
    const bool written = lathe::emit::write_if_changed(file, text);
    if (!quiet) std::cout << file << (written ? " (written)" : " (unchanged)") << "\n";
  }
  if (dump) {
    const std::string plan_path = (dir / "plan.dump").string();
    lathe::emit::write_if_changed(plan_path, lathe::lower::describe(planned.model));
    const std::string dump_path = (dir / "kernels.dump").string();
    lathe::emit::write_if_changed(dump_path, lathe::emit::dump_kernels(kernels));
    if (!quiet) std::cout << plan_path << "\n" << dump_path << "\n";
  }
}

// The generated build of a spec; unsupported fields are errors at the spec.
int cmd_gen(const std::string& path, const std::string& out_dir, bool quiet, bool dump) {
  auto planned = load_planned(path);
  if (!planned) return 1;
  write_build(*planned, path, out_dir, quiet, dump);
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

// `lathe quantize`: a GGUF file, a Hugging Face checkpoint or a spec and its weights → a GGUF file of
// llama.cpp's mixture `type` (generator/import/quantize.hpp has the rules).
int cmd_quantize(const std::string& in, const std::string& out, const std::string& type, const std::string& weights) {
  const lathe::importer::Mixture mixture = *lathe::importer::mixture_from_key(type);  // checked by the option
  // On a terminal, a line rewritten as each tensor is converted.
  lathe::importer::QuantizeProgress progress;
  if (isatty(STDERR_FILENO))
    progress = [](size_t done, size_t total, const std::string& name) {
      std::fprintf(stderr, "\rquantizing tensor %zu/%zu: %s\033[K", done + 1, total, name.c_str());
      std::fflush(stderr);
    };
  const lathe::importer::QuantizeResult result = lathe::importer::quantize_model(in, out, mixture, weights, progress);
  if (progress) std::cerr << "\r\033[K";
  std::cerr << out << " (written): ";
  bool first = true;
  for (const auto& [dtype, count] : result.tensors) {
    std::cerr << (first ? "" : ", ") << count << " " << lathe::spelling(dtype).enumerator;
    first = false;
  }
  std::cerr << " tensors, " << result.bytes << " bytes of data\n";
  if (!result.vocabulary.empty()) std::cerr << out << ": " << result.vocabulary << "\n";
  return 0;
}

// A model executable of `spec_path` in the cache, built when no cached one
// has the same key: the spec's path and text, the lathe binary, its
// toolchain and libraries. nullopt when the spec has errors (printed).
struct Built {
  std::filesystem::path exe;
  bool cached = false;
};
std::optional<Built> build_model(const std::string& spec_path, bool verbose) {
  namespace fs = std::filesystem;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  auto spec = load_spec(spec_path);
  if (!spec) return std::nullopt;
  const std::string cache = lathe::cache_dir();
  if (cache.empty())
    throw lathe::Error(lathe::ErrorKind::NotFound,
                       "no cache directory for model builds: set LATHE_CACHE_DIR (or XDG_CACHE_HOME or HOME)");
  const lathe::driver::Toolchain toolchain = lathe::driver::find_toolchain();
  std::ifstream spec_file(spec_path, std::ios::binary);
  const std::string spec_text((std::istreambuf_iterator<char>(spec_file)), std::istreambuf_iterator<char>());
  // The canonical path: ./m.toml, m.toml and a link to it are one entry.
  const std::string key = lathe::driver::Hash()
                              .add(lathe::driver::toolchain_key(toolchain))
                              .add(fs::weakly_canonical(spec_path).string())
                              .add(spec_text)
                              .hex();
  const std::string name = lathe::emit::model_namespace(spec->name);
  const fs::path dir = fs::path(cache) / "models" / (name + "-" + key);
  const fs::path exe = dir / name;
  if (fs::exists(exe)) {
    if (verbose) std::cerr << "lathe: " << exe.string() << " (cached)\n";
    std::error_code error;
    fs::last_write_time(dir, fs::file_time_type::clock::now(), error);  // used now: the last to be pruned
    return Built{exe, true};
  }
  auto planned = load_planned(spec_path);
  if (!planned) return std::nullopt;
  std::cerr << "lathe: building " << spec->name << " from " << spec_path << " (" << dir.string() << ")\n";
  // Built aside and renamed into place, so that an interrupted build or a
  // concurrent one never leaves a half-made directory under the key.
  const fs::path temp = fs::path(cache) / "models" / (name + "-" + key + ".tmp" + std::to_string(getpid()));
  fs::remove_all(temp);
  write_build(*planned, spec_path, temp.string(), /*quiet=*/true, /*dump=*/false);
  lathe::driver::compile_model(toolchain, temp, temp / name, verbose);
  std::error_code error;
  fs::rename(temp, dir, error);
  if (error) {
    fs::remove_all(temp);  // another lathe put the same build there first
    if (!fs::exists(exe)) throw lathe::Error(lathe::ErrorKind::Io, "cannot rename " + temp.string() + " to " +
                                                                       dir.string() + ": " + error.message());
  }
  std::fprintf(stderr, "lathe: built %s in %.1f s\n", exe.c_str(),
               std::chrono::duration<double>(Clock::now() - start).count());
  // Keep the cache within its limit: the least recently used builds go.
  for (const auto& gone : lathe::driver::prune_cache(cache, std::nullopt, lathe::driver::cache_limit(), dir))
    if (verbose) std::cerr << "lathe: removed " << gone.path.string() << " from the cache (LATHE_CACHE_LIMIT)\n";
  return Built{exe, false};
}

// What --help after the model of `lathe run` becomes (model_first()), so
// that it reaches the model executable rather than run's own parser.
constexpr const char* kModelHelp = "--lathe-model-help";

// What `lathe build` and `lathe run` take: a spec (.toml), a Hugging Face
// model directory, a GGUF file or a directory holding one. A checkpoint is
// imported to a spec kept in the cache, and is the weights to run with.
struct Resolved {
  std::string spec_path;
  std::string weights;  // empty for a spec
};
Resolved resolve_model(const std::string& model, bool verbose) {
  namespace fs = std::filesystem;
  if (fs::path(model).extension() == ".toml") return {model, ""};
  if (!fs::is_directory(model) && fs::path(model).extension() != ".gguf")
    throw lathe::Error(lathe::ErrorKind::InvalidArgument,
                       model + ": not a spec (.toml), a Hugging Face model directory or a .gguf file");
  const lathe::importer::ImportResult imported = lathe::importer::import_model_config(model);
  const std::string cache = lathe::cache_dir();
  if (cache.empty())
    throw lathe::Error(lathe::ErrorKind::NotFound,
                       "no cache directory for imported specs: set LATHE_CACHE_DIR (or XDG_CACHE_HOME or HOME)");
  const fs::path specs = fs::path(cache) / "specs";
  fs::create_directories(specs);
  Resolved r;
  r.spec_path = (specs / (imported.spec.name + "-" + lathe::driver::Hash().add(imported.text).hex() + ".toml")).string();
  if (!fs::exists(r.spec_path) && !lathe::emit::write_if_changed(r.spec_path, imported.text))
    throw lathe::Error(lathe::ErrorKind::Io, r.spec_path + ": cannot write the imported spec");
  if (verbose) std::cerr << "lathe: " << model << " imported to " << r.spec_path << "\n";
  r.weights = model;
  // A directory holding one GGUF file (and no config.json): the file itself,
  // so that the model executable finds its vocabulary as the tokenizer.
  if (fs::is_directory(model) && !fs::exists(fs::path(model) / "config.json"))
    for (const auto& e : fs::directory_iterator(model))
      if (e.path().extension() == ".gguf") r.weights = e.path().string();
  return r;
}

// `lathe build`: the model executable of a model (resolve_model), copied to
// <out>/<name>. Weights given with a spec are checked against its manifest
// first: a checkpoint that does not fit is named before anything is built.
int cmd_build(const std::string& model, const std::string& weights, const std::string& out_dir, bool verbose) {
  namespace fs = std::filesystem;
  const Resolved resolved = resolve_model(model, verbose);
  const std::string checkpoint = weights.empty() ? resolved.weights : weights;
  if (!checkpoint.empty()) {
    const auto spec = load_spec(resolved.spec_path);
    if (!spec) return 1;
    // The spec's manifest as a build's constexpr one reads (names point into `manifest`).
    const lathe::spec::Manifest manifest = lathe::spec::build_manifest(*spec);
    const std::vector<lathe::ManifestEntry> entries = lathe::spec::manifest_entries(manifest);
    lathe::weights::Checkpoint file(checkpoint);
    file.match_names(entries);
    const std::string misfit = file.misfit(spec->name, spec->dims.hidden, spec->dims.layers);
    if (!misfit.empty()) throw lathe::Error(lathe::ErrorKind::BadFile, misfit);
    file.require_matches(entries);
    if (verbose) std::cerr << "lathe: " << checkpoint << " fits " << resolved.spec_path << "\n";
  }
  const std::optional<Built> built = build_model(resolved.spec_path, verbose);
  if (!built) return 1;
  fs::create_directories(out_dir);
  const fs::path target = fs::path(out_dir) / built->exe.filename();
  std::error_code error;
  fs::copy_file(built->exe, target, fs::copy_options::overwrite_existing, error);
  if (error) throw lathe::Error(lathe::ErrorKind::Io, target.string() + ": cannot write: " + error.message());
  std::cout << target.string() << "\n";
  return 0;
}

// `lathe run`: a spec, a Hugging Face directory or a GGUF file → the model
// executable (built or cached) → exec'd with `args`: a command of the model
// executable first (default: generate), then its options. A checkpoint is
// imported to a spec in the cache and passed on as -w, unless `args` give one.
int cmd_run(const std::string& model, std::vector<std::string> args, bool verbose, const std::string& run_help) {
  const Resolved resolved = resolve_model(model, verbose);
  const std::string& spec_path = resolved.spec_path;
  const std::string& weights = resolved.weights;
  const std::optional<Built> built = build_model(spec_path, verbose);
  if (!built) return 1;
  lathe::driver::Command command = {built->exe.string()};
  // --serve anywhere after MODEL means the serve command: `lathe run M --serve --port 8081`.
  if (const auto flag = std::find(args.begin(), args.end(), "--serve"); flag != args.end()) {
    args.erase(flag);
    args.insert(args.begin(), "serve");
  }
  const bool help_only = args.size() == 1 && args[0] == kModelHelp;
  std::replace(args.begin(), args.end(), std::string(kModelHelp), std::string("--help"));
  if (help_only) {
    // lathe run's options, then every command and option of the model's executable.
    std::cout << run_help << "\nThe model executable " << built->exe.filename().string()
              << " (its commands; `lathe run MODEL COMMAND --help` for a command's options):\n";
  } else if (args.empty() || args.front().starts_with("-")) {
    command.push_back("generate");
  } else {
    command.push_back(args.front());
    args.erase(args.begin());
  }
  // lathe run -v: generate and chat say their sampling seed too.
  if (verbose && command.size() > 1 && (command[1] == "generate" || command[1] == "chat")) command.push_back("-v");
  const bool has_weights = std::any_of(args.begin(), args.end(), [](const std::string& a) {
    return a == "-w" || a.starts_with("--weights") || (a.starts_with("-w") && a.size() > 2);
  });
  if (!weights.empty() && !has_weights && command.size() > 1) command.insert(command.end(), {"-w", weights});
  command.insert(command.end(), args.begin(), args.end());
  if (verbose) std::cerr << "lathe: " << lathe::driver::quote(command) << "\n";
  std::cout.flush();
  const std::string why = lathe::driver::exec(command);
  throw lathe::Error(lathe::ErrorKind::Io, built->exe.string() + ": cannot run: " + why);
}

// `lathe run` takes the model executable's options before the model too
// (`lathe run -n 8 model.gguf -p Hi`): those are moved after it, where the
// executable's command and options go; lathe's own -v stays. The model is
// the first path argument that is a spec, a .gguf or a directory and is no
// option's value.
std::vector<std::string> model_first(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] != "run") return args;
  // --help after the model is the model executable's (CLI11 would take it as run's).
  auto model_help = [](std::vector<std::string> a, size_t model) {
    for (size_t j = model + 1; j < a.size(); ++j)
      if (a[j] == "-h" || a[j] == "--help") a[j] = kModelHelp;
    return a;
  };
  static const std::vector<std::string> with_value = {"-w", "--weights", "--tokenizer", "-f", "--file", "-o", "--output"};
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool is_value = std::find(with_value.begin(), with_value.end(), args[i - 1]) != with_value.end();
    if (a.starts_with("-") || is_value) continue;
    std::error_code error;
    if (!(fs::path(a).extension() == ".toml" || fs::path(a).extension() == ".gguf" || fs::is_directory(a, error)))
      continue;
    if (i == 1) return model_help(args, 1);
    std::vector<std::string> before, own;
    for (size_t j = 1; j < i; ++j) (args[j] == "-v" || args[j] == "--verbose" ? own : before).push_back(args[j]);
    std::vector<std::string> out = {"run"};
    out.insert(out.end(), own.begin(), own.end());
    out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
    out.insert(out.end(), before.begin(), before.end());
    return model_help(out, 1 + own.size());
  }
  return args;
}

// `lathe cache`: every entry with its size and the time since its last use;
// `lathe cache clean`: all of them, or those unused for --older-than days.
std::string cache_or_throw() {
  const std::string cache = lathe::cache_dir();
  if (cache.empty())
    throw lathe::Error(lathe::ErrorKind::NotFound, "no cache directory: set LATHE_CACHE_DIR (or XDG_CACHE_HOME or HOME)");
  return cache;
}

std::string age_text(std::filesystem::file_time_type used) {
  const double s = std::chrono::duration<double>(std::filesystem::file_time_type::clock::now() - used).count();
  char text[32];
  if (s < 3600) std::snprintf(text, sizeof text, "%.0f min", s / 60);
  else if (s < 86400 * 2) std::snprintf(text, sizeof text, "%.1f h", s / 3600);
  else std::snprintf(text, sizeof text, "%.0f days", s / 86400);
  return text;
}

int cmd_cache_list() {
  const std::string cache = cache_or_throw();
  const auto entries = lathe::driver::list_cache(cache);
  uint64_t total = 0;
  std::printf("%-10s %12s %10s  %s\n", "kind", "size", "last used", "path");
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    std::printf("%-10s %12s %10s  %s\n", it->kind.c_str(), lathe::driver::format_bytes(it->bytes).c_str(),
                age_text(it->used).c_str(), it->path.c_str());
    total += it->bytes;
  }
  std::printf("%zu entries, %s in %s (builds are pruned beyond %s: LATHE_CACHE_LIMIT)\n", entries.size(),
              lathe::driver::format_bytes(total).c_str(), cache.c_str(),
              lathe::driver::format_bytes(lathe::driver::cache_limit()).c_str());
  return 0;
}

int cmd_cache_clean(std::optional<double> older_than_days) {
  const std::string cache = cache_or_throw();
  std::optional<std::chrono::seconds> older;
  if (older_than_days) older = std::chrono::seconds(static_cast<int64_t>(*older_than_days * 86400));
  else older = std::chrono::seconds(-1);  // every entry
  const auto removed = lathe::driver::prune_cache(cache, older, std::nullopt);
  uint64_t total = 0;
  for (const auto& e : removed) total += e.bytes;
  std::printf("removed %zu entries, %s\n", removed.size(), lathe::driver::format_bytes(total).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"lathe: a transformer spec in, a model-specific Vulkan inference build out"};
  app.require_subcommand(1);
  app.set_version_flag("--version", [] { return lathe::version_text("lathe"); });

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
  std::string svg_path, png_path;
  report->add_option("--svg", svg_path,
                     "Also write pictures (SVG): parameters and FLOPs per layer and component (the FLOPs at the last "
                     "--decode context), the cache against context beside the weights");
  report->add_option("--png", png_path, "The same pictures as a PNG (needs rsvg-convert, from librsvg)");
  SplitOptions split;
  report->add_option("--devices", split.devices,
                     "Place the layers on devices of these sizes (24GiB,24GiB), or on this machine's devices by "
                     "index or name (0,1), and print each one's bytes; exit 1 when a device's share does not fit");
  report->add_option("--split", split.split, "With --devices: memory (a share of the need for each device's size, "
                                             "the default) or layers:N,N,… (the layers of each device)");
  report->add_option("--context", split.context, "With --devices: the positions each sequence's cache holds "
                                                 "(default: the spec's max_context)")
      ->check(CLI::PositiveNumber);
  report->add_option("--sequences", split.sequences, "With --devices: sequences whose caches the devices hold "
                                                     "(default 1)")
      ->check(CLI::Range(1, 4096));

  auto* lint = app.add_subcommand("lint", "Advice on each hyperparameter of a spec far from practice, at its line");
  lint->add_option("spec", spec_path, "The architecture spec (TOML)")->required()->check(CLI::ExistingFile);

  std::string audit_path;
  auto* audit = app.add_subcommand(
      "audit", "Check a checkpoint's whole contract: config, tokenizer and tensors must agree (a line per check; exit "
               "1 on errors)");
  audit->add_option("checkpoint", audit_path, "A Hugging Face model directory (or its config.json), a .gguf file, or "
                                              "a directory holding one")
      ->required();
  audit->add_flag("--json", json, "Print JSON for tools instead of lines");

  lathe::spec::DesignArgs design_args;
  std::string design_out;
  bool explain = false;
  auto* design = app.add_subcommand(
      "design", "Write a spec from a budget (parameters or training FLOPs), a context and a use: every value "
                "commented with the published rule that chose it");
  const auto design_option = [&](const char* flag, std::optional<std::string>& value, const char* help) {
    design->add_option_function<std::string>(flag, [&value](const std::string& v) { value = v; }, help);
  };
  design_option("--params", design_args.params, "Parameter budget: 8B, 350M, 8e9");
  design_option("--flops", design_args.flops,
                "Training-compute budget in FLOPs (1e24): N = sqrt(C / (6 · 20 · overtrain)), Chinchilla's 20 tokens a "
                "parameter");
  design_option("--overtrain", design_args.overtrain,
                "Tokens a parameter as a multiple of Chinchilla's 20, for inference-heavy use (default 1)");
  design_option("--context", design_args.context, "Longest context in tokens: 8192, 128k (default by use: 8192; code 16k; long-context 128k)");
  design_option("--train-context", design_args.train_context,
                "Context trained at (default: the context up to 32k); past it RoPE is scaled");
  design_option("--use", design_args.use, "general, long-context, code, low-latency or memory-bound (default general)");
  design_option("--memory", design_args.memory,
                "Device memory the weights and one sequence's cache must fit: 24GiB, 80GB (K, M, G, T alone are binary)");
  design_option("--vocab", design_args.vocab, "Vocabulary size (rounded up to a multiple of 128; default 32000, less in small models)");
  design_option("--dtype", design_args.dtype, "Weight dtype: f32, f16, bf16 (default), q8_0, q4_0");
  design_option("--rope-scaling", design_args.rope_scaling, "RoPE scaling past the trained context: yarn (default) or ntk");
  design_option("--name", design_args.name, "[model] name (default design-<budget>)");
  design->add_flag("--moe", design_args.moe, "A mixture of 8 experts, top-2, below 70B too");
  design->add_flag("--dense", design_args.dense, "A dense MLP, from 70B too");
  design->add_option("-o,--out", design_out, "The spec file to write (default: stdout)");
  design->add_flag("--explain", explain, "Print the derivation, each step and number, to stderr");

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

  std::string quantize_in, quantize_out, quantize_type, quantize_weights;
  std::vector<std::string> mixture_keys;
  for (const auto& m : lathe::importer::kMixtures) mixture_keys.emplace_back(m.key);
  auto* quantize = app.add_subcommand(
      "quantize", "Write a GGUF file of ggml's block formats (or f16) from a GGUF file (f32, f16, bf16), a Hugging "
                  "Face checkpoint or a spec and its weights, with the per-tensor types and bytes llama.cpp's "
                  "quantizer (no imatrix) writes and the checkpoint's tokenizer");
  quantize->add_option("in", quantize_in, "A .gguf file, a Hugging Face model directory (or its config.json), or a spec (.toml)")
      ->required()
      ->check(CLI::ExistingPath);
  quantize->add_option("-w,--weights", quantize_weights, "With a spec: its checkpoint (a file or a directory)")
      ->check(CLI::ExistingPath);
  quantize->add_option("out", quantize_out, "The .gguf file to write")->required();
  quantize->add_option("--type", quantize_type, "The llama.cpp mixture")->required()->check(CLI::IsMember(mixture_keys));

  std::string build_out = ".";
  std::string build_model_path, build_weights;
  bool verbose = false;
  auto* build = app.add_subcommand(
      "build", "Generate and compile the model executable of a spec, a Hugging Face directory or a GGUF file (cached: "
               "the same spec and lathe, no rebuild)");
  build->add_option("model", build_model_path,
                    "A spec (.toml), a Hugging Face model directory, a .gguf file or a directory holding one")
      ->required()
      ->check(CLI::ExistingPath);
  build->add_option("-w,--weights", build_weights, "A checkpoint the spec's build must fit: checked before building")
      ->check(CLI::ExistingPath);
  build->add_option("-o,--out", build_out, "Directory to put the executable in")->capture_default_str();
  build->add_flag("-v,--verbose", verbose, "Print the compile and link commands");

  std::string run_model;
  auto* run = app.add_subcommand(
      "run", "Build (or reuse) the model executable of a spec, a Hugging Face directory or a GGUF file and run it: "
             "lathe run MODEL [COMMAND] [OPTIONS]; COMMAND defaults to generate (--serve: the serve command, an "
             "OpenAI-compatible server), OPTIONS are the model executable's (a checkpoint is passed as -w)");
  run->add_option("model", run_model,
                  "A spec (.toml), a Hugging Face model directory, a .gguf file or a directory holding one")
      ->required()
      ->check(CLI::ExistingPath);
  run->add_flag("-v,--verbose", verbose, "Print what is imported, built and run");
  run->prefix_command();  // everything after MODEL is the model executable's

  auto* cache = app.add_subcommand("cache", "List what lathe keeps in its cache (builds, imported specs, pipeline "
                                           "caches) with sizes and last use; `lathe cache clean` prunes it");
  auto* cache_clean = cache->add_subcommand("clean", "Remove every cache entry, or those unused for --older-than days");
  std::optional<double> older_than;
  cache_clean->add_option("--older-than", older_than, "Days since the entry's last use")->check(CLI::NonNegativeNumber);

  const std::vector<std::string> arguments = model_first(argc, argv);
  std::vector<const char*> pointers = {argv[0]};
  for (const std::string& a : arguments) pointers.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(pointers.size()), const_cast<char**>(pointers.data()));
  } catch (const CLI::ParseError& e) {
    // CLI11_PARSE's exit, but a bad `lathe design` option exits 2 as the
    // design's own refusals do, and so does a bad `lathe audit` (1 is its
    // errors; help and version still exit 0).
    const int status = app.exit(e);
    return status != 0 && (design->parsed() || audit->parsed()) ? 2 : status;
  }
  try {
    if (*devices) return cmd_devices(validation);
    if (*report) return cmd_report(spec_path, json, prefill, decode, svg_path, png_path, split);
    if (*lint) return cmd_lint(spec_path);
    if (*audit) return cmd_audit(audit_path, json);
    if (*design) return cmd_design(design_args, design_out, explain, argc, argv);
    if (*gen) return cmd_gen(spec_path, out_dir, quiet, dump);
    if (*check) return cmd_check(spec_path, root, inject);
    if (*import) return cmd_import(import_path, import_out, import_name);
    if (*quantize) return cmd_quantize(quantize_in, quantize_out, quantize_type, quantize_weights);
    if (*build) return cmd_build(build_model_path, build_weights, build_out, verbose);
    if (*run) return cmd_run(run_model, run->remaining(), verbose, run->help());
    if (*cache_clean) return cmd_cache_clean(older_than);
    if (*cache) return cmd_cache_list();
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
