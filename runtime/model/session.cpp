// A session's public API: the checks of every call, prompts cut into
// chunks, and the passes of prefill, decode and greedy generation.
#include "runtime/model/session.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/error.hpp"
#include "runtime/model/session_impl.hpp"
#include "runtime/model/stage_link.hpp"
#include "runtime/vk/buffer.hpp"
#include "runtime/vk/check.hpp"

namespace lathe {

Session::Impl::Impl(vk::Device& d, const ModelInfo& m, const SessionOptions& o)
    : device(d), model(m), plan(m.plan), options(o), pipelines(vk::Pipelines::shared(d, o.pipeline_cache)), arena(d) {}

Session::Impl::~Impl() {
  if (device.handle() != VK_NULL_HANDLE) vkDeviceWaitIdle(device.handle());
  if (fence != VK_NULL_HANDLE) vkDestroyFence(device.handle(), fence, nullptr);
  if (pool != VK_NULL_HANDLE) vkDestroyCommandPool(device.handle(), pool, nullptr);
}

void Session::Impl::check_sequence(int64_t sequence) const {
  if (sequence < 0 || sequence >= static_cast<int64_t>(positions.size()))
    throw Error(ErrorKind::InvalidArgument, "sequence " + std::to_string(sequence) + " is outside [0, " +
                                                std::to_string(positions.size()) + "), the session's sequences");
}

void Session::Impl::check_ready(int64_t sequence, size_t count) const {
  // Every tensor a stage holds, once: a tensor stays uploaded (every decode
  // step calls this).
  if (!loaded) {
    for (const Impl* stage : stages())
      for (size_t i = 0; i < stage->tensors.size(); ++i)
        if (stage->owned.tensors[i] && !stage->tensors[i].uploaded)
          throw Error(ErrorKind::InvalidArgument, std::string(model.manifest[i].name) + ": not loaded before the first forward pass");
    loaded = true;
  }
  check_sequence(sequence);
  const int64_t position = positions[static_cast<size_t>(sequence)];
  if (position + static_cast<int64_t>(count) > context)
    throw Error(ErrorKind::InvalidArgument,
                "the context of " + std::to_string(context) + " positions is full: " + std::to_string(position) +
                    " cached + " + std::to_string(count) + " new tokens" +
                    (positions.size() > 1 ? " in sequence " + std::to_string(sequence) : std::string()) +
                    " (raise the context, up to " + std::to_string(model.max_context) + ")");
}

void Session::Impl::check_token(int32_t token) const {
  // (An image cross-attention decoder's marker is a row of its token table
  // past the vocabulary: Llama 3.2 Vision's <|image|>.)
  const bool marker = model.vision != nullptr && model.vision->cross && token == model.vision->marker;
  if (token < 0 || (token >= model.vocab && !marker))
    throw Error(ErrorKind::InvalidArgument,
                "token id " + std::to_string(token) + " is outside the vocabulary [0, " + std::to_string(model.vocab) + ")");
}

void Session::Impl::check_source(int64_t sequence) const {
  if (model.encoder_decoder && sources[static_cast<size_t>(sequence)] == 0)
    throw Error(ErrorKind::InvalidArgument,
                std::string(model.name) + " is an encoder-decoder: encode a source first (source())" +
                    (positions.size() > 1 ? " for sequence " + std::to_string(sequence) : std::string()));
}

size_t Session::Impl::padded_rows(size_t n) const {
  const uint32_t group = attention_rows(prefill);
  return std::min<size_t>((n + group - 1) / group * group, static_cast<size_t>(context));
}

size_t Session::Impl::write_input(size_t at, uint32_t sequence, std::span<const int32_t> input) {
  const size_t rows = padded_rows(input.size());
  for (size_t r = 0; r < rows; ++r)
    io_rows()[at + r] = {static_cast<uint32_t>(r < input.size() ? input[r] : 0), sequence, static_cast<uint32_t>(r),
                         static_cast<uint32_t>(input.size())};
  return rows;
}

void Session::Impl::run_chunk(int64_t sequence, uint32_t rows) {
  if (rows == 1) {
    run_decode(1);
  } else {
    run_pass(rows, false);
    run_later(rows, false);
  }
  positions[static_cast<size_t>(sequence)] += rows;
}

void Session::Impl::run_prompt(int64_t sequence, std::span<const int32_t> tokens, const Splice& splice,
                               const std::function<void(uint32_t)>& done) {
  const std::vector<Impl*> all = stages();
  const size_t most = static_cast<size_t>(options.max_chunk), n = all.size();
  // The chunks' first rows: max_chunk rows each, the last the rest; where an
  // image's rows see each other both ways, a chunk ends before an image it
  // would cut (Session() made max_chunk hold one).
  const plan::VisionLink* vision = model.vision;
  const bool whole_images = vision != nullptr && vision->two_way && !splice.at.empty();
  const std::vector<size_t> images = whole_images ? plan::image_starts(splice.at.size(), vision->features)
                                                  : std::vector<size_t>{};
  std::vector<size_t> starts;
  for (size_t first = 0; first < tokens.size();) {
    starts.push_back(first);
    const size_t end = std::min(first + most, tokens.size());
    first = whole_images ? plan::whole_images_end(splice.at, images, first, end) : end;
  }
  const size_t chunks = starts.size();
  starts.push_back(tokens.size());
  const int64_t position = positions[static_cast<size_t>(sequence)];
  const uint32_t extent = extent_of(sequence, static_cast<uint32_t>(position + static_cast<int64_t>(tokens.size())));
  // An image cross-attention decoder's rows: each its own images' keys.
  const bool image_rows = vision != nullptr && vision->cross;
  const auto chunk_rows = [&](size_t c) { return static_cast<uint32_t>(starts[c + 1] - starts[c]); };
  for (size_t t = 0; t + 1 < chunks + n; ++t) {
    // Hand on first, last stage first: stage k takes chunk t − k (its IO
    // rows, and stage k − 1's handoff, which that stage wrote at step t − 1
    // and is about to overwrite with chunk t − k + 1).
    std::vector<size_t> running;  // the stages with a chunk this step
    for (size_t k = n; k-- > 0;) {
      if (t < k || t - k >= chunks) continue;
      const size_t c = t - k;
      for (uint32_t r = 0; r < chunk_rows(c); ++r) {
        const size_t at = starts[c] + r;
        uint32_t token = static_cast<uint32_t>(tokens[at]);
        // A spliced row: flagged, with its image's last position (which
        // attention reads where an image's rows see each other both ways);
        // its features at its row of the first stage's input.
        if (!splice.rows.empty() && splice.rows[at] >= 0) {
          const size_t feature = static_cast<size_t>(splice.rows[at]);
          size_t last = at;
          if (vision != nullptr && vision->two_way) {  // (two-way images are of one size)
            const size_t per = static_cast<size_t>(vision->features);
            last = static_cast<size_t>(splice.at[std::min(feature / per * per + per, splice.at.size()) - 1]);
          }
          token = plan::kSplicedToken | static_cast<uint32_t>(position + static_cast<int64_t>(last));
          if (k == 0) {
            const size_t width = static_cast<size_t>(model.hidden);
            std::memcpy(static_cast<float*>(all[0]->input->mapped()) + r * width,
                        splice.features.data() + feature * width, width * sizeof(float));
          }
        }
        const int64_t row_position = position + static_cast<int64_t>(at);
        all[k]->io_rows()[r] = {token, static_cast<uint32_t>(sequence), static_cast<uint32_t>(row_position),
                                image_rows ? image_extent(sequence, row_position) : extent};
      }
      if (k > 0)
        std::memcpy(all[k]->handoff_in->mapped(), all[k - 1]->handoff_out->mapped(),
                    all[k]->carried_bytes(all[k]->carried_in, chunk_rows(c)));
      running.push_back(k);
    }
    // Each on its own device at once (a chunk of one row as a decode step,
    // as run_chunk runs it); every one waited for before an error leaves.
    size_t started = 0;
    try {
      for (size_t k : running) {
        const uint32_t rows = chunk_rows(t - k);
        all[k]->begin_pass(rows, rows == 1);
        ++started;
      }
    } catch (...) {
      for (size_t i = 0; i < started; ++i) all[running[i]]->finish();
      throw;
    }
    for (size_t k : running) all[k]->finish();
    if (running.front() != n - 1) continue;
    // The last stage's chunk (over processes: rank 0's, passed on to the others).
    const uint32_t rows = chunk_rows(t - (n - 1));
    if (link) send_pass(rows, rows == 1);
    else io_rows()[0] = all.back()->io_rows()[0];  // argmax's pick, where the next step's embedding reads it
    positions[static_cast<size_t>(sequence)] += rows;
    done(rows);
  }
}

void Session::Impl::run_decode(uint32_t count) {
  run_pass(count, true);
  run_later(count, true);
}

void Session::Impl::run_pass(uint32_t rows, bool decode_step) {
  begin_pass(rows, decode_step);
  finish();
}

void Session::Impl::begin_pass(uint32_t rows, bool decode_step) {
  if (!decode_step) {
    record(prefill_commands, rows, tile_for(rows), options.all_logits, true);
    start(prefill_commands);
    return;
  }
  const size_t at = rows - 1;
  if (!decode_recorded[at]) {
    record(decode_commands[at], rows, rows == 1 ? decode : batch, rows > 1 || options.all_logits, false);
    decode_recorded[at] = true;
  }
  start(decode_commands[at]);
}

void Session::Impl::run_later(uint32_t rows, bool decode_step) {
  if (link) {
    send_pass(rows, decode_step);
    return;
  }
  const Impl* before = this;
  for (const std::unique_ptr<Impl>& stage : later) {
    std::memcpy(stage->io_rows(), io_rows(), rows * sizeof(plan::IoRow));
    // The handoff holds `rows` rows of each carried slot, slot after slot.
    const VkDeviceSize bytes = carried_bytes(stage->carried_in, rows);
    std::memcpy(stage->handoff_in->mapped(), before->handoff_out->mapped(), bytes);
    stage->run_pass(rows, decode_step);
    before = stage.get();
  }
  if (!later.empty()) io_rows()[0] = later.back()->io_rows()[0];  // argmax's pick, where the next step's embedding reads it
}

// A split over processes: rank 0 sends each pass to rank 1 (what it is, its
// IO rows and the carried slots' rows), each rank runs its stage and sends
// on, and the last sends back argmax's pick (IO row 0) and the logits rows
// a caller reads.
namespace {
enum class StageMessage : uint32_t { Start = 1, Stop = 2, Pass = 3 };
struct PassHeader {
  StageMessage kind = StageMessage::Pass;
  uint32_t rows = 0, decode_step = 0, logit_rows = 0;
};
// The options every rank's stage is built with, rank 0's (its device's
// caps applied), then the stages' layers.
struct StageStart {
  StageMessage kind = StageMessage::Start;
  uint32_t all_logits = 0;
  int64_t context = 0, max_chunk = 0, sequences = 0, attention_splits = 0, stages = 0, verify_rows = 0;
};
}  // namespace

void Session::Impl::send_pass(uint32_t rows, bool decode_step) {
  const int last = link->ranks() - 1;
  const PassHeader header{StageMessage::Pass, rows, decode_step ? 1u : 0u, logit_rows(rows, decode_step)};
  link->send(1, &header, sizeof header);
  link->send(1, io_rows(), rows * sizeof(plan::IoRow));
  link->send(1, handoff_out->mapped(), carried_bytes(carried_out, rows));
  link->receive(last, io_rows(), sizeof(plan::IoRow));  // argmax's pick, where the next step's embedding reads it
  remote_logits.resize(static_cast<size_t>(header.logit_rows) * static_cast<size_t>(model.output_width));
  link->receive(last, remote_logits.data(), remote_logits.size() * sizeof(float));
}

std::vector<float> Session::Impl::read_logits(uint32_t rows) {
  if (link) {
    const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(model.output_width);
    if (n > remote_logits.size()) throw Error(ErrorKind::InvalidArgument, "logits of " + std::to_string(rows) + " rows were not sent back");
    return std::vector<float>(remote_logits.begin(), remote_logits.begin() + static_cast<std::ptrdiff_t>(n));
  }
  const Impl& last = later.empty() ? *this : *later.back();
  std::vector<float> out(static_cast<size_t>(rows) * static_cast<size_t>(model.output_width));
  vk::download(last.device, *last.logits, out.data(), out.size() * sizeof(float));
  return out;
}

Session::Session(vk::Device& device, const ModelInfo& model, const SessionOptions& options)
    : Session(std::vector<vk::Device*>{&device}, model, options) {}

Session::Session(std::span<vk::Device* const> devices, const ModelInfo& model, const SessionOptions& options) {
  const size_t count = options.stages.empty() ? 1 : options.stages.size();
  StageLink* const link = options.link;
  if (link && (count != static_cast<size_t>(link->ranks()) || devices.size() != 1))
    throw Error(ErrorKind::InvalidArgument, std::to_string(count) + " pipeline stage(s) and " + std::to_string(devices.size()) +
                                                " device(s) for " + std::to_string(link->ranks()) +
                                                " ranks: each rank runs one stage on one device");
  if (!link && devices.size() != count)
    throw Error(ErrorKind::InvalidArgument, std::to_string(devices.size()) + " device(s) for " + std::to_string(count) +
                                                " pipeline stage(s): one device runs each stage's layers");
  if (count > 1) {
    if (model.plan.carried.empty())
      throw Error(ErrorKind::Unsupported, std::string(model.name) + ": an encoder-decoder's plan cannot be split into pipeline stages");
    int64_t layers = 0;
    std::string sum;
    for (int64_t n : options.stages) {
      if (n < 1) throw Error(ErrorKind::InvalidArgument, "a pipeline stage of " + std::to_string(n) + " layers: each runs at least one");
      layers += n;
      sum += (sum.empty() ? "" : " + ") + std::to_string(n);
    }
    if (layers != static_cast<int64_t>(model.plan.carried.size()))
      throw Error(ErrorKind::InvalidArgument, "the pipeline stages' layers " + sum + " = " + std::to_string(layers) +
                                                  ", not the " + std::to_string(model.plan.carried.size()) +
                                                  " layers of " + std::string(model.name));
  }
  if (model.kernels.size() != model.plan.kernels.size())
    throw Error(ErrorKind::Unsupported, std::string(model.name) + ": the build has " + std::to_string(model.kernels.size()) +
                                            " kernel binaries for a plan of " + std::to_string(model.plan.kernels.size()) +
                                            " kernels (regenerate the build)");
  const int64_t context = Impl::context_of(model, options);
  if (context < 1 || context > model.max_context)
    throw Error(ErrorKind::InvalidArgument, "context " + std::to_string(options.context) + " is outside [1, " +
                                                std::to_string(model.max_context) + "], the spec's max_context of " +
                                                std::string(model.name));
  if (options.max_chunk < 1)
    throw Error(ErrorKind::InvalidArgument, "max_chunk must be at least 1, not " + std::to_string(options.max_chunk));
  if (options.verify_rows < 0 || options.verify_rows > options.max_chunk)
    throw Error(ErrorKind::InvalidArgument, "verify_rows " + std::to_string(options.verify_rows) + " is outside [0, " +
                                                std::to_string(options.max_chunk) + "]: a verification is one pass");
  if (options.sequences < 1 || options.sequences > options.max_chunk)
    throw Error(ErrorKind::InvalidArgument, "sequences " + std::to_string(options.sequences) + " is outside [1, " +
                                                std::to_string(options.max_chunk) +
                                                "]: a batched decode step is one pass of a row per sequence");
  SessionOptions effective = options;
  if (model.encoder) {
    // An encoder's input runs in one pass (its rows see each other's keys),
    // every row's hidden states kept.
    effective.all_logits = true;
    effective.max_chunk = std::max(options.max_chunk, context * options.sequences);
  }
  // An encoder–decoder's source runs in one pass too.
  if (model.encoder_decoder) effective.max_chunk = std::max(options.max_chunk, context);
  // An image whose rows see each other both ways runs in one chunk.
  const int64_t image_rows = model.vision != nullptr && model.vision->two_way ? model.vision->features : 0;
  effective.max_chunk = std::max(effective.max_chunk, std::min(image_rows, context));
  // Every activation (and the logits of every row) is bound whole as a
  // storage buffer: a chunk may hold no more rows than maxStorageBufferRange
  // of every device allows (128 MiB on lavapipe: 261 rows of a 128256-token
  // vocabulary).
  const int64_t widest =
      std::max(model.plan.widest_row_floats,
               effective.all_logits || std::max(options.sequences, options.verify_rows) > 1 ? model.output_width : 0);
  for (vk::Device* device : devices) {
    const uint64_t range = device->info().max_storage_buffer_range;
    if (range == 0 || widest == 0) continue;
    const int64_t fit = static_cast<int64_t>(range / (static_cast<uint64_t>(widest) * 4));
    if (fit < 1)
      throw Error(ErrorKind::Unsupported, "a row of " + std::to_string(widest) + " values exceeds maxStorageBufferRange (" +
                                              std::to_string(range) + " bytes) of " + device->info().name);
    effective.max_chunk = std::min(effective.max_chunk, fit);
    if (std::max(options.sequences, options.verify_rows) > fit)
      throw Error(ErrorKind::Unsupported, std::to_string(std::max(options.sequences, options.verify_rows)) +
                                              " sequences or verified rows: a batched step's rows of " +
                                              std::to_string(widest) + " values exceed maxStorageBufferRange (" +
                                              std::to_string(range) + " bytes) of " + device->info().name +
                                              " beyond " + std::to_string(fit) + " sequences");
  }
  if (effective.max_chunk < std::min(image_rows, context))
    throw Error(ErrorKind::Unsupported, "an image's " + std::to_string(image_rows) +
                                            " rows see each other both ways, so they run in one chunk: more rows than "
                                            "maxStorageBufferRange lets " + std::to_string(effective.max_chunk) +
                                            " rows of " + std::to_string(widest) + " values hold");

  // Each stage: its device's class and kernels, the dispatches of its layers
  // (the embedding's on the first, the head's on the last) and what they bind.
  int64_t first_layer = 0;
  const size_t first_layered = Impl::first_layered(model.plan);
  for (size_t k = 0; k < count; ++k) {
    if (link && k != static_cast<size_t>(link->rank())) {  // another process's stage
      first_layer += options.stages[k];
      continue;
    }
    vk::Device& device = *devices[link ? 0 : k];
    vk::check_requirements(device.info(), vk::DeviceRequirements{.subgroup_arithmetic = true, .subgroup_ballot = true});
    std::unique_ptr<Impl> stage = std::make_unique<Impl>(device, model, effective);
    Impl& s = *stage;
    if (!impl_) impl_ = std::move(stage);
    else impl_->later.push_back(std::move(stage));
    s.link = link;
    s.context = context;
    s.positions.assign(static_cast<size_t>(options.sequences), 0);
    s.sources.assign(static_cast<size_t>(options.sequences), 0);
    s.image_keys.assign(static_cast<size_t>(options.sequences), {});
    s.first_stage = k == 0;
    s.last_stage = k + 1 == count;
    s.first_layer = first_layer;
    s.end_layer = count == 1 ? std::numeric_limits<int64_t>::max() : first_layer + options.stages[k];
    first_layer = s.end_layer;
    if (!s.first_stage) s.carried_in = model.plan.carried[static_cast<size_t>(s.first_layer)];
    if (!s.last_stage) s.carried_out = model.plan.carried[static_cast<size_t>(s.end_layer)];
    s.lanes = device.info().subgroup_size;
    s.choose_class();
    for (size_t i = 0; i < s.plan.dispatches.size(); ++i) {
      const plan::Dispatch& d = s.plan.dispatches[i];
      const bool here = d.block >= 0 ? d.block >= s.first_layer && d.block < s.end_layer
                                     : (i < first_layered ? s.first_stage : s.last_stage);
      if (here && plan::runs(d, s.splits > 1 || s.decode_splits > 1, s.device_class->chunked_scan, s.expanded_rows > 0, plan::uses(*s.device_class, plan::Variant::Dot))) {
        s.active.push_back(i);
        s.encode_active += i < s.plan.encode_dispatches ? 1 : 0;
      }
    }
    s.assign_dtypes();
    s.own_bound();
  }

  // Before anything is allocated: every stage's need against its device.
  const std::vector<Impl*> stages = impl_->stages();
  if (count == 1) {
    impl_->check_memory();
  } else {
    std::string table;
    bool fits = true;
    for (size_t k = 0; k < stages.size(); ++k) {
      const Impl& s = *stages[k];
      const Impl::Fit f = s.fit();
      const bool over = f.heap > 0 && f.need > f.heap;
      fits = fits && !over;
      table += "\n  stage " + std::to_string(link ? link->rank() : static_cast<int>(k)) + ", layers " + std::to_string(s.first_layer) + "-" +
               std::to_string(s.end_layer - 1) + ", on " + s.device.info().name + ": needs " + Impl::mib(f.need) + " (" +
               s.memory_text() + "), holds " + (f.heap ? Impl::mib(f.heap) : std::string("an unknown amount")) +
               (f.host ? " (the host's memory)" : "") +
               (f.available > 0 ? ", " + Impl::mib(f.available) + " of it free now" : "") + (over ? ": does not fit" : "");
    }
    if (!fits)
      throw Error(ErrorKind::Unsupported, std::string(model.name) + " split over " + std::to_string(count) +
                                              " devices does not fit:" + table);
  }
  for (Impl* s : stages) {
    s->allocate();
    s->build_sets();
    s->create_commands();
  }
  // Rank 0 tells the others how to build their stages.
  if (link && link->rank() == 0) {
    const StageStart start{StageMessage::Start, effective.all_logits ? 1u : 0u, context, effective.max_chunk,
                           options.sequences, options.attention_splits, static_cast<int64_t>(count),
                           options.verify_rows};
    for (int r = 1; r < link->ranks(); ++r) {
      link->send(r, &start, sizeof start);
      link->send(r, options.stages.data(), count * sizeof(int64_t));
    }
    link->configured = true;
  }
}

void Session::stop_stages(StageLink& link) {
  StageStart stop;
  stop.kind = StageMessage::Stop;
  for (int r = 1; r < link.ranks(); ++r) link.send(r, &stop, sizeof stop);
  link.configured = true;
}

void Session::serve_stage(vk::Device& device, const ModelInfo& model, StageLink& link,
                          const std::function<void(Session&)>& load) {
  StageStart start;
  link.receive(0, &start, sizeof start);
  if (start.kind == StageMessage::Stop) return;  // rank 0 ended without a session
  if (start.kind != StageMessage::Start || start.stages != link.ranks())
    throw Error(ErrorKind::Io, "rank " + std::to_string(link.rank()) + ": an unexpected first message from rank 0");
  SessionOptions options;
  options.context = start.context;
  options.max_chunk = start.max_chunk;
  options.sequences = start.sequences;
  options.verify_rows = start.verify_rows;
  options.all_logits = start.all_logits != 0;
  options.attention_splits = start.attention_splits;
  options.stages.resize(static_cast<size_t>(start.stages));
  link.receive(0, options.stages.data(), options.stages.size() * sizeof(int64_t));
  options.link = &link;
  std::vector<vk::Device*> one = {&device};
  Session session(one, model, options);
  Impl& s = *session.impl_;
  if (s.options.max_chunk != start.max_chunk)
    throw Error(ErrorKind::Unsupported, "rank " + std::to_string(link.rank()) + ": " + device.info().name + " binds " +
                                            std::to_string(s.options.max_chunk) + " rows a pass, rank 0's device " +
                                            std::to_string(start.max_chunk) + " (lower max_chunk)");
  load(session);
  s.check_ready(0, 0);
  const int before = link.rank() - 1, after = link.rank() + 1;
  for (;;) {
    PassHeader header;
    link.receive(before, &header, sizeof header);
    if (header.kind == StageMessage::Stop) {
      if (!s.last_stage) link.send(after, &header, sizeof header);
      return;
    }
    if (header.kind != StageMessage::Pass || header.rows < 1 || header.rows > s.options.max_chunk)
      throw Error(ErrorKind::Io, "rank " + std::to_string(link.rank()) + ": a bad pass message");
    link.receive(before, s.io_rows(), header.rows * sizeof(plan::IoRow));
    link.receive(before, s.handoff_in->mapped(), s.carried_bytes(s.carried_in, header.rows));
    s.run_pass(header.rows, header.decode_step != 0);
    if (!s.last_stage) {
      link.send(after, &header, sizeof header);
      link.send(after, s.io_rows(), header.rows * sizeof(plan::IoRow));
      link.send(after, s.handoff_out->mapped(), s.carried_bytes(s.carried_out, header.rows));
      continue;
    }
    link.send(0, s.io_rows(), sizeof(plan::IoRow));
    std::vector<float> rows(static_cast<size_t>(header.logit_rows) * static_cast<size_t>(model.output_width));
    vk::download(device, *s.logits, rows.data(), rows.size() * sizeof(float));
    link.send(0, rows.data(), rows.size() * sizeof(float));
  }
}

Session::~Session() {
  if (!impl_ || !impl_->link || impl_->link->rank() != 0) return;
  const PassHeader stop{StageMessage::Stop, 0, 0, 0};
  try {
    impl_->link->send(1, &stop, sizeof stop);
  } catch (const std::exception&) {  // the job is ending anyway: its launcher stops the other ranks
  }
}

const ModelInfo& Session::model() const { return impl_->model; }
int64_t Session::context() const { return impl_->context; }
int64_t Session::sequences() const { return static_cast<int64_t>(impl_->positions.size()); }
int64_t Session::position() const { return impl_->positions[0]; }
int64_t Session::position(int64_t sequence) const {
  impl_->check_sequence(sequence);
  return impl_->positions[static_cast<size_t>(sequence)];
}
void Session::reset() {
  std::fill(impl_->positions.begin(), impl_->positions.end(), 0);
  std::fill(impl_->sources.begin(), impl_->sources.end(), 0);
  for (Impl::ImageKeys& k : impl_->image_keys) k = {};
}
void Session::reset(int64_t sequence) {
  impl_->check_sequence(sequence);
  impl_->positions[static_cast<size_t>(sequence)] = 0;
  impl_->sources[static_cast<size_t>(sequence)] = 0;
  if (!impl_->image_keys.empty()) impl_->image_keys[static_cast<size_t>(sequence)] = {};
}
int64_t Session::rewind_floor(int64_t sequence) const {
  const Impl& s = *impl_;
  s.check_sequence(sequence);
  const int64_t position = s.positions[static_cast<size_t>(sequence)];
  if (s.plan.state_layers > 0) return position;
  // A ring of R positions of a window W holds positions [P − R, P); a row at
  // position p ≥ the cut reads [p − W + 1, p], of which those before the
  // cut must still be there: p − W + 1 ≥ P − R, or the ring has not wrapped.
  int64_t floor = 0;
  for (size_t l = 0; l < s.ring.size(); ++l) {
    const int64_t window = s.plan.windows[l], ring = s.ring[l];
    if (window > 0 && position > ring) floor = std::max(floor, position - ring + window - 1);
  }
  return std::min(floor, position);
}

void Session::truncate(int64_t sequence, int64_t position) {
  Impl& s = *impl_;
  const int64_t floor = rewind_floor(sequence), now = s.positions[static_cast<size_t>(sequence)];
  if (position != 0 && (position < floor || position > now))
    throw Error(ErrorKind::InvalidArgument,
                "sequence " + std::to_string(sequence) + " holds " + std::to_string(now) +
                    " positions: it cuts back exactly to 0 or to [" + std::to_string(floor) + ", " +
                    std::to_string(now) + "], not to " + std::to_string(position) +
                    (floor > 0 ? s.plan.state_layers > 0 ? " (a state-space layer's state holds its whole history)"
                                                         : " (a sliding window's ring has written over the keys before)"
                               : std::string()));
  s.positions[static_cast<size_t>(sequence)] = position;
  if (!s.image_keys.empty()) {
    std::vector<int64_t>& markers = s.image_keys[static_cast<size_t>(sequence)].markers;
    markers.erase(std::lower_bound(markers.begin(), markers.end(), position), markers.end());
  }
}

bool Session::verifies() const {
  const Impl& s = *impl_;
  return !s.model.encoder && !s.model.encoder_decoder && s.plan.state_layers == 0;
}

int64_t Session::decode_rows() const { return impl_->decode_rows(); }

bool Session::copies() const {
  const Impl& s = *impl_;
  return !s.model.encoder && !s.model.encoder_decoder && !(s.model.vision != nullptr && s.model.vision->cross) &&
         s.link == nullptr;
}

void Session::copy(int64_t from, int64_t to, int64_t count) {
  Impl& s = *impl_;
  s.check_sequence(to);
  if (s.model.encoder || s.model.encoder_decoder || (s.model.vision != nullptr && s.model.vision->cross))
    throw Error(ErrorKind::Unsupported,
                std::string(s.model.name) + ": a sequence of " +
                    (s.model.encoder           ? "an encoder keeps nothing"
                     : s.model.encoder_decoder ? "an encoder-decoder holds its source"
                                               : "an image cross-attention decoder holds its images") +
                    " beside its cache: its prefix is not copied");
  if (s.link != nullptr)
    throw Error(ErrorKind::Unsupported, "a session split over processes copies no cache (the other ranks hold theirs)");
  if (from == to) throw Error(ErrorKind::InvalidArgument, "a copy of sequence " + std::to_string(from) + " into itself");
  const int64_t floor = rewind_floor(from), held = s.positions[static_cast<size_t>(from)];
  if (count != 0 && (count < floor || count > held))
    throw Error(ErrorKind::InvalidArgument,
                "sequence " + std::to_string(from) + " holds " + std::to_string(held) + " positions: a copy takes 0 or [" +
                    std::to_string(floor) + ", " + std::to_string(held) + "] of them exactly, not " +
                    std::to_string(count));
  s.positions[static_cast<size_t>(to)] = 0;
  if (count == 0) return;
  s.check_ready(from, 0);
  for (Impl* stage : s.stages()) {
    const plan::Plan& p = stage->plan;
    vk::OneShot shot(stage->device);
    VkCommandBuffer cb = shot.begin();
    const auto copy_block = [&](const vk::Buffer& buffer, VkDeviceSize block, VkDeviceSize bytes) {
      const VkBufferCopy region{static_cast<VkDeviceSize>(from) * block, static_cast<VkDeviceSize>(to) * block, bytes};
      vkCmdCopyBuffer(cb, buffer.handle(), buffer.handle(), 1, &region);
    };
    // Position q lives at slot q mod ring: the first `count` slots, or the
    // whole ring once it has wrapped (rewind_floor keeps what is read).
    const VkDeviceSize row = static_cast<VkDeviceSize>(p.cache_row_bytes);
    for (size_t l = 0; l < stage->ring.size(); ++l) {
      if (!stage->owned.caches[l]) continue;
      const VkDeviceSize ring = stage->ring[l], slots = std::min<VkDeviceSize>(ring, static_cast<VkDeviceSize>(count));
      copy_block(stage->k_cache[l], ring * row, slots * row);
      if (!stage->v_cache.empty()) copy_block(stage->v_cache[l], ring * row, slots * row);
    }
    for (size_t l = 0; l < stage->conv_state.size(); ++l) {
      if (!stage->owned.states[l]) continue;
      if (p.conv_state_floats > 0)
        copy_block(stage->conv_state[l], static_cast<VkDeviceSize>(p.conv_state_floats) * 4,
                   static_cast<VkDeviceSize>(p.conv_state_floats) * 4);
      copy_block(stage->scan_state[l], static_cast<VkDeviceSize>(p.scan_state_floats) * 4,
                 static_cast<VkDeviceSize>(p.scan_state_floats) * 4);
    }
    // The next passes read what the copies wrote.
    VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &barrier, 0,
                         nullptr, 0, nullptr);
    shot.submit_and_wait();
  }
  s.positions[static_cast<size_t>(to)] = count;
}

size_t Session::dispatches_per_token() const {
  size_t n = 0;
  for (const Impl* s : impl_->stages())
    for (size_t i = s->encode_active; i < s->active.size(); ++i) n += s->in_pass(i, false, false, s->decode) ? 1 : 0;
  return n;
}
const plan::DeviceClass& Session::device_class() const { return *impl_->device_class; }
Session::Memory Session::memory() const {
  Memory m;
  for (const Impl* s : impl_->stages()) {
    const Memory sm = s->memory();
    m.weights += sm.weights;
    m.cache += sm.cache;
    m.activations += sm.activations;
    m.state += sm.state;
  }
  return m;
}
std::vector<Session::Memory> Session::stage_memory() const {
  std::vector<Memory> out;
  for (const Impl* s : impl_->stages()) out.push_back(s->memory());
  return out;
}
size_t Session::stages() const { return impl_->later.size() + 1; }
bool Session::pipelines_cached() const {
  for (const Impl* s : impl_->stages())
    if (!s->pipelines->from_disk()) return false;
  return true;
}

void Session::warm_up(int64_t rows, const WarmUpProgress& progress) {
  const Impl& s = *impl_;
  reset();
  // Room for the prompt, a decode step and a batched step after it (of
  // several sequences, or a verification's rows of one: the same kernels).
  const bool verifying = s.positions.size() == 1 && s.options.verify_rows > 1 && verifies();
  const bool several = (s.positions.size() > 1 && !s.model.encoder) || verifying;
  const int64_t n = std::clamp<int64_t>(std::min({rows, s.context - (several ? 2 : 1), s.options.max_chunk}), 1, s.context);
  const bool decodes = n < s.context && !s.model.encoder;  // an encoder has no decode step
  const bool batched = several && n + 1 < s.context;
  const int stages = 1 + decodes + batched;
  int done = 0;
  const auto stage = [&](const char* name) {
    if (progress) progress(name, done, stages);
    ++done;
  };
  if (s.model.encoder_decoder)
    for (size_t i = 0; i < s.positions.size(); ++i) source(static_cast<int64_t>(i), std::vector<int32_t>(static_cast<size_t>(n), 0));
  stage(n < 8 ? "decode-layout prefill" : "prefill");
  prefill(std::vector<int32_t>(static_cast<size_t>(n), 0));
  if (decodes) {
    stage("decode");
    decode(0);
  }
  if (batched) {
    stage("batched decode");
    std::vector<Step> steps;
    for (size_t i = 0; i < s.positions.size(); ++i) steps.push_back({static_cast<int64_t>(i), 0});
    if (verifying) verify(0, std::vector<int32_t>{0, 0});
    else decode(steps);
  }
  if (progress) progress("", stages, stages);
  reset();
}

std::vector<float> Session::prefill(std::span<const int32_t> tokens) { return prefill(0, tokens); }

std::vector<float> Session::prefill(int64_t sequence, std::span<const int32_t> tokens) {
  Impl& s = *impl_;
  if (s.model.encoder) {
    const std::vector<int32_t> input(tokens.begin(), tokens.end());
    return encode(std::span(&input, 1)).front();
  }
  return s.prompt(sequence, tokens, {});
}

std::vector<float> Session::Impl::prompt(int64_t sequence, std::span<const int32_t> tokens, const Splice& splice) {
  if (tokens.empty()) throw Error(ErrorKind::InvalidArgument, "prefill of no tokens");
  for (size_t i = 0; i < tokens.size(); ++i)
    if (splice.rows.empty() || splice.rows[i] < 0) check_token(tokens[i]);
  check_ready(sequence, tokens.size());
  check_source(sequence);
  if (model.vision != nullptr && model.vision->cross) {
    // The prompt's image markers, each an image given to images() before.
    ImageKeys& k = image_keys[static_cast<size_t>(sequence)];
    std::vector<int64_t> markers = k.markers;
    for (size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] == model.vision->marker)
        markers.push_back(positions[static_cast<size_t>(sequence)] + static_cast<int64_t>(i));
    if (markers.size() > k.first.size())
      throw Error(ErrorKind::InvalidArgument,
                  "the sequence's prompts hold " + std::to_string(markers.size()) + " image markers (token " +
                      std::to_string(model.vision->marker) + "), but " + std::to_string(k.first.size()) +
                      " images were given to its cross-attention (Session::images)");
    k.markers = std::move(markers);
    // A sequence without images: one key of zeros (a row of zero features
    // gives k and v zeros), which its rows read for nothing, so that its
    // cross-attention layers add nothing (transformers skips them).
    if (k.keys == 0) {
      const std::vector<float> zeros(static_cast<size_t>(model.hidden), 0.0f);
      const int64_t first = 0;
      image_pass(sequence, zeros, std::span(&first, 1));
      k.keys = 1;
    }
  }
  // Chunk by chunk; stages in this process work at once on consecutive
  // chunks (run_prompt).
  std::vector<float> all;
  std::vector<float> last;
  size_t read = 0;
  run_prompt(sequence, tokens, splice, [&](uint32_t rows) {
    read += rows;
    if (options.all_logits) {
      const std::vector<float> part = read_logits(rows);
      all.insert(all.end(), part.begin(), part.end());
    } else if (read == tokens.size()) {
      last = read_logits(1);
    }
  });
  return options.all_logits ? all : last;
}

uint32_t Session::Impl::image_extent(int64_t sequence, int64_t position) const {
  const ImageKeys& k = image_keys[static_cast<size_t>(sequence)];
  size_t last = k.markers.size();
  while (last > 0 && k.markers[last - 1] > position) --last;
  if (last == 0) return plan::image_extent(0, k.keys, false);
  size_t first = last - 1;
  while (first > 0 && k.markers[first - 1] + 1 == k.markers[first]) --first;
  return plan::image_extent(k.first[first], k.end[last - 1], true);
}

void Session::images(int64_t sequence, std::span<const float> features, std::span<const int64_t> tiles) {
  Impl& s = *impl_;
  const plan::VisionLink* v = s.model.vision;
  if (v == nullptr || !v->cross)
    throw Error(ErrorKind::InvalidArgument, std::string(s.model.name) +
                                                " has no image cross-attention (images() feeds Llama 3.2 Vision's)");
  s.check_sequence(sequence);
  if (s.positions[static_cast<size_t>(sequence)] != 0)
    throw Error(ErrorKind::InvalidArgument, "sequence " + std::to_string(sequence) +
                                                " holds tokens: its images go in before its first prompt (reset it)");
  const int64_t images = static_cast<int64_t>(tiles.size()), per = v->tile_keys(), hidden = s.model.hidden;
  if (images == 0) throw Error(ErrorKind::InvalidArgument, "images() of no images");
  if (images > s.options.images)
    throw Error(ErrorKind::InvalidArgument, std::to_string(images) + " images exceed the " +
                                                std::to_string(s.options.images) +
                                                " a sequence of this session holds (SessionOptions::images)");
  if (static_cast<int64_t>(features.size()) != images * per * hidden)
    throw Error(ErrorKind::InvalidArgument, std::to_string(features.size()) + " feature values for " +
                                                std::to_string(images) + " images of " + std::to_string(per) +
                                                " rows of " + std::to_string(hidden));
  for (int64_t n : tiles)
    if (n < 1 || n > v->tiles)
      throw Error(ErrorKind::InvalidArgument, "an image of " + std::to_string(n) + " tiles; the tower takes 1 to " +
                                                  std::to_string(v->tiles));
  if (images * per > plan::kMaxImageKeys)  // a row's extent names its keys in 15 bits
    throw Error(ErrorKind::InvalidArgument, std::to_string(images) + " images of " + std::to_string(per) +
                                                " keys exceed the " + std::to_string(plan::kMaxImageKeys) +
                                                " a sequence's cross-attention reads");
  s.check_ready(sequence, 0);
  // The cross caches' keys: each image's own tiles' rows, image by image,
  // then the rest (rows a row that sees no image reads too).
  Impl::ImageKeys keys;
  std::vector<int64_t> order;  // feature rows in key order
  for (int64_t i = 0; i < images; ++i) {
    keys.first.push_back(static_cast<int64_t>(order.size()));
    for (int64_t r = 0; r < tiles[static_cast<size_t>(i)] * v->tile_rows; ++r) order.push_back(i * per + r);
    keys.end.push_back(static_cast<int64_t>(order.size()));
  }
  for (int64_t i = 0; i < images; ++i)
    for (int64_t r = tiles[static_cast<size_t>(i)] * v->tile_rows; r < per; ++r) order.push_back(i * per + r);
  keys.keys = static_cast<int64_t>(order.size());
  s.image_pass(sequence, features, order);
  s.image_keys[static_cast<size_t>(sequence)] = std::move(keys);
}

void Session::Impl::image_pass(int64_t sequence, std::span<const float> features, std::span<const int64_t> order) {
  // max_chunk rows at a time (each key's row is its own).
  const size_t most = static_cast<size_t>(options.max_chunk), width = static_cast<size_t>(model.hidden);
  for (size_t from = 0; from < order.size(); from += most) {
    const size_t rows = std::min(most, order.size() - from);
    float* to = static_cast<float*>(input->mapped());
    for (size_t r = 0; r < rows; ++r) {
      std::memcpy(to + r * width, features.data() + static_cast<size_t>(order[from + r]) * width, width * sizeof(float));
      io_rows()[r] = {0, static_cast<uint32_t>(sequence), static_cast<uint32_t>(from + r),
                      static_cast<uint32_t>(order.size())};
    }
    record(prefill_commands, static_cast<uint32_t>(rows), tile_for(static_cast<uint32_t>(rows)), false, true,
           VK_NULL_HANDLE, true);
    submit(prefill_commands);
  }
}

std::vector<float> Session::prefill(int64_t sequence, std::span<const int32_t> tokens, std::span<const int64_t> at,
                                    std::span<const float> features) {
  Impl& s = *impl_;
  if (s.model.encoder || s.plan.input_row_floats != s.model.hidden || (s.model.vision && s.model.vision->cross))
    throw Error(ErrorKind::InvalidArgument, std::string(s.model.name) + " splices no rows (a decoder of a [vision] splice does)");
  const size_t width = static_cast<size_t>(s.model.hidden);
  if (features.size() != at.size() * width)
    throw Error(ErrorKind::InvalidArgument, std::to_string(features.size()) + " feature values for " +
                                                std::to_string(at.size()) + " spliced rows of " + std::to_string(width));
  std::vector<int64_t> rows(tokens.size(), -1);
  for (size_t i = 0; i < at.size(); ++i) {
    if (at[i] < 0 || at[i] >= static_cast<int64_t>(tokens.size()) || (i > 0 && at[i] <= at[i - 1]))
      throw Error(ErrorKind::InvalidArgument, "spliced row " + std::to_string(at[i]) + " (entry " + std::to_string(i) +
                                                  ") is not an increasing row of the " + std::to_string(tokens.size()) +
                                                  " tokens");
    rows[static_cast<size_t>(at[i])] = static_cast<int64_t>(i);
  }
  // An image's rows that see each other both ways come whole, consecutive.
  if (const plan::VisionLink* link = s.model.vision; link != nullptr && link->two_way) {
    const size_t per = static_cast<size_t>(link->features);
    for (size_t i = 0; i < at.size(); i += per)
      if (i + per > at.size() || at[i + per - 1] - at[i] != static_cast<int64_t>(per) - 1)
        throw Error(ErrorKind::InvalidArgument,
                    "spliced rows " + std::to_string(i) + " on: an image's rows see each other both ways in " +
                        std::string(s.model.name) + ", so a prefill holds whole images, each " + std::to_string(per) +
                        " consecutive rows");
  }
  return s.prompt(sequence, tokens, {rows, features, at});
}

std::vector<float> Session::decode(int32_t token) {
  const Step step{0, token};
  return decode(std::span(&step, 1));
}

std::vector<std::vector<float>> Session::encode(std::span<const std::vector<int32_t>> inputs) {
  Impl& s = *impl_;
  if (!s.model.encoder)
    throw Error(ErrorKind::InvalidArgument,
                std::string(s.model.name) + (s.model.encoder_decoder ? " is an encoder-decoder: source() encodes its sources"
                                                                     : " is a decoder: encode() runs encoders only"));
  if (inputs.empty()) throw Error(ErrorKind::InvalidArgument, "encode of no inputs");
  if (inputs.size() > s.positions.size())
    throw Error(ErrorKind::InvalidArgument, std::to_string(inputs.size()) + " inputs in one pass, but the session holds " +
                                                std::to_string(s.positions.size()) + " sequences (raise sequences)");
  // Each input's rows are padded to a whole number of attention workgroups.
  size_t rows = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int32_t>& input = inputs[i];
    const std::string which = inputs.size() > 1 ? "input " + std::to_string(i) + ": " : "";
    if (input.empty()) throw Error(ErrorKind::InvalidArgument, which + "an empty input");
    for (int32_t t : input) s.check_token(t);
    if (static_cast<int64_t>(input.size()) > s.context)
      throw Error(ErrorKind::InvalidArgument, which + std::to_string(input.size()) + " tokens exceed the context of " +
                                                  std::to_string(s.context) + " positions (up to " +
                                                  std::to_string(s.model.max_context) + ", the spec's max_context)");
    rows += s.padded_rows(input.size());
  }
  if (static_cast<int64_t>(rows) > s.options.max_chunk)
    throw Error(ErrorKind::InvalidArgument, std::to_string(rows) + " rows in one pass exceed the " +
                                                std::to_string(s.options.max_chunk) + " this device binds at once");
  s.check_ready(0, 0);
  std::vector<size_t> first(inputs.size());
  size_t at = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    first[i] = at;
    at += s.write_input(at, static_cast<uint32_t>(i), inputs[i]);
  }
  s.run_chunk(0, static_cast<uint32_t>(rows));
  s.positions[0] = 0;  // nothing stays cached: each pass starts from position 0
  const std::vector<float> out = s.read_logits(static_cast<uint32_t>(rows));
  const size_t width = static_cast<size_t>(s.model.output_width);
  std::vector<std::vector<float>> result;
  for (size_t i = 0; i < inputs.size(); ++i)
    result.emplace_back(out.begin() + static_cast<std::ptrdiff_t>(first[i] * width),
                        out.begin() + static_cast<std::ptrdiff_t>((first[i] + inputs[i].size()) * width));
  return result;
}

std::vector<float> Session::encode_rows(std::span<const float> input, int64_t rows, std::span<const int32_t> tokens,
                                       int64_t own) {
  Impl& s = *impl_;
  const int64_t width = s.plan.input_row_floats;
  if (!s.model.encoder || width == 0)
    throw Error(ErrorKind::InvalidArgument, std::string(s.model.name) + " reads no input rows: encode_rows() runs a vision tower");
  if (rows < 1 || static_cast<int64_t>(input.size()) != rows * width)
    throw Error(ErrorKind::InvalidArgument, std::to_string(input.size()) + " input values for " + std::to_string(rows) +
                                                " rows of " + std::to_string(width));
  if (rows > s.context)
    throw Error(ErrorKind::InvalidArgument, std::to_string(rows) + " input rows exceed the context of " +
                                                std::to_string(s.context) + " positions");
  const size_t padded = s.padded_rows(static_cast<size_t>(rows));
  if (static_cast<int64_t>(padded) > s.options.max_chunk)
    throw Error(ErrorKind::InvalidArgument, std::to_string(rows) + " input rows exceed the " +
                                                std::to_string(s.options.max_chunk) + " this device binds at once");
  if (!tokens.empty() && static_cast<int64_t>(tokens.size()) != rows)
    throw Error(ErrorKind::InvalidArgument, std::to_string(tokens.size()) + " row tokens for " + std::to_string(rows) +
                                                " input rows");
  if (own < 0 || own > rows)
    throw Error(ErrorKind::InvalidArgument, std::to_string(own) + " rows of the image's own among " + std::to_string(rows));
  s.check_ready(0, 0);
  const size_t written = s.write_input(0, 0, tokens.empty() ? std::vector<int32_t>(static_cast<size_t>(rows), 0)
                                                            : std::vector<int32_t>(tokens.begin(), tokens.end()));
  // A tiled tower's rows past the image's own see those alone.
  if (own > 0)
    for (size_t r = static_cast<size_t>(own); r < written; ++r) s.io_rows()[r].extent = static_cast<uint32_t>(own);
  float* to = static_cast<float*>(s.input->mapped());
  std::copy(input.begin(), input.end(), to);
  std::fill(to + input.size(), to + padded * static_cast<size_t>(width), 0.0f);  // the padding rows: zeros
  s.run_chunk(0, static_cast<uint32_t>(padded));
  s.positions[0] = 0;  // nothing stays cached: each pass starts from position 0
  std::vector<float> out = s.read_logits(static_cast<uint32_t>(padded));
  out.resize(static_cast<size_t>(rows * s.model.output_width));
  return out;
}

void Session::source(int64_t sequence, std::span<const int32_t> tokens) {
  Impl& s = *impl_;
  if (!s.model.encoder_decoder)
    throw Error(ErrorKind::InvalidArgument,
                std::string(s.model.name) + " is not an encoder-decoder: source() encodes an encoder-decoder's source");
  s.check_sequence(sequence);
  if (tokens.empty()) throw Error(ErrorKind::InvalidArgument, "an empty source");
  for (int32_t t : tokens) s.check_token(t);
  if (static_cast<int64_t>(tokens.size()) > s.context)
    throw Error(ErrorKind::InvalidArgument, "a source of " + std::to_string(tokens.size()) +
                                                " tokens exceeds the context of " + std::to_string(s.context) +
                                                " positions (up to " + std::to_string(s.model.max_context) +
                                                ", the spec's max_context)");
  s.check_ready(sequence, 0);
  // One pass of the source's rows, padded as encode() pads.
  if (static_cast<int64_t>(s.padded_rows(tokens.size())) > s.options.max_chunk)
    throw Error(ErrorKind::InvalidArgument, "a source of " + std::to_string(tokens.size()) + " tokens exceeds the " +
                                                std::to_string(s.options.max_chunk) + " rows this device binds at once");
  const size_t rows = s.write_input(0, static_cast<uint32_t>(sequence), tokens);
  s.record(s.prefill_commands, static_cast<uint32_t>(rows), s.tile_for(static_cast<uint32_t>(rows)), false, true,
           VK_NULL_HANDLE, true);
  s.submit(s.prefill_commands);
  s.sources[static_cast<size_t>(sequence)] = static_cast<int64_t>(tokens.size());
  s.positions[static_cast<size_t>(sequence)] = 0;  // the decoder starts again
}

std::vector<float> Session::prompt(int64_t sequence, std::span<const int32_t> tokens) {
  if (!impl_->model.encoder_decoder) return prefill(sequence, tokens);
  source(sequence, tokens);
  const int32_t start = impl_->model.decoder_start;
  return prefill(sequence, std::span(&start, 1));
}

std::vector<float> Session::decode(std::span<const Step> steps) {
  Impl& s = *impl_;
  if (s.model.encoder)
    throw Error(ErrorKind::InvalidArgument, std::string(s.model.name) + " is an encoder: it has no decode step (encode())");
  if (steps.empty()) throw Error(ErrorKind::InvalidArgument, "decode of no sequences");
  std::vector<bool> named(s.positions.size(), false);
  for (const Step& step : steps) {
    s.check_token(step.token);
    s.check_ready(step.sequence, 1);
    if (named[static_cast<size_t>(step.sequence)])
      throw Error(ErrorKind::InvalidArgument, "sequence " + std::to_string(step.sequence) + " is named twice in one decode step");
    named[static_cast<size_t>(step.sequence)] = true;
    s.check_source(step.sequence);
  }
  for (size_t i = 0; i < steps.size(); ++i)
    s.io_rows()[i] = {static_cast<uint32_t>(steps[i].token), static_cast<uint32_t>(steps[i].sequence),
                      static_cast<uint32_t>(s.positions[static_cast<size_t>(steps[i].sequence)]),
                      s.extent_of(steps[i].sequence, 0)};
  s.run_decode(static_cast<uint32_t>(steps.size()));
  for (const Step& step : steps) ++s.positions[static_cast<size_t>(step.sequence)];
  return s.read_logits(static_cast<uint32_t>(steps.size()));
}

std::vector<float> Session::verify(int64_t sequence, std::span<const int32_t> tokens) {
  std::vector<Step> rows;
  for (int32_t token : tokens) rows.push_back({sequence, token});
  return verify(rows);
}

std::vector<float> Session::verify(std::span<const Step> rows) {
  Impl& s = *impl_;
  if (!verifies())
    throw Error(ErrorKind::Unsupported,
                std::string(s.model.name) + (s.plan.state_layers > 0
                                                 ? ": a state-space layer's rows of one sequence in one pass would read "
                                                   "one state, and its state cannot be cut back: no verification pass"
                                                 : " decodes no rows of its own tokens: no verification pass"));
  if (rows.empty()) throw Error(ErrorKind::InvalidArgument, "a verification of no tokens");
  if (static_cast<int64_t>(rows.size()) > s.decode_rows())
    throw Error(ErrorKind::InvalidArgument, "a verification of " + std::to_string(rows.size()) +
                                                " tokens: a pass holds at most " + std::to_string(s.decode_rows()) +
                                                " (SessionOptions::verify_rows)");
  // Each sequence's rows together, and how many it has.
  std::vector<size_t> count(s.positions.size(), 0);
  for (size_t i = 0; i < rows.size(); ++i) {
    s.check_sequence(rows[i].sequence);
    s.check_token(rows[i].token);
    const size_t q = static_cast<size_t>(rows[i].sequence);
    if (count[q] > 0 && rows[i - 1].sequence != rows[i].sequence)
      throw Error(ErrorKind::InvalidArgument,
                  "sequence " + std::to_string(q) + "'s rows of a verification are not together");
    ++count[q];
  }
  for (size_t q = 0; q < count.size(); ++q)
    if (count[q] > 0) s.check_ready(static_cast<int64_t>(q), count[q]);
  std::vector<int64_t> at(s.positions.begin(), s.positions.end());
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t sequence = rows[i].sequence, position = at[static_cast<size_t>(sequence)]++;
    s.io_rows()[i] = {static_cast<uint32_t>(rows[i].token), static_cast<uint32_t>(sequence),
                      static_cast<uint32_t>(position),
                      s.model.vision != nullptr && s.model.vision->cross ? s.image_extent(sequence, position) : 0u};
  }
  s.run_decode(static_cast<uint32_t>(rows.size()));
  s.positions.assign(at.begin(), at.end());
  return s.read_logits(static_cast<uint32_t>(rows.size()));
}

// The device argmax's pick in row 0 of the IO block; one past the vocabulary
// when the row held only NaN (no largest value): an error naming `where()`.
template <class Where>
int32_t Session::Impl::device_pick(const Where& where) const {
  const uint32_t pick = io_rows()[0].token;
  if (pick >= static_cast<uint32_t>(model.vocab))
    throw Error(ErrorKind::BadFile, where() + ": the logits hold NaN (the device's argmax finds no largest value): a "
                                              "non-finite weight or an overflow in the computation");
  return static_cast<int32_t>(pick);
}

std::vector<int32_t> Session::generate_greedy(int32_t token, int64_t steps) {
  Impl& s = *impl_;
  if (s.model.encoder)
    throw Error(ErrorKind::InvalidArgument, std::string(s.model.name) + " is an encoder: it has no decode step (encode())");
  s.check_token(token);
  s.check_ready(0, static_cast<size_t>(std::max<int64_t>(steps, 0)));
  s.check_source(0);
  std::vector<int32_t> out;
  s.io_rows()[0] = {static_cast<uint32_t>(token), 0, 0, s.extent_of(0, 0)};
  for (int64_t i = 0; i < steps; ++i) {
    // argmax leaves its pick in row 0's token, where the next step's embedding reads it
    const int64_t position = s.positions[0];
    s.io_rows()[0].position = static_cast<uint32_t>(position);
    s.run_chunk(0, 1);
    out.push_back(s.device_pick([&] {
      return "decode step " + std::to_string(i + 1) + " (position " + std::to_string(position) + ")";
    }));
  }
  return out;
}

int32_t Session::argmax() const {
  return impl_->device_pick([] { return std::string("the last pass (the prompt's, or the last decode step)"); });
}

void check_logits(std::span<const float> row, std::string_view where) {
  // -inf is a token ruled out (a mask, a bias), as long as one is left.
  size_t bad = 0, first = row.size(), ruled_out = 0;
  for (size_t i = 0; i < row.size(); ++i)
    if (std::isnan(row[i]) || row[i] == std::numeric_limits<float>::infinity()) {
      if (bad++ == 0) first = i;
    } else if (row[i] == -std::numeric_limits<float>::infinity()) {
      ++ruled_out;
    }
  if (bad == 0 && ruled_out < row.size()) return;
  if (bad == 0)
    throw Error(ErrorKind::BadFile, std::string(where) + ": every logit is -inf: an overflow in the computation");
  const float v = row[first];
  throw Error(ErrorKind::BadFile, std::string(where) + ": the logits hold " +
                                      (std::isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf") + " at token " +
                                      std::to_string(first) + " (" + std::to_string(bad) + " of " +
                                      std::to_string(row.size()) +
                                      " values are NaN or inf): a non-finite weight or an overflow in the computation");
}

}  // namespace lathe
