// The commands of the `lathe` tool, one a subcommand (main.cpp wires their
// options with CLI11, the files beside it run them), and the options that
// main() fills for them. Each returns the process's exit status; main()
// reports the lathe::Error one throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "generator/spec/design.hpp"

namespace lathe::tool {

// devices.cpp: the machine.

// The Vulkan devices, their memory and the limits that matter, the one a
// session selects and the device class each takes.
int cmd_devices(bool validation);

// spec.cpp: a spec, read and written.

// --devices (and --split, --context, --sequences): where a pipeline split
// would put the model's layers, each device's bytes (placement.hpp).
struct SplitOptions {
  std::string devices, split = "memory";
  int64_t context = 0, sequences = 1;  // context 0: the spec's max_context
};

// Parameters, bytes, FLOPs per token and KV-cache size of a spec (a table,
// or JSON), with --devices where a pipeline split would put its layers; the
// pictures as SVG or PNG. Exit 1 when a device's share does not fit, 2 on a
// bad --devices or --split.
int cmd_report(const std::string& path, bool json, const std::vector<int64_t>& prefill,
               const std::vector<int64_t>& decode, const std::string& svg_path, const std::string& png_path,
               const SplitOptions& split);

// Advice on the spec's hyperparameters (warnings at their lines; never an
// error: the exit status is 0 for any spec that parses).
int cmd_lint(const std::string& path);

// The checkpoint's contract checked, a line per check (audit.hpp): exit 1
// when a check errs, 0 with warnings alone. A path that cannot be read is an
// error check naming it.
int cmd_audit(const std::string& path, bool json);

// A spec from a budget: to stdout or `out`; the derivation (--explain) to
// stderr, so that the spec alone goes down a pipe. Bad options exit 2.
int cmd_design(lathe::spec::DesignArgs args, const std::string& out, bool explain, int argc, char** argv);

// gen.cpp: the generated build of a spec.

// The generated build of a spec; unsupported fields are errors at the spec.
// `draft` (a spec, or empty): the draft model's build beside it (draft.hpp,
// lathe::draft_info()); a draft that cannot propose the model's tokens, or a
// model that cannot verify them, is an error at the spec at fault.
int cmd_gen(const std::string& path, const std::string& draft, const std::string& out_dir, bool quiet, bool dump);

// Generates the model header in memory and compiles it in process (Clang):
// the contract's static_asserts, and the typed API's through the instantiated
// schedule, are reported at the spec (with `draft`, the draft's header too).
// `inject` is C++ appended to the translation unit (debugging, tests of the
// check itself).
int cmd_check(const std::string& path, const std::string& draft, const std::string& root, const std::string& inject);

// import.cpp: checkpoints in.

// Writes the spec imported from a Hugging Face config (a directory or a
// config.json) or a GGUF file (with `mmproj`, its vision tower's file) to
// stdout or `out`; warnings and the checkpoint check go to stderr.
int cmd_import(const std::string& path, const std::string& out, const std::string& name, const std::string& mmproj);

// `lathe quantize`: a GGUF file, a Hugging Face checkpoint or a spec and its weights → a GGUF file of
// llama.cpp's mixture `type` (generator/import/quantize.hpp has the rules).
int cmd_quantize(const std::string& in, const std::string& out, const std::string& type, const std::string& weights);

// build.cpp: the model executable.

// `lathe build`: the model executable of a model (resolve_model), copied to
// <out>/<name>. Weights given with a spec are checked against its manifest
// first: a checkpoint that does not fit is named before anything is built.
// `mmproj`: a GGUF text model's vision tower (llama.cpp's mmproj file).
// `draft`: a draft model (what `model` may be), its build beside the
// model's (lathe gen --draft), the build cached apart from the one without;
// its checkpoint (`draft_weights`, or the draft itself when it is one) is
// checked against the draft's manifest as the model's is.
int cmd_build(const std::string& model, const std::string& weights, const std::string& out_dir, bool verbose,
              const std::string& mmproj, const std::string& draft, const std::string& draft_weights);

// `lathe run`: a spec, a Hugging Face directory or a GGUF file → the model
// executable (built or cached) → exec'd with `args`: a command of the model
// executable first (default: generate), then its options. A checkpoint is
// imported to a spec in the cache and passed on as -w, unless `args` give one;
// a GGUF file's --mmproj in `args` is imported with it (its [vision]) and
// passed on too (the model executable reads the tower from it). --draft
// DRAFT in `args` (what `model` may be) is taken out: the executable carries
// the draft's build, and a checkpoint DRAFT is passed on as --draft-weights
// to generate, chat, bench and serve, unless `args` give one.
int cmd_run(const std::string& model, std::vector<std::string> args, bool verbose, const std::string& run_help);

// `lathe run` takes the model executable's options before the model too
// (`lathe run -n 8 model.gguf -p Hi`): those are moved after it, where the
// executable's command and options go; lathe's own -v stays. The model is
// the first path argument that is a spec, a .gguf or a directory and is no
// option's value. main() parses what this returns in place of argv[1…].
std::vector<std::string> model_first(int argc, char** argv);

// cache.cpp: what lathe keeps in its cache.

// `lathe cache`: every entry with its size and the time since its last use;
// `lathe cache clean`: all of them, or those unused for --older-than days.
int cmd_cache_list();
int cmd_cache_clean(std::optional<double> older_than_days);

}  // namespace lathe::tool
