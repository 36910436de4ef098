#include "generator/lower/model_plan.hpp"

#include <algorithm>
#include <map>
#include <sstream>

namespace lathe::lower {

namespace {

// Each name once, in order.
void add_names(std::vector<std::string>& out, const spec::Manifest& m, int64_t from_layer = -1) {
  for (const spec::TensorSpec& t : m.tensors)
    if (t.layer >= from_layer && std::find(out.begin(), out.end(), t.name) == out.end()) out.push_back(t.name);
}

}  // namespace

std::optional<ModelPlan> plan_model(const spec::Spec& s, spec::Diagnostics& diagnostics) {
  spec::Manifest manifest = spec::build_manifest(s);
  Graph graph = build_graph(s, manifest);
  auto model = plan_graph(s, std::move(manifest), std::move(graph), diagnostics);
  if (model && s.vision.enabled) add_names(model->others, spec::build_vision_manifest(s));  // the tower's
  return model;
}

// The layers a tower's build runs: its local layers up to the feature
// layer, then a tiled tower's global layers (numbered from dims.layers).
spec::Spec tower_spec(const spec::Spec& s) {
  spec::Spec tower = spec::vision_tower(s);
  tower.dims.layers = s.vision.layers_run() + s.vision.global_layers;
  tower.locations = s.locations;
  return tower;
}

namespace {

// The tower's local layers past its feature layer: in the checkpoint, not run.
bool past_feature_layer(const spec::Spec& s, const spec::TensorSpec& t) {
  return t.layer >= s.vision.layers_run() && t.layer < s.vision.dims.layers;
}

}  // namespace

spec::Manifest tower_manifest(const spec::Spec& s) {
  spec::Manifest m = spec::build_vision_manifest(s);
  std::erase_if(m.tensors, [&](const spec::TensorSpec& t) { return past_feature_layer(s, t); });
  return m;
}

std::optional<ModelPlan> plan_tower(const spec::Spec& s, spec::Diagnostics& diagnostics) {
  spec::Manifest manifest = tower_manifest(s);
  Graph graph;
  try {
    graph = build_tower_graph(s, manifest);
  } catch (const TowerError& e) {
    diagnostics.error(s.where("vision"), std::string("the vision tower cannot run on the device: ") + e.what());
    return std::nullopt;
  }
  // The tower's own sizes (heads, cache rows), its ops' keys the spec's lines.
  auto tower = plan_graph(tower_spec(s), std::move(manifest), std::move(graph), diagnostics);
  if (tower) {
    // The decoder's tensors, the tower's layers past the feature layer, and
    // what the spec ignores (CLIP's post_layernorm among them).
    add_names(tower->others, spec::build_manifest(s));
    tower->unread = spec::build_vision_manifest(s);
    std::erase_if(tower->unread.tensors, [&](const spec::TensorSpec& t) { return !past_feature_layer(s, t); });
    add_names(tower->others, tower->unread);
    for (const std::string& p : spec::ignored_patterns(s))
      if (std::find(tower->others.begin(), tower->others.end(), p) == tower->others.end()) tower->others.push_back(p);
  }
  return tower;
}

std::optional<ModelPlan> plan_graph(const spec::Spec& s, spec::Manifest manifest, Graph graph,
                                    spec::Diagnostics& diagnostics) {
  ModelPlan m;
  m.manifest = std::move(manifest);
  m.graph = std::move(graph);
  std::vector<DType> dtypes;
  for (const spec::TensorSpec& t : m.manifest.tensors) dtypes.push_back(device_dtype(t.dtype));
  try {
    m.plan = lower(m.graph.schedule, dtypes, s.weights.max_part_bytes);
    add_flash_classes(m.plan, s.dims.head_dim, s.cache.dtype == DType::F16,
                      s.position.kind == spec::PositionKind::Relative ? s.position.max_distance : 0);
  } catch (const LowerError& e) {
    diagnostics.error(s.where(m.graph.keys[e.op()]), std::string("the kernels cannot run this model: ") + e.what());
    return std::nullopt;
  }
  plan::Plan& sizes = m.plan.scalars;
  sizes.cache_row_bytes = spec::cache_row_bytes(s);
  sizes.v_cache_row_bytes = spec::v_cache_row_bytes(s);
  sizes.partials_row_floats = s.dims.heads * (s.dims.head_dim + 2);
  sizes.widest_row_floats = 0;
  for (int64_t w : m.plan.slot_widths) sizes.widest_row_floats = std::max(sizes.widest_row_floats, w);
  for (Dispatch& d : m.plan.dispatches) d.line = static_cast<uint32_t>(s.where(m.graph.keys[d.op]).line);
  return m;
}

namespace {

// `activation3`, `io`: the resource's name and its index, if it takes one.
std::string binding_text(const plan::Binding& b) {
  const plan::ResourceName r = plan::resource_name(b.resource);
  return std::string(r.name) + (r.indexed ? std::to_string(b.index) : "");
}

const char* form_text(plan::Form f) {
  switch (f) {
    case plan::Form::Any: return "";
    case plan::Form::Recurrent: return " [recurrent form]";
    case plan::Form::Chunked: return " [chunked form]";
    case plan::Form::Absorbed: return " [absorbed form]";
    case plan::Form::Expanded: return " [expanded form]";
    case plan::Form::Quantized: return " [dot layout's input]";
  }
  return "";
}

}  // namespace

std::string describe(const ModelPlan& m) {
  std::ostringstream out;
  const Plan& p = m.plan;
  out << "plan: " << p.dispatches.size() << " dispatches (" << plan::dispatch_count(*View(p), false)
      << " when attention is not split), " << p.kernels.size() << " kernel instances, " << p.slot_widths.size()
      << " activation slots, " << p.packs.size() << " packs\n";
  const size_t encode = p.scalars.encode_dispatches;
  if (encode > 0)
    out << "passes: the first " << encode << " dispatches encode a source (an encoder-decoder), the other "
        << p.dispatches.size() - encode << " run the decoder\n";
  // Per layer: the dispatches every pass records, and those only a split attention adds.
  std::map<int32_t, std::pair<size_t, size_t>> per_layer;
  for (const Dispatch& d : p.dispatches)
    if (!plan::prompt_only(d.form)) (d.split_only ? per_layer[d.layer].second : per_layer[d.layer].first)++;
  auto count = [](const std::pair<size_t, size_t>& n) {
    return std::to_string(n.first) + (n.second ? " (+" + std::to_string(n.second) + " split)" : "");
  };
  out << "dispatches per layer:";
  for (const auto& [layer, n] : per_layer) {
    if (layer < 0) out << " outside the layers " << count(n) << ";";
    else if (layer == 0 || n != per_layer[0]) out << " layer " << layer << " " << count(n) << ";";
  }
  if (per_layer.size() > 2) out << " (the layers not listed: as layer 0)";
  if (std::any_of(p.windows.begin(), p.windows.end(), [](int64_t w) { return w > 0; })) {
    out << "\nwindows (keys a query sees; 0: all, else the layer's cache is a ring):";
    for (size_t l = 0; l < p.windows.size(); ++l) out << " layer" << l << "=" << p.windows[l];
  }
  out << "\nactivation slots (f32 per row):";
  for (size_t i = 0; i < p.slot_widths.size(); ++i) out << " activation" << i << "=" << p.slot_widths[i];
  out << "\n";
  for (size_t i = 0; i < p.packs.size(); ++i) {
    out << "pack" << i << ":";
    for (int32_t w : plan::weight_members(p.packs[i])) out << " " << m.manifest.tensors[static_cast<size_t>(w)].name;
    out << "\n";
  }
  for (size_t i = 0; i < p.parts.size(); ++i)
    out << "part" << i << ": " << m.manifest.tensors[static_cast<size_t>(p.parts[i].tensor)].name << " rows "
        << p.parts[i].row0 << ".." << p.parts[i].row0 + p.parts[i].rows << " (max_part_bytes " << p.scalars.max_part_bytes << ")\n";
  for (size_t i = 0; i < p.dispatches.size(); ++i) {
    const Dispatch& d = p.dispatches[i];
    const kernels::FamilyInfo& f = kernels::family(d.family);
    out << i << ": " << p.kernel_name(d) << (d.layer >= 0 ? " [layer " + std::to_string(d.layer) + "]" : "")
        << (d.last_row ? " [last row]" : "") << (d.split_only ? " [split only]" : "")
        << form_text(d.form)
        << " groups_x=" << d.groups_x;
    if (d.groups_z != 1) out << " groups_z=" << d.groups_z;
    for (size_t b = 0; b < f.bindings.size(); ++b)
      if (d.bindings[b].resource != plan::Resource::None) out << " " << f.bindings[b].name << "=" << binding_text(d.bindings[b]);
    for (size_t w = 0; w < f.push.size(); ++w)  // the words the plan sets (0: not set, or set to 0)
      if (d.push[w] != 0) out << " " << f.push[w].name << "=" << d.push[w];
    out << "\n";
  }
  return out.str();
}

}  // namespace lathe::lower
