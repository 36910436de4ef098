// The model-specific executable: the generic front end, linked with one
// generated model library.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <type_traits>
#include <sstream>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <pthread.h>
#include <thread>
#include <unistd.h>

#ifdef LATHE_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only: no C++ bindings to link
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

#include "core/balance.hpp"
#include "core/plan.hpp"
#include "runtime/error.hpp"
#include "runtime/model/model_info.hpp"
#include "runtime/serve/embedder.hpp"
#include "runtime/model/session.hpp"
#include "runtime/serve/server.hpp"
#include "runtime/text/chat_template.hpp"
#include "runtime/version.hpp"
#include "runtime/text/generate.hpp"
#include "runtime/model/stage_link.hpp"
#include "runtime/vk/device.hpp"
#include "runtime/weights/checkpoint.hpp"
#include "runtime/weights/gguf.hpp"
#include "runtime/weights/dtype.hpp"
#include "runtime/weights/safetensors.hpp"

namespace {

using lathe::Error;
using lathe::ErrorKind;

int cmd_info() {
  const lathe::ModelInfo& m = lathe::model_info();
  const lathe::plan::Plan& plan = m.plan;
  std::cout << "model        " << m.name << " (" << m.spec_file << ")\n"
            << "dims         hidden " << m.hidden << ", layers " << m.layers << ", heads " << m.heads << "/"
            << m.kv_heads << " × " << m.head_dim << ", intermediate " << m.intermediate << ", vocab " << m.vocab
            << ", max context " << m.max_context << "\n"
            << "parameters   " << m.total_params << " in " << m.manifest.size() << " tensors\n";
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

// `text` read whole as a number (std::stoll or std::stod), or nullopt.
template <class T>
std::optional<T> read_number(const std::string& text) {
  size_t used = 0;
  T v{};
  try {
    if constexpr (std::is_integral_v<T>) v = std::stoll(text, &used);
    else v = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used == 0 || used != text.size()) return std::nullopt;
  return v;
}

// A whole number of at least `low`, said in words: CLI11's
// NonNegativeNumber would print its range up to the largest double.
CLI::Validator at_least(int64_t low) {
  return CLI::Validator(
      [low](std::string& text) -> std::string {
        const std::optional<long long> v = read_number<long long>(text);
        if (!v) return "'" + text + "' is not a whole number";
        if (*v < low) return "must be " + std::to_string(low) + " or more, not " + text;
        return "";
      },
      ">= " + std::to_string(low));
}

// A finite number above zero (NaN and infinities are refused).
CLI::Validator finite_positive() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::optional<double> v = read_number<double>(text);
        if (!v) return "'" + text + "' is not a number";
        if (!std::isfinite(*v) || !(*v > 0)) return "must be a finite number above 0, not " + text;
        return "";
      },
      "> 0");
}

// A model split over processes: `mpirun -np N <model> <command> …` runs the
// command on rank 0 and one pipeline stage of the layers on every rank
// (--split layers:…; as even as they divide without it), each rank on its
// own device and its own copy of the checkpoint, the hidden states passed
// as MPI messages (Open MPI; a build without it refuses to run under
// mpirun). Null: one process.
lathe::StageLink* g_link = nullptr;

#ifdef LATHE_HAVE_MPI
class MpiLink final : public lathe::StageLink {
 public:
  MpiLink() {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks_);
  }
  ~MpiLink() override {
    if (rank_ == 0 && !configured) lathe::Session::stop_stages(*this);
    MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int ranks() const override { return ranks_; }
  // In pieces under 2 GiB: MPI counts are ints.
  void send(int to, const void* data, size_t bytes) override {
    size_t at = 0;
    do {
      const int n = static_cast<int>(std::min(kPiece, bytes - at));
      check(MPI_Send(static_cast<const char*>(data) + at, n, MPI_BYTE, to, 0, MPI_COMM_WORLD), "MPI_Send", to);
      at += static_cast<size_t>(n);
    } while (at < bytes);
  }
  void receive(int from, void* data, size_t bytes) override {
    size_t at = 0;
    do {
      const int n = static_cast<int>(std::min(kPiece, bytes - at));
      check(MPI_Recv(static_cast<char*>(data) + at, n, MPI_BYTE, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv",
            from);
      at += static_cast<size_t>(n);
    } while (at < bytes);
  }
  // Ends every rank: no rank waits on one that failed.
  [[noreturn]] void abort(int code) {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::exit(code);
  }

 private:
  static constexpr size_t kPiece = size_t{1} << 30;
  void check(int result, const char* what, int peer) const {
    if (result != MPI_SUCCESS)
      throw lathe::Error(lathe::ErrorKind::Io, std::string(what) + " between ranks " + std::to_string(rank_) + " and " +
                                                   std::to_string(peer) + " failed (" + std::to_string(result) + ")");
  }
  int rank_ = 0, ranks_ = 1;
};
#endif

// Under mpirun with several ranks (Open MPI's OMPI_COMM_WORLD_SIZE), the
// link between them; null for one process.
std::unique_ptr<lathe::StageLink> open_link(const char* program) {
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (!size || std::atoi(size) <= 1) return nullptr;
#ifdef LATHE_HAVE_MPI
  (void)program;
  return std::make_unique<MpiLink>();
#else
  std::cerr << program << ": launched by mpirun with " << size
            << " ranks, but this build has no MPI (install libopenmpi-dev and rebuild)\n";
  std::exit(1);
#endif
}

[[noreturn]] void abort_ranks(lathe::StageLink& link, int code) {
#ifdef LATHE_HAVE_MPI
  static_cast<MpiLink&>(link).abort(code);
#else
  (void)link;
  std::exit(code);
#endif
}

// One entry of a --device list: a rank's under MPI when it lists one a rank.
std::string rank_device(const std::string& device, int rank, int ranks) {
  const std::vector<std::string> entries = lathe::vk::device_list(device);
  if (entries.size() <= 1) return device;
  if (entries.size() != static_cast<size_t>(ranks))
    throw lathe::Error(lathe::ErrorKind::InvalidArgument, "--device " + device + " lists " + std::to_string(entries.size()) +
                                                               " devices for " + std::to_string(ranks) +
                                                               " ranks: one, or one a rank");
  return entries[static_cast<size_t>(rank)];
}

// --device: an index or part of a name; empty: LATHE_DEVICE, else the best;
// several, comma-separated ("0,1"), split the model's layers over them (under
// MPI: each rank's).
lathe::vk::ContextOptions device_options(const std::string& device) {
  lathe::vk::ContextOptions options;
  options.device = g_link ? rank_device(device, g_link->rank(), g_link->ranks()) : device;
  return options;
}

// --split (every command's, given before or after it): how the layers go
// over the devices --device names: "layers:16,16" as given, "memory" the
// contiguous runs whose largest share of what a device can take now
// (vk::device_memory: its budget less its usage where it reports them,
// else its heap) is least, each layer its weights and caches
// (core/balance.hpp, as `lathe report --split memory` plans it), empty: as
// evenly as they divide (the first stages one more).
std::string g_split;

std::vector<int64_t> stage_layers(const std::string& split, const std::vector<lathe::vk::Device*>& devices,
                                  const lathe::SessionOptions& options) {
  const int64_t layers = static_cast<int64_t>(lathe::model_info().plan.carried.size());
  const size_t n = g_link ? static_cast<size_t>(g_link->ranks()) : devices.size();
  if (g_link && split == "memory")
    throw lathe::Error(lathe::ErrorKind::InvalidArgument, "--split memory divides a process's devices; over MPI ranks give "
                                                          "--split layers:N,N,…");
  if (n == 1) {
    if (!split.empty()) throw lathe::Error(lathe::ErrorKind::InvalidArgument, "--split " + split + " needs several --device entries (\"0,1\")");
    return {};
  }
  std::optional<std::vector<int64_t>> counts;  // (empty --split: as even as they divide)
  try {
    if (!split.empty()) counts = lathe::plan::parse_split(split);  // lathe report --split's syntax
  } catch (const std::invalid_argument& e) {
    throw lathe::Error(lathe::ErrorKind::InvalidArgument, e.what());
  }
  if (counts) {
    if (counts->size() != n)
      throw lathe::Error(lathe::ErrorKind::InvalidArgument, "--split " + split + " gives " + std::to_string(counts->size()) +
                                                                " stages for the " + std::to_string(n) + " devices of --device");
    return *counts;
  }
  if (split == "memory") {
    std::vector<int64_t> capacity;
    for (const lathe::vk::Device* d : devices) {
      const lathe::vk::DeviceMemory m = lathe::vk::device_memory(d->info());
      capacity.push_back(static_cast<int64_t>(m.available > 0 ? m.available : m.bytes));
    }
    const lathe::Session::SplitNeed need = lathe::Session::split_need(lathe::model_info(), options);
    const auto balanced = lathe::balance::by_memory(need.layers, capacity, need.first, need.last);
    if (!balanced)
      throw lathe::Error(lathe::ErrorKind::InvalidArgument,
                         "--split memory: " + std::to_string(n) + " devices for " + std::to_string(layers) +
                             " layers, or a device that reports no memory (give --split layers:N,N,…)");
    return *balanced;
  }
  // As evenly as they divide, the first stages one more.
  std::vector<int64_t> stages;
  for (size_t i = 0; i < n; ++i)
    stages.push_back(layers / static_cast<int64_t>(n) + (static_cast<int64_t>(i) < layers % static_cast<int64_t>(n) ? 1 : 0));
  return stages;
}

// A command's session options over the context's devices (--split).
lathe::SessionOptions split_over(lathe::SessionOptions options, lathe::vk::Context& vk) {
  options.stages = stage_layers(g_split, vk.devices(), options);
  options.link = g_link;
  return options;
}

// A rank above 0 of a split over processes: its stage of the command's
// model, from the command line's --weights, --device and --no-check (every
// rank is given the same command).
int run_stage_rank(int argc, char** argv, lathe::StageLink& link) {
  std::string weights, device;
  bool check = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&](const std::string& s, const std::string& l, std::string& out) {
      if ((a == s || a == l) && i + 1 < argc) out = argv[++i];
      else if (a.rfind(l + "=", 0) == 0) out = a.substr(l.size() + 1);
    };
    value("-w", "--weights", weights);
    value("-d", "--device", device);
    if (a == "--no-check") check = false;
  }
  const std::string me = std::string(argv[0]) + " (rank " + std::to_string(link.rank()) + ")";
  try {
    lathe::vk::Context vk(device_options(device));
    lathe::Session::serve_stage(vk.device(), lathe::model_info(), link, [&](lathe::Session& session) {
      if (weights.empty())  // (a command without a session, such as info, never gets here)
        throw lathe::Error(lathe::ErrorKind::InvalidArgument,
                           "the command gives no --weights: every rank loads its stage's weights from its own copy");
      session.load(*lathe::open_checkpoint(lathe::model_info(), weights), lathe::Session::LoadOptions{check});
    });
  } catch (const std::exception& e) {
    // One write: mpirun interleaves the ranks' output (and its own notice) by write.
    const std::string line = me + ": " + e.what() + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
    abort_ranks(link, 1);
  }
  return 0;
}

// Before anything is timed. On a first run the kernels compile (llvmpipe
// JITs each at its first dispatch): that is said, not reported as a speed.
// `rows`: the prompt's tokens (the kernels of its chunk's layout compile).
// The compile says what it does: on a terminal a line that is rewritten as
// each pass's kernels compile ("compiling kernels, once …: decode (2/3),
// 12.0 s"), elsewhere each pass named as it begins. A later run still builds
// its pipelines (lavapipe translates every kernel at each start, seconds for
// a K-quant model): past a second, a terminal shows that too, and the line
// is wiped when done.
void warm_up(lathe::Session& session, int64_t rows) {
  const bool cold = !session.pipelines_cached();
  const auto start = std::chrono::steady_clock::now();
  const bool terminal = isatty(STDERR_FILENO);
  const char* lead = cold ? "compiling kernels, once (they are cached for later runs)" : "preparing kernels";
  bool shown = false;
  lathe::Session::WarmUpProgress progress;
  if (cold || terminal)  // a warm start speaks only on a terminal, and only past a second
    progress = [&](const char* stage, int done, int stages) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (done == stages) {
        if (cold && terminal)
          std::fprintf(stderr, "\r%s: %d passes, %.1f s\033[K\n", lead, stages, s);
        else if (cold)
          std::fprintf(stderr, " %.1f s\n", s);
        else if (shown)
          std::fprintf(stderr, "\r\033[K");
      } else if (terminal) {
        if (cold || s >= 1.0) {
          std::fprintf(stderr, "\r%s: %s pass (%d/%d), %.1f s\033[K", lead, stage, done + 1, stages, s);
          shown = true;
        }
      } else if (done == 0) {
        std::fprintf(stderr, "%s: %s", lead, stage);
      } else {
        std::fprintf(stderr, ", %s", stage);
      }
      std::fflush(stderr);
    };
  session.warm_up(rows, progress);
}

// Random values for one manifest tensor, deterministic in `state`: uniform
// in [-scale, scale), norm scales around 1, a state-space layer's A, dt
// bias and D in a trained model's ranges (lathe::ssm_parameter).
std::vector<float> random_values(const lathe::ManifestEntry& e, uint64_t& state, float scale) {
  const bool norm = !e.bias && lathe::is_norm(e.role);
  const bool a_log = lathe::model_info().ssm_a_log;
  std::vector<float> values(static_cast<size_t>(e.elements()));
  for (float& v : values) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;  // xorshift64
    const float uniform = static_cast<float>(state >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
    const std::optional<double> ssm = lathe::ssm_parameter(e.role, e.bias, a_log, (uniform + 1.0) / 2.0);
    v = ssm ? static_cast<float>(*ssm) : (norm ? 1.0f : 0.0f) + scale * uniform;
  }
  return values;
}

// --no-check, on every command that takes -w.
constexpr const char* kNoCheckHelp =
    "Load the weights without checking that every value is finite (a NaN or inf is refused by default; the logits "
    "are checked all the same)";

// The checkpoint at `weights` opened and audited against the build's
// manifest before the device starts (a file that does not fit is refused in
// milliseconds, not after the device's start); null for random weights.
std::unique_ptr<lathe::weights::Checkpoint> checked(const std::string& weights) {
  if (weights.empty()) return nullptr;
  return lathe::open_checkpoint(lathe::model_info(), weights);
}

// Loads `checkpoint` (checked()), or random weights when it is null;
// `check`: refuse a NaN or an infinity among them (--no-check turns it off).
void load_weights(lathe::Session& session, const lathe::weights::Checkpoint* checkpoint, bool check) {
  if (checkpoint) return session.load(*checkpoint, {.check_finite = check});
  const lathe::ModelInfo& m = session.model();
  uint64_t state = 7;
  for (size_t i = 0; i < m.manifest.size(); ++i) {
    const std::vector<float> values = random_values(m.manifest[i], state, 0.05f);
    session.upload(i, lathe::DType::F32, std::as_bytes(std::span(values)));
  }
}

// "weights 3.29 MiB, KV cache 1.50 MiB": what the session holds on the device.
std::string memory_text(const lathe::Session& session) {
  const lathe::Session::Memory m = session.memory();
  char text[96];
  std::snprintf(text, sizeof text, "weights %.2f MiB, KV cache %.2f MiB", static_cast<double>(m.weights) / (1 << 20),
                static_cast<double>(m.cache) / (1 << 20));
  std::string out = text;
  if (m.state > 0) {  // a Mamba model: its fixed state per sequence instead of a cache
    std::snprintf(text, sizeof text, ", Mamba state %.2f MiB", static_cast<double>(m.state) / (1 << 20));
    out += text;
  }
  return out;
}

// A checkpoint of random weights in the manifest's dtypes: for trying a
// build without one (tests, benchmarks).
int cmd_random_weights(const std::string& out, uint64_t seed, float scale) {
  const lathe::ModelInfo& m = lathe::model_info();
  std::vector<lathe::weights::TensorToWrite> tensors;
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (const lathe::ManifestEntry& e : m.manifest) {
    const std::vector<float> values = random_values(e, state, scale);
    lathe::weights::TensorToWrite t{std::string(e.name), e.dtype, e.stored_shape(), {}};
    t.data.resize(values.size() * lathe::weights::dtype_size(e.dtype));
    lathe::weights::convert(lathe::DType::F32, std::as_bytes(std::span(values)), e.dtype, t.data);
    tensors.push_back(std::move(t));
  }
  lathe::weights::write_safetensors(out, tensors, {{"format", "pt"}, {"lathe", "random weights"}});
  std::cerr << "wrote " << tensors.size() << " random tensors of " << m.name << " to " << out << "\n";
  return 0;
}

// Device time per kernel of one pass over `rows` tokens after `position`
// cached ones, on random weights: where a step's time goes.
int cmd_profile(uint32_t rows, int64_t position, const std::string& device) {
  const lathe::ModelInfo& m = lathe::model_info();
  lathe::vk::Context vk(device_options(device));
  lathe::SessionOptions options;
  options.max_chunk = std::max<int64_t>({rows, 1, std::min<int64_t>(position, 256)});
  lathe::Session session(vk.devices(), m, split_over(options, vk));
  load_weights(session, nullptr, true);
  if (position > 0) session.prefill(std::vector<int32_t>(static_cast<size_t>(position), 1));
  session.profile(rows);  // warm-up: first dispatches compile pipelines
  std::map<std::string, std::pair<int, double>> by_kernel;
  double total = 0;
  for (const auto& k : session.profile(rows)) {
    by_kernel[k.kernel].first++;
    by_kernel[k.kernel].second += k.microseconds;
    total += k.microseconds;
  }
  std::printf("%s on %s (class %s): %u rows after %lld cached, %zu dispatches, %.0f us\n", std::string(m.name).c_str(),
              vk.device().info().name.c_str(), std::string(session.device_class().name).c_str(), rows, static_cast<long long>(position), session.dispatches_per_token(),
              total);
  for (const auto& [name, v] : by_kernel)
    std::printf("  %-40s %4d x %9.1f us = %6.1f %%\n", name.c_str(), v.first, v.second / v.first, 100 * v.second / total);
  return 0;
}

// Comma- or space-separated ids, optionally in brackets: "1,2,3", "1 2 3",
// or tokenize --ids's "[1, 2, 3]".
std::vector<int32_t> parse_tokens(const std::string& text, const std::string& option = "--tokens") {
  std::string list = text;
  for (char& c : list)
    if (c == ',' || c == '[' || c == ']' || c == '\n' || c == '\t' || c == '\r') c = ' ';
  std::vector<int32_t> out;
  std::stringstream in(list);
  std::string item;
  while (in >> item) {
    const std::optional<long long> v = read_number<long long>(item);
    if (!v || *v < INT32_MIN || *v > INT32_MAX)
      throw Error(ErrorKind::InvalidArgument, option + ": '" + item + "' is not a token id");
    out.push_back(static_cast<int32_t>(*v));
  }
  if (out.empty()) throw Error(ErrorKind::InvalidArgument, option + ": no token ids given");
  return out;
}

// The logits of every prompt position, then of `steps` greedy decode steps,
// as raw little-endian f32 rows of vocab values: for comparing lathe with any
// other implementation.
// An encoder-decoder's rows are its decoder's, after the source
// (--source-tokens) is encoded.
int cmd_logits(const std::string& weights, const std::string& tokens_text, const std::string& source_text,
               int64_t steps, int64_t context, const std::string& device, const std::string& out_path, bool check) {
  const lathe::ModelInfo& m = lathe::model_info();
  const std::vector<int32_t> tokens = parse_tokens(tokens_text);
  if (m.encoder && steps > 0)
    throw Error(ErrorKind::InvalidArgument, std::string(m.name) + " is an encoder: it has no decode steps (drop -n)");
  if (m.encoder_decoder && source_text.empty())
    throw Error(ErrorKind::InvalidArgument, std::string(m.name) + " is an encoder-decoder: give the source's ids "
                                                                   "(--source-tokens) and the decoder's (-t)");
  if (!m.encoder_decoder && !source_text.empty())
    throw Error(ErrorKind::InvalidArgument,
                "--source-tokens: " + std::string(m.name) + " is not an encoder-decoder: it has no source");
  const std::vector<int32_t> source = m.encoder_decoder ? parse_tokens(source_text, "--source-tokens") : std::vector<int32_t>{};
  const auto checkpoint = checked(weights);
  lathe::vk::Context vk(device_options(device));
  lathe::SessionOptions options;
  options.all_logits = true;
  options.context = context;
  lathe::Session session(vk.devices(), m, split_over(options, vk));
  session.load(*checkpoint, {.check_finite = check});
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(ErrorKind::Io, out_path + ": cannot write");
  // Every row checked before it is written: NaN rows are an error naming
  // the row, not a file a comparison reads as a mismatch (or a match).
  const size_t vocab = static_cast<size_t>(m.output_width);  // an encoder's rows: its final hidden states
  auto write = [&](const std::vector<float>& rows, const std::function<std::string(size_t)>& where) {
    for (size_t r = 0; r * vocab < rows.size(); ++r)
      lathe::check_logits(std::span(rows).subspan(r * vocab, vocab), where(r));
    out.write(reinterpret_cast<const char*>(rows.data()), static_cast<std::streamsize>(rows.size() * sizeof(float)));
  };
  if (!source.empty()) session.source(0, source);
  write(session.prefill(tokens), [](size_t r) { return "prompt row " + std::to_string(r); });
  for (int64_t i = 0; i < steps; ++i)
    write(session.decode(session.argmax()), [i](size_t) { return "decode step " + std::to_string(i + 1); });
  if (!out.flush()) throw Error(ErrorKind::Io, out_path + ": write failed");
  std::cerr << "wrote " << tokens.size() + static_cast<size_t>(steps) << " rows × " << vocab
            << (m.encoder ? " f32 hidden states to " : " f32 logits to ")
            << out_path << " (" << vk.device().info().name << ")\n";
  return 0;
}

// Greedy generation from token ids (text in and out comes with the
// tokenizers): the picks, then prefill and decode speed.
int cmd_generate(const std::string& weights, const std::string& tokens_text, int64_t steps, int64_t context,
                 const std::string& device, bool check) {
  using Clock = std::chrono::steady_clock;
  const lathe::ModelInfo& m = lathe::model_info();
  const std::vector<int32_t> prompt = parse_tokens(tokens_text);
  const auto checkpoint = checked(weights);
  lathe::vk::Context vk(device_options(device));
  lathe::SessionOptions options;
  options.context = context;
  options.max_chunk = std::max<int64_t>(1, std::min<int64_t>(static_cast<int64_t>(prompt.size()), 512));
  lathe::Session session(vk.devices(), m, split_over(options, vk));
  load_weights(session, checkpoint.get(), check);
  if (weights.empty()) std::cerr << "(random weights: the tokens mean nothing; the speed does)\n";
  warm_up(session, static_cast<int64_t>(prompt.size()));
  const int64_t free = session.context() - static_cast<int64_t>(prompt.size());
  if (free < 0)
    throw Error(ErrorKind::InvalidArgument, "--tokens: " + std::to_string(prompt.size()) + " tokens do not fit the context of " +
                                                std::to_string(session.context()) + " positions (--context)");
  // -n: new tokens; -1: until the context is full. The first comes from the
  // prompt's pass, each later one from a decode step.
  const int64_t wanted = steps < 0 ? free + 1 : steps;
  const Clock::time_point start = Clock::now();
  session.prompt(0, prompt);  // an encoder-decoder's source, then its decoder's start token
  const Clock::time_point prefilled = Clock::now();
  std::vector<int32_t> picks;
  if (wanted > 0) {
    picks.push_back(session.argmax());  // the prompt's greedy continuation
    const int64_t room = m.encoder_decoder ? session.context() - session.position() : free;
    const std::vector<int32_t> more = session.generate_greedy(picks[0], std::min(wanted - 1, room));
    picks.insert(picks.end(), more.begin(), more.end());
  }
  const Clock::time_point done = Clock::now();
  for (size_t i = 0; i < picks.size(); ++i) std::cout << (i ? " " : "") << picks[i];
  std::cout << "\n";
  steps = static_cast<int64_t>(picks.size());
  const double prefill_s = std::chrono::duration<double>(prefilled - start).count();
  const double decode_s = std::chrono::duration<double>(done - prefilled).count();
  std::fprintf(stderr, "%s on %s: %s %zu tokens %.1f tok/s, decode %lld tokens %.1f tok/s, %zu dispatches/token; %s\n",
               std::string(m.name).c_str(), vk.device().info().name.c_str(), m.encoder_decoder ? "encode" : "prefill",
               prompt.size(),
               static_cast<double>(prompt.size()) / prefill_s, static_cast<long long>(steps),
               steps > 1 ? static_cast<double>(steps - 1) / std::max(decode_s, 1e-9) : 0.0,
               session.dispatches_per_token(), memory_text(session).c_str());
  return 0;
}

// The tokenizer of --tokenizer, else the one beside the weights: a GGUF
// file's own vocabulary, or tokenizer.json / tokenizer.model in the
// checkpoint's directory.
lathe::text::Tokenizer load_tokenizer(const std::string& tokenizer, const std::string& weights,
                                      const std::string& needer = "--prompt") {
  namespace fs = std::filesystem;
  if (!tokenizer.empty()) {
    const fs::path p(tokenizer);
    if (p.extension() == ".model") return lathe::text::Tokenizer::from_sentencepiece(tokenizer);
    if (p.extension() == ".gguf") return lathe::text::Tokenizer::from_gguf(lathe::weights::GgufFile(tokenizer));
    return lathe::text::Tokenizer::from_hf(tokenizer);
  }
  if (weights.empty())
    throw Error(ErrorKind::InvalidArgument, needer + " needs a tokenizer: give --tokenizer, or --weights with one beside it");
  const fs::path w(weights);
  if (w.extension() == ".gguf") return lathe::text::Tokenizer::from_gguf(lathe::weights::GgufFile(weights));
  const fs::path dir = fs::is_directory(w) ? w : w.parent_path();
  if (fs::exists(dir / "tokenizer.json")) return lathe::text::Tokenizer::from_hf((dir / "tokenizer.json").string());
  if (fs::exists(dir / "tokenizer.model"))
    return lathe::text::Tokenizer::from_sentencepiece((dir / "tokenizer.model").string());
  throw Error(ErrorKind::NotFound, needer + " needs a tokenizer: no tokenizer.json or tokenizer.model in " +
                                       (dir.empty() ? std::string(".") : dir.string()) + "; give --tokenizer");
}

struct TextOptions {
  std::string weights, tokenizer, device;
  int64_t context = 0;
  bool no_check = false, verbose = false;
  lathe::text::GenerateOptions generate;
};

void print_stats(const lathe::text::GenerateStats& s, const std::string& device, const lathe::Session& session) {
  std::fprintf(stderr, "\n[%s on %s: %s %zu tokens %.1f tok/s, decode %zu tokens %.1f tok/s; %s; stop: %s]\n",
               std::string(lathe::model_info().name).c_str(), device.c_str(),
               lathe::model_info().encoder_decoder ? "encode" : "prefill", s.prompt_tokens,
               static_cast<double>(s.prompt_tokens) / std::max(s.prefill_seconds, 1e-9), s.new_tokens,
               s.new_tokens > 1 ? static_cast<double>(s.new_tokens - 1) / std::max(s.decode_seconds, 1e-9) : 0.0,
               memory_text(session).c_str(), s.stop_reason.c_str());
}

// What generate --prompt and chat share, in the order that lets bad input
// fail before the device work: the tokenizer, the sampler (whose options it
// checks), then the device, the session and its weights.
struct TextRun {
  static lathe::SessionOptions session_options(int64_t context) {
    lathe::SessionOptions options;
    options.context = context;
    return options;
  }
  explicit TextRun(const TextOptions& o)
      : tokenizer(load_tokenizer(o.tokenizer, o.weights)),
        sampler(o.generate.sampling),
        checkpoint(checked(o.weights)),
        vk(device_options(o.device)),
        session(vk.devices(), lathe::model_info(), split_over(session_options(o.context), vk)) {
    if (o.verbose)
      std::cerr << "seed " << o.generate.sampling.seed << " (--seed " << o.generate.sampling.seed
                << " samples this text again)\n";
    load_weights(session, checkpoint.get(), !o.no_check);
  }
  lathe::text::Tokenizer tokenizer;
  lathe::text::Sampler sampler;
  std::unique_ptr<lathe::weights::Checkpoint> checkpoint;  // opened and audited before the device starts
  lathe::vk::Context vk;
  lathe::Session session;
};

// Text generation: the prompt, then its continuation streamed as it is
// sampled; prefill and decode speed at the end (stderr).
int cmd_generate_text(const TextOptions& o, const std::string& prompt) {
  TextRun run(o);
  const std::vector<int32_t> ids = lathe::text::encode_prompt(run.session, run.tokenizer, prompt);
  warm_up(run.session, static_cast<int64_t>(ids.size()));
  std::cout << prompt << std::flush;
  const lathe::text::GenerateStats stats =
      lathe::text::generate(run.session, run.tokenizer, run.sampler, ids, o.generate, [](std::string_view text) {
        std::cout << text << std::flush;
      });
  std::cout << "\n" << std::flush;  // before the stats on stderr, where both go to one pipe
  print_stats(stats, run.vk.device().info().name, run.session);
  return 0;
}

// An interactive session: each line read is appended to the conversation
// and the model continues it; the KV cache keeps everything said.
int cmd_chat(const TextOptions& o) {
  TextRun run(o);
  lathe::Session& session = run.session;
  warm_up(session, session.context());  // lines of any length: both layouts
  lathe::text::GenerateOptions options = o.generate;
  if (options.stop.empty()) options.stop = {"\n"};  // a turn is one line, unless --stop says otherwise
  const bool terminal = isatty(STDIN_FILENO) != 0;
  if (terminal)
    std::cerr << lathe::model_info().name << ": type a line, the model continues it (" << session.context()
              << " positions of context; Ctrl-D ends)\n";
  std::string line;
  while (true) {
    if (terminal) std::cout << "> " << std::flush;
    if (!std::getline(std::cin, line)) break;
    const std::string text = line + "\n";
    std::vector<int32_t> ids = lathe::text::encode_prompt(session, run.tokenizer, text);
    if (session.position() + static_cast<int64_t>(ids.size()) + 1 > session.context()) {
      // A line that would not fit even a fresh context is refused alone;
      // the conversation goes on without it.
      const size_t fresh = run.tokenizer.encode(text, /*add_special=*/true).size();
      if (static_cast<int64_t>(fresh) + 1 > session.context()) {
        std::cerr << "[that line is " << fresh << " tokens; with one for the answer it does not fit the context of "
                  << session.context() << " positions (--context): not sent]\n";
        continue;
      }
      std::cerr << "[the context is full: starting over]\n";
      session.reset();
      run.sampler.reset();
      ids = lathe::text::encode_prompt(session, run.tokenizer, text);  // now with BOS
    }
    const lathe::text::GenerateStats stats = lathe::text::generate(
        session, run.tokenizer, run.sampler, ids, options, [](std::string_view t) { std::cout << t << std::flush; });
    std::cout << "\n";
    if (terminal) print_stats(stats, run.vk.device().info().name, run.session);
  }
  return 0;
}

// Text → ids, as llama.cpp's llama-tokenize prints them: one token a line
// ("  1043 -> ' In'"), or with ids_only the list "[1, 1043, 261]".
struct TokenizeOptions {
  std::string weights, tokenizer, prompt, file;
  bool no_special = false, no_parse_special = false, ids_only = false, show_count = false;
};

std::string read_text_file(const std::string& path, const std::string& option) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::NotFound, option + " " + path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(ErrorKind::Io, option + " " + path + ": read failed");
  return text.str();
}

int cmd_tokenize(const TokenizeOptions& o) {
  const lathe::text::Tokenizer tokenizer = load_tokenizer(o.tokenizer, o.weights, "tokenize");
  const std::string text = o.file.empty() ? o.prompt : read_text_file(o.file, "--file");
  const std::vector<int32_t> ids = tokenizer.encode(text, !o.no_special, !o.no_parse_special);
  if (o.ids_only) {
    std::cout << "[";
    for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? ", " : "") << ids[i];
    std::cout << "]\n";
  } else {
    for (const int32_t id : ids) std::printf("%6d -> '%s'\n", id, std::string(tokenizer.token_bytes(id)).c_str());
  }
  if (o.show_count) std::cout << "Total number of tokens: " << ids.size() << "\n";
  return 0;
}

// Ids → text: what the tokens decode to, special tokens shown unless skipped.
int cmd_detokenize(const std::string& weights, const std::string& tokenizer_path, const std::string& tokens,
                   bool skip_special) {
  const lathe::text::Tokenizer tokenizer = load_tokenizer(tokenizer_path, weights, "detokenize");
  const std::vector<int32_t> ids = parse_tokens(tokens);
  for (const int32_t id : ids)
    if (id < 0 || id >= tokenizer.vocab_size())
      throw Error(ErrorKind::InvalidArgument, "--tokens: " + std::to_string(id) + " is outside the vocabulary of " +
                                                  tokenizer.description() + " (" + std::to_string(tokenizer.vocab_size()) +
                                                  " tokens)");
  std::cout << tokenizer.decode(ids, skip_special) << "\n";
  return 0;
}

// Perplexity as llama.cpp's llama-perplexity computes it: the file's ids
// (with BOS) cut into whole chunks of the context length, each chunk's first
// token replaced by BOS (when the vocabulary has one), and the negative
// log-likelihood of each token of a chunk's second half, predicted from
// everything before it in the chunk. PPL = exp(mean NLL), with the standard
// error of that mean carried through exp.
struct PerplexityOptions {
  std::string weights, tokenizer, file, device;
  int64_t context = 0, chunks = 0;
  bool no_check = false;
  bool decode = false;  // each chunk a token at a time: the decode path (the dot layout on a class that has it)
};

int cmd_perplexity(const PerplexityOptions& o) {
  using Clock = std::chrono::steady_clock;
  const lathe::ModelInfo& m = lathe::model_info();
  const lathe::text::Tokenizer tokenizer = load_tokenizer(o.tokenizer, o.weights, "perplexity");
  const std::vector<int32_t> tokens = tokenizer.encode(read_text_file(o.file, "--file"), /*add_special=*/true);
  const int64_t n_ctx = o.context > 0 ? o.context : m.max_context;
  if (n_ctx < 4 || n_ctx > m.max_context)
    throw Error(ErrorKind::InvalidArgument, "--context " + std::to_string(n_ctx) + ": must be in [4, " +
                                                std::to_string(m.max_context) + "] (the spec's max_context)");
  int64_t chunks = static_cast<int64_t>(tokens.size()) / n_ctx;
  if (chunks < 1)
    throw Error(ErrorKind::InvalidArgument, "--file " + o.file + ": " + std::to_string(tokens.size()) +
                                                " tokens, fewer than one chunk of " + std::to_string(n_ctx) +
                                                " (give a longer text or a smaller --context)");
  if (o.chunks > 0) chunks = std::min(chunks, o.chunks);
  const auto checkpoint = checked(o.weights);
  lathe::vk::Context vk(device_options(o.device));
  lathe::SessionOptions options;
  options.context = n_ctx;
  options.max_chunk = n_ctx;
  options.all_logits = true;
  lathe::Session session(vk.devices(), m, split_over(options, vk));
  session.load(*checkpoint, {.check_finite = !o.no_check});
  warm_up(session, n_ctx);
  const bool terminal = isatty(STDERR_FILENO) != 0;
  const int64_t first = n_ctx / 2;
  const size_t vocab = static_cast<size_t>(m.vocab);
  double nll = 0, nll2 = 0;
  int64_t count = 0;
  const Clock::time_point start = Clock::now();
  for (int64_t c = 0; c < chunks; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx);
    if (tokenizer.bos()) chunk[0] = *tokenizer.bos();
    session.reset();
    // n_ctx rows × vocab: one prompt pass, or (--decode) its first token
    // and then a decode step a token, as generation reads them.
    std::vector<float> logits;
    if (o.decode) {
      logits = session.prefill(std::span(chunk).first(1));
      logits.resize(static_cast<size_t>(n_ctx) * vocab);
      for (int64_t j = 1; j < n_ctx - 1; ++j) {
        const std::vector<float> step = session.decode(chunk[static_cast<size_t>(j)]);
        std::copy(step.begin(), step.end(), logits.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(j) * vocab));
      }
    } else {
      logits = session.prefill(chunk);
    }
    for (int64_t j = first; j < n_ctx - 1; ++j) {
      const float* row = logits.data() + static_cast<size_t>(j) * vocab;
      lathe::check_logits(std::span(row, vocab), "chunk " + std::to_string(c + 1) + ", row " + std::to_string(j));
      const double top = *std::max_element(row, row + vocab);
      double sum = 0;
      for (size_t k = 0; k < vocab; ++k) sum += std::exp(static_cast<double>(row[k]) - top);
      const double v = top + std::log(sum) - row[chunk[static_cast<size_t>(j) + 1]];
      nll += v;
      nll2 += v * v;
      ++count;
    }
    if (terminal) std::fprintf(stderr, "[%lld]%.4f,", static_cast<long long>(c + 1), std::exp(nll / count));
  }
  if (terminal) std::fprintf(stderr, "\n");
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double mean = nll / count;
  const double ppl = std::exp(mean);
  const double error = count > 1 ? std::sqrt(std::max(nll2 / count - mean * mean, 0.0) / (count - 1)) * ppl : 0.0;
  std::printf("%zu tokens, %lld chunks of %lld, %lld scored\nFinal estimate: PPL = %.4f +/- %.5f\n", tokens.size(),
              static_cast<long long>(chunks), static_cast<long long>(n_ctx), static_cast<long long>(count), ppl, error);
  std::fflush(stdout);
  std::fprintf(stderr, "[%s on %s: %.1f s, %.1f tok/s]\n", std::string(m.name).c_str(), vk.device().info().name.c_str(),
               seconds, static_cast<double>(chunks * n_ctx) / std::max(seconds, 1e-9));
  return 0;
}

// Sentence embeddings of an encoder: each input (token ids, or text lines
// through the tokenizer) to one vector, pooled and normalized as the spec
// says (runtime/model/pooling.hpp); `batch` inputs a pass. Written as raw
// f32 rows to `out_path`, else as one JSON array a line on stdout.
struct EmbedOptions {
  std::string weights, tokenizer, file, device, out_path;
  std::vector<std::string> tokens, prompts;
  int64_t batch = 16, context = 0;
  bool no_check = false;
};

int cmd_embed(const EmbedOptions& o) {
  const lathe::ModelInfo& m = lathe::model_info();
  std::vector<std::vector<int32_t>> inputs;
  for (const std::string& t : o.tokens) inputs.push_back(parse_tokens(t, "--tokens"));
  if (!o.prompts.empty() || !o.file.empty()) {
    const lathe::text::Tokenizer tokenizer = load_tokenizer(o.tokenizer, o.weights, "embed of text");
    std::vector<std::string> lines = o.prompts;
    if (!o.file.empty()) {
      std::istringstream text(read_text_file(o.file, "--file"));
      for (std::string line; std::getline(text, line);)
        if (!line.empty()) lines.push_back(line);
    }
    for (const std::string& line : lines) inputs.push_back(tokenizer.encode(line, /*add_special=*/true));
  }
  if (inputs.empty()) throw Error(ErrorKind::InvalidArgument, "embed: no inputs (give --tokens, --prompt or --file)");
  const auto checkpoint = checked(o.weights);
  lathe::vk::Context vk(device_options(o.device));
  lathe::SessionOptions options;
  options.context = o.context;
  options.sequences = std::min<int64_t>(o.batch, static_cast<int64_t>(inputs.size()));
  lathe::Session session(vk.devices(), m, split_over(options, vk));
  load_weights(session, checkpoint.get(), !o.no_check);
  std::ofstream out;
  if (!o.out_path.empty()) {
    out.open(o.out_path, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(ErrorKind::Io, o.out_path + ": cannot write");
  }
  const auto start = std::chrono::steady_clock::now();
  // The server's embedder: `batch` inputs a pass, each pooled as the spec says.
  const std::vector<std::vector<float>> vectors = lathe::serve::Embedder(session).embed(inputs);
  size_t tokens = 0;
  for (size_t i = 0; i < vectors.size(); ++i) {
    const std::vector<float>& v = vectors[i];
    tokens += inputs[i].size();
    lathe::check_logits(v, "input " + std::to_string(i));
    if (out.is_open()) {
      out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
      continue;
    }
    std::string line = "[";
    char number[32];
    for (size_t j = 0; j < v.size(); ++j) {
      std::snprintf(number, sizeof number, "%s%.9g", j ? ", " : "", static_cast<double>(v[j]));
      line += number;
    }
    std::cout << line << "]\n";
  }
  if (out.is_open() && !out.flush()) throw Error(ErrorKind::Io, o.out_path + ": write failed");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << "embedded " << inputs.size() << " inputs (" << tokens << " tokens) in " << seconds << " s: "
            << static_cast<double>(inputs.size()) / seconds << " inputs/s, " << m.output_width << " values each ("
            << vk.device().info().name << ")\n";
  return 0;
}

// The OpenAI-compatible server: the checkpoint's tokenizer and chat
// template, a session of `parallel` sequences, the scheduler and the HTTP
// server (runtime/serve/), until SIGINT or SIGTERM.
struct ServeOptions {
  std::string weights, tokenizer, device, host = "127.0.0.1";
  int port = 8080;
  int64_t parallel = 1, context = 0, queue = 64, max_body = 1 << 20;
  double read_timeout = 30, write_timeout = 30, keep_alive = 5, grace = 15;
  int keep_alive_max = 100, http_threads = 0;
  std::vector<std::string> cors;
  bool no_check = false;
};

std::optional<lathe::text::ChatTemplateSource> find_chat_template(const std::string& weights) {
  namespace fs = std::filesystem;
  if (fs::path(weights).extension() == ".gguf")
    return lathe::text::find_chat_template(lathe::weights::GgufFile(weights));
  return lathe::text::find_chat_template(weights);
}

int cmd_serve(const ServeOptions& o) {
  const lathe::ModelInfo& m = lathe::model_info();
  const lathe::text::Tokenizer tokenizer = load_tokenizer(o.tokenizer, o.weights, "serve");
  const std::optional<lathe::text::ChatTemplateSource> source = find_chat_template(o.weights);
  std::optional<lathe::text::ChatTemplate> chat_template;
  if (source) chat_template = lathe::text::ChatTemplate::parse(source->text, source->origin);
  // The handlers and the engine thread inherit this mask: the signals reach
  // only the thread that waits for them below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const auto checkpoint = checked(o.weights);
  lathe::vk::Context vk(device_options(o.device));
  lathe::SessionOptions options;
  options.context = o.context;
  options.max_chunk = 64;  // the scheduler's prompt chunk (an encoder-decoder's source runs whole)
  options.sequences = o.parallel;
  lathe::Session session(vk.devices(), m, split_over(options, vk));
  load_weights(session, checkpoint.get(), !o.no_check);
  warm_up(session, options.max_chunk);
  lathe::serve::SessionEngine engine(session);
  lathe::serve::SchedulerOptions scheduling;
  scheduling.chunk = m.encoder_decoder ? session.context() : options.max_chunk;
  scheduling.queue_limit = o.queue;
  lathe::serve::Scheduler scheduler(engine, tokenizer, scheduling);
  lathe::serve::Model model{std::string(m.name), &tokenizer, chat_template ? &*chat_template : nullptr,
                            source ? source->bos_token : "", source ? source->eos_token : "", session.context(),
                            m.vocab, m.encoder};
  // An encoder answers /v1/embeddings: --parallel inputs a pass.
  std::optional<lathe::serve::Embedder> embedder;
  if (m.encoder) embedder.emplace(session);
  lathe::serve::ServerOptions server_options;
  server_options.host = o.host;
  server_options.port = o.port;
  server_options.max_body_bytes = static_cast<size_t>(o.max_body);
  const auto ms = [](double seconds) { return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)); };
  server_options.read_timeout = ms(o.read_timeout);
  server_options.write_timeout = ms(o.write_timeout);
  server_options.keep_alive_timeout = ms(o.keep_alive);
  server_options.keep_alive_max = o.keep_alive_max;
  server_options.threads = o.http_threads;
  server_options.cors_origins = o.cors;
  lathe::serve::Server server(scheduler, model, server_options, embedder ? &*embedder : nullptr);
  const int port = server.bind();
  // The first SIGINT or SIGTERM stops accepting and lets the requests in
  // flight finish; a second one, or the end of --grace, cuts them off.
  std::atomic<bool> listening_done = false;
  std::thread stopper([&] {
    int signal = 0;
    if (sigwait(&signals, &signal) != 0 || listening_done) return;
    std::cerr << "lathe serve: stopping: no new requests; those in flight may take " << o.grace << " s (--grace)\n";
    server.stop();
    const auto until = std::chrono::steady_clock::now() + ms(o.grace);
    const timespec slice{0, 100'000'000};
    while (!server.wait_stopped(std::chrono::milliseconds(0))) {
      const bool signalled = sigtimedwait(&signals, nullptr, &slice) > 0;
      if (listening_done) return;  // the wake-up from the main thread
      if (signalled || std::chrono::steady_clock::now() >= until) {
        std::cerr << "lathe serve: cutting off the requests still in flight\n";
        server.cut();
        return;
      }
    }
  });
  std::printf("%s on %s: listening on http://%s:%d (%lld sequences of %lld positions; %s; chat template: %s)\n",
              std::string(m.name).c_str(), vk.device().info().name.c_str(), o.host.c_str(), port,
              static_cast<long long>(engine.sequences()), static_cast<long long>(session.context()),
              memory_text(session).c_str(), source ? source->origin.c_str() : "none");
  std::fflush(stdout);
  server.listen();
  listening_done = true;
  pthread_kill(stopper.native_handle(), SIGTERM);  // wakes the waiter if listen() ended otherwise
  stopper.join();
  std::cerr << "lathe serve: stopped\n";
  return 0;
}

// Speed on the build's own terms: a prefill of `prompt` tokens and `steps`
// greedy decode steps on the device, `repeat` times; the best of each.
int cmd_bench(const std::string& weights, int64_t prompt, int64_t steps, int repeat, const std::string& device,
              bool check) {
  using Clock = std::chrono::steady_clock;
  const lathe::ModelInfo& m = lathe::model_info();
  const auto checkpoint = checked(weights);
  lathe::vk::Context vk(device_options(device));
  lathe::SessionOptions options;
  options.context = std::min<int64_t>(m.max_context, prompt + steps + 1);
  options.max_chunk = std::max<int64_t>(1, std::min<int64_t>(prompt, 512));
  lathe::Session session(vk.devices(), m, split_over(options, vk));
  load_weights(session, checkpoint.get(), check);
  std::vector<int32_t> tokens(static_cast<size_t>(prompt));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7919 + 1) % static_cast<size_t>(m.vocab));
  double best_prefill = 0, best_decode = 0;
  for (int r = 0; r < repeat + 1; ++r) {  // the first round warms up (pipelines, caches)
    session.reset();
    const Clock::time_point start = Clock::now();
    // An encoder-decoder's prompt pass: the source's encode and the decoder's start token.
    session.prompt(0, tokens);
    const Clock::time_point prefilled = Clock::now();
    session.generate_greedy(session.argmax(), steps);
    const Clock::time_point done = Clock::now();
    if (r == 0) continue;
    best_prefill = std::max(best_prefill, static_cast<double>(prompt) / std::chrono::duration<double>(prefilled - start).count());
    best_decode = std::max(best_decode, static_cast<double>(steps) / std::chrono::duration<double>(done - prefilled).count());
  }
  std::printf("%s on %s (class %s): %s %lld tokens %.1f tok/s, decode %lld tokens %.1f tok/s (best of %d; %zu dispatches/token)\n",
              std::string(m.name).c_str(), vk.device().info().name.c_str(), std::string(session.device_class().name).c_str(),
              m.encoder_decoder ? "encode" : "prefill",
              static_cast<long long>(prompt), best_prefill,
              static_cast<long long>(steps), best_decode, repeat, session.dispatches_per_token());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::unique_ptr<lathe::StageLink> link = open_link(argv[0]);
  if (link && link->rank() > 0) return run_stage_rank(argc, argv, *link);
  g_link = link.get();
  const lathe::ModelInfo& m = lathe::model_info();
  CLI::App app{std::string("lathe build of ") + std::string(m.name)};
  app.require_subcommand(1);
  app.fallthrough();  // --split after the command's name too
  app.add_option("--split", g_split,
                 "With several --device entries (\"0,1\"): the layers of each, \"layers:16,16\", or \"memory\" "
                 "(by each device's memory); default: as even as they divide");
  app.set_version_flag("--version", [&] { return lathe::version_text(std::string(m.name) + " (lathe)"); });
  auto* info = app.add_subcommand("info", "The model's configuration, manifest and dispatch plan");

  auto* random = app.add_subcommand("random-weights", "Write a safetensors file of random weights for this model");
  std::string random_out;
  uint64_t seed = 1;
  float scale = 0.05f;
  random->add_option("-o,--output", random_out, "The safetensors file to write")->required();
  random->add_option("--seed", seed, "Random seed")->capture_default_str();
  random->add_option("--scale", scale, "Values are uniform in [-scale, scale) (norm scales around 1); a finite number above 0")
      ->capture_default_str()
      ->check(finite_positive());

  auto* logits = app.add_subcommand("logits", "Write the logits of every position as raw little-endian f32 rows");
  std::string weights, tokens, out_path, device;
  int64_t steps = 0, context = 0;
  logits->add_option("-w,--weights", weights,
                     "Checkpoint: a .safetensors file, a sharded one's .index.json, a .gguf file, or a directory holding one")
      ->required()
      ->check(CLI::ExistingPath);
  logits->add_option("-t,--tokens", tokens, "Prompt token ids, comma-separated (an encoder-decoder: the decoder's)")
      ->required();
  std::string source_tokens;
  logits->add_option("--source-tokens", source_tokens, "An encoder-decoder's source token ids, comma-separated");
  logits->add_option("-n,--steps", steps, "Greedy decode steps after the prompt (their logits follow)")
      ->capture_default_str()
      ->check(at_least(0));
  logits->add_option("-c,--context", context, "KV-cache positions (default: the spec's max_context)")
      ->check(at_least(1));
  logits->add_option("-d,--device", device, "Vulkan device: index or name part (default: LATHE_DEVICE, else the best)");
  logits->add_option("-o,--output", out_path, "Output file: (prompt + steps) rows × vocab f32")->required();
  bool logits_no_check = false;
  logits->add_flag("--no-check", logits_no_check, kNoCheckHelp);

  auto* profile = app.add_subcommand("profile", "Device time per kernel of one pass, on random weights");
  uint32_t profile_rows = 1;
  int64_t profile_position = 128;
  profile->add_option("-r,--rows", profile_rows, "Token rows of the pass (1: a decode step)")
      ->capture_default_str()
      ->check(at_least(1));
  profile->add_option("-p,--position", profile_position, "Cached positions before the pass")
      ->capture_default_str()
      ->check(at_least(0));
  profile->add_option("-d,--device", device, "Vulkan device: index or name part");

  // generate: token ids in → ids out (greedy on the device), or text in →
  // text out (sampled); chat: text lines in, continuations out.
  TextOptions text;
  lathe::text::SamplingOptions& sampling = text.generate.sampling;
  sampling.temperature = 0.8f;
  sampling.top_k = 40;
  sampling.top_p = 0.95f;
  sampling.min_p = 0.05f;
  // The repetition penalty stays 1 (off), as in llama.cpp and the OpenAI
  // API: --temp 0 is then greedy, the text demo.golden checks.
  std::vector<CLI::Option*> seed_options;
  auto add_text_options = [&](CLI::App* c) {
    c->add_option("-w,--weights", text.weights,
                  "Checkpoint: .safetensors, .index.json, .gguf or a directory (default: random weights)")
        ->check(CLI::ExistingPath);
    c->add_option("--tokenizer", text.tokenizer,
                  "tokenizer.json, a SentencePiece .model or a .gguf (default: the one beside the weights)")
        ->check(CLI::ExistingPath);
    c->add_option("-n,--max-tokens", text.generate.max_new_tokens,
                  "New tokens at most; 0: none (the prompt is only read), -1: no limit (until EOS, --stop or a full "
                  "context)")
        ->capture_default_str()
        ->check(at_least(-1));
    c->add_option("--temp", sampling.temperature, "Temperature; 0: greedy")->capture_default_str();
    c->add_option("--top-k", sampling.top_k, "Keep the k most likely tokens; 0: all")->capture_default_str();
    c->add_option("--top-p", sampling.top_p, "Keep the smallest set with this much probability; 1: all")
        ->capture_default_str();
    c->add_option("--min-p", sampling.min_p, "Drop tokens below min-p times the top probability; 0: none")
        ->capture_default_str();
    c->add_option("--repeat-penalty", sampling.repetition_penalty, "Penalty on the last 64 tokens' logits; 1: none")
        ->capture_default_str();
    seed_options.push_back(c->add_option("--seed", sampling.seed,
                                         "Sampling seed: the same seed, the same text (default: a random one, "
                                         "which -v prints)"));
    c->add_flag("-v,--verbose", text.verbose, "Say more on stderr: the sampling seed");
    c->add_option("--stop", text.generate.stop, "Stop before this text (repeatable)");
    c->add_option("-c,--context", text.context, "KV-cache positions (default: the spec's max_context)")
        ->check(at_least(1));
    c->add_option("-d,--device", text.device, "Vulkan device: index or name part (default: LATHE_DEVICE, else the best)");
    c->add_flag("--no-check", text.no_check, kNoCheckHelp);
  };

  auto* generate = app.add_subcommand(
      "generate", "Generate text from --prompt (streamed, sampled), or greedy token ids from --tokens; then the speed");
  add_text_options(generate);
  std::string prompt, gen_tokens;
  auto* prompt_option = generate->add_option("-p,--prompt", prompt, "Prompt text");
  auto* tokens_option = generate->add_option("-t,--tokens", gen_tokens, "Prompt token ids, comma-separated (greedy ids out)");
  prompt_option->excludes(tokens_option);
  generate->callback([&] {
    if (prompt_option->count() == 0 && tokens_option->count() == 0)
      throw CLI::RequiredError("--prompt or --tokens");
  });

  auto* chat = app.add_subcommand(
      "chat", "Interactive: each line you type is appended and the model answers with a line (--stop overrides)");
  add_text_options(chat);

  auto* bench = app.add_subcommand("bench", "Prefill and decode speed (best of several rounds)");
  int64_t bench_prompt = 128, bench_steps = 64;
  int bench_repeat = 3;
  bench->add_option("-w,--weights", text.weights, "Checkpoint (default: random weights)")->check(CLI::ExistingPath);
  bench->add_option("-p,--prompt-tokens", bench_prompt, "Prompt length")->capture_default_str()->check(at_least(1));
  bench->add_option("-n,--steps", bench_steps, "Decode steps")->capture_default_str()->check(at_least(1));
  bench->add_option("-r,--repeat", bench_repeat, "Rounds (after one warm-up)")->capture_default_str()
      ->check(at_least(1));
  bench->add_option("-d,--device", text.device, "Vulkan device: index or name part");
  bench->add_flag("--no-check", text.no_check, kNoCheckHelp);

  auto* serve = app.add_subcommand(
      "serve", "An OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions, /v1/models, /health, "
               "/metrics) with continuous batching");
  ServeOptions srv;
  serve->add_option("-w,--weights", srv.weights, "Checkpoint: .safetensors, .index.json, .gguf or a directory")
      ->required()
      ->check(CLI::ExistingPath);
  serve->add_option("--tokenizer", srv.tokenizer, "tokenizer.json, a SentencePiece .model or a .gguf (default: the "
                                                  "one beside the weights)")
      ->check(CLI::ExistingPath);
  serve->add_option("--host", srv.host, "Address to listen on")->capture_default_str();
  serve->add_option("--port", srv.port, "Port to listen on; 0: any free one (the line on stdout names it)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  serve->add_option("-P,--parallel", srv.parallel,
                    "Sequences decoded together (each with its own KV cache; at most 64, the prompt chunk)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  serve->add_option("-c,--context", srv.context, "KV-cache positions of each sequence (default: the spec's max_context)")
      ->check(at_least(1));
  serve->add_option("--queue", srv.queue, "Requests waiting for a sequence at most; more are refused with 503")
      ->capture_default_str()
      ->check(at_least(0));
  serve->add_option("--max-body", srv.max_body, "Largest request body in bytes; larger ones are refused with 413")
      ->capture_default_str()
      ->check(at_least(1));
  serve->add_option("--read-timeout", srv.read_timeout,
                    "Seconds a whole request (headers and body) may take to arrive; slower clients get 408")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  serve->add_option("--write-timeout", srv.write_timeout, "Seconds one write may wait for the client to read")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  serve->add_option("--keep-alive", srv.keep_alive, "Seconds a connection may stay idle between requests")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  serve->add_option("--keep-alive-max", srv.keep_alive_max, "Requests on one connection at most")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  serve->add_option("--http-threads", srv.http_threads,
                    "HTTP worker threads at most (0: every sequence and queue place, and 64 more)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  serve->add_option("--grace", srv.grace,
                    "Seconds the requests in flight may take to finish after SIGINT or SIGTERM (a second signal "
                    "cuts them off at once)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  serve->add_option("--cors", srv.cors,
                    "Origin whose browsers may call the API (repeatable; * for any); default: no CORS headers");
  serve->add_option("-d,--device", srv.device, "Vulkan device: index or name part");
  serve->add_flag("--no-check", srv.no_check, kNoCheckHelp);

  // tokenize / detokenize: llama.cpp's llama-tokenize, both ways.
  auto* tokenize = app.add_subcommand("tokenize", "Print the token ids of a text (--prompt or --file), one a line or as a list");
  TokenizeOptions tok;
  auto add_tokenizer_options = [](CLI::App* c, std::string& w, std::string& t) {
    c->add_option("-w,--weights", w, "Checkpoint whose tokenizer to use: a .gguf file's own, or the tokenizer.json / "
                                     "tokenizer.model beside it")
        ->check(CLI::ExistingPath);
    c->add_option("--tokenizer", t, "tokenizer.json, a SentencePiece .model or a .gguf")->check(CLI::ExistingPath);
  };
  add_tokenizer_options(tokenize, tok.weights, tok.tokenizer);
  auto* tok_prompt = tokenize->add_option("-p,--prompt", tok.prompt, "The text");
  auto* tok_file = tokenize->add_option("-f,--file", tok.file, "A file whose text to tokenize")->check(CLI::ExistingFile);
  tok_prompt->excludes(tok_file);
  tokenize->add_flag("--no-special", tok.no_special, "Add no BOS/EOS (by default those the tokenizer adds)");
  tokenize->add_flag("--no-parse-special", tok.no_parse_special,
                     "Special tokens written in the text (\"<s>\") stay text rather than becoming their ids");
  tokenize->add_flag("--ids", tok.ids_only, "Print only the ids, as [1, 2, 3] (what detokenize -t takes)");
  tokenize->add_flag("--show-count", tok.show_count, "Also print the number of tokens");
  tokenize->callback([&] {
    if (tok_prompt->count() == 0 && tok_file->count() == 0) throw CLI::RequiredError("--prompt or --file");
  });

  auto* detokenize = app.add_subcommand("detokenize", "Print the text of token ids");
  std::string detok_weights, detok_tokenizer, detok_tokens;
  bool detok_skip = false;
  add_tokenizer_options(detokenize, detok_weights, detok_tokenizer);
  detokenize->add_option("-t,--tokens", detok_tokens, "Token ids, comma- or space-separated, or tokenize --ids's list")
      ->required();
  detokenize->add_flag("--skip-special", detok_skip, "Leave out special tokens (BOS, EOS, <|im_start|>, …)");

  auto* perplexity = app.add_subcommand(
      "perplexity", "Perplexity of a text file, as llama-perplexity computes it: chunks of the context length, the "
                    "mean negative log-likelihood of each chunk's second half");
  PerplexityOptions ppl;
  perplexity->add_option("-w,--weights", ppl.weights,
                         "Checkpoint: .safetensors, .index.json, .gguf or a directory")
      ->required()
      ->check(CLI::ExistingPath);
  perplexity->add_option("--tokenizer", ppl.tokenizer, "tokenizer.json, a SentencePiece .model or a .gguf (default: "
                                                       "the one beside the weights)")
      ->check(CLI::ExistingPath);
  perplexity->add_option("-f,--file", ppl.file, "The text file")->required()->check(CLI::ExistingFile);
  perplexity->add_option("-c,--context", ppl.context, "Chunk length in tokens (default: the spec's max_context)")
      ->check(at_least(4));
  perplexity->add_option("--chunks", ppl.chunks, "Chunks at most; 0: every whole chunk of the file")
      ->capture_default_str()
      ->check(at_least(0));
  perplexity->add_option("-d,--device", ppl.device, "Vulkan device: index or name part");
  perplexity->add_flag("--no-check", ppl.no_check, kNoCheckHelp);
  perplexity->add_flag("--decode", ppl.decode,
                       "Feed each chunk a token at a time (decode steps, as generation does) instead of one prompt "
                       "pass: the logits of the decode path");

  auto* embed = app.add_subcommand(
      "embed", "Sentence embeddings of an encoder: one vector per input, pooled as the spec says, one JSON array a "
               "line (or raw f32 rows with -o)");
  EmbedOptions emb;
  embed->add_option("-w,--weights", emb.weights,
                    "Checkpoint: .safetensors, .index.json, .gguf or a directory (default: random weights)")
      ->check(CLI::ExistingPath);
  embed->add_option("--tokenizer", emb.tokenizer, "tokenizer.json, a SentencePiece .model or a .gguf (default: the one "
                                                  "beside the weights)")
      ->check(CLI::ExistingPath);
  embed->add_option("-t,--tokens", emb.tokens, "One input's token ids, comma-separated (repeatable)");
  embed->add_option("-p,--prompt", emb.prompts, "One input's text (repeatable)");
  embed->add_option("-f,--file", emb.file, "A text file: one input a line (empty lines skipped)")
      ->check(CLI::ExistingFile);
  embed->add_option("-b,--batch", emb.batch, "Inputs a pass")->capture_default_str()->check(at_least(1));
  embed->add_option("-c,--context", emb.context, "Positions an input may hold (default: the spec's max_context)")
      ->check(at_least(1));
  embed->add_option("-o,--output", emb.out_path, "Write raw little-endian f32 rows (inputs × width) here");
  embed->add_option("-d,--device", emb.device, "Vulkan device: index or name part");
  embed->add_flag("--no-check", emb.no_check, kNoCheckHelp);

  CLI11_PARSE(app, argc, argv);
  // Without --seed every run samples anew (it was seed 0 every time).
  if (std::none_of(seed_options.begin(), seed_options.end(), [](CLI::Option* o) { return o->count() > 0; })) {
    std::random_device entropy;
    sampling.seed = (static_cast<uint64_t>(entropy()) << 32) | entropy();
  }
  try {
    if (*info) return cmd_info();
    // An encoder embeds: commands that decode or sample would read hidden
    // states as logits.
    const bool decodes = *generate || *chat || *bench || *perplexity;
    if (lathe::model_info().encoder && decodes)
      throw Error(ErrorKind::InvalidArgument, std::string(lathe::model_info().name) +
                                                  " is an encoder: it embeds (embed, serve's /v1/embeddings) and writes "
                                                  "hidden states (logits); it does not generate");
    if (!lathe::model_info().encoder && *embed)
      throw Error(ErrorKind::InvalidArgument,
                  std::string(lathe::model_info().name) + (lathe::model_info().encoder_decoder ? " is an encoder-decoder" : " is a decoder") +
                      ": embed runs encoders (model.stack = \"encoder\")");
    // An encoder-decoder generates from a source; chat and perplexity read
    // one stream of tokens through the cache.
    if (lathe::model_info().encoder_decoder && (*chat || *perplexity))
      throw Error(ErrorKind::InvalidArgument, std::string(lathe::model_info().name) +
                                                  " is an encoder-decoder: it generates from a source (generate, serve); "
                                                  "chat and perplexity continue one stream");
    if (*embed) return cmd_embed(emb);
    if (*random) return cmd_random_weights(random_out, seed, scale);
    if (*generate && prompt_option->count() > 0) return cmd_generate_text(text, prompt);
    if (*generate)
      return cmd_generate(text.weights, gen_tokens, text.generate.max_new_tokens, text.context, text.device,
                          !text.no_check);
    if (*chat) return cmd_chat(text);
    if (*bench) return cmd_bench(text.weights, bench_prompt, bench_steps, bench_repeat, text.device, !text.no_check);
    if (*profile) return cmd_profile(profile_rows, profile_position, device);
    if (*logits) return cmd_logits(weights, tokens, source_tokens, steps, context, device, out_path, !logits_no_check);
    if (*tokenize) return cmd_tokenize(tok);
    if (*detokenize) return cmd_detokenize(detok_weights, detok_tokenizer, detok_tokens, detok_skip);
    if (*perplexity) return cmd_perplexity(ppl);
    if (*serve) return cmd_serve(srv);
  } catch (const Error& e) {
    const std::string line = std::string(argv[0]) + ": " + e.what() + "\n";  // one write (mpirun interleaves by write)
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
    if (link) abort_ranks(*link, 1);  // the other ranks may wait on this one
    return 1;
  }
  return 0;
}
