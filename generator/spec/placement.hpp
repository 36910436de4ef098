// A model's layers placed on several devices (a pipeline split, issue 29's
// plan): each device holds a contiguous run of layers, their weights and
// their sequences' caches or states; the first also the embedding, the last
// the final norm and the LM head (a tied head: the embedding table again).
// What `lathe report SPEC --devices 24GiB,24GiB` prints before anything is
// allocated. Activations are not counted (a chunk's rows: a few MiB).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/spec.hpp"
#include "generator/spec/report.hpp"

namespace lathe::spec {

struct DeviceShare {
  int64_t capacity = 0;                 // bytes the device offers
  int64_t first_layer = 0, end_layer = 0;  // its layers: [first, end)
  bool embedding = false, head = false;
  int64_t weights = 0, cache = 0;       // bytes on it
  int64_t need() const { return weights + cache; }
  bool fits() const { return need() <= capacity; }
};

struct Placement {
  std::vector<DeviceShare> devices;
  int64_t context = 0;    // each sequence's positions the caches hold
  int64_t sequences = 1;
  bool by_memory = true;  // split by the devices' memory (else the layer counts given)
  bool fits() const;
};

// A placement that cannot be made: the message names the option at fault.
class PlacementError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The devices' byte counts from "24GiB,24GiB" (also GB, MiB, MB, bytes);
// throws PlacementError naming --devices.
std::vector<int64_t> parse_capacities(const std::string& text);
// "memory" (nullopt: by memory) or "layers:16,16"; throws PlacementError naming --split.
std::optional<std::vector<int64_t>> parse_split(const std::string& text);

// Places the spec's layers on devices of `capacities` bytes, by memory (the
// contiguous runs whose largest need ÷ capacity is least, so that they fit
// whenever some placement does: core/balance.hpp) or by the layer counts
// given (which must sum to the layers); every device at least one layer. Throws PlacementError for counts that do not fit the model, more
// devices than layers or an encoder-decoder (two stacks: not planned).
Placement place(const Spec& spec, const Report& report, std::span<const int64_t> capacities,
                const std::optional<std::vector<int64_t>>& layer_counts, int64_t context, int64_t sequences = 1);

std::string format_placement(const Placement& p);  // a table, then "fits" or every device's need and free bytes
nlohmann::json placement_json(const Placement& p);

}  // namespace lathe::spec
