// Accounting: parameters, bytes, FLOPs and KV-cache size of a spec.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/spec.hpp"

namespace lathe::spec {

// A component's share of one layer (or of the model's global tensors): its
// parameters, and a token's FLOPs in it as flops_per_token counts them.
struct ComponentCost {
  std::string component;  // name(Component): "attention", "ssm", "mlp", "experts", "norms", …
  int64_t params = 0;
  int64_t active_params = 0;  // per token: the routed experts' top_k only
  double flops = 0;           // at Report::breakdown_context
};

// A sequence's cache against its context, in one of the dtypes the spec's
// cache may take.
struct CacheCurve {
  std::string label;  // "KV cache (f16)", "latent cache (f32)", "state (f32)", "KV cache (f16) + state"
  DType dtype = DType::F16;
  std::vector<std::pair<int64_t, int64_t>> bytes_at_context;  // (L, bytes), L rising
  int64_t passes_weights_at = 0;  // the first context whose cache holds device_weight_bytes or more; 0: none does
  bool spec_dtype = false;        // the spec's [cache] dtype
};

// A vision tower ([vision]): its checkpoint's share and one image's cost,
// at the largest image the spec takes.
struct VisionCost {
  bool present = false;
  std::string connection;         // "splice", "cross_attention"
  int64_t params = 0;             // the tower's and the projector's, every layer the checkpoint holds
  int64_t projector_params = 0;
  int64_t layers_run = 0;         // up to the feature layer
  int64_t patches = 0;            // the tower's rows: patches (and the class token) of every tile
  int64_t features = 0;           // rows of projected features
  int64_t tokens = 0;             // an image's tokens in the prompt (a splice's row ends and prefix too; cross: 1)
  double flops = 0;               // patch embedding, layers run, projector
  int64_t device_bytes = 0;       // as the text model's are counted
  int64_t checkpoint_bytes = 0;   // stored, in their dtypes
};

struct Report {
  std::string name;
  VisionCost vision;
  std::vector<std::pair<std::string, int64_t>> components;  // parameters per component
  int64_t total_params = 0;
  int64_t active_params = 0;  // per token: top-k experts only under MoE
  // The checkpoint bytes one decode token reads: every tensor but the
  // embedding table (one row; all of it when it is the tied LM head) and the
  // experts the token is not routed to.
  double decode_weight_bytes = 0;
  DType dtype = DType::F32;
  std::vector<std::pair<DType, int64_t>> weight_bytes;  // the whole checkpoint stored as each dtype
  std::vector<std::pair<DType, double>> decode_bytes;   // a decode token's reads, the matrices stored as each dtype
  int64_t checkpoint_bytes = 0;  // the manifest's tensors in their dtypes (weights.dtypes' exceptions too)
  // On the device: matrices in their dtype (block rows as device_row lays
  // them out), vectors in f32; and with the KV cache at each context.
  int64_t device_weight_bytes = 0;
  std::vector<std::pair<int64_t, int64_t>> device_bytes_at_context;
  // The same by where a pipeline split puts them (placement.hpp): each
  // block's tensors; the embedding's (its table, norm and position tables:
  // the first stage); the final norm's and LM head's (the last stage); the
  // embedding table alone (which a tied head reads on the last stage too).
  std::vector<int64_t> layer_device_bytes;
  int64_t embedding_device_bytes = 0, head_device_bytes = 0, embedding_table_device_bytes = 0;
  // Matmul and attention FLOPs (2 per multiply-add; elementwise ops excluded).
  std::vector<std::pair<int64_t, double>> prefill_flops_per_token;  // (T, FLOPs/token) from an empty cache
  std::vector<std::pair<int64_t, double>> decode_flops_per_token;   // (L, FLOPs) for one token at context L
  DType kv_dtype = DType::F16;
  int64_t kv_bytes_per_token = 0;        // all layers, H_kv heads, K and V
  int64_t kv_bytes_max_context = 0;      // windowed layers hold only their window
  int64_t max_context = 0;
  // An encoder: an input runs in one pass (every row attends to every key),
  // no LM head, no decode; its K and V live for the pass.
  bool encoder = false;
  // An encoder-decoder: a source's encode pass, then decode tokens reading
  // the decoder's weights; its caches: the encoder's, the decoder's, the
  // cross-attention's.
  bool encoder_decoder = false;
  // A state-space model: no KV cache; each sequence holds a fixed state of
  // every layer, its convolution window and its scan state (f32).
  bool ssm = false;
  // Multi-head latent attention: the cache holds each layer's latent and rotary key, no V.
  bool mla = false;
  int64_t conv_state_bytes = 0;
  int64_t scan_state_bytes = 0;

  // Per layer and component, for the pictures: each block's (an
  // encoder–decoder's encoder layers first) and the global tensors' (the
  // embedding, its norm and the final norm, the LM head, which multiplies
  // every token even when tied). Their FLOPs are a decode token's at the
  // last decode context (an encoder: an input of the last prefill length):
  // breakdown_context; they sum to that flops_per_token entry.
  std::vector<std::vector<ComponentCost>> layer_costs;
  std::vector<ComponentCost> global_costs;
  int64_t breakdown_context = 0;
  int64_t encoder_layers = 0;  // an encoder–decoder's: the first of layer_costs
  // A sequence's cache in each dtype [cache] dtype accepts (f16, f32), and
  // a state-space model's state (f32, fixed): sampled at half octaves up to
  // an octave past where the cache reaches the weights (or max_context, if
  // further), a window's knee and max_context among them.
  std::vector<CacheCurve> cache_curves;
};

// The positions a sequence's cache layer `cache_layer` holds at `context`:
// a windowed layer's at most its window.
int64_t cached_positions(const Spec& spec, int64_t cache_layer, int64_t context);
// A sequence's cache or state in block `block` at `context` positions: a
// state-space layer's conv window and scan state, an attention layer's K
// and V (latent attention's latent alone).
int64_t layer_cache_bytes(const Spec& spec, int64_t block, int64_t context);

VisionCost vision_cost(const Spec& spec);  // of [vision]; make_report's vision
Report make_report(const Spec& spec, const std::vector<int64_t>& prefill_lengths = {128, 512},
                   const std::vector<int64_t>& decode_contexts = {128, 2048});

std::string format_report(const Report& report);  // a table for people
nlohmann::json report_json(const Report& report);
// Pictures for people (generator/spec/report_svg.cpp): parameters and FLOPs
// per layer and component, and the cache against context beside the
// weights. Every number it shows is report_json's, named by a data-key
// attribute (a JSON pointer into it); the whole of report_json is its
// <metadata>. With a placement (--devices), a third picture: each device's
// weights and cache beside its memory, its numbers placement_json's under
// "placement" in the metadata.
struct Placement;
std::string report_svg(const Report& report, const Placement* placement = nullptr);

// The table's and the pictures' numbers: digits in groups of three
// ("8,192"); 4 significant digits and an SI prefix ("16.06 GFLOP"); bytes in
// binary units ("14.96 GiB").
std::string grouped(int64_t v);
std::string human(double v, const char* unit);
std::string human_bytes(double v);

}  // namespace lathe::spec
