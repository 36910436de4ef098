// Comparing two specs field by field: what an importer's round trip, or a
// hand-written spec against an imported one, must agree on.
#pragma once

#include <string>
#include <vector>

#include "core/spec.hpp"

namespace lathe::spec {

// Every field in which `a` and `b` differ, one line each, named by its spec
// key path with both values: `dims.hidden: 576 vs 577`,
// `weights.names.q: "model.layers.{layer}.q" vs (none)`. Empty when the two
// describe the same model and build.
//
// Ignored: model.name, model.source, the file and the source locations.
// Compared by meaning rather than by spelling: dims.head_dim by value
// (whether it was written or derived from hidden / heads does not matter),
// attention.window_pattern by which of the `dims.layers` layers are windowed
// ([true, false] equals [true, false, true, false]). attention.scale counts
// as set or unset, as the runtime treats it, so an explicit 1/√head_dim
// differs from none.
//
// [vision] is compared as the decoder's tables are, under its own key paths
// (`vision.projector.kind: "mlp" vs "pooled"`, `vision.norm.eps`,
// `vision.weights.global_names.q`), again by meaning: vision.feature_layer
// by the hidden state it names (−1 and 24 of a 24-layer tower are one),
// vision.drop_class_token only where a tower has a class token,
// vision.rope_theta only between two rope_2d towers, and a projector's keys
// only where both projectors' kinds read them (a pooled projector has no
// activation or bias).
std::vector<std::string> spec_differences(const Spec& a, const Spec& b);

}  // namespace lathe::spec
