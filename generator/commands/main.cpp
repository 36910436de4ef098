// lathe — the command-line front end: devices, report, gen, check, …
// main() wires each command's options with CLI11 and runs it
// (commands.hpp; the files beside this one hold the commands).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "generator/commands/commands.hpp"
#include "generator/import/import.hpp"
#include "generator/import/quantize.hpp"
#include "generator/spec/design.hpp"
#include "runtime/error.hpp"
#include "runtime/version.hpp"

int main(int argc, char** argv) {
  using namespace lathe::tool;
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
  std::string draft_path;
  constexpr const char* kDraftSpecHelp =
      "A draft model's spec (TOML): its build beside the model's (draft.hpp), to propose the tokens the model "
      "verifies (speculative decoding); a decoder of the model's vocabulary";
  gen->add_option("--draft", draft_path, kDraftSpecHelp)->check(CLI::ExistingFile);
  bool dump = false;
  gen->add_flag("--dump", dump, "Also write plan.dump (every dispatch of the plan) and kernels.dump (the GLSL and SPIR-V disassembly of every kernel); with --draft, the draft's in draft-plan.dump and draft-kernels.dump");

  std::string root = LATHE_SOURCE_DIR;
  std::string inject;
  auto* check = app.add_subcommand(
      "check", "Generate the model header and compile it in process (Clang); failed contracts point at the spec");
  check->add_option("spec", spec_path, "The architecture spec (TOML)")->required()->check(CLI::ExistingFile);
  check->add_option("--root", root, "The lathe source tree, for runtime/model/*.hpp")
      ->capture_default_str()
      ->check(CLI::ExistingDirectory);
  check->add_option("--draft", draft_path, kDraftSpecHelp)->check(CLI::ExistingFile);
  check->add_option("--inject", inject, "C++ appended to the checked translation unit")->group("");

  std::string import_path;
  std::string import_out;
  std::string import_name;
  std::string mmproj;
  auto* import = app.add_subcommand(
      "import", "Write a commented TOML spec from a Hugging Face config.json or a GGUF file's metadata (checked against "
                "the checkpoint's tensors)");
  import->add_option("path", import_path, "A model directory holding config.json (or one .gguf file), a config file, or a .gguf file")
      ->required()
      ->check(CLI::ExistingPath);
  import->add_option("-o,--out", import_out, "The spec file to write (default: stdout)");
  import->add_option("--name", import_name, "[model] name (default: the directory's name, else _name_or_path)");
  constexpr const char* kMmprojHelp =
      "With a GGUF text model: its mmproj file (llama.cpp's vision tower and projector), whose tower becomes [vision]";
  import->add_option("--mmproj", mmproj, kMmprojHelp)->check(CLI::ExistingFile);

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
  build->add_option("--mmproj", mmproj, kMmprojHelp)->check(CLI::ExistingFile);
  std::string build_draft, build_draft_weights;
  build->add_option("--draft", build_draft,
                    "A draft model (what MODEL may be: a spec, a Hugging Face directory, a GGUF file) built into the "
                    "executable beside the model, to propose the tokens it verifies; a decoder of its vocabulary")
      ->check(CLI::ExistingPath);
  build->add_option("--draft-weights", build_draft_weights, "A checkpoint the draft's build must fit: checked before "
                                                            "building")
      ->check(CLI::ExistingPath);
  build->add_flag("-v,--verbose", verbose, "Print the compile and link commands");

  std::string run_model;
  auto* run = app.add_subcommand(
      "run", "Build (or reuse) the model executable of a spec, a Hugging Face directory or a GGUF file and run it: "
             "lathe run MODEL [COMMAND] [OPTIONS]; COMMAND defaults to generate (--serve: the serve command, an "
             "OpenAI-compatible server), OPTIONS are the model executable's (a checkpoint is passed as -w); "
             "--draft DRAFT (a spec, a Hugging Face directory or a GGUF file) builds a draft model into it, a "
             "checkpoint DRAFT passed as --draft-weights");
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
    if (*gen) return cmd_gen(spec_path, draft_path, out_dir, quiet, dump);
    if (*check) return cmd_check(spec_path, draft_path, root, inject);
    if (*import) return cmd_import(import_path, import_out, import_name, mmproj);
    if (*quantize) return cmd_quantize(quantize_in, quantize_out, quantize_type, quantize_weights);
    if (*build)
      return cmd_build(build_model_path, build_weights, build_out, verbose, mmproj, build_draft, build_draft_weights);
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
