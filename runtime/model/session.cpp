// A session's public API: the checks of every call, prompts cut into
// chunks, and the passes of prefill, decode and greedy generation.
#include "runtime/model/session.hpp"

#include <algorithm>

#include "runtime/error.hpp"
#include "runtime/model/session_impl.hpp"
#include "runtime/vk/buffer.hpp"
#include "runtime/vk/check.hpp"

namespace lathe {

Session::Impl::Impl(vk::Device& d, const ModelInfo& m, const SessionOptions& o)
    : device(d), model(m), plan(m.plan), options(o), pipelines(d, o.pipeline_cache), arena(d) {}

Session::Impl::~Impl() {
  if (device.handle() != VK_NULL_HANDLE) vkDeviceWaitIdle(device.handle());
  if (fence != VK_NULL_HANDLE) vkDestroyFence(device.handle(), fence, nullptr);
  if (pool != VK_NULL_HANDLE) vkDestroyCommandPool(device.handle(), pool, nullptr);
}

void Session::Impl::check_ready(size_t count) const {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!tensors[i].uploaded)
      throw Error(ErrorKind::InvalidArgument, std::string(model.manifest[i].name) + ": not loaded before the first forward pass");
  if (position + static_cast<int64_t>(count) > context)
    throw Error(ErrorKind::InvalidArgument,
                "the context of " + std::to_string(context) + " positions is full: " + std::to_string(position) +
                    " cached + " + std::to_string(count) + " new tokens (raise the context, up to " +
                    std::to_string(model.max_context) + ")");
}

void Session::Impl::check_token(int32_t token) const {
  if (token < 0 || token >= model.vocab)
    throw Error(ErrorKind::InvalidArgument,
                "token id " + std::to_string(token) + " is outside the vocabulary [0, " + std::to_string(model.vocab) + ")");
}

// Runs one chunk (rows ≤ max_chunk) already written to io; advances the position.
void Session::Impl::run_chunk(uint32_t rows) {
  io_words()[0] = static_cast<uint32_t>(position);
  if (rows == 1) {
    if (!decode_recorded) {
      record(decode_commands, 1, decode);
      decode_recorded = true;
    }
    submit(decode_commands);
  } else {
    record(prefill_commands, rows, tile_for(rows));
    submit(prefill_commands);
  }
  position += rows;
}

std::vector<float> Session::Impl::read_logits(uint32_t rows) {
  std::vector<float> out(static_cast<size_t>(rows) * static_cast<size_t>(model.vocab));
  vk::download(device, *logits, out.data(), out.size() * sizeof(float));
  return out;
}

Session::Session(vk::Device& device, const ModelInfo& model, const SessionOptions& options)
    : impl_(std::make_unique<Impl>(device, model, options)) {
  Impl& s = *impl_;
  vk::check_requirements(device.info(), vk::DeviceRequirements{.subgroup_arithmetic = true, .subgroup_ballot = true});
  if (model.kernels.size() != model.plan.kernels.size())
    throw Error(ErrorKind::Unsupported, std::string(model.name) + ": the build has " + std::to_string(model.kernels.size()) +
                                            " kernel binaries for a plan of " + std::to_string(model.plan.kernels.size()) +
                                            " kernels (regenerate the build)");
  s.context = options.context ? options.context : model.max_context;
  if (s.context < 1 || s.context > model.max_context)
    throw Error(ErrorKind::InvalidArgument, "context " + std::to_string(options.context) + " is outside [1, " +
                                                std::to_string(model.max_context) + "], the spec's max_context of " +
                                                std::string(model.name));
  if (options.max_chunk < 1)
    throw Error(ErrorKind::InvalidArgument, "max_chunk must be at least 1, not " + std::to_string(options.max_chunk));
  s.lanes = device.info().subgroup_size;
  s.choose_tiles();
  // A CPU device has a few threads and many workgroups already; a GPU needs
  // more of them over a long cache than heads × rows gives in decode.
  s.splits = options.attention_splits > 0 ? static_cast<uint32_t>(options.attention_splits)
             : device.info().type == VK_PHYSICAL_DEVICE_TYPE_CPU ? 1u : 16u;
  for (size_t i = 0; i < s.plan.dispatches.size(); ++i)
    if (plan::runs(s.plan.dispatches[i], s.splits > 1)) s.active.push_back(i);
  // Every activation (and the logits of every row) is bound whole as a
  // storage buffer: a chunk may hold no more rows than maxStorageBufferRange
  // allows (128 MiB on lavapipe: 261 rows of a 128256-token vocabulary).
  const int64_t widest = std::max(s.plan.widest_row_floats, options.all_logits ? model.vocab : 0);
  const uint64_t range = device.info().max_storage_buffer_range;
  if (range > 0 && widest > 0) {
    const int64_t fit = static_cast<int64_t>(range / (static_cast<uint64_t>(widest) * 4));
    if (fit < 1)
      throw Error(ErrorKind::Unsupported, "a row of " + std::to_string(widest) + " values exceeds maxStorageBufferRange (" +
                                              std::to_string(range) + " bytes) of " + device.info().name);
    s.options.max_chunk = std::min(s.options.max_chunk, fit);
  }
  s.allocate();
  s.build_sets();
  s.create_commands();
}

Session::~Session() = default;

const ModelInfo& Session::model() const { return impl_->model; }
int64_t Session::context() const { return impl_->context; }
int64_t Session::position() const { return impl_->position; }
void Session::reset() { impl_->position = 0; }
size_t Session::dispatches_per_token() const { return impl_->active.size(); }
bool Session::pipelines_cached() const { return impl_->pipelines.from_disk(); }

void Session::warm_up(int64_t rows) {
  const Impl& s = *impl_;
  reset();
  const int64_t n = std::clamp<int64_t>(std::min({rows, s.context - 1, s.options.max_chunk}), 1, s.context);
  prefill(std::vector<int32_t>(static_cast<size_t>(n), 0));
  if (position() < s.context) decode(0);
  reset();
}

std::vector<float> Session::prefill(std::span<const int32_t> tokens) {
  Impl& s = *impl_;
  if (tokens.empty()) throw Error(ErrorKind::InvalidArgument, "prefill of no tokens");
  for (int32_t t : tokens) s.check_token(t);
  s.check_ready(tokens.size());
  std::vector<float> all;
  std::vector<float> last;
  for (size_t at = 0; at < tokens.size(); at += static_cast<size_t>(s.options.max_chunk)) {
    const uint32_t rows = static_cast<uint32_t>(std::min<size_t>(tokens.size() - at, static_cast<size_t>(s.options.max_chunk)));
    for (uint32_t r = 0; r < rows; ++r) s.io_words()[1 + r] = static_cast<uint32_t>(tokens[at + r]);
    s.run_chunk(rows);
    if (s.options.all_logits) {
      const std::vector<float> chunk = s.read_logits(rows);
      all.insert(all.end(), chunk.begin(), chunk.end());
    } else if (at + rows == tokens.size()) {
      last = s.read_logits(1);
    }
  }
  return s.options.all_logits ? all : last;
}

std::vector<float> Session::decode(int32_t token) {
  Impl& s = *impl_;
  s.check_token(token);
  s.check_ready(1);
  s.io_words()[1] = static_cast<uint32_t>(token);
  s.run_chunk(1);
  return s.read_logits(1);
}

std::vector<int32_t> Session::generate_greedy(int32_t token, int64_t steps) {
  Impl& s = *impl_;
  s.check_token(token);
  s.check_ready(static_cast<size_t>(std::max<int64_t>(steps, 0)));
  std::vector<int32_t> out;
  s.io_words()[1] = static_cast<uint32_t>(token);
  for (int64_t i = 0; i < steps; ++i) {
    s.run_chunk(1);  // argmax leaves its pick in tokens[0], where the next step's embedding reads it
    out.push_back(argmax());
    s.io_words()[1] = static_cast<uint32_t>(out.back());
  }
  return out;
}

int32_t Session::argmax() const { return static_cast<int32_t>(impl_->io_words()[1]); }

}  // namespace lathe
