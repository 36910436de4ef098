// A spec's plan, from start to end: its manifest, its op graph and the graph
// lowered. What `lathe gen` emits and `lathe gen --dump` shows.
#pragma once

#include <optional>
#include <string>

#include "core/manifest.hpp"
#include "core/spec.hpp"
#include "generator/lower/graph.hpp"
#include "generator/lower/lowering.hpp"
#include "generator/spec/diagnostics.hpp"

namespace lathe::lower {

struct ModelPlan {
  spec::Manifest manifest;
  Graph graph;
  Plan plan;  // with the sizes the runtime allocates by (core/plan.hpp) in plan.scalars
};

// A graph the kernels cannot run is an error at the spec line of the key
// that decides the op at fault; nullopt then.
std::optional<ModelPlan> plan_model(const spec::Spec& spec, spec::Diagnostics& diagnostics);
// The same from a graph already built (build_graph of the spec and manifest).
std::optional<ModelPlan> plan_graph(const spec::Spec& spec, spec::Manifest manifest, Graph graph,
                                    spec::Diagnostics& diagnostics);

// The plan as text, one dispatch a line: `lathe gen --dump`, `<model> info`.
std::string describe(const ModelPlan& model);

}  // namespace lathe::lower
