// `lathe design`: a complete spec from a budget. Parameters, or training
// compute at Chinchilla's ~20 tokens a parameter (over-trained by a factor
// for inference-heavy use), a context length, a use and optionally a device
// memory go in; a spec TOML comes out whose every chosen value carries a
// comment naming the published rule that chose it, and whose exact
// parameter count (make_report's) is within 1 % of a parameter budget.
// A pure function: the command line only reads its options and prints.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/spec.hpp"

namespace lathe::spec {

// What the model is for: each use moves a rule of the decision table.
enum class DesignUse { General, LongContext, Code, LowLatency, MemoryBound };

// The options as typed on the command line, each unset when not given.
struct DesignArgs {
  std::optional<std::string> params, flops, overtrain, context, train_context, use, memory, vocab, dtype, rope_scaling,
      name;
  bool moe = false, dense = false;
  std::string command;  // the command line, quoted in the spec's header
};

// The options read and checked.
struct DesignOptions {
  std::optional<double> params;  // a parameter budget, or
  std::optional<double> flops;   // a training-compute budget
  double overtrain = 1;          // the tokens a parameter: 20 · overtrain
  std::optional<int64_t> context;
  std::optional<int64_t> train_context;
  DesignUse use = DesignUse::General;
  int64_t memory = 0;  // bytes of device memory; 0: no limit
  std::optional<int64_t> vocab;
  DType dtype = DType::BF16;
  RopeScaling rope_scaling = RopeScaling::Yarn;
  std::optional<bool> moe;  // --moe (true) or --dense (false): overrides the rule
  std::string name;
  std::string command;
};

// A bad or contradictory option: the message names the option (or both).
class DesignError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads the options; throws DesignError naming the option at fault
// (`--params: "8Q" is not a count (use 8B, 350M, 8e9)`).
DesignOptions design_options(const DesignArgs& args);

struct Design {
  std::string spec;                      // the TOML text, comments naming each rule
  std::vector<std::string> explanation;  // the derivation, a step a line
  int64_t params = 0;                    // make_report's exact count of the spec
  double budget = 0;                     // the parameters aimed at
};

// The design; throws DesignError when the options cannot be met (a model
// whose weights and cache exceed --memory even with one KV head).
Design design(const DesignOptions& options);

const char* name(DesignUse);

// An amount of memory as an option gives it: 24GiB, 80GB, 512MiB (K, M, G
// and T alone are binary), 1 MiB … 1 PB; throws DesignError naming `option`.
int64_t parse_memory(const char* option, const std::string& text);

}  // namespace lathe::spec
