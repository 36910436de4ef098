// The model and its build: info (its configuration, manifest and dispatch
// plan) and random-weights (a checkpoint of random values for it).
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/model/commands.hpp"
#include "cli/model/common.hpp"
#include "core/kernels.hpp"
#include "core/plan.hpp"
#include "runtime/model/model_info.hpp"
#include "runtime/weights/dtype.hpp"
#include "runtime/weights/safetensors.hpp"

namespace lathe::cli {

int cmd_info() {
  const lathe::ModelInfo& m = lathe::model_info();
  const lathe::plan::Plan& plan = m.plan;
  std::cout << "model        " << m.name << " (" << m.spec_file << ")\n"
            << "dims         hidden " << m.hidden << ", layers " << m.layers << ", heads " << m.heads << "/"
            << m.kv_heads << " × " << m.head_dim << ", intermediate " << m.intermediate << ", vocab " << m.vocab
            << ", max context " << m.max_context << "\n"
            << "parameters   " << m.total_params << " in " << m.manifest.size() << " tensors\n";
  if (const lathe::ModelInfo* d = lathe::draft_info())  // speculative decoding's proposer (--draft-weights)
    std::cout << "draft        " << d->name << " (" << d->spec_file << "): hidden " << d->hidden << ", layers "
              << d->layers << ", " << d->total_params << " parameters, max context " << d->max_context << "\n";
  std::map<int32_t, size_t> per_layer;
  std::map<std::string_view, int> kernels;
  // The classes whose prompt chunks take a Mamba-2 scan's chunked form, and latent attention's expanded one.
  std::string chunked_classes, expanded_classes;
  for (const lathe::plan::DeviceClass& c : plan.classes) {
    if (c.chunked_scan) chunked_classes += (chunked_classes.empty() ? "" : ", ") + std::string(c.name);
    if (c.expanded_mla) expanded_classes += (expanded_classes.empty() ? "" : ", ") + std::string(c.name);
  }
  bool chunked = false, expanded = false;  // the plan has those forms (a prompt chunk's, in place of a decode step's)
  for (const lathe::plan::Dispatch& d : plan.dispatches) {
    kernels[plan.kernels[d.kernel].name]++;
    chunked = chunked || d.form == lathe::plan::Form::Chunked;
    expanded = expanded || d.form == lathe::plan::Form::Expanded;
    if (!lathe::plan::prompt_only(d.form)) per_layer[d.layer]++;
  }
  // Dispatches name their layer's cache or state: a hybrid numbers its
  // attention and state-space layers apart, and its layers differ.
  bool uniform = static_cast<int64_t>(per_layer.size() - per_layer.count(-1)) == m.layers;
  for (const auto& [layer, n] : per_layer) {
    if (layer < 0) continue;
    uniform = uniform && n == per_layer[0];
  }
  std::cout << "plan         " << lathe::plan::dispatch_count(plan, false) << " dispatches per pass ("
            << lathe::plan::dispatch_count(plan, true) << " with split attention): " << per_layer[-1]
            << " outside the layers, "
            << (uniform || m.layers == 0 ? std::to_string(m.layers > 0 ? per_layer[0] : 0) + " per layer; "
                                         : std::to_string(lathe::plan::dispatch_count(plan, false) - per_layer[-1]) +
                                               " in the layers; ")
            << plan.kernels.size()
            << " kernel instances, " << plan.slot_widths.size() << " activation buffers, " << plan.packs.size()
            << " packs\n";
  if (m.encoder_decoder) {  // two passes of one plan
    size_t encode = 0;
    for (size_t i = 0; i < plan.encode_dispatches; ++i) encode += lathe::plan::runs(plan.dispatches[i], false) ? 1 : 0;
    std::cout << "passes       an encoder-decoder of " << m.encoder_layers << " encoder and " << m.layers
              << " decoder layers: " << encode << " dispatches encode a source (and fill the cross-attention caches), "
              << lathe::plan::dispatch_count(plan, false) - encode << " run the decoder; decoder start token "
              << m.decoder_start << "\n";
  }
  for (const auto& [name, n] : kernels) std::cout << "  " << n << " × " << name << "\n";
  if (chunked)
    std::cout << "scan forms   a prompt chunk on class " << chunked_classes << " runs each Mamba-2 scan chunked ("
              << lathe::kernels::kMamba2ChunkRows << " rows at once, mamba2_chunk); decode steps and the other classes "
              << "run the recurrence (mamba2_scan)\n";
  if (expanded)
    std::cout << "MLA forms    a prompt chunk of " << plan.expanded_min_rows << " rows or more on class " << expanded_classes
              << " runs latent attention expanded (mla_prefill_expand, mla_prefill_attend; keys of up to "
              << plan.expanded_rows << " positions); decode steps, shorter chunks and the other classes run it "
              << "absorbed (mla_query, attention, mla_values)\n";
  std::cout << "device classes (a device takes the first whose needs it meets; LATHE_DEVICE_CLASS forces one):\n";
  for (const lathe::plan::DeviceClass& c : plan.classes)
    std::cout << "  " << c.name << std::string(12 - std::min<size_t>(c.name.size(), 11), ' ') << lathe::plan::class_text(c) << "\n";
  if (!plan.parts.empty()) {  // matrices over the spec's max_part_bytes, bound a row range at a time
    std::map<int32_t, int> ranges;
    for (const lathe::plan::Part& p : plan.parts) ranges[p.tensor]++;
    const auto most = std::max_element(ranges.begin(), ranges.end(), [](auto& a, auto& b) { return a.second < b.second; });
    std::cout << "row ranges   " << ranges.size() << " matrices over " << plan.max_part_bytes << " bytes, bound and run "
              << "a row range at a time: " << plan.parts.size() << " ranges (most: "
              << m.manifest[static_cast<size_t>(most->first)].name << ", " << most->second << ")\n";
  }
  std::map<int64_t, int> windows;  // window → layers
  for (int64_t w : plan.windows)
    if (w > 0) windows[w]++;
  for (const auto& [w, n] : windows)
    std::cout << "window       " << n << " of " << m.layers << " layers see the last " << w
              << " keys (their KV caches: rings of window + max_chunk − 1 positions)\n";
  return 0;
}

int cmd_random_weights(const std::string& out, uint64_t seed, float scale) {
  const lathe::ModelInfo& m = lathe::model_info();
  std::vector<lathe::weights::TensorToWrite> tensors;
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  const auto write = [&](const lathe::ManifestEntry& e, std::string name) {
    const std::vector<float> values = random_values(e, state, scale);
    lathe::weights::TensorToWrite t{std::move(name), e.dtype, e.stored_shape(), {}};
    t.data.resize(values.size() * lathe::weights::dtype_size(e.dtype));
    lathe::weights::convert(lathe::DType::F32, std::as_bytes(std::span(values)), e.dtype, t.data);
    tensors.push_back(std::move(t));
  };
  // A [vision] model's checkpoint holds its tower's build's tensors too, and
  // the tower's layers past the feature layer, which no build reads.
  for (const lathe::ModelInfo* build : {&m, lathe::vision_info()}) {
    if (build == nullptr) continue;
    for (const lathe::ManifestEntry& e : build->manifest) write(e, std::string(e.name));
    for (const lathe::ManifestEntry& e : build->unread_tensors) write(e, std::string(e.name));
  }
  lathe::weights::write_safetensors(out, tensors, {{"format", "pt"}, {"lathe", "random weights"}});
  std::cerr << "wrote " << tensors.size() << " random tensors of " << m.name << " to " << out << "\n";
  return 0;
}

}  // namespace lathe::cli
