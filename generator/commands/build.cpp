// The model executable: build (a spec, a Hugging Face directory or a GGUF
// file to an executable, cached) and run (built or cached, then exec'd), and
// model_first, which puts `lathe run`'s model before the executable's options.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "core/manifest.hpp"
#include "generator/commands/commands.hpp"
#include "generator/commands/common.hpp"
#include "generator/driver/cache.hpp"
#include "generator/driver/model_build.hpp"
#include "generator/driver/process.hpp"
#include "generator/emit/emit_cpp.hpp"
#include "generator/import/import.hpp"
#include "runtime/cache_dir.hpp"
#include "runtime/error.hpp"
#include "runtime/weights/checkpoint.hpp"

namespace lathe::tool {
namespace {

// A spec's canonical path and text, for a build's key: ./m.toml, m.toml and
// a link to it are one entry.
std::string spec_key(const std::string& spec_path) {
  std::ifstream spec_file(spec_path, std::ios::binary);
  const std::string spec_text((std::istreambuf_iterator<char>(spec_file)), std::istreambuf_iterator<char>());
  return lathe::driver::Hash().add(std::filesystem::weakly_canonical(spec_path).string()).add(spec_text).hex();
}

// A model executable of `spec_path` (with `draft_path`, a draft's spec, the
// draft's build beside it: lathe gen --draft) in the cache, built when no
// cached one has the same key: the specs' paths and texts, the lathe binary,
// its toolchain and libraries. nullopt when a spec has errors (printed).
struct Built {
  std::filesystem::path exe;
  bool cached = false;
};
std::optional<Built> build_model(const std::string& spec_path, const std::string& draft_path, bool verbose) {
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
  lathe::driver::Hash hash;
  hash.add(lathe::driver::toolchain_key(toolchain)).add(spec_key(spec_path));
  const std::string name = lathe::emit::model_namespace(spec->name);
  // A build with a draft is an entry of its own, named so: <model>-draft-<draft>-<key>.
  std::string entry = name;
  if (!draft_path.empty()) {
    const auto draft = load_spec(draft_path);
    if (!draft) return std::nullopt;
    hash.add(spec_key(draft_path));
    entry += "-draft-" + lathe::emit::model_namespace(draft->name);
  }
  const std::string key = hash.hex();
  const fs::path dir = fs::path(cache) / "models" / (entry + "-" + key);
  const fs::path exe = dir / name;
  if (fs::exists(exe)) {
    if (verbose) std::cerr << "lathe: " << exe.string() << " (cached)\n";
    std::error_code error;
    fs::last_write_time(dir, fs::file_time_type::clock::now(), error);  // used now: the last to be pruned
    return Built{exe, true};
  }
  auto planned = load_planned(spec_path, draft_path);
  if (!planned) return std::nullopt;
  std::cerr << "lathe: building " << spec->name << " from " << spec_path
            << (draft_path.empty() ? "" : ", its draft " + planned->draft->spec.name + " from " + draft_path) << " ("
            << dir.string() << ")\n";
  // Built aside and renamed into place, so that an interrupted build or a
  // concurrent one never leaves a half-made directory under the key.
  const fs::path temp = fs::path(cache) / "models" / (entry + "-" + key + ".tmp" + std::to_string(getpid()));
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
Resolved resolve_model(const std::string& model, bool verbose, const std::string& mmproj) {
  namespace fs = std::filesystem;
  if (fs::path(model).extension() == ".toml") return {model, ""};  // (its tower's weights: the executable's --mmproj)
  if (!fs::is_directory(model) && fs::path(model).extension() != ".gguf")
    throw lathe::Error(lathe::ErrorKind::InvalidArgument,
                       model + ": not a spec (.toml), a Hugging Face model directory or a .gguf file");
  lathe::importer::ImportOptions options;
  options.mmproj = mmproj;
  const lathe::importer::ImportResult imported = lathe::importer::import_model_config(model, options);
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

// Whether `checkpoint` fits the manifest of the spec at `spec_path`: false
// when the spec has errors (printed); a checkpoint that does not fit is a
// lathe::Error naming it (and `option`, the one that gave it, when not -w).
bool check_fits(const std::string& spec_path, const std::string& checkpoint, bool verbose,
                const std::string& option = {}) {
  const auto spec = load_spec(spec_path);
  if (!spec) return false;
  // The spec's manifest as a build's constexpr one reads (names point into `manifest`).
  const lathe::spec::Manifest manifest = lathe::spec::build_manifest(*spec);
  const std::vector<lathe::ManifestEntry> entries = lathe::spec::manifest_entries(manifest);
  lathe::weights::Checkpoint file(checkpoint);
  file.match_names(entries);
  const std::string misfit = file.misfit(spec->name, spec->dims.hidden, spec->dims.layers);
  if (!misfit.empty())
    throw lathe::Error(lathe::ErrorKind::BadFile, (option.empty() ? "" : option + " " + checkpoint + ": ") + misfit);
  file.require_matches(entries);
  if (verbose) std::cerr << "lathe: " << checkpoint << " fits " << spec_path << "\n";
  return true;
}

}  // namespace

int cmd_build(const std::string& model, const std::string& weights, const std::string& out_dir, bool verbose,
              const std::string& mmproj, const std::string& draft, const std::string& draft_weights) {
  namespace fs = std::filesystem;
  if (!mmproj.empty() && std::filesystem::path(model).extension() == ".toml")
    throw lathe::Error(lathe::ErrorKind::InvalidArgument,
                       "--mmproj " + mmproj + ": a spec states its tower itself; --mmproj goes with a GGUF text model");
  if (!draft_weights.empty() && draft.empty())
    throw lathe::Error(lathe::ErrorKind::InvalidArgument, "--draft-weights " + draft_weights + ": give its --draft");
  const Resolved resolved = resolve_model(model, verbose, mmproj);
  const std::string checkpoint = weights.empty() ? resolved.weights : weights;
  if (!checkpoint.empty() && !check_fits(resolved.spec_path, checkpoint, verbose)) return 1;
  std::string draft_spec;
  if (!draft.empty()) {
    const Resolved resolved_draft = resolve_model(draft, verbose, "");
    draft_spec = resolved_draft.spec_path;
    const std::string draft_checkpoint = draft_weights.empty() ? resolved_draft.weights : draft_weights;
    const std::string option = draft_weights.empty() ? "--draft" : "--draft-weights";
    if (!draft_checkpoint.empty() && !check_fits(draft_spec, draft_checkpoint, verbose, option)) return 1;
  }
  const std::optional<Built> built = build_model(resolved.spec_path, draft_spec, verbose);
  if (!built) return 1;
  fs::create_directories(out_dir);
  const fs::path target = fs::path(out_dir) / built->exe.filename();
  std::error_code error;
  fs::copy_file(built->exe, target, fs::copy_options::overwrite_existing, error);
  if (error) throw lathe::Error(lathe::ErrorKind::Io, target.string() + ": cannot write: " + error.message());
  std::cout << target.string() << "\n";
  return 0;
}

// `option FILE` (or option=FILE) taken out of `args`: its file, "" when none.
static std::string take_option(std::vector<std::string>& args, const std::string& option) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string file;
    if (args[i] == option && i + 1 < args.size()) file = args[i + 1];
    else if (args[i].starts_with(option + "=")) file = args[i].substr(option.size() + 1);
    else continue;
    args.erase(args.begin() + static_cast<std::ptrdiff_t>(i),
               args.begin() + static_cast<std::ptrdiff_t>(args[i] == option ? i + 2 : i + 1));
    return file;
  }
  return "";
}

// Whether `args` give `option` (long, with its value apart or after '=').
static bool gives(const std::vector<std::string>& args, const std::string& option) {
  return std::any_of(args.begin(), args.end(),
                     [&](const std::string& a) { return a == option || a.starts_with(option + "="); });
}

int cmd_run(const std::string& model, std::vector<std::string> args, bool verbose, const std::string& run_help) {
  // --mmproj is lathe's (the import's) and the model executable's: passed on after the command.
  const std::string mmproj = take_option(args, "--mmproj");
  // --draft is lathe's alone: the draft's build goes into the executable,
  // its checkpoint (when it was one) is passed on as --draft-weights.
  const std::string draft = take_option(args, "--draft");
  const Resolved resolved = resolve_model(model, verbose, mmproj);
  const std::string& spec_path = resolved.spec_path;
  const std::string& weights = resolved.weights;
  const std::optional<Resolved> resolved_draft =
      draft.empty() ? std::nullopt : std::optional<Resolved>(resolve_model(draft, verbose, ""));
  const std::optional<Built> built = build_model(spec_path, resolved_draft ? resolved_draft->spec_path : "", verbose);
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
  if (!mmproj.empty() && command.size() > 1) command.insert(command.end(), {"--mmproj", mmproj});
  // The commands that run a draft (docs/speculative.md) read its checkpoint.
  const bool drafts = command.size() > 1 && (command[1] == "generate" || command[1] == "chat" ||
                                             command[1] == "bench" || command[1] == "serve");
  if (resolved_draft && !resolved_draft->weights.empty() && drafts && !gives(args, "--draft-weights"))
    command.insert(command.end(), {"--draft-weights", resolved_draft->weights});
  command.insert(command.end(), args.begin(), args.end());
  if (verbose) std::cerr << "lathe: " << lathe::driver::quote(command) << "\n";
  std::cout.flush();
  const std::string why = lathe::driver::exec(command);
  throw lathe::Error(lathe::ErrorKind::Io, built->exe.string() + ": cannot run: " + why);
}

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
  static const std::vector<std::string> with_value = {"-w",       "--weights", "--tokenizer", "-f",
                                                      "--file",   "-o",        "--output",    "--mmproj",
                                                      "--draft",  "--draft-weights"};
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

}  // namespace lathe::tool
