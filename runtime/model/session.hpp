// A session: one model's weights, KV cache and activations on a device, and
// the forward pass of the plan its build carries (core/plan.hpp).
//
// Prefill records a command buffer for its chunk of T tokens; decode submits
// one command buffer recorded once, again and again: each row's token,
// sequence and cache position travel in a small host-visible IO buffer, never
// in the recording.
//
// A session holds `sequences` independent KV caches (continuous batching: a
// server's requests each own one). A prefill chunk extends one sequence; a
// batched decode step runs one token of each of several sequences in one pass,
// every matrix read once for all of them. A sequence's logits do not depend
// on what else runs: a batched step's row for sequence s has the bits of the
// same token decoded with s alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/model/model_info.hpp"
#include "runtime/vk/device.hpp"

namespace lathe {
namespace weights {
class Checkpoint;
}
class StageLink;

struct SessionOptions {
  int64_t context = 0;      // KV-cache positions; 0: the model's max_context
  int64_t max_chunk = 128;  // token rows of one prefill pass; longer prompts run in chunks (capped so that
                            // each activation fits maxStorageBufferRange)
  bool all_logits = false;  // prefill returns the logits of every row, not only the last
  std::string pipeline_cache;  // vk::Pipelines cache_dir ("-": none)
  int64_t attention_splits = 0;  // key ranges per attention row; 0: the device class's
  // The plan's device class to run (its name: "cpu", "gpu", …); empty: the
  // LATHE_DEVICE_CLASS variable, else the first class the device meets.
  // Error(Unsupported) when the device does not meet the named class's needs.
  std::string device_class;
  // Latent attention's form in a prompt chunk (plan::Form): empty, the
  // class's (expanded from the plan's expanded_min_rows rows, on a class
  // with expanded_mla); "absorbed" or "expanded" (every chunk whose keys fit
  // the expansion) for a measurement or a test.
  std::string mla_form;
  int64_t sequences = 1;  // independent KV caches of `context` positions each (at most max_chunk)
  // Rows a verification pass (verify(): speculative decoding's proposals)
  // holds at most, beside a batched decode step's `sequences` (at most
  // max_chunk; 0: sequences).
  int64_t verify_rows = 0;
  // An image cross-attention decoder (Llama 3.2 Vision): the images a
  // sequence holds at most, its cross-attention caches' keys (each image's
  // tiles' rows).
  int64_t images = 1;
  // A model split over devices: the layers of each pipeline stage, in order,
  // one device each (the Session's devices): {16, 16} runs layers 0–15 on the
  // first device, with the embedding, and 16–31 on the second, with the
  // final norm and head. Empty: one device runs every layer.
  std::vector<int64_t> stages;
  // A model split over processes (machines): this one runs stage
  // link->rank() of `stages`, one stage a rank, on the one device it is
  // given. Rank 0's session is the API (prefill, decode, …): each pass goes
  // on from its stage to rank 1's and so on, and the last rank sends back
  // the logits rows read and argmax's pick; the other ranks run
  // Session::serve_stage. Null: every stage in this process.
  StageLink* link = nullptr;
};

// Throws Error(BadFile, "<where>: the logits hold NaN at token 17 (2048 of
// 2048 values are NaN or inf) …") when `row` holds a NaN or +inf, or is all
// -inf (a -inf alone rules its token out, as a mask or a bias does).
// Whatever reads a model's logits (generate, the server's scheduler, the
// model executable's logits and perplexity) checks each row it uses, so that
// a broken model or checkpoint fails naming the step rather than sampling
// from garbage. (BadFile: a weight loaded with --no-check is the usual
// cause; an overflow in the computation is the other.)
void check_logits(std::span<const float> row, std::string_view where);

class Session {
 public:
  // Allocates every buffer (weights, cache, activations) and builds the plan.
  // Throws Error(InvalidArgument) for a context beyond the model's
  // max_context, Error(Unsupported) for a device without subgroup
  // arithmetic, Error(OutOfMemory) when something does not fit.
  Session(vk::Device& device, const ModelInfo& model, const SessionOptions& options = {});
  // A model split into pipeline stages over several devices
  // (options.stages, one device each; Vulkan devices of one process, or one
  // physical device opened twice). Each device holds its stage's weights,
  // caches and activations; a pass runs stage after stage, the slots live at
  // a stage's first layer (plan::Plan::carried) handed on through
  // host-visible memory. With every device of one class the logits are
  // bit-identical to one device's: the same kernels sum in the same order.
  // Throws Error(InvalidArgument) when the devices and stages do not match
  // or the stages' layers are not the model's, Error(Unsupported) for an
  // encoder–decoder or, before anything is allocated, when a stage does not
  // fit its device (every stage's need and memory named).
  Session(std::span<vk::Device* const> devices, const ModelInfo& model, const SessionOptions& options);
  // Rank 0 of a split over processes tells the other ranks to stop.
  ~Session();
  // A rank above 0 of a split over processes (link.rank() > 0): receives
  // from rank 0's session the options its stage needs, builds the stage on
  // `device`, calls `load` to fill its weights (each rank reads its own
  // copy of the checkpoint; a stage uploads only the tensors it holds), then
  // runs each pass rank 0's session sends until that session ends. Rank 0
  // ending without a session returns at once. Errors are thrown; the
  // caller ends the job (MPI_Abort), so no rank waits for one that failed.
  static void serve_stage(vk::Device& device, const ModelInfo& model, StageLink& link,
                          const std::function<void(Session&)>& load);
  // Rank 0 of a split over processes that ends without a session (a
  // command that needs none, or one refused before its session): tells the
  // other ranks, waiting in serve_stage, to return.
  static void stop_stages(StageLink& link);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const ModelInfo& model() const;
  int64_t context() const;  // positions of each sequence's cache
  int64_t sequences() const;

  // One manifest tensor as the checkpoint stores it (its manifest shape and
  // layout, row-major), in any of f32/f16/bf16: converted to the manifest
  // dtype (norm scales and biases to f32) and, for in_out layouts,
  // transposed to [out, in]. Throws Error(InvalidArgument) naming the tensor
  // when the byte count does not fit its shape.
  void upload(size_t tensor, DType dtype, std::span<const std::byte> data);
  // Audits a checkpoint (a safetensors file, a sharded one's index.json, or
  // a directory holding either; weights::Checkpoint) against the manifest,
  // every problem listed at once, then uploads it tensor by tensor from the
  // file mappings: the host holds one converted tensor at a time. Each
  // tensor's values are checked first (weights/finite.hpp): a NaN or an
  // infinity is Error(BadFile) naming the file, the tensor and the first bad
  // value. On a terminal a progress line shows a load that takes over a
  // second. A rank of a split over processes reads, checks and converts
  // only the tensors its stage holds (upload() skips the others too).
  struct LoadOptions {
    bool check_finite = true;  // false: --no-check, the values as they are
  };
  void load(const std::string& path, const LoadOptions& options);
  void load(const std::string& path) { load(path, LoadOptions{}); }
  // The same from a checkpoint open_checkpoint() has opened and audited.
  void load(const weights::Checkpoint& checkpoint, const LoadOptions& options);

  // Appends `tokens` to the cache at position() and returns the logits of the
  // last row [vocab], or of every row [T][vocab] with all_logits. Throws
  // Error(InvalidArgument) for a token outside the vocabulary or a context
  // overflow, naming the numbers, before anything runs.
  std::vector<float> prefill(std::span<const int32_t> tokens);
  // The same for one sequence's cache.
  std::vector<float> prefill(int64_t sequence, std::span<const int32_t> tokens);
  // The same for a decoder of a [vision] splice, whose rows `at` (increasing
  // indices into tokens) take the rows of `features` ([at.size()][hidden],
  // a vision tower's output rows) in place of their tokens' embeddings.
  // Throws Error(InvalidArgument) for a model that splices nothing, rows
  // out of order or a size that does not match, before anything runs.
  std::vector<float> prefill(int64_t sequence, std::span<const int32_t> tokens, std::span<const int64_t> at,
                             std::span<const float> features);
  // An encoder's final hidden states [T_i][hidden] of each input, all inputs
  // in one pass (at most sequences() of them, each at most the context long;
  // every row of an input attends to every key of it). The cache keeps
  // nothing: each call starts from position 0. Throws
  // Error(InvalidArgument) for a decoder, an empty input, a bad token or an
  // input too long, before anything runs. On an encoder, prefill(tokens) is
  // encode() of the one input.
  std::vector<std::vector<float>> encode(std::span<const std::vector<int32_t>> inputs);
  // A vision tower (vision_info()): one image's input rows, `rows` of
  // plan.input_row_floats values each (its patches unfolded, a class
  // token's row zeros), through the tower in one pass; its output rows
  // [rows][output_width]. Throws Error(InvalidArgument) for a model that
  // reads no input rows, a size that does not match, or more rows than the
  // context or a pass holds, before anything runs. `tokens`: each row's IO
  // token (a 2D RoPE tower's: its patch's row · grid + column; empty: 0).
  // `own` > 0 (a tiled tower's image): the rows from `own` on (its padding
  // tiles' and padding rows) see the rows before it alone, which see every row.
  std::vector<float> encode_rows(std::span<const float> input, int64_t rows, std::span<const int32_t> tokens = {},
                                 int64_t own = 0);
  // An encoder–decoder: encodes `tokens`, the source, in one pass into the
  // sequence's cross-attention caches and empties its decoder cache; its
  // prefill and decode steps then attend to that source, starting from
  // model().decoder_start. Throws Error(InvalidArgument) for another stack,
  // an empty source, a bad token or a source longer than the context,
  // before anything runs. prefill and decode of a sequence without a source
  // are errors too.
  void source(int64_t sequence, std::span<const int32_t> tokens);
  // An image cross-attention decoder (Llama 3.2 Vision): `images` images'
  // features (the tower's rows of each, model().vision's tiles × tile_rows,
  // [images][tiles · tile_rows][hidden]) into the sequence's cross-attention
  // caches, `tiles[i]` of image i's its own (the rest its canvas's padding
  // tiles). The sequence's prompts then hold a marker for each, in order
  // (MllamaProcessor's cross-attention mask: a row sees the image of the
  // last marker at or before it, with the adjacent markers before that one;
  // a row before any reads every key, its MLP adding nothing). Throws
  // Error(InvalidArgument) for another model, a sequence that holds tokens
  // (reset it), more images than SessionOptions::images, or features or
  // tile counts that do not fit, before anything runs.
  void images(int64_t sequence, std::span<const float> features, std::span<const int64_t> tiles);
  // A prompt's pass, whatever the stack: a decoder's prefill(sequence,
  // tokens); an encoder–decoder's source(sequence, tokens), then the prefill
  // of its decoder_start. The logits of the last row [vocab].
  std::vector<float> prompt(int64_t sequence, std::span<const int32_t> tokens);
  // One token through the recorded decode step; its logits [vocab].
  std::vector<float> decode(int32_t token);
  // One token of each of several distinct sequences in one pass: the logits
  // [steps.size()][vocab], row i for steps[i], each with the bits of that
  // token decoded with its sequence alone. Throws Error(InvalidArgument) for a
  // sequence out of range or named twice, a bad token or a full cache, before
  // anything runs.
  struct Step {
    int64_t sequence = 0;
    int32_t token = 0;
  };
  std::vector<float> decode(std::span<const Step> steps);
  // Speculative decoding's verification: `tokens` appended to one sequence
  // in one decode pass, a row each at consecutive positions, as that many
  // decode steps would run them and with their bits (the batched step's
  // kernels: a row's logits do not depend on the pass's other rows); the
  // logits of every row [tokens.size()][vocab]. Rejected rows are then cut
  // back (truncate). Throws Error(InvalidArgument) for more tokens than
  // max(sequences, verify_rows), a bad token or a full cache, and
  // Error(Unsupported) for a model with a state-space layer (a step's rows
  // of one sequence would read one state) or a stack whose decode rows are
  // not its tokens' (an encoder, an encoder–decoder), before anything runs.
  std::vector<float> verify(int64_t sequence, std::span<const int32_t> tokens);
  // The same for several sequences in one pass (the server's, each with its
  // proposals): `rows` holds each sequence's tokens together, in order, at
  // consecutive positions from its own; a sequence's rows not together is
  // Error(InvalidArgument). The logits [rows.size()][vocab], row for row.
  std::vector<float> verify(std::span<const Step> rows);
  // Greedy decoding on the device: feeds `token`, then each step's argmax,
  // `steps` times; returns the picks. No logits are read back: a row of NaN
  // (the device's argmax finds no largest value) is Error(BadFile) naming
  // the decode step (1 for the first of this call) and position, never a
  // token -1 fed on. (A row with some NaN among finite values yields the
  // largest finite one.)
  std::vector<int32_t> generate_greedy(int32_t token, int64_t steps);
  // The device's argmax of the last row of the last forward pass; a row of
  // NaN is Error(BadFile).
  int32_t argmax() const;

  int64_t position() const;  // of sequence 0
  int64_t position(int64_t sequence) const;
  void reset();                  // empties every sequence's cache and source (the weights stay)
  void reset(int64_t sequence);  // empties one

  // A sequence cut back, and a prefix of one sequence copied into another:
  // what prompt reuse (a cached prefix's prefill skipped) and speculative
  // decoding (rejected proposals rolled back) stand on. A cut or a copy is
  // exact: every row after it reads the bits it would have read had the
  // sequence never gone past the cut.
  //
  // The lowest position `sequence` cuts back to exactly: 0 where every
  // cache keeps every position; a sliding window's ring keeps max_chunk
  // positions past its window, so a cut of up to max_chunk positions (any
  // cut before the ring has wrapped); a state-space layer's state (a Mamba
  // model's or a hybrid's) holds its whole history in one value, so the
  // position itself. A cut to 0 is always exact (it starts afresh).
  int64_t rewind_floor(int64_t sequence) const;
  // Cuts the sequence back to `position`, in [rewind_floor, position()] or
  // 0: its cache past it is dropped (a later pass writes over it); its
  // source (an encoder–decoder's) and images stay, the image markers at or
  // past the cut go. Throws Error(InvalidArgument) outside that range.
  void truncate(int64_t sequence, int64_t position);
  // Sequence `to` becomes sequence `from`'s first `count` positions, `count`
  // in [rewind_floor(from), position(from)] or 0: every stage's caches and
  // states of them copied on the device (what `to` held is dropped).
  // Throws Error(InvalidArgument) for `to` == `from` or a count outside that
  // range, Error(Unsupported) for a stack whose sequences hold more than
  // their caches (an encoder–decoder's source, Llama 3.2 Vision's images,
  // an encoder's nothing) and for a split over processes (the other ranks'
  // caches are theirs).
  void copy(int64_t from, int64_t to, int64_t count);
  bool copies() const;   // whether copy() runs here (the stack and the split allow it)
  bool verifies() const;  // whether verify() runs here (no state-space layer; a decoder of its own tokens)
  int64_t decode_rows() const;  // the rows a decode or verification pass holds: max(sequences, verify_rows)

  size_t dispatches_per_token() const;  // of a decode step
  const plan::DeviceClass& device_class() const;  // the plan's class the session runs
  // For measurements only (lathe_bench --decode-tiles, --prefill-tiles; the
  // GPU kit's sweep): the matmul tiles of the decode and prefill layouts
  // instead of the class's, as LATHE_TILE_DECODE and _PREFILL set them at
  // start; later steps are recorded with them. Throws InvalidArgument for a
  // tile matmul.comp cannot run (rows 1–64, texels 1–8, a decode tile of 1
  // token, a prefill tile of 8 or the decode tile itself).
  void set_tiles(const plan::Tile& decode, const plan::Tile& prefill);
  std::pair<plan::Tile, plan::Tile> tiles() const;  // decode, prefill

  // The device memory the session's buffers take, in bytes (what the check
  // before allocation counts): the weights as the device holds them (block
  // types repacked, each plane padded to a 16-byte texel: within a row's
  // padding of the file's bytes), every sequence's KV cache, the
  // activations and logits.
  struct Memory {
    uint64_t weights = 0, cache = 0, activations = 0;
    uint64_t state = 0;  // a Mamba model's conv windows and scan states of every sequence
  };
  Memory memory() const;               // every stage's together
  std::vector<Memory> stage_memory() const;  // each pipeline stage's
  // What a split by memory balances over devices (core/balance.hpp's
  // by_memory), before any session exists: each layer's bytes on a device,
  // its tensors and every sequence's KV cache of it at the options'
  // context (a windowed layer's ring; caches that are not one a layer, a
  // hybrid's, and a Mamba model's states spread over its layers alike); and
  // the tensors of no layer on
  // the stage that runs their dispatches: `first` the first stage's (the
  // embedding), `last` the last's (the final norm and head; a tied head's
  // embedding on both). A stage's weights and cache are its layers' and its
  // end's (stage_memory()).
  struct SplitNeed {
    std::vector<int64_t> layers;
    int64_t first = 0, last = 0;
  };
  static SplitNeed split_need(const ModelInfo& model, const SessionOptions& options);
  size_t stages() const;               // pipeline stages (devices): 1 unless split

  // Runs the pipelines a prefill of `rows` tokens and the decode steps after
  // it use — one pass of that many rows (at most a chunk) and a decode step,
  // on token 0 — then empties the cache. A driver that compiles a kernel at
  // its first dispatch (llvmpipe's JIT) does it here, so the first timed
  // pass is not a compile; once its caches are warm this costs a pass.
  // Chunks under 8 rows run the decode layout, so a short prompt's warm-up
  // compiles no prefill kernel. With several sequences a batched decode step
  // of all of them runs too. Call it after the weights are in.
  // `progress(stage, done, stages)` is called before each pass ("prefill",
  // "decode", "batched decode"; done counts those before it) and once at
  // the end (stage "", done == stages), for a progress line.
  using WarmUpProgress = std::function<void(const char* stage, int done, int stages)>;
  void warm_up(int64_t rows, const WarmUpProgress& progress = {});
  // Whether the pipeline cache on disk already held this device's
  // pipelines: false on a first run, whose warm_up() compiles the kernels.
  bool pipelines_cached() const;

  // Device time of each dispatch of one pass over `rows` tokens at the
  // current position (timestamp queries; the cache position is not
  // advanced). For benchmarks: which kernels dominate. One device only.
  struct KernelTime {
    std::string kernel;
    double microseconds;
  };
  std::vector<KernelTime> profile(uint32_t rows);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Opens the checkpoint at `path` (weights::Checkpoint) and audits it against
// `model`'s manifest without a device, every problem listed at once
// (Error(BadFile)): a command calls it before it starts the device, so that
// a file that does not fit is refused in milliseconds, and hands the result
// to Session::load.
std::unique_ptr<weights::Checkpoint> open_checkpoint(const ModelInfo& model, const std::string& path);

}  // namespace lathe
