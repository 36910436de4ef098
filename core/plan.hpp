// The plan: what `lathe gen` lowers a model's op graph into and emits as
// constexpr data (model.hpp), and all the runtime needs to run the model:
// every dispatch of one forward pass over a chunk of token rows, with its
// kernel instance, its push-constant values and its bindings, both written
// by name (core/kernels.hpp), and the buffers they name. The runtime
// allocates, binds, records and submits it; it never re-derives any of it.
//
// Run-time values and how a dispatch depends on them:
//   rows (T)       the chunk's token rows: every push layout's `rows`, set when recorded
//   rows' tokens   each row's token, sequence and cache position: kernels read them from the
//                  IO buffer (IoRow); a chunk is one sequence's consecutive positions, a batched
//                  decode step one position of each of several sequences
//   all_logits     a session option: `last_row` dispatches serve row T − 1 only unless set
//   splits         key ranges of attention, a prompt chunk's and a step's (a device choice;
//                  `split_only` dispatches run in a pass whose ranges are more than 1)
//   ring           per layer, the positions its K and V caches hold: the context on a layer
//                  that sees every key; min(context, W + max_chunk − 1) on a layer of window W
//                  (rope_kv appends a chunk's T keys before attention reads any). Position p
//                  of sequence s lives at slot s · ring + p mod ring; rope_kv and attention
//                  take it as a spec constant.
//   sequences      the KV caches a session holds (each layer's cache is [sequences][ring][…])
//   tile           matmul's rows and tokens per workgroup: the device class's (below)
//   class          the plan's first device class whose needs the device meets
// Workgroup counts, per grid:
//   Rows       (R, 1, 1)                  R = rows (1 for a last_row dispatch)
//   Heads      (groups_x, R, 1)
//   Split      (groups_x, ceil(R / attention rows), splits): attention rows a workgroup
//   Tiles      (ceil(groups_x / tile rows per workgroup), ceil(R / tile tokens), 1)
//   Single     (1, 1, 1)
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/contract.hpp"
#include "core/kernels.hpp"

namespace lathe::plan {

enum class Resource : uint8_t {
  None,        // nothing: an unused binding of the kernel (bound to a dummy)
  Io,          // the session's host-visible IO buffer: IoRow[rows]
  Activation,  // activation slot `index`: [rows][slot_widths[index]] f32
  Logits,      // [rows, or 1][vocab] f32
  Weight,      // manifest tensor `index`: a matrix in its device dtype (texels) or a vector in f32 (storage)
  Pack,        // pack `index`: its weights stacked by rows (texels)
  PackBias,    // pack `index`: their biases stacked the same way, f32
  KCache,      // layer `index`'s K cache (storage, or texels as the kernel's binding says)
  VCache,      // layer `index`'s V cache
  Partials,    // the attention partials of split key ranges: [rows][heads][splits][head_dim + 2] f32
  Part,        // part `index`: a row range of a matrix over the binding limit (texels)
  ConvState,   // layer `index`'s Mamba conv windows: [sequences][conv_state_floats] f32
  ScanState,   // layer `index`'s Mamba scan states h: [sequences][scan_state_floats] f32
  Expanded,    // latent attention's keys and values of a prompt's sequence, expanded: [rows][expanded_row_floats] f32
  Input,       // the host's rows, host-visible: [rows][input_row_floats] f32 (a vision tower's unfolded
               //   patches; a decoder's spliced rows, image features, at the rows they replace)
};

// A row's IoRow::token with this bit set is spliced: the embedding takes the
// row of the same index of the Input resource (Embed's kSplice variant).
inline constexpr uint32_t kSplicedToken = 0x80000000u;

// One token row of a pass, as the kernels read it from the IO buffer
// (common.glsl's IoRow, std430: four words, no padding); argmax writes the
// next token into row 0's token.
struct IoRow {
  uint32_t token = 0;
  uint32_t sequence = 0;  // whose cache the row extends and attends to
  uint32_t position = 0;  // its position in that sequence
  // The positions its sequence holds once the call that brought the row is
  // done: a prompt's end for each of its rows, however it is chunked (one
  // forward call's sequence length, which dynamic NTK RoPE scales by); 0
  // for a decode step's row (position + 1). An encoder–decoder's decoder
  // rows: their sequence's source length (the keys cross-attention sees).
  uint32_t extent = 0;
};
static_assert(sizeof(IoRow) == 16, "common.glsl's IoRow is four 32-bit words");

struct Binding {
  Resource resource = Resource::None;
  int32_t index = 0;  // slot, manifest tensor, pack or layer
  constexpr bool operator==(const Binding&) const = default;
};

constexpr Binding io() { return {Resource::Io, 0}; }
constexpr Binding activation(int32_t slot) { return {Resource::Activation, slot}; }
constexpr Binding logits() { return {Resource::Logits, 0}; }
constexpr Binding weight(int32_t tensor) { return {Resource::Weight, tensor}; }
constexpr Binding pack(int32_t index) { return {Resource::Pack, index}; }
constexpr Binding pack_bias(int32_t index) { return {Resource::PackBias, index}; }
constexpr Binding k_cache(int32_t layer) { return {Resource::KCache, layer}; }
constexpr Binding v_cache(int32_t layer) { return {Resource::VCache, layer}; }
constexpr Binding partials() { return {Resource::Partials, 0}; }
constexpr Binding part(int32_t index) { return {Resource::Part, index}; }
constexpr Binding conv_state(int32_t layer) { return {Resource::ConvState, layer}; }
constexpr Binding scan_state(int32_t layer) { return {Resource::ScanState, layer}; }
constexpr Binding expanded() { return {Resource::Expanded, 0}; }
constexpr Binding input() { return {Resource::Input, 0}; }

// A resource's name, as its function above spells it (`plan::k_cache(3)`),
// and whether the function takes an index: what the generated plan and
// `lathe gen --dump` print.
struct ResourceName {
  std::string_view name;
  bool indexed = false;
};
constexpr ResourceName resource_name(Resource r) {
  switch (r) {
    case Resource::None: return {"none"};
    case Resource::Io: return {"io"};
    case Resource::Activation: return {"activation", true};
    case Resource::Logits: return {"logits"};
    case Resource::Weight: return {"weight", true};
    case Resource::Pack: return {"pack", true};
    case Resource::PackBias: return {"pack_bias", true};
    case Resource::KCache: return {"k_cache", true};
    case Resource::VCache: return {"v_cache", true};
    case Resource::Partials: return {"partials"};
    case Resource::Part: return {"part", true};
    case Resource::ConvState: return {"conv_state", true};
    case Resource::ScanState: return {"scan_state", true};
    case Resource::Expanded: return {"expanded"};
    case Resource::Input: return {"input"};
  }
  return {"?"};
}

// A family's named bindings as a plan's fixed-size array.
template <class Named>
constexpr std::array<Binding, kernels::kMaxBindings> bindings(const Named& named) {
  const auto list = named.array();
  std::array<Binding, kernels::kMaxBindings> out{};
  for (size_t i = 0; i < list.size(); ++i) out[i] = list[i];
  return out;
}

// Experts: the matmul tiles of Tiles for each of groups_z experts (grid z).
// Channels: (groups_x, 1, 1), a workgroup per kSsmChannelsPerGroup channels
// over every row (a Mamba layer's ssm_conv and ssm_scan, which walk the rows
// in order). Keys: (groups_x, ceil(keys / kMlaExpandKeys)) over the keys of
// a prompt chunk's sequence once it is appended (its first row's position
// + rows).
enum class Grid : uint8_t { Rows, Heads, Split, Tiles, Single, Experts, Channels, Keys };

// The passes that record a dispatch (besides split_only). A Mamba-2 layer's
// scan has two forms: the recurrence, a row at a time (mamba2_scan), runs in
// every pass but a prompt chunk's on a class with chunked_scan; the chunked
// form (mamba2_chunk: a chunk of rows at once, then the state carried to the
// next chunk) runs in exactly those. A prompt chunk's rows are one
// sequence's, which the chunked form needs. Latent attention has two forms
// too: absorbed (queries into the latent's space, attention over the cached
// latent as one key head), in every pass but the expanded ones; expanded
// (each head's keys and values out of the cached latent, attention at the
// heads' own widths), in a prompt chunk's pass on a class with expanded_mla
// when the chunk has Plan::expanded_min_rows rows or more and its sequence's
// keys fit the session's expansion rows. A quantize dispatch (the 8-bit
// blocks of a matmul's input that the dot layout reads) is Quantized: built
// on a class whose tiles use the dot layout, recorded in a pass whose matmul
// tile does.
enum class Form : uint8_t { Any, Recurrent, Chunked, Absorbed, Expanded, Quantized };
// The forms only a prompt chunk's pass records: a decode step never does.
constexpr bool prompt_only(Form f) { return f == Form::Chunked || f == Form::Expanded; }

// One kernel instance of the model: its name and family. The SPIR-V is in
// the model's kernel table at the same index (kernels.cpp).
struct Kernel {
  std::string_view name;
  kernels::Family family;
  int64_t width = 0;  // matmul: K, the input width it was specialized for; attention: its window (0: every key)
};

struct Dispatch {
  uint16_t kernel = 0;  // index into the plan's kernels
  Grid grid = Grid::Rows;
  bool last_row = false;    // serves the last row only, unless the session keeps every row's logits
  bool split_only = false;  // runs only when attention is split into key ranges
  Form form = Form::Any;    // which passes record it (above)
  uint32_t groups_x = 1;    // Heads, Split: heads; Tiles, Experts: output rows (MatmulPush::n)
  uint32_t groups_z = 1;    // Experts: the experts
  uint32_t groups_z_per_row = 0;  // Experts: at most this many per token row (top_k: a decode step's experts)
  std::array<Binding, kernels::kMaxBindings> bindings{};  // binding i of the kernel's family
  std::array<uint32_t, push::kMaxWords> push{};           // the push struct's words; `rows` is set when recorded
  int32_t layer = -1;       // the layer it belongs to, -1 outside the layers (a hybrid's: its cache's or state's index)
  uint32_t line = 0;        // the spec line of the op it comes from (0: none)
  int32_t block = -1;       // the model's block (layer of the stack) it belongs to, -1 outside: pipeline stages split by it
};

// Matrices of one input width whose products are taken together (a layer's
// q, k and v): stored stacked by rows in one buffer, so one matmul dispatch
// computes them all into one activation, which the next kernels read as
// column views.
struct Pack {
  std::array<int32_t, 4> weights{};  // manifest tensors, in row order
  uint8_t count = 0;
  std::array<int32_t, 4> biases{};   // their biases (all or none)
  uint8_t bias_count = 0;
  // An expert pack (stride > 0): one role's matrices of `experts` experts,
  // manifest tensors weights[0] + e · stride, expert e's rows after e − 1's.
  int32_t stride = 0;
  uint16_t experts = 0;
  constexpr bool operator==(const Pack&) const = default;
};

// A row range of a matrix too large to bind whole: one texel view holds at
// most maxTexelBufferElements texels (2^27, 2 GiB, on lavapipe and most
// GPUs), so the plan splits a matrix over its part limit (the spec's
// [weights] max_part_bytes) into ranges of whole rows, each in a buffer of its
// own, and runs every kernel that reads it once per range (matmul: the
// range's output columns; embed: the range's tokens). Nothing binds such a
// matrix whole.
struct Part {
  int32_t tensor = 0;  // the manifest tensor
  int64_t row0 = 0;    // its first row
  int64_t rows = 0;
};

// The manifest tensors of a pack's weights, in row order.
inline std::vector<int32_t> weight_members(const Pack& p) {
  std::vector<int32_t> out;
  if (p.stride > 0)
    for (int32_t e = 0; e < p.experts; ++e) out.push_back(p.weights[0] + e * p.stride);
  else
    out.assign(p.weights.begin(), p.weights.begin() + p.count);
  return out;
}

// matmul's tile: its specialization constants 1–4 and the layout they run
// (kernels::Layout, a kernel file each). The rows layout (tokens < 8) gives
// a subgroup-sized workgroup `rows` weight rows for `tokens` tokens (1, or
// a batched decode step's sequences), texels per lane per chunk of K, and a
// workgroup of `groups` such subgroups (1–8, specialization constant 4); the
// broadcast layout (tokens 8) gives each lane `rows` rows for 8 tokens; the
// tiled one (tokens 32 or 64: GPUs) gives a workgroup of kTiledThreads
// invocations `rows` rows (64 or 128) × `tokens` tokens, staged in shared
// memory 32 · texels values of K (texels 1–4) a step. The variant picks
// another kernel for the same shape of work: Dot, integer dot products in
// the rows layout (block weights; other dtypes keep the plain kernel); Coop
// and CoopKhr, a tiled prompt on matrix units.
enum class Variant : uint8_t { Plain, Dot, Coop, CoopKhr };

struct Tile {
  uint32_t rows = 0, tokens = 0, texels = 0, groups = 1;
  Variant variant = Variant::Plain;
  static constexpr uint32_t kPrefillTokens = 8;
  static constexpr uint32_t kTiledThreads = 128;
  constexpr bool tiled() const { return tokens > kPrefillTokens; }
  constexpr kernels::Layout layout() const {
    if (tokens < kPrefillTokens) return variant == Variant::Dot ? kernels::Layout::Dot : kernels::Layout::Rows;
    if (!tiled()) return kernels::Layout::Broadcast;
    return variant == Variant::Coop      ? kernels::Layout::Coop
           : variant == Variant::CoopKhr ? kernels::Layout::CoopKhr
                                         : kernels::Layout::Tiled;
  }
  constexpr uint32_t rows_per_group(uint32_t lanes) const {
    return tokens == kPrefillTokens ? rows * lanes : tiled() ? rows : rows * groups;
  }
  // The workgroup size (specialization constant 0).
  constexpr uint32_t threads(uint32_t lanes) const { return tiled() ? kTiledThreads : lanes * groups; }
  // Shared memory the layout declares, in bytes, for a matmul with one weight
  // matrix or two (gated): matmul_tiled.comp's ws, ws2, xs (f32), tstats and
  // partial; matmul_coop.comp's ws, ws2 and xs in f16, rows of k + 8, and
  // outs, a 16 × 16 f32 block (two gated) for each of its 4 bands (less than
  // the tiled layout's for every tile: 21,760 bytes against 22,784 for the
  // gpu class's 64 × 32 gated).
  constexpr uint32_t shared_bytes(bool gated) const {
    if (!tiled()) return 0;
    const uint32_t k = 32 * texels, matrices = gated ? 2 : 1, stats = 4 * (2 * tokens + kTiledThreads);
    if (layout() == kernels::Layout::Coop || layout() == kernels::Layout::CoopKhr)
      return 2 * (k + 8) * (rows * matrices + tokens) + 4 * 4 * 256 * matrices + stats;
    return 4 * (k * (rows + 4) * matrices + k * (tokens + 4)) + stats;
  }
  constexpr bool operator==(const Tile&) const = default;
};

// A tile matmul can run: rows in [1, 64], texels in [1, 8], groups in
// [1, 8] (the rows layout's; 1 otherwise); tiled as above; Dot only in the
// rows layout, Coop and CoopKhr only tiled.
constexpr bool tile_fits(const Tile& t) {
  if (t.tiled())
    return (t.rows == 64 || t.rows == 128) && (t.tokens == 32 || t.tokens == 64) && t.texels >= 1 && t.texels <= 4 &&
           t.groups == 1 && t.variant != Variant::Dot;
  const bool rows_layout = t.tokens < Tile::kPrefillTokens;
  return t.rows >= 1 && t.rows <= 64 && t.texels >= 1 && t.texels <= 8 && t.groups >= 1 && t.groups <= 8 &&
         (t.groups == 1 || rows_layout) && (t.variant == Variant::Plain || (t.variant == Variant::Dot && rows_layout));
}
// A decode tile takes 1 token; a prefill tile is the decode tile itself, 8
// tokens broadcast from 8 lanes (subgroups of `lanes` or more), or tiled
// (within `shared` bytes of shared memory).
constexpr bool layouts_fit(const Tile& decode, const Tile& prefill, uint32_t lanes, uint32_t shared) {
  return tile_fits(decode) && tile_fits(prefill) && decode.tokens == 1 &&
         (prefill == decode || (prefill.tokens == Tile::kPrefillTokens && lanes >= Tile::kPrefillTokens) ||
          (prefill.tiled() && prefill.shared_bytes(true) <= shared));
}

// What a device reports that a class may need: nothing else decides (never
// a vendor or a device name).
struct DeviceFeatures {
  bool cpu = false;       // VK_PHYSICAL_DEVICE_TYPE_CPU
  uint32_t subgroup = 0;  // subgroupSize: the lanes of a workgroup
  uint32_t shared = 0;    // maxComputeSharedMemorySize, bytes
  uint32_t invocations = 0;  // maxComputeWorkGroupInvocations
  bool integer_dot = false;  // shaderIntegerDotProduct (Vulkan 1.3 or VK_KHR_shader_integer_dot_product)
  // Cooperative matrices with a 16 × 16 × 16 f16 × f16 → f32 shape in the
  // subgroup scope: VK_NV_cooperative_matrix, VK_KHR_cooperative_matrix.
  bool coop_nv = false;
  bool coop_khr = false;
};

// Shared memory attention stages its keys and values in when it takes
// several rows a workgroup (attention.comp's kstage and vstage).
inline constexpr uint32_t kAttentionStageBytes = 8192;

// Flash attention of a prompt chunk (shaders/attention_flash.glsl): a
// workgroup of kFlashThreads invocations takes `rows` consecutive rows of
// the chunk for GT query heads of one KV head (lines = rows · GT query
// lines) and walks their keys in tiles of `keys`, staged in shared memory
// once for every line; attention_flash.comp takes the products by
// multiply-adds, attention_flash_coop.comp on matrix units (a class whose
// prompts' matmuls run the coop layouts). rows 0: none (attention.comp).
struct Flash {
  uint32_t rows = 0, keys = 0;
  constexpr bool operator==(const Flash&) const = default;
};
inline constexpr uint32_t kFlashThreads = 128;
// The shared memory a flash tile is planned within: 32 KiB by multiply-adds
// (lavapipe's, so that the tests run it), 48 KiB on matrix units (what
// devices with them have).
inline constexpr uint32_t kFlashBudget = 32768, kFlashCoopBudget = 49152;
// T5's relative-bias table as a flash workgroup stages it: a bias for each
// offset −max_distance … max_distance and each of its GT heads (f32); 0
// without one (max_distance 0).
constexpr uint32_t flash_relative_bytes(int64_t max_distance, uint32_t gt) {
  return max_distance > 0 ? static_cast<uint32_t>(2 * max_distance + 1) * gt * 4 : 0;
}

// The shared memory a flash workgroup declares, in bytes: the lines'
// queries (f32, or f16 rows padded by 8 on matrix units), a tile's keys and
// values (the cache's texels, or f16 padded rows), its scores (f32) and,
// on matrix units, P (f16 rows of keys + 8) and the lines' output (f32);
// two floats a line; `extra`, T5's relative-bias table where there is one.
constexpr uint32_t flash_shared_bytes(bool coop, uint32_t lines, uint32_t keys, uint32_t dh, bool cache_f16,
                                      uint32_t extra = 0) {
  const uint32_t common = lines * keys * 4 + lines * 8 + extra;
  if (!coop) return common + lines * dh * 4 + 2 * keys * dh * (cache_f16 ? 2 : 4);
  return common + (lines + 2 * keys) * (dh + 8) * 2 + lines * (keys + 8) * 2 + lines * dh * 4;
}
// The flash tile of a model whose workgroups take gt query heads of head
// width dh, within `budget` bytes of shared memory: the most lines (64, 32
// or 16, a multiple of 16 and of gt), then the most keys (32 or 16), that
// fit; none ({0, 0}) where nothing fits or, on matrix units, dh is not a
// multiple of 16.
constexpr Flash flash_tile(bool coop, uint32_t gt, uint32_t dh, bool cache_f16, uint32_t budget, uint32_t extra = 0) {
  if (gt == 0 || dh == 0 || dh % 8 != 0 || (coop && dh % 16 != 0)) return {};
  for (uint32_t lines = 64; lines >= 16; lines -= 16)
    for (uint32_t keys = 32; keys >= 16; keys -= 16)
      if (lines % gt == 0 && flash_shared_bytes(coop, lines, keys, dh, cache_f16, extra) <= budget)
        return {lines / gt, keys};
  return {};
}

// A device class: how the plan runs on one kind of device, decided by the
// generator for the model (its tiles depend on its dtypes). A session takes
// the plan's first class whose needs its device meets, or the one
// LATHE_DEVICE_CLASS (SessionOptions::device_class) names.
struct DeviceClass {
  std::string_view name;
  // Needs:
  bool cpu_only = false;      // a CPU device (lavapipe): instructions, not bytes, bound every kernel
  uint32_t min_subgroup = 1;  // the prefill layout broadcasts 8 tokens from 8 lanes
  uint32_t min_shared = 0;    // bytes of shared memory: the tiled prefill's (Tile::shared_bytes)
  // What it runs: matmul's layout of a prompt chunk (prefill), of one
  // decode step (decode) and of a batched step of up to batch.tokens
  // sequences a workgroup.
  Tile decode, prefill, batch;
  // Attention's key ranges per (head, row): a prompt chunk's (splits) and
  // a pass in the decode or batch layout's (decode_splits: a step's rows
  // are few, so its ranges are what keeps a GPU's multiprocessors busy
  // over a long cache; a chunk's rows do that for it).
  uint32_t splits = 1;
  uint32_t decode_splits = 1;
  // Rows of a prompt chunk an attention workgroup takes, a subgroup each,
  // sharing staged keys and values (1: a workgroup a row, as decode).
  uint32_t attention_rows = 1;
  // A prompt chunk runs a Mamba-2 scan in its chunked form (Form::Chunked):
  // every row of a chunk of kMamba2ChunkRows at once, which devices with
  // many lanes want; the recurrence keeps a lane a channel over every row.
  bool chunked_scan = false;
  // A prompt chunk runs latent attention in its expanded form
  // (Form::Expanded): a head's query against keys of its own width, read
  // once per chunk, where the absorbed form reads the latent's (576 wide for
  // DeepSeek-V3) for every query row and head.
  bool expanded_mla = false;
  // (Its tiles' variants say which features it needs besides: uses().)
  // A class whose kernels no device of its kind has passed the tests on yet
  // is taken only when named (LATHE_DEVICE_CLASS); `verified` names the
  // device its kernel and model tests passed on once they have.
  bool forced_only = false;
  std::string_view verified;
  // A prompt chunk's attention in flash tiles instead of attention_rows
  // (rows 0: none); the class's min_shared covers them.
  Flash flash;
};

// Whether a class runs `v` in any pass: a variant needs its feature (Dot
// integer dot products, Coop NV's cooperative matrices, CoopKhr KHR's).
constexpr bool uses(const DeviceClass& c, Variant v) {
  return c.decode.variant == v || c.prefill.variant == v || c.batch.variant == v;
}

constexpr bool meets(const DeviceClass& c, const DeviceFeatures& f) {
  return (!c.cpu_only || f.cpu) && f.subgroup >= c.min_subgroup && f.shared >= c.min_shared &&
         (!uses(c, Variant::Dot) || f.integer_dot) && (!uses(c, Variant::Coop) || f.coop_nv) &&
         (!uses(c, Variant::CoopKhr) || f.coop_khr) &&
         f.invocations >= std::max({f.subgroup * c.attention_rows, c.flash.rows > 0 ? kFlashThreads : 1u,
                                    c.prefill.threads(f.subgroup),
                                    c.decode.threads(f.subgroup), c.batch.threads(f.subgroup)});
}

// "a CPU device with subgroups of 8 lanes or more"; "22784 bytes of shared
// memory"; "nothing".
std::string needs_text(const DeviceClass& c);
// What a class needs and runs, in a line (`<model> info`, `lathe devices`).
std::string class_text(const DeviceClass& c);
// "32×1×2": rows × tokens × texels; "1×1×2 in 4 subgroups".
std::string tile_text(const Tile& t);
// "rows,tokens,texels[,groups]" (LATHE_TILE_*, lathe_bench's tile lists) as a tile,
// or nullopt; whether matmul can run it is the caller's to check.
std::optional<Tile> parse_tile(std::string_view text);
// --split (lathe report's and a model executable's): "memory" (nullopt: each
// device a share by its memory) or "layers:N,N,…" (each 1 or more, the
// layers of each pipeline stage). Throws std::invalid_argument naming
// --split and the item at fault.
std::optional<std::vector<int64_t>> parse_split(std::string_view text);

// The first class `f` meets and that is not forced_only, or -1.
constexpr int32_t first_met(std::span<const DeviceClass> classes, const DeviceFeatures& f) {
  for (size_t i = 0; i < classes.size(); ++i)
    if (!classes[i].forced_only && meets(classes[i], f)) return static_cast<int32_t>(i);
  return -1;
}

// The rows of features an image gives the decoder, as a grid: `rows` rows
// of `cols` (a fixed-size image's: one row of them all). A splice with row
// ends (Pixtral's [IMG_BREAK]) writes one after each row.
struct ImageGrid {
  int64_t rows = 0, cols = 0;
  constexpr int64_t count() const { return rows * cols; }
  constexpr bool operator==(const ImageGrid&) const = default;
};

// A [vision] splice's link between its two builds (the decoder's
// ModelInfo::vision), as the spec says it: what the host makes of an image
// for the tower, and how a prompt holds the tower's rows.
struct VisionLink {
  // The tower's input: a square of image_size pixels; where `variable`,
  // any whole-patch size up to image_size a side (the processor's
  // longest_edge), its aspect kept.
  int64_t channels = 0, patch = 0, image_size = 0;
  int64_t class_rows = 0;    // the tower's input rows before the patches (a class token's), zeros
  int64_t skip_rows = 0;     // its output rows before the features (a class token's the projector drops)
  int64_t features = 0;      // the rows an image gives the decoder (a variable size's: the most)
  int64_t marker = -1;       // the token a prompt holds once where an image goes
  int64_t image_token = -1;  // the token each of the image's rows holds (−1: the marker)
  // The tokens around an image's rows, in place of its marker (Gemma 3's
  // "\n\n<start_of_image>" before, "<end_of_image>\n\n" after).
  std::span<const int32_t> prefix, suffix;
  // An image's rows see each other both ways in the decoder (Gemma 3): a
  // prefill holds whole images, and a prompt chunk cuts none.
  bool two_way = false;
  bool variable = false;
  // Patches merged a side into one feature row (Mistral 3's patch merger):
  // the host orders the tower's input rows block by block (each block's
  // merge² patches row-major, the blocks row-major, then the patches of an
  // odd last row or column, which no block takes).
  int64_t merge = 1;
  // 2D RoPE: each input row's IO token holds its patch's row · grid() +
  // column.
  bool rope_2d = false;
  int64_t row_end = -1;  // after each row of features (Pixtral's [IMG_BREAK]; −1: none)
  int64_t end = -1;      // in place of the last row's row_end ([IMG_END]; −1: row_end stays)
  // A tiled tower (Llama 3.2 Vision): an image cut into up to `tiles` tiles
  // of image_size², one pass of `tiles` × tile_rows rows (each tile's class
  // row, then its patches), then `tiles` × tile_pad padding rows; each row's
  // IO token its image's aspect ratio id (1 … aspect_ratios). 0: no tiles.
  int64_t tiles = 0, tile_rows = 0, tile_pad = 0, aspect_ratios = 0;
  // The decoder's layers cross-attend to the features (an image's tiles ×
  // tile_rows rows, through the decoder's image pass) where a prompt holds
  // its marker, once: no rows are spliced.
  bool cross = false;

  // Patches a side of the largest image (2D RoPE's grid).
  constexpr int64_t grid() const { return patch > 0 ? image_size / patch : 0; }
  // A tiled tower's pass: its tiles' rows, then their padding rows.
  constexpr int64_t tile_pass_rows() const { return tiles * (tile_rows + tile_pad); }
  // … its tiles' rows alone (spec::Vision::tile_keys): an image's features.
  constexpr int64_t tile_keys() const { return tiles * tile_rows; }
  // The features of an image of `rows` × `cols` patches (a fixed size's
  // ignore them: one row of `features`).
  constexpr ImageGrid grid_of(int64_t rows, int64_t cols) const {
    if (!variable) return {1, features};
    return {rows / merge, cols / merge};
  }
  // The largest image's.
  constexpr ImageGrid largest() const { return grid_of(grid(), grid()); }
  // The ids one marker becomes: prefix, an image's rows (with its row
  // ends), suffix; at the largest image when no grid is given.
  constexpr int64_t expanded_rows(const ImageGrid& g) const {
    return static_cast<int64_t>(prefix.size()) + g.count() + (row_end >= 0 ? g.rows : 0) +
           static_cast<int64_t>(suffix.size());
  }
  constexpr int64_t expanded_rows() const { return expanded_rows(largest()); }
};

// Where a prompt chunk [begin, end) ends so that it cuts no image of a
// two-way link: `at` the prompt's spliced rows, increasing, image i's
// at[starts[i], starts[i + 1]) (starts: one more than the images). An image
// `end` would cut ends the chunk before its first row, or, when it starts
// the chunk, after its last (a chunk holds one image at least).
inline size_t whole_images_end(std::span<const int64_t> at, std::span<const size_t> starts, size_t begin, size_t end) {
  for (size_t i = 0; i + 1 < starts.size(); ++i) {
    if (starts[i] == starts[i + 1] || starts[i + 1] > at.size()) continue;
    const size_t first = static_cast<size_t>(at[starts[i]]), last = static_cast<size_t>(at[starts[i + 1] - 1]);
    if (first < end && last >= end) return first > begin ? first : last + 1;
  }
  return end;
}

// Images of `rows` feature rows each, `at.size() / rows` of them: their
// starts, for whole_images_end.
inline std::vector<size_t> image_starts(size_t spliced, int64_t rows) {
  std::vector<size_t> out;
  const size_t per = static_cast<size_t>(std::max<int64_t>(rows, 1));
  for (size_t i = 0; i <= spliced; i += per) out.push_back(i);
  if (out.back() != spliced) out.push_back(spliced);
  return out;
}

// Everything a session allocates for the plan.
struct Plan {
  std::span<const Kernel> kernels;
  std::span<const Dispatch> dispatches;
  std::span<const int64_t> slot_widths;  // f32 values per token row of each activation slot
  std::span<const Pack> packs;
  std::span<const int64_t> windows;  // per layer: its attention's window W (0: every key); W > 0 makes its cache a ring
  int64_t cache_row_bytes = 0;      // one position of one layer's K (or V) cache: kv_heads × head_dim × dtype
  int64_t partials_row_floats = 0;  // Partials per token row and split: heads × (head_dim + 2)
  int64_t widest_row_floats = 0;    // the widest activation row (a chunk's rows must fit a storage buffer)
  std::span<const DeviceClass> classes;  // in order of preference; the last needs nothing
  std::span<const Part> parts;           // by tensor, each tensor's in row order
  int64_t max_part_bytes = 0;            // the limit the parts were cut to (the spec's)
  // An encoder–decoder's: its first encode_dispatches dispatches are the
  // encode pass over a source's rows (the encoder, then each decoder layer's
  // cross-attention cache of its output), the rest the decoder's pass, whose
  // rows' IoRow::extent is their sequence's source length. 0: one pass.
  size_t encode_dispatches = 0;
  // A Mamba model's state per sequence, kept across passes: layers
  // 0 … state_layers − 1 each hold conv windows [d_inner][d_conv − 1] and
  // scan states h [d_inner][d_state] (f32) of every sequence, as
  // conv_state_floats and scan_state_floats per sequence. 0: none.
  int64_t state_layers = 0;
  int64_t conv_state_floats = 0;
  int64_t scan_state_floats = 0;
  // One position of one layer's V cache; 0: the layers have none (latent
  // attention reads its values from the K cache, which binds as V too).
  int64_t v_cache_row_bytes = 0;
  // Per block (Dispatch::block): the activation slots (bit i: slot i) live
  // at its first dispatch. A model split into pipeline stages by layers
  // hands these slots' rows from one stage's device to the next one's.
  // Empty: the plan cannot be split (an encoder–decoder's two passes).
  std::span<const uint64_t> carried;
  // Latent attention's expanded form: per key of a prompt's sequence, every
  // head's k_nope and v (heads × (qk_nope_head_dim + v_head_dim) f32), for
  // up to expanded_rows keys (a session holds min(this, its context)). 0: none.
  // A chunk takes the expanded form from expanded_min_rows rows: there it
  // does fewer multiply-adds than the absorbed form (lowering.cpp).
  int64_t expanded_row_floats = 0;
  int64_t expanded_rows = 0;
  int64_t expanded_min_rows = 0;
  // The values of a row of the Input resource (0: the plan reads none).
  int64_t input_row_floats = 0;
};

// The manifest tensors a binding reads (a weight; a pack's members and
// biases; a part's whole tensor), each passed to f; none for the rest.
template <class F>
void for_each_bound_tensor(const Plan& p, const Binding& b, F&& f) {
  const size_t i = static_cast<size_t>(b.index);
  switch (b.resource) {
    case Resource::Weight: f(b.index); break;
    case Resource::Pack:
    case Resource::PackBias:
      for (int32_t m : weight_members(p.packs[i])) f(m);
      for (int32_t m : std::span(p.packs[i].biases).first(p.packs[i].bias_count)) f(m);
      break;
    case Resource::Part: f(p.parts[i].tensor); break;
    default: break;
  }
}

// The positions a sequence's cache of a layer holds at `context`: all of
// them, or for a window W > 0 a ring of W + max_chunk − 1 (rope_kv appends
// a chunk's keys before attention reads its first row's window); W ≤ −2:
// an image cross-attention layer's (Llama 3.2 Vision), −W keys an image for
// the session's `images` a sequence, whatever the context.
constexpr int64_t ring_positions(int64_t window, int64_t context, int64_t max_chunk, int64_t images = 1) {
  if (window <= -2) return -window * images;
  return window > 0 ? std::min(context, window + max_chunk - 1) : context;
}

// An image cross-attention decoder's row (Llama 3.2 Vision): IoRow::extent
// holds the image keys it sees in its sequence's cross caches, [first,
// end), as first << kImageKeyBits | end, and kImageRowBit where it sees an
// image (a row that sees none reads every key; its MLP input is zeros).
// common.glsl's IMAGE_ROW_BIT and IMAGE_KEY_BITS.
inline constexpr uint32_t kImageRowBit = 0x80000000u;
inline constexpr uint32_t kImageKeyBits = 15;
inline constexpr int64_t kMaxImageKeys = (int64_t{1} << kImageKeyBits) - 1;
constexpr uint32_t image_extent(int64_t first, int64_t end, bool sees_image) {
  return (sees_image ? kImageRowBit : 0u) | static_cast<uint32_t>(first) << kImageKeyBits | static_cast<uint32_t>(end);
}

// Whether a session records `d` in any pass (and builds its pipeline):
// split_only dispatches run only when attention is split into key ranges,
// Chunked ones only on a class with chunked_scan, Expanded ones only on a
// class with expanded_mla, Quantized ones only on a class with a dot tile.
constexpr bool runs(const Dispatch& d, bool split, bool chunked_scan = false, bool expanded_mla = false, bool dot = false) {
  return (!d.split_only || split) && (d.form != Form::Chunked || chunked_scan) &&
         (d.form != Form::Expanded || expanded_mla) && (d.form != Form::Quantized || dot);
}
// Whether a pass of a session that runs `d` records it: a prompt chunk's
// pass (`prompt`: one sequence's consecutive rows) or a decode step's;
// `expanded`: the pass runs latent attention expanded (a prompt chunk's, on
// a class with expanded_mla, whose keys fit the expansion rows); `dot`: its
// matmul tile is the dot layout.
constexpr bool in_pass(const Dispatch& d, bool prompt, bool chunked_scan, bool expanded = false, bool dot = false) {
  switch (d.form) {
    case Form::Any: return true;
    case Form::Recurrent: return !(prompt && chunked_scan);
    case Form::Chunked: return prompt && chunked_scan;
    case Form::Absorbed: return !expanded;
    case Form::Expanded: return expanded;
    case Form::Quantized: return dot;
  }
  return true;
}

// The dispatch count of one decode step: those a session records.
constexpr size_t dispatch_count(const Plan& p, bool split) {
  size_t n = 0;
  for (const Dispatch& d : p.dispatches) n += runs(d, split) ? 1 : 0;
  return n;
}

// Every device gets a class (the last needs nothing), and every tile is one
// matmul.comp can run on a device the class takes: rows in [1, 64], texels
// in [1, 8], the decode layout 1 token, prefill 8 (or the decode layout
// itself, for narrow subgroups, or tiled within the class's shared memory),
// a batch 1–7; at least one key range.
constexpr bool classes_valid(std::span<const DeviceClass> classes) {
  if (classes.empty()) return false;
  const DeviceClass& last = classes.back();  // needs nothing: workgroups of one subgroup, no shared memory
  if (last.cpu_only || last.min_subgroup > 1 || last.min_shared > 0 || last.attention_rows > 1 || last.flash.rows > 0 ||
      last.decode.groups > 1 || last.batch.groups > 1 || last.prefill.tiled() || last.forced_only ||
      uses(last, Variant::Dot))
    return false;
  for (const DeviceClass& c : classes) {
    if (c.name.empty() || !layouts_fit(c.decode, c.prefill, c.min_subgroup, c.min_shared) || !tile_fits(c.batch) ||
        c.splits < 1 || c.decode_splits < 1 || c.attention_rows < 1 ||
        c.attention_rows > 8 ||
        (c.attention_rows > 1 && (c.min_shared < kAttentionStageBytes || c.prefill == c.decode)))
      return false;
    // Flash tiles: a prompt's rows (the tiled layouts'), at most 64 of them, keys 16 or 32.
    if (c.flash.rows > 0 && (!c.prefill.tiled() || c.flash.rows > 64 || (c.flash.keys != 16 && c.flash.keys != 32)))
      return false;
    if (c.batch.tokens < 1 || c.batch.tokens >= Tile::kPrefillTokens) return false;
  }
  return true;
}

// Compile-time checks of an emitted plan against its manifest: every binding
// names a resource that exists, in the form its kernel binds it (texels or
// storage), every matmul's weight has the rows the dispatch computes, and
// attention runs workgroups over a tile of each KV head's query heads (its
// combine one per query head) as the model's head counts say, over its
// layer's window (a window per layer, and V cache rows none or the K cache's,
// or the first dispatch fails). The index of the first dispatch that fails,
// or -1.
constexpr int32_t first_invalid(std::span<const ManifestEntry> manifest, const Plan& p, int64_t layers, int64_t heads,
                                int64_t kv_heads) {
  if (p.windows.size() != static_cast<size_t>(layers)) return 0;
  // A V cache row is a K cache row's twin, or there is none (latent attention).
  if (p.v_cache_row_bytes != 0 && p.v_cache_row_bytes != p.cache_row_bytes) return 0;
  // The slots a stage receives exist.
  for (uint64_t c : p.carried)
    if (p.slot_widths.size() < 64 && (c >> p.slot_widths.size()) != 0) return 0;
  for (size_t i = 0; i < p.dispatches.size(); ++i) {
    const Dispatch& d = p.dispatches[i];
    const int32_t bad = static_cast<int32_t>(i);
    if (d.kernel >= p.kernels.size()) return bad;
    const kernels::FamilyInfo& f = kernels::family(p.kernels[d.kernel].family);
    for (size_t b = 0; b < d.bindings.size(); ++b) {
      const Binding& x = d.bindings[b];
      if (b >= f.bindings.size()) {
        if (x.resource != Resource::None) return bad;
        continue;
      }
      const bool texel = f.bindings[b].kind == kernels::BindingKind::Texel;
      const auto in = [](int32_t index, size_t size) { return index >= 0 && static_cast<size_t>(index) < size; };
      switch (x.resource) {
        case Resource::Activation:
          if (!in(x.index, p.slot_widths.size()) || texel) return bad;
          break;
        case Resource::Weight:
          if (!in(x.index, manifest.size())) return bad;
          if (texel != read_as_matrix(manifest[x.index].role, manifest[x.index].bias, manifest[x.index].rank)) return bad;
          break;
        case Resource::Pack:
        case Resource::PackBias:
          if (!in(x.index, p.packs.size()) || texel != (x.resource == Resource::Pack)) return bad;
          break;
        case Resource::KCache:
          if (!in(x.index, static_cast<size_t>(layers))) return bad;
          break;
        case Resource::VCache:
          if (!in(x.index, static_cast<size_t>(layers)) || p.v_cache_row_bytes == 0) return bad;
          break;
        case Resource::Part:
          if (!in(x.index, p.parts.size()) || !texel) return bad;
          break;
        case Resource::ConvState:
        case Resource::ScanState:
          if (!in(x.index, static_cast<size_t>(p.state_layers)) || texel) return bad;
          break;
        case Resource::Input:
          if (p.input_row_floats == 0) return bad;
          [[fallthrough]];
        case Resource::Expanded:
          if (x.resource == Resource::Expanded && p.expanded_row_floats == 0) return bad;
          [[fallthrough]];
        case Resource::Io:
        case Resource::Logits:
        case Resource::Partials:
          if (texel) return bad;
          break;
        case Resource::None:
          break;
      }
    }
    // Attention runs its layer's window: the kernel's and the cache's agree.
    // (Its workgroups take the query heads of a KV head a tile at a time.)
    if (f.family == kernels::Family::Attention &&
        (d.groups_x == 0 || d.groups_x % kv_heads != 0 || heads % d.groups_x != 0 || d.layer < 0 || d.layer >= layers ||
         p.kernels[d.kernel].width != std::max<int64_t>(p.windows[static_cast<size_t>(d.layer)], 0)))
      return bad;
    if (f.family == kernels::Family::AttentionCombine && d.groups_x != heads) return bad;
    // The gather reads the token rows of the table it binds: the whole
    // table's, or its range's.
    if (f.family == kernels::Family::Embed) {
      const uint32_t token0 = d.push[push::word(offsetof(push::EmbedPush, token0))];
      const uint32_t tokens = d.push[push::word(offsetof(push::EmbedPush, tokens))];
      const auto named = [&](std::string_view name) {
        size_t at = 0;
        while (at + 1 < f.bindings.size() && f.bindings[at].name != name) ++at;
        return d.bindings[at];
      };
      const Binding table = named("table");
      if (table.resource == Resource::Part) {
        const Part& part = p.parts[static_cast<size_t>(table.index)];
        if (token0 != part.row0 || tokens != part.rows) return bad;
      } else if (table.resource == Resource::Weight) {
        if (token0 != 0 || tokens != manifest[table.index].shape[0]) return bad;
      } else if (table.resource != Resource::None || named("x").resource == Resource::None) {
        return bad;  // (no table: the rows of x, which it binds)
      }
    }
    // A matmul computes groups_x rows of weights K wide: each weight holds
    // them (a fused gate_up: both halves, from gate_row0 and up_row0).
    if (f.family == kernels::Family::Matmul) {
      const int64_t k = p.kernels[d.kernel].width;
      const uint32_t n = d.push[push::word(offsetof(push::MatmulPush, n))];
      const uint32_t row0[2] = {d.push[push::word(offsetof(push::MatmulPush, gate_row0))],
                                d.push[push::word(offsetof(push::MatmulPush, up_row0))]};
      if (k <= 0 || n != d.groups_x || n == 0) return bad;
      const uint32_t col0 = d.push[push::word(offsetof(push::MatmulPush, col0))];
      const uint32_t stride = d.push[push::word(offsetof(push::MatmulPush, y_stride))];
      if (col0 + n > stride) return bad;
      for (int w = 0; w < 2; ++w) {
        const Binding& x = d.bindings[static_cast<size_t>(w)];
        if (x.resource == Resource::Part) {  // a row range: its rows, written at its place in y
          const Part& part = p.parts[static_cast<size_t>(x.index)];
          if (manifest[part.tensor].elements() % k != 0 || row0[w] + n > part.rows || part.row0 != col0) return bad;
        }
        if (x.resource != Resource::Weight) continue;
        // (Its rows as the device holds them: padded to whole texels.)
        const ManifestEntry& e = manifest[x.index];
        const int64_t held = e.rank >= 2 ? e.shape[0] * device_cols(e.dtype, e.shape[1]) : e.elements();
        if (held % k != 0 || row0[w] + n > held / k) return bad;
      }
    }
  }
  return -1;
}

}  // namespace lathe::plan
