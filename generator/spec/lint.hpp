// `lathe lint`: advice on the hyperparameters of a spec that lie far from
// what published models do, each at its spec line with the rule it breaks
// and why it matters. Advice, never an error: real models deviate, and
// lint says so without refusing them (its test pins what each shipped spec
// gets).
#pragma once

#include <string>
#include <vector>

#include "core/loc.hpp"
#include "core/spec.hpp"

namespace lathe::spec {

struct Advice {
  Loc loc;           // the key's line (or its table's)
  std::string rule;  // a short name: "width-depth", "ffn-ratio", …
  std::string text;  // what is off, by how much, and why it matters
};

// Every rule in a fixed order; none for a spec within practice.
std::vector<Advice> lint(const Spec& spec);

// "file:line:col: warning: text [rule]" a line, in the order given.
std::string format_advice(const std::string& file, const std::vector<Advice>& advice);

}  // namespace lathe::spec
