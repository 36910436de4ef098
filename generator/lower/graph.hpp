// The op graph of a model: the spec's block structure unrolled into the ops
// of one forward pass (core/typed.hpp's Op list), built once, in C++, from
// the spec. The lowering turns it into the plan; the C++ emitter prints the
// same ops as the typed forward() of model.hpp, whose compilation checks
// every shape again. Each op remembers the spec key that decides it, so an
// error about it points at that line.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "core/manifest.hpp"
#include "core/spec.hpp"
#include "core/typed.hpp"

namespace lathe::lower {

struct Graph {
  typed::Schedule schedule;         // ops, value count, value widths
  std::vector<std::string> keys;    // per op: the spec key that decides it ("dims.kv_heads")
  // Per op, the typed handle expressions of its tensors as model.hpp spells
  // them ("weights.q[3]", "weights.q_bias[3]"); empty where none.
  std::vector<std::array<std::string, 6>> handles;
};

// `manifest` is build_manifest(spec): ops name its tensors by index.
Graph build_graph(const spec::Spec& spec, const spec::Manifest& manifest);

// The graph of the tower's build of a spec with a splice [vision]: the
// host's rows of an image's unfolded patches, the patch embedding, the class
// token and positions, the tower's layers up to its feature layer and the
// projector, whose rows (the decoder's width) are the output. `manifest` is
// build_vision_manifest(spec). Throws TowerError for a tower the device
// path does not run yet, saying which part.
Graph build_tower_graph(const spec::Spec& spec, const spec::Manifest& manifest);
struct TowerError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The name of a manifest tensor's member in model.hpp's Weights ("q", "q_bias").
std::string member_name(const spec::TensorSpec& t);

}  // namespace lathe::lower
