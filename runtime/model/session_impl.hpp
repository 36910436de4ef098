// The inside of a Session, shared by its units, one job each:
//   session.cpp   the public API: checks, chunking, prefill/decode/generate
//   memory.cpp    every buffer the plan needs, and a binding's buffer
//   upload.cpp    weights into those buffers (conversion, transposition, checkpoints)
//   record.cpp    pipelines, descriptor sets, command recording, submission, profiling
// Nothing here decides what runs: the plan (model.plan) says it all.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/model/session.hpp"
#include "runtime/model/stage_link.hpp"
#include "runtime/vk/buffer.hpp"
#include "runtime/vk/descriptors.hpp"
#include "runtime/vk/pipeline.hpp"

namespace lathe {

using plan::Tile;

// A manifest tensor on the device: matrices keep their device dtype and are
// read through a texel view; vectors (norm scales, biases) become f32.
struct DeviceTensor {
  std::optional<vk::Buffer> buffer;
  std::optional<vk::TexelView> view;
  DType dtype = DType::F32;
  bool uploaded = false;
  // Packed tensors live in their pack's buffer instead, at `offset` bytes;
  // a tensor split into row ranges has no home: its bytes are in the
  // session's parts [first_part, first_part + part_count), in row order.
  vk::Buffer* home = nullptr;
  VkDeviceSize offset = 0;
  size_t first_part = 0, part_count = 0;
};

// A plan::Part on the device: a row range of a matrix in a buffer of its own.
struct DevicePart {
  vk::Buffer buffer;
  vk::TexelView view;
  VkDeviceSize begin = 0;  // its first byte in the whole matrix as the device lays it out
};

// A plan::Pack on the device: its weights stacked in one buffer (with a
// texel view), their biases in another.
struct DevicePack {
  std::optional<vk::Buffer> weights, biases;
  std::optional<vk::TexelView> view;
};

struct Session::Impl {
  vk::Device& device;
  const ModelInfo& model;
  const plan::Plan& plan;
  SessionOptions options;
  int64_t context = 0;                  // positions of each sequence's cache
  // The rows of a decode pass at most: a batched step's sequences, or a
  // verification's rows (SessionOptions::verify_rows).
  int64_t decode_rows() const { return std::max(options.sequences, options.verify_rows); }
  std::vector<int64_t> positions;       // per sequence: the positions its cache holds
  uint32_t lanes = 0;
  uint32_t splits = 1, decode_splits = 1;  // attention's key ranges: a prompt chunk's, a step's (DeviceClass)
  // Keys latent attention's expanded form holds (the class's form, the
  // plan's rows up to the context; 0: the absorbed form everywhere), and
  // the fewest rows of a chunk that takes it.
  int64_t expanded_rows = 0, expanded_min_rows = 0;
  const plan::DeviceClass* device_class = nullptr;  // choose_class()
  Tile decode{}, prefill{}, batch{};    // batch: a decode step of several sequences
  // Chunks of fewer rows run the decode layout: for a few tokens it is about
  // as fast, and a short prompt then needs none of the prefill layout's
  // kernels, which llvmpipe takes about three times longer to compile than
  // the decode layout's (a first run's cold start: 4 s rather than 15 s for
  // the demo model on 2 loaded cores).
  static constexpr uint32_t kPrefillLayoutRows = 8;
  const Tile& tile_for(uint32_t rows) const { return rows >= kPrefillLayoutRows ? prefill : decode; }
  // Attention's rows a workgroup in a layout: the class's in the prefill
  // layout (a chunk's rows are one sequence's; its flash tile's where it
  // has one), else 1 (a batched step's rows are of several sequences).
  // Flash tiles run in the class's own prefill layout alone, whose flash
  // module the generator compiled (a tile set for a measurement in another
  // layout takes attention.comp).
  bool prompt_layout(const Tile& tile) const { return tile == prefill && !(prefill == decode); }
  bool flash(const Tile& tile) const {
    return prompt_layout(tile) && device_class->flash.rows > 0 && tile.layout() == device_class->prefill.layout();
  }
  // The first dispatch inside the blocks (the model's layers): one of no
  // block before it runs on the first pipeline stage, after it on the last.
  static size_t first_layered(const plan::Plan& p) {
    size_t i = 0;
    while (i < p.dispatches.size() && p.dispatches[i].block < 0) ++i;
    return i;
  }
  // The positions of each sequence's cache: SessionOptions::context, else
  // the spec's (the constructor refuses one outside [1, max_context]).
  static int64_t context_of(const ModelInfo& m, const SessionOptions& o) { return o.context ? o.context : m.max_context; }
  uint32_t splits_for(const Tile& tile) const { return prompt_layout(tile) ? splits : decode_splits; }
  uint32_t attention_rows(const Tile& tile) const {
    return flash(tile) ? device_class->flash.rows : prompt_layout(tile) ? device_class->attention_rows : 1;
  }
  // A pipeline stage of a session split over devices (SessionOptions::stages):
  // it runs layers [first_layer, end_layer), the embedding when it is the
  // first and the final norm and head when it is the last. It holds only
  // what its dispatches bind (`owned`), receives the plan's carried slots of
  // its first layer from the stage before through host-visible memory
  // (handoff_in) and hands those of the next stage's first layer on
  // (handoff_out). One device: a single stage that holds everything.
  int64_t first_layer = 0, end_layer = 0;
  bool first_stage = true, last_stage = true;
  uint64_t carried_in = 0, carried_out = 0;     // slot masks (plan::Plan::carried)
  std::optional<vk::Buffer> handoff_in, handoff_out;  // host-visible: [rows] of each carried slot, slot after slot
  struct Owned {
    std::vector<char> tensors, packs, parts, caches, states;
  } owned;
  std::vector<std::unique_ptr<Impl>> later;     // the first stage's: the stages after it, in order
  // A split over processes (SessionOptions::link): this process's stage is
  // link->rank()'s; rank 0 keeps the logits rows the last rank sent back.
  StageLink* link = nullptr;
  std::vector<float> remote_logits;
  mutable bool loaded = false;  // the first stage's: every held tensor uploaded (check_ready)
  // Bytes of `rows` rows of the slots in `carried` (a handoff's used part).
  VkDeviceSize carried_bytes(uint64_t carried, uint32_t rows) const {
    VkDeviceSize floats = 0;
    for (size_t i = 0; i < plan.slot_widths.size(); ++i)
      if (carried >> i & 1) floats += static_cast<VkDeviceSize>(plan.slot_widths[i]);
    return floats * rows * 4;
  }
  // The logits rows a pass leaves that a caller reads: every row with
  // all_logits or in a decode step, else the last.
  uint32_t logit_rows(uint32_t rows, bool decode_step) const { return options.all_logits || decode_step ? rows : 1; }
  void send_pass(uint32_t rows, bool decode_step);  // rank 0: the pass on to rank 1, then the answer back
  std::vector<Impl*> stages() {                 // the first stage's: every stage, itself first
    std::vector<Impl*> all{this};
    for (const auto& l : later) all.push_back(l.get());
    return all;
  }
  std::vector<const Impl*> stages() const {
    std::vector<const Impl*> all{this};
    for (const auto& l : later) all.push_back(l.get());
    return all;
  }
  void own_bound();  // memory.cpp: `owned` from the active dispatches' bindings (a single stage: everything)
  // The first stage's: whether a stage of this process holds the tensor (a
  // split over processes holds only its rank's; one device holds every one).
  bool held(size_t tensor) const {
    for (const Impl* stage : stages())
      if (stage->owned.tensors[tensor]) return true;
    return false;
  }
  // Copies the carried slots' `rows` rows between the slots and a handoff buffer.
  void copy_carried(VkCommandBuffer cb, uint32_t rows, bool in) const;
  // The first stage's: after its pass over `rows` rows, each later stage's,
  // the IO rows and the carried slots handed on; the last stage's IO row 0
  // (argmax's pick) back into this one's.
  void run_later(uint32_t rows, bool decode_step);

  std::vector<size_t> active;  // the plan's dispatches a pass records (split_only ones only when split)
  size_t encode_active = 0;    // an encoder–decoder's: the first of `active`, its encode pass
  std::vector<int64_t> sources;  // an encoder–decoder's, per sequence: its source's length (0: none yet)
  // An image cross-attention decoder's (Llama 3.2 Vision), per sequence: its
  // images' keys in the cross caches (their own tiles' rows, [first, end)
  // each, image by image; the other tiles' rows after them, `keys` in all)
  // and the positions of the prompts' image markers so far.
  struct ImageKeys {
    std::vector<int64_t> first, end;
    int64_t keys = 0;
    std::vector<int64_t> markers;
  };
  std::vector<ImageKeys> image_keys;
  // The extent of the sequence's row at `position` (plan::image_extent):
  // the images of the last run of adjacent markers at or before it, or, with
  // none, every key.
  uint32_t image_extent(int64_t sequence, int64_t position) const;
  // The image pass of `sequence`: rows order[i] of `features` ([rows][hidden])
  // into its cross-attention caches at key i.
  void image_pass(int64_t sequence, std::span<const float> features, std::span<const int64_t> order);

  std::shared_ptr<vk::Pipelines> pipelines;  // shared with the other sessions on this device (Pipelines::shared)
  std::map<std::array<uint32_t, 5>, std::vector<const vk::Pipeline*>> layouts;  // pipelines_for, by rows, tokens, texels, groups, variant
  vk::DescriptorArena arena;
  std::vector<DeviceTensor> tensors;
  std::vector<DevicePack> packs;
  std::vector<DevicePart> parts;                // the plan's, in its order
  std::vector<vk::Buffer> slots;                // [max_chunk][width] f32 each
  std::vector<uint32_t> ring;                   // per layer: the positions its caches hold (core/plan.hpp)
  std::vector<vk::Buffer> k_cache, v_cache;     // per layer [sequences][ring][cache_row_bytes]
  std::vector<vk::TexelView> k_views, v_views;  // the same, as RGBA32UI texels
  std::vector<vk::Buffer> conv_state, scan_state;  // per Mamba layer [sequences][conv/scan_state_floats] f32
  std::optional<vk::Buffer> io;                 // host-visible: plan::IoRow[max_chunk]
  std::optional<vk::Buffer> input;              // host-visible: [max_chunk][input_row_floats] f32, when read
  std::optional<vk::Buffer> logits;             // [max_chunk with all_logits, else sequences][vocab] f32
  std::optional<vk::Buffer> partials;           // [max_chunk][splits][partials_row_floats] f32, when split
  std::optional<vk::Buffer> expanded;           // [expanded_rows][expanded_row_floats] f32, when the class expands
  std::optional<vk::Buffer> dummy;              // unused bindings
  std::optional<vk::TexelView> dummy_view;
  std::vector<VkDescriptorSet> sets;  // one per active dispatch

  // A tensor's bytes as the device lays them out, into its buffer, its
  // pack's, or its row ranges'.
  void write(size_t tensor, std::span<const std::byte> bytes);
  bool convert_mapped(size_t tensor, DType from, std::span<const std::byte> data);

  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandBuffer prefill_commands = VK_NULL_HANDLE;
  // Recorded once each: [0] a decode step of one sequence, [B − 1] a batched
  // step of B sequences (recorded at its first use).
  std::vector<VkCommandBuffer> decode_commands;
  std::vector<bool> decode_recorded;
  VkFence fence = VK_NULL_HANDLE;

  Impl(vk::Device& d, const ModelInfo& m, const SessionOptions& o);
  ~Impl();

  // memory.cpp
  void assign_dtypes();            // each tensor's device dtype, which its bytes depend on
  Session::Memory memory() const;  // what allocate() takes (this stage's)
  struct Fit {
    VkDeviceSize need = 0, heap = 0;  // heap: the largest device-local one (0: unknown)
    bool host = false;                // the heap is the host's memory (a CPU device)
    VkDeviceSize available = 0;       // what it can take now (vk::DeviceMemory; 0: not reported)
  };
  Fit fit() const;
  std::string memory_text() const;  // memory() in words
  static std::string mib(VkDeviceSize bytes);
  void check_memory() const;       // throws when the session cannot fit the device's heap
  // Split attention's partials, [rows][splits][partials_row_floats] f32
  // for the most a pass takes (0: attention not split, or none), and latent
  // attention's expanded keys and values,
  // [expanded_rows][expanded_row_floats] f32 (0: the absorbed form only):
  // what allocate() makes and memory() counts.
  VkDeviceSize partials_bytes() const { return partials_bytes(decode, prefill); }
  // … were the tiles these: a prompt chunk's max_chunk rows in the prefill
  // layout, a step's (a chunk of fewer than kPrefillLayoutRows rows, or a
  // row of every sequence) in the decode or batch layout's ranges; where
  // the two layouts are one, every pass's.
  VkDeviceSize partials_bytes(const Tile& decode_tile, const Tile& prefill_tile) const {
    const bool one_layout = prefill_tile == decode_tile;
    const uint64_t prompt = one_layout || splits == 1 ? 0 : static_cast<uint64_t>(options.max_chunk) * splits,
                   step = decode_splits == 1 ? 0 : step_rows(decode_tile, prefill_tile) * decode_splits;
    return static_cast<VkDeviceSize>(std::max(prompt, step)) * static_cast<VkDeviceSize>(plan.partials_row_floats) * 4;
  }
  uint64_t step_rows(const Tile& decode_tile, const Tile& prefill_tile) const {
    const uint64_t chunk = static_cast<uint64_t>(options.max_chunk);
    return prefill_tile == decode_tile
               ? chunk
               : std::min<uint64_t>(chunk, std::max<uint64_t>(kPrefillLayoutRows - 1, static_cast<uint64_t>(decode_rows())));
  }
  VkDeviceSize expanded_bytes() const {
    return static_cast<VkDeviceSize>(expanded_rows) * static_cast<VkDeviceSize>(plan.expanded_row_floats) * 4;
  }
  int64_t ring_positions(int64_t layer) const;  // the positions each sequence's cache of `layer` holds
  void allocate();
  vk::Binding resolve(const plan::Binding& b, kernels::BindingKind kind) const;
  VkDeviceSize device_bytes(size_t tensor) const;

  // upload.cpp: see Session::upload

  // record.cpp
  void choose_class();  // device_class, its tiles and key ranges
  void build_sets();
  void create_commands();
  // every_row: last_row dispatches serve every row (all_logits, or a batched
  // decode step, whose rows are each a sequence's last).
  // encode_pass: an encoder–decoder's encode pass, else its decoder's.
  // `prompt`: a prompt chunk's pass (one sequence's rows), else a decode
  // step's (plan::in_pass).
  void record(VkCommandBuffer cb, uint32_t rows, const Tile& tile, bool every_row, bool prompt,
              VkQueryPool timestamps = VK_NULL_HANDLE, bool encode_pass = false);
  // `expanded`: the pass runs latent attention expanded (expands());
  // `tile`: its matmul tile (the dot layout reads its quantize dispatches').
  // A dispatch that combines key ranges records where the pass's tile has several.
  bool in_pass(size_t n, bool prompt, bool expanded, const Tile& tile) const {
    const plan::Dispatch& d = plan.dispatches[active[n]];
    return plan::in_pass(d, prompt, device_class->chunked_scan, expanded, tile.layout() == kernels::Layout::Dot) &&
           (!d.split_only || splits_for(tile) > 1);
  }
  // Whether a prompt chunk of `rows` rows (its first row's position in io)
  // runs latent attention expanded: its sequence's keys fit the expansion.
  bool expands(uint32_t rows) const {
    return expanded_rows > 0 && rows >= expanded_min_rows &&
           static_cast<int64_t>(io_rows()[0].position) + rows <= expanded_rows;
  }
  void submit(VkCommandBuffer cb);  // start(cb), then finish()
  void start(VkCommandBuffer cb);   // submitted, not waited for (the stage's fence)
  void finish();                    // waits for what start() submitted
  const KernelBinary& kernel(const plan::Dispatch& d) const { return model.kernels[d.kernel]; }
  const kernels::FamilyInfo& family(const plan::Dispatch& d) const {
    return kernels::family(plan.kernels[d.kernel].family);
  }
  vk::Pipelines::Request pipeline_request(const plan::Dispatch& d, const Tile& tile) const;
  // Per active dispatch, its pipeline in `tile`'s layout; created at the first call.
  const std::vector<const vk::Pipeline*>& pipelines_for(const Tile& tile);

  // session.cpp
  plan::IoRow* io_rows() const { return static_cast<plan::IoRow*>(io->mapped()); }
  template <class Where>
  int32_t device_pick(const Where& where) const;  // session.cpp: the argmax's pick, checked
  void check_sequence(int64_t sequence) const;
  void check_ready(int64_t sequence, size_t count) const;
  void check_token(int32_t token) const;
  // An encoder–decoder's decoder rows attend to their sequence's source:
  // one must be encoded first (Session::source).
  void check_source(int64_t sequence) const;
  uint32_t extent_of(int64_t sequence, uint32_t extent) const {
    if (model.vision != nullptr && model.vision->cross)  // a decode row: its position the sequence's next
      return image_extent(sequence, positions[static_cast<size_t>(sequence)]);
    return model.encoder_decoder ? static_cast<uint32_t>(sources[static_cast<size_t>(sequence)]) : extent;
  }
  // Writes one input's rows (an encoder's input, an encoder–decoder's
  // source) to io from row `at` as `sequence`, positions from 0, each with
  // the input's length as its extent, padded to whole attention workgroups
  // (a workgroup stages one sequence's keys; the padding rows' keys lie past
  // the extent, their outputs are dropped). Returns the rows written.
  size_t write_input(size_t at, uint32_t sequence, std::span<const int32_t> input);
  size_t padded_rows(size_t n) const;
  // Runs a pass over `rows` rows already written to io (a chunk of one
  // sequence); advances that sequence.
  void run_chunk(int64_t sequence, uint32_t rows);
  // A decode step of `count` rows already in io, one sequence each.
  void run_decode(uint32_t count);
  // The first stage's: a prompt of `sequence` in chunks of max_chunk rows
  // (the last the rest; fewer before an image of two-way rows it would
  // cut), the stages of this process working at once, stage
  // k on chunk t − k at step t (over processes, each chunk passed on to
  // rank 1); calls `done(rows)` as the last stage finishes each chunk, its
  // logits then readable, the sequence advanced past it.
  // A spliced prompt's rows (Session::prefill with features): per token
  // row, its feature row (−1: its token's embedding), the features
  // ([hidden] f32 each), and the rows that take them (increasing; image i's
  // at[i · features, (i + 1) · features) of the link). Empty: every row its
  // token's.
  struct Splice {
    std::span<const int64_t> rows;
    std::span<const float> features;
    std::span<const int64_t> at;
  };
  void run_prompt(int64_t sequence, std::span<const int32_t> tokens, const Splice& splice,
                  const std::function<void(uint32_t)>& done);
  std::vector<float> prompt(int64_t sequence, std::span<const int32_t> tokens, const Splice& splice);
  // This stage's pass over `rows` rows: a prompt chunk's, or a decode step's
  // (its command buffer recorded once); begin_pass submits it, finish()
  // waits for it.
  void run_pass(uint32_t rows, bool decode_step);
  void begin_pass(uint32_t rows, bool decode_step);
  // A tensor's device bytes into every stage that holds it (`owned`), or,
  // where each one's memory is mapped, converted straight into it.
  void store(size_t tensor, std::span<const std::byte> bytes);
  bool store_mapped(size_t tensor, DType from, std::span<const std::byte> data);
  std::vector<float> read_logits(uint32_t rows);
};

}  // namespace lathe
