#include "generator/spec/placement.hpp"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "core/balance.hpp"
#include "core/plan.hpp"
#include "generator/spec/design.hpp"

namespace lathe::spec {

namespace {

[[noreturn]] void fail(const std::string& message) { throw PlacementError(message); }

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  if (!text.empty() && text.back() == ',') out.emplace_back();
  return out;
}

std::string layers_text(const DeviceShare& d) {
  std::string out = d.end_layer - d.first_layer == 1 ? "layer " + std::to_string(d.first_layer)
                                                     : "layers " + std::to_string(d.first_layer) + "–" +
                                                           std::to_string(d.end_layer - 1);
  if (d.embedding) out += " + embedding";
  if (d.head) out += " + head";
  return out;
}

}  // namespace

bool Placement::fits() const {
  return std::all_of(devices.begin(), devices.end(), [](const DeviceShare& d) { return d.fits(); });
}

std::vector<int64_t> parse_capacities(const std::string& text) {
  std::vector<int64_t> out;
  for (const std::string& item : split_list(text)) {
    try {
      out.push_back(parse_memory("--devices", item));
    } catch (const DesignError& e) {
      fail(e.what());
    }
  }
  if (out.empty()) fail("--devices: no devices given (use 24GiB,24GiB)");
  return out;
}

std::optional<std::vector<int64_t>> parse_split(const std::string& text) {
  try {
    return plan::parse_split(text);  // the model executables' --split too
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
}

Placement place(const Spec& s, const Report& r, std::span<const int64_t> capacities,
                const std::optional<std::vector<int64_t>>& layer_counts, int64_t context, int64_t sequences) {
  if (s.encoder_decoder()) fail("--devices: an encoder-decoder's two stacks are not split over devices");
  const int64_t blocks = s.blocks(), n = static_cast<int64_t>(capacities.size());
  if (n > blocks)
    fail("--devices: " + std::to_string(n) + " devices for " + std::to_string(blocks) + " layers (each holds one at least)");
  if (context < 1 || context > s.dims.max_context)
    fail("--context: " + std::to_string(context) + " is outside 1 … " + std::to_string(s.dims.max_context) +
         " (the spec's max_context)");
  std::vector<int64_t> need(static_cast<size_t>(blocks));
  for (int64_t l = 0; l < blocks; ++l)
    need[static_cast<size_t>(l)] = r.layer_device_bytes.at(static_cast<size_t>(l)) + sequences * layer_cache_bytes(s, l, context);
  // A tied head on another device than the embedding reads its own copy of the table.
  const int64_t head = r.head_device_bytes + (s.embedding.tied && n > 1 && !s.encoder() ? r.embedding_table_device_bytes : 0);

  std::vector<int64_t> counts;
  if (layer_counts) {
    counts = *layer_counts;
    if (static_cast<int64_t>(counts.size()) != n)
      fail("--split: " + std::to_string(counts.size()) + " layer counts for " + std::to_string(n) + " devices (--devices)");
    const int64_t sum = std::accumulate(counts.begin(), counts.end(), int64_t{0});
    if (sum != blocks)
      fail("--split: the layer counts sum to " + std::to_string(sum) + ", the model has " + std::to_string(blocks) + " layers");
  } else {
    // The contiguous runs whose largest share of a device's capacity is
    // least: they fit whenever some placement does (core/balance.hpp).
    const auto balanced = balance::by_memory(need, capacities, r.embedding_device_bytes, head);
    if (!balanced) fail("--devices: a device of no memory");
    counts = *balanced;
  }

  Placement p;
  p.context = context;
  p.sequences = sequences;
  p.by_memory = !layer_counts;
  int64_t l = 0;
  for (int64_t d = 0; d < n; ++d) {
    DeviceShare share;
    share.capacity = capacities[static_cast<size_t>(d)];
    share.first_layer = l;
    share.end_layer = l + counts[static_cast<size_t>(d)];
    share.embedding = d == 0;
    share.head = d == n - 1 && !s.encoder();
    for (; l < share.end_layer; ++l) {
      share.weights += r.layer_device_bytes.at(static_cast<size_t>(l));
      share.cache += sequences * layer_cache_bytes(s, l, context);
    }
    if (share.embedding) share.weights += r.embedding_device_bytes;
    if (share.head) share.weights += head;
    p.devices.push_back(share);
  }
  return p;
}

std::string format_placement(const Placement& p) {
  std::ostringstream out;
  out << "\n## Placement on " << p.devices.size() << " devices ("
      << (p.by_memory ? "split by memory" : "layers as given") << "), " << p.sequences
      << (p.sequences == 1 ? " sequence" : " sequences") << " at context " << p.context << "\n\n"
      << "| device | holds | weights | cache | need | memory | fits |\n|---|---|---:|---:|---:|---:|---|\n";
  for (size_t d = 0; d < p.devices.size(); ++d) {
    const DeviceShare& s = p.devices[d];
    out << "| " << d << " | " << layers_text(s) << " | " << human_bytes(static_cast<double>(s.weights)) << " | "
        << human_bytes(static_cast<double>(s.cache)) << " | " << human_bytes(static_cast<double>(s.need())) << " | "
        << human_bytes(static_cast<double>(s.capacity)) << " | " << (s.fits() ? "yes" : "**no**") << " |\n";
  }
  out << "\nWeights as the device holds them and each sequence's cache or state; a chunk's activations are not "
         "counted.\n";
  if (!p.fits()) {
    out << "Does not fit:";
    for (size_t d = 0; d < p.devices.size(); ++d)
      out << (d ? ";" : "") << " device " << d << " needs " << grouped(p.devices[d].need()) << " bytes of "
          << grouped(p.devices[d].capacity);
    out << "\n";
  }
  return out.str();
}

nlohmann::json placement_json(const Placement& p) {
  nlohmann::json j;
  j["context"] = p.context;
  j["sequences"] = p.sequences;
  j["split"] = p.by_memory ? "memory" : "layers";
  j["fits"] = p.fits();
  for (const DeviceShare& d : p.devices)
    j["devices"].push_back({{"first_layer", d.first_layer},
                            {"last_layer", d.end_layer - 1},
                            {"end_layer", d.end_layer},
                            {"embedding", d.embedding},
                            {"head", d.head},
                            {"weight_bytes", d.weights},
                            {"cache_bytes", d.cache},
                            {"need_bytes", d.need()},
                            {"capacity_bytes", d.capacity},
                            {"fits", d.fits()}});
  return j;
}

}  // namespace lathe::spec
