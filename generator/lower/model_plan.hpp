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
  // A [vision] spec's builds share one checkpoint: the tensors it holds for
  // the other build (each name once), which this one's audit tolerates
  // beside spec::ignored_patterns.
  std::vector<std::string> others;
  // Tensors of that checkpoint no build reads, with their shapes (the
  // tower's layers past the feature layer): random weights write them, so
  // that a random checkpoint is laid out as a real one.
  spec::Manifest unread;
};

// A graph the kernels cannot run is an error at the spec line of the key
// that decides the op at fault; nullopt then.
std::optional<ModelPlan> plan_model(const spec::Spec& spec, spec::Diagnostics& diagnostics);
// The plan of the tower's build of a spec with a splice [vision]
// (build_tower_graph over build_vision_manifest): an error at the spec's
// [vision] for a tower the device path does not run yet.
std::optional<ModelPlan> plan_tower(const spec::Spec& spec, spec::Diagnostics& diagnostics);
// The tower's build's spec: vision_tower(spec) of the layers it runs (up to
// the feature layer), with the spec's key locations; and its manifest, the
// vision manifest without the layers past the feature layer.
spec::Spec tower_spec(const spec::Spec& spec);
spec::Manifest tower_manifest(const spec::Spec& spec);
// The same from a graph already built (build_graph of the spec and manifest).
std::optional<ModelPlan> plan_graph(const spec::Spec& spec, spec::Manifest manifest, Graph graph,
                                    spec::Diagnostics& diagnostics);

// The plan as text, one dispatch a line: `lathe gen --dump`, `<model> info`.
std::string describe(const ModelPlan& model);

}  // namespace lathe::lower
