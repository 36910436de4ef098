// The decode/prefill benchmark of one model build (linked with one generated
// model library: each defines lathe::model_info()), with the memory-bandwidth
// roofline measured in the same run. Random weights: speed does not depend on
// the values. Timing lives here only, never in tests.
//
// Prints the device, a STREAM-style copy bandwidth and one Markdown table row
// (with its header); bench/run runs every bench build and merges the rows.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/device_bandwidth.hpp"
#include "bench/grammar_mask.hpp"
#include "runtime/error.hpp"
#include "runtime/generate/images.hpp"
#include "runtime/image/preprocess.hpp"
#include "runtime/model/model_info.hpp"
#include "runtime/model/session.hpp"
#include "runtime/vk/buffer.hpp"
#include "runtime/vk/check.hpp"
#include "runtime/vk/descriptors.hpp"
#include "runtime/vk/device.hpp"
#include "runtime/vk/device_features.hpp"
#include "runtime/vk/pipeline.hpp"
#include "runtime/weights/gguf.hpp"

using namespace lathe;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// xorshift32: weights for 125M parameters in a fraction of a second.
struct XorShift {
  uint32_t state;
  uint32_t next() {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    return state;
  }
  float uniform(float lo, float hi) { return lo + (hi - lo) * static_cast<float>(next() >> 8) * 0x1p-24f; }
};

bool is_norm_scale(const ManifestEntry& e) { return !e.bias && is_norm(e.role); }

// Bytes of n elements as the device stores them (vectors are kept in f32).
double stored_bytes(const ManifestEntry& e, int64_t n) {
  if (e.rank != 2) return 4.0 * static_cast<double>(n);
  const DTypeLayout layout = dtype_layout(e.dtype);  // block types: their blocks' bytes
  return static_cast<double>(layout.bytes) / static_cast<double>(layout.elements) * static_cast<double>(n);
}

// Random weights for every manifest tensor: vectors as f32 values (±0.02;
// norm scales about 1), converted by the session; each matrix the bytes of
// 65,536 random values (±0.02) in its own dtype, encoded once per dtype
// (blocks by ggml's reference quantizer) and repeated to the matrix's size:
// an 8B model's upload then costs copies, not 8 billion quantized values.
void upload_random(Session& session) {
  const ModelInfo& m = session.model();
  constexpr size_t kPool = 65536;  // a whole number of every block type's values
  std::map<DType, std::vector<std::byte>> pools;
  std::vector<float> values;
  std::vector<std::byte> bytes;
  for (size_t i = 0; i < m.manifest.size(); ++i) {
    const ManifestEntry& e = m.manifest[i];
    XorShift rng{static_cast<uint32_t>(0x9e3779b9u * (i + 1)) | 1u};
    if (e.rank != 2) {
      values.resize(static_cast<size_t>(e.elements()));
      const float center = is_norm_scale(e) ? 1.0f : 0.0f;
      for (float& v : values) v = center + rng.uniform(-0.02f, 0.02f);
      session.upload(i, DType::F32, std::as_bytes(std::span(values)));
      continue;
    }
    std::vector<std::byte>& pool = pools[e.dtype];
    if (pool.empty()) {
      values.resize(kPool);
      for (float& v : values) v = rng.uniform(-0.02f, 0.02f);
      pool = weights::encode_values(e.dtype, values);
    }
    bytes.resize(static_cast<size_t>(stored_bytes(e, e.elements())));
    for (size_t at = 0; at < bytes.size(); at += pool.size())
      std::memcpy(bytes.data() + at, pool.data(), std::min(pool.size(), bytes.size() - at));
    session.upload(i, e.dtype, bytes);
  }
}

// The weights' dtype: that of the matrices (vectors are stored in f32).
DType matrix_dtype(const ModelInfo& m) {
  for (const ManifestEntry& e : m.manifest)
    if (e.rank == 2) return e.dtype;
  return DType::F32;
}

double weight_bytes(const ModelInfo& m) {
  double bytes = 0;
  for (const ManifestEntry& e : m.manifest) bytes += stored_bytes(e, e.elements());
  return bytes;
}

// Bytes one decode step must read from memory at a cache of `context`
// positions: every matrix (an untied LM head whole; one the kernels read as
// an f32 array, latent attention's kv_b or Mamba's dt_proj, as f32), one row
// of the embedding table (of a mixture of experts, the chosen experts'), and
// the K and V cache of every layer (latent attention's: the K cache alone):
// its last W positions when the layer has a window W, and a state-space
// layer's state, read and written once (Mamba-2's h: 128 values a channel).
// Vectors (norm scales) are noise.
double decode_bytes(const ModelInfo& m, int64_t context) {
  double bytes = 0;
  for (const ManifestEntry& e : m.manifest) {
    if (e.rank != 2) continue;
    // A token reads top_k of a mixture's experts (a long decode reads each
    // about equally): the experts' share top_k / experts.
    const double share = e.expert >= 0 ? static_cast<double>(m.top_k) / static_cast<double>(m.experts) : 1.0;
    if (!read_as_matrix(e.role, e.bias, e.rank)) bytes += share * 4.0 * static_cast<double>(e.elements());
    else bytes += e.role == Role::Embed ? stored_bytes(e, e.shape[1]) : share * stored_bytes(e, e.elements());
  }
  const double row = static_cast<double>(m.plan.cache_row_bytes + m.plan.v_cache_row_bytes);  // K and V
  // The decoder layers' self-attention caches (a hybrid's attention layers
  // only; an encoder-decoder's encoder and cross caches are not counted).
  for (int64_t layer = 0; layer < std::min(m.cache_layers, m.layers); ++layer) {
    const int64_t window = static_cast<size_t>(layer) < m.plan.windows.size() ? m.plan.windows[static_cast<size_t>(layer)] : 0;
    const int64_t keys = window > 0 ? std::min(window, context) : context;
    bytes += static_cast<double>(keys) * row;
  }
  bytes += 2.0 * 4.0 * static_cast<double>(m.plan.state_layers) *
           static_cast<double>(m.plan.conv_state_floats + m.plan.scan_state_floats);
  return bytes;
}

// STREAM "copy": b = a over buffers far larger than the last-level cache,
// split across threads; GB/s counting the bytes read plus the bytes written.
double stream_copy_gbs(size_t bytes, int repeats) {
  const size_t n = bytes / sizeof(double);
  std::unique_ptr<double[]> a(new double[n]), b(new double[n]);
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  auto parallel = [&](auto&& body) {
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { body(n * t / threads, n * (t + 1) / threads); });
    for (std::thread& th : pool) th.join();
  };
  // First touch by the threads that will copy, so pages are placed (and faulted) before timing.
  parallel([&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) a[i] = 1.0 + static_cast<double>(i & 1023), b[i] = 0;
  });
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const Clock::time_point start = Clock::now();
    parallel([&](size_t lo, size_t hi) {
      const double* src = a.get();
      double* dst = b.get();
      for (size_t i = lo; i < hi; ++i) dst[i] = src[i];
    });
    best = std::min(best, seconds_since(start));
  }
  if (b[n / 2] != a[n / 2]) throw std::runtime_error("STREAM copy is wrong");  // keeps the copy observable
  return 2.0 * static_cast<double>(n * sizeof(double)) / best / 1e9;
}

std::vector<int32_t> random_tokens(size_t n, int64_t vocab, uint32_t seed) {
  XorShift rng{seed | 1u};
  std::vector<int32_t> out(n);
  for (int32_t& t : out) t = static_cast<int32_t>(rng.next() % static_cast<uint32_t>(vocab));
  return out;
}

// The device a bench runs on (validation off: it costs time).
std::unique_ptr<vk::Context> open_device(const std::string& device) {
  vk::ContextOptions options;
  options.validation = false;
  options.device = device;
  return std::make_unique<vk::Context>(options);
}

struct Options {
  std::string device;
  bool quick = false;
  int64_t steps = 0;  // 0: the defaults per context
  std::vector<int64_t> streams;  // --streams: batched decode of this many sequences each, instead of the table
  std::vector<int64_t> depths;   // --depths: llama-bench's rows (pp and tg after each depth), instead of the table
  int64_t pp = 512, tg = 128;    // --pp, --tg: their sizes
  int repeats = 3;               // --repeats
  std::string decode_tiles, prefill_tiles;  // --decode-tiles, --prefill-tiles: a sweep instead of the class's tiles
  std::vector<int64_t> batches = {1, 32};   // an encoder's: inputs a pass
  int64_t length = 128;                     // an encoder's: tokens an input
  std::vector<int64_t> profile;             // --profile: rows of each pass whose kernels are timed, instead of the table
  std::vector<std::string> profile_classes;  // --profile-classes: those classes alone (default every one the device meets)
  int64_t profile_depth = 128;              // --profile-depth: tokens cached before each profiled pass
  std::string mla_form;                     // --mla-form: latent attention's form in a prompt chunk (empty: the class's)
  int64_t attention_splits = 0;             // --attention-splits: key ranges of attention (0: the class's)
  std::vector<int64_t> mask_vocabs;         // --grammar-mask: a grammar's mask over vocabularies of these sizes
  int64_t verify = 0;                       // --verify: a verification pass of 1 … this many rows against a decode step
};

// "rows,tokens,texels[,subgroups]/…" as tiles; throws InvalidArgument naming the option.
std::vector<plan::Tile> parse_tiles(const std::string& option, const std::string& text) {
  std::vector<plan::Tile> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, '/');) {
    const std::optional<plan::Tile> t = plan::parse_tile(item);
    if (!t) throw Error(ErrorKind::InvalidArgument, option + ": '" + item + "' is not rows,tokens,texels[,subgroups]");
    out.push_back(*t);
  }
  return out;
}

// Best tokens/s of a prefill of T tokens from position 0, after one untimed
// warm-up run (the first prefill of a session creates its pipelines).
double prefill_tps(Session& session, int64_t T, int repeats, bool warm_up = true) {
  const std::vector<int32_t> tokens = random_tokens(static_cast<size_t>(T), session.model().vocab, 17);
  double best = 1e30;
  for (int r = warm_up ? -1 : 0; r < repeats; ++r) {
    session.reset();
    const Clock::time_point start = Clock::now();
    session.prefill(tokens);
    if (r >= 0) best = std::min(best, seconds_since(start));
  }
  session.reset();
  return static_cast<double>(T) / best;
}

// Tokens/s of `steps` greedy decode steps after a prompt that fills the
// cache to L − 1 positions, so the first timed step attends to L positions.
// Where L − 1 + steps would overflow the session's context (L = max_context),
// the prompt is shortened so the last step attends to the last position.
// Each step is timed on its own (one step is one submit and wait either way):
// the mean is the number, the median shows how much other load disturbed it.
struct DecodeSpeed {
  double mean_tps, median_tps;
};

DecodeSpeed decode_tps(Session& session, int64_t L, int64_t steps) {
  const int64_t prompt = std::min(L - 1, session.context() - steps);
  session.reset();
  if (prompt > 0) session.prefill(random_tokens(static_cast<size_t>(prompt), session.model().vocab, 23));
  std::vector<double> times;
  int32_t token = 1;
  for (int64_t i = 0; i < steps; ++i) {
    const Clock::time_point start = Clock::now();
    token = session.generate_greedy(token, 1).back();
    times.push_back(seconds_since(start));
  }
  session.reset();
  double total = 0;
  for (double t : times) total += t;
  std::nth_element(times.begin(), times.begin() + static_cast<ptrdiff_t>(times.size() / 2), times.end());
  return {static_cast<double>(steps) / total, 1.0 / times[times.size() / 2]};
}

// The 1-minute load average, or a negative number where /proc has none: the
// bench shares its cores with everything else, and a busy machine skews it.
double load_average() {
  double load = -1;
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = -1;
    std::fclose(f);
  }
  return load;
}

// What one run measures. The full run follows the table's columns; --quick
// keeps every phase but shrinks each (one session, short prompts, few steps):
// a smoke test of the harness in well under a minute, not a measurement.
struct Plan {
  size_t stream_bytes;
  int stream_repeats, prefill_repeats;
  int64_t prefill_short, prefill_long;  // T of the two prefill columns
  int64_t decode_short, decode_long;    // L of the two decode columns
  int64_t steps_short, steps_long;
};

Plan make_plan(const Options& opt, const ModelInfo& m) {
  Plan p = opt.quick ? Plan{64ull << 20, 2, 1, 32, 128, 32, 128, 4, 4}
                     : Plan{512ull << 20, 5, 3, 128, 512, 128, std::min<int64_t>(2048, m.max_context), 32, 16};
  if (opt.steps) p.steps_short = p.steps_long = opt.steps;
  return p;
}

int run(const Options& opt) {
  const Clock::time_point run_start = Clock::now();
  const double load_before = load_average();
  const ModelInfo& m = model_info();
  const Plan p = make_plan(opt, m);

  const std::unique_ptr<vk::Context> context = open_device(opt.device);
  vk::Device& device = context->device();

  // STREAM before the model's buffers exist (the device comes first so that a wrong --device fails at once).
  Clock::time_point phase = Clock::now();
  const double stream = stream_copy_gbs(p.stream_bytes, p.stream_repeats);
  const double stream_s = seconds_since(phase);

  double setup_s = 0, prefill_s = 0, warm_s = 0, decode_s = 0;
  auto new_session = [&](int64_t max_chunk) {
    const Clock::time_point start = Clock::now();
    SessionOptions so;
    so.max_chunk = max_chunk;
    auto session = std::make_unique<Session>(device, m, so);
    upload_random(*session);
    setup_s += seconds_since(start);
    return session;
  };
  auto timed = [](double& total, auto&& body) {
    const Clock::time_point start = Clock::now();
    const auto result = body();
    total += seconds_since(start);
    return result;
  };

  // One session per configuration: max_chunk = T for each prefill; the
  // decode runs reuse the T = 512 session, whose 512-row chunks fill their
  // prompts (decode replays one recorded step whatever max_chunk is).
  double prefill_short_tps = 0;
  if (!opt.quick) {
    std::unique_ptr<Session> session = new_session(p.prefill_short);
    prefill_short_tps = timed(prefill_s, [&] { return prefill_tps(*session, p.prefill_short, p.prefill_repeats); });
  }
  std::unique_ptr<Session> session = new_session(p.prefill_long);
  if (opt.quick)
    prefill_short_tps = timed(prefill_s, [&] { return prefill_tps(*session, p.prefill_short, p.prefill_repeats); });
  // --quick: the T = 32 run already warmed this session up.
  const double prefill_long_tps =
      timed(prefill_s, [&] { return prefill_tps(*session, p.prefill_long, p.prefill_repeats, !opt.quick); });
  // Warm-up: records the decode command buffer, which reset() keeps for every later step.
  timed(warm_s, [&] { return session->generate_greedy(1, 1); });
  const DecodeSpeed decode_short = timed(decode_s, [&] { return decode_tps(*session, p.decode_short, p.steps_short); });
  const DecodeSpeed decode_long = timed(decode_s, [&] { return decode_tps(*session, p.decode_long, p.steps_long); });
  const size_t dispatches = session->dispatches_per_token();
  const std::string device_class(session->device_class().name);
  session.reset();

  const double decode_gbs = decode_bytes(m, p.decode_short) * decode_short.mean_tps / 1e9;
  const auto ll = [](int64_t v) { return static_cast<long long>(v); };

  std::printf("device: %s (driver %s), class %s\n", device.info().name.c_str(), device.info().driver_name.c_str(),
              device_class.c_str());
  std::printf("STREAM copy: %.1f GB/s (%u threads, 2 x %zu MiB, best of %d, bytes read + written)\n", stream,
              std::max(1u, std::thread::hardware_concurrency()), p.stream_bytes >> 20, p.stream_repeats);
  std::printf("decode @%lld: %lld steps, reads %.1f MiB/token, median step %.2f tok/s\n", ll(p.decode_short),
              ll(p.steps_short), decode_bytes(m, p.decode_short) / (1 << 20), decode_short.median_tps);
  std::printf("decode @%lld: %lld steps, reads %.1f MiB/token, median step %.2f tok/s\n", ll(p.decode_long),
              ll(p.steps_long), decode_bytes(m, p.decode_long) / (1 << 20), decode_long.median_tps);
  std::printf(
      "seconds: STREAM %.1f, session setup + upload %.1f, prefill %.1f, decode warm-up %.1f, decode (prompts + steps) "
      "%.1f, total %.1f; load average %.2f before, %.2f after\n",
      stream_s, setup_s, prefill_s, warm_s, decode_s, seconds_since(run_start), load_before, load_average());
  if (opt.quick) std::printf("--quick: a smoke run of the harness with shrunken phases, not a measurement\n");
  std::printf(
      "\n| model | dtype | weights MiB | prefill T=%lld tok/s | prefill T=%lld tok/s | decode @%lld tok/s "
      "| decode @%lld tok/s | decode GB/s @%lld | roofline fraction @%lld | dispatches/token |\n",
      ll(p.prefill_short), ll(p.prefill_long), ll(p.decode_short), ll(p.decode_long), ll(p.decode_short),
      ll(p.decode_short));
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::printf("| %s | %s | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %.3f | %zu |\n", std::string(m.name).c_str(),
              std::string(dtype_name(matrix_dtype(m))).c_str(), weight_bytes(m) / (1 << 20), prefill_short_tps,
              prefill_long_tps, decode_short.mean_tps, decode_long.mean_tps, decode_gbs, decode_gbs / stream,
              dispatches);
  return 0;
}

// Continuous batching's engine: aggregate decode tokens/s of B sequences
// stepped together (Session::decode of B steps), each after a prompt of 128
// tokens, for each B of --streams, in one session of max(B) sequences. A
// serving loop adds sampling and HTTP on top; this is the device's part.
int run_streams(const Options& opt) {
  const ModelInfo& m = model_info();
  const std::unique_ptr<vk::Context> context = open_device(opt.device);
  vk::Device& device = context->device();
  const int64_t most = *std::max_element(opt.streams.begin(), opt.streams.end());
  const int64_t prompt = opt.quick ? 16 : 128;
  const int64_t steps = opt.steps ? opt.steps : opt.quick ? 4 : 32;
  SessionOptions so;
  so.sequences = most;
  so.context = std::min<int64_t>(m.max_context, prompt + steps + 1);
  Session session(device, m, so);
  upload_random(session);
  session.warm_up(prompt);
  std::printf("device: %s (driver %s), class %s\n", device.info().name.c_str(), device.info().driver_name.c_str(),
              std::string(session.device_class().name).c_str());
  std::printf("\n| model | streams | aggregate decode tok/s | per stream tok/s | vs 1 stream |\n|---|---:|---:|---:|---:|\n");
  double single = 0;
  for (int64_t streams : opt.streams) {
    session.reset();
    std::vector<Session::Step> batch;
    for (int64_t s = 0; s < streams; ++s) {
      session.prefill(s, random_tokens(static_cast<size_t>(prompt), m.vocab, 29 + static_cast<uint32_t>(s)));
      batch.push_back({s, 1});
    }
    session.decode(batch);  // records this batch size's command buffer
    const Clock::time_point start = Clock::now();
    for (int64_t i = 1; i < steps; ++i) session.decode(batch);
    const double tps = static_cast<double>(streams * (steps - 1)) / seconds_since(start);
    if (streams == 1) single = tps;
    std::printf("| %s | %lld | %.1f | %.2f | %s |\n", std::string(m.name).c_str(), static_cast<long long>(streams), tps,
                tps / static_cast<double>(streams), single > 0 ? (std::to_string(tps / single).substr(0, 4) + "×").c_str() : "–");
  }
  return 0;
}

// llama-bench's tests on this model: for each depth d, `pp` prompt tokens
// after d cached tokens (best of `repeats`, the d tokens prefilled again
// before each) and `tg` greedy decode steps after d cached tokens (their
// total time, best of `repeats`). One Markdown row per test, with the bytes a
// decode step reads × its tok/s ÷ the device's copy bandwidth measured in the
// same run (bench/gpu/run merges these rows with llama.cpp's).
int run_depths(const Options& opt) {
  const ModelInfo& m = model_info();
  const std::unique_ptr<vk::Context> context = open_device(opt.device);
  vk::Device& device = context->device();
  const bench::DeviceBandwidth bandwidth = bench::device_bandwidth(device, opt.quick ? (64ull << 20) : (1ull << 30), opt.quick ? 2 : 5);
  // The roofline: the faster of the two, the most the device was seen to move.
  const double copy = std::max(bandwidth.kernel, bandwidth.copy_command);
  const int64_t deepest = *std::max_element(opt.depths.begin(), opt.depths.end());
  SessionOptions so;
  so.mla_form = opt.mla_form;
  so.attention_splits = opt.attention_splits;
  so.max_chunk = std::min<int64_t>(opt.pp, 512);
  so.context = deepest + std::max(opt.pp, opt.tg + 1);
  if (so.context > m.max_context)
    throw Error(ErrorKind::InvalidArgument, "depth " + std::to_string(deepest) + " + the test's tokens exceed " +
                                                std::string(m.name) + "'s max_context of " + std::to_string(m.max_context));
  Session session(device, m, so);
  upload_random(session);
  session.warm_up(so.max_chunk);
  std::printf("device: %s (driver %s), class %s\n", device.info().name.c_str(), device.info().driver_name.c_str(),
              std::string(session.device_class().name).c_str());
  std::printf("device copy: %.1f GB/s (the faster of stream_copy.comp %.1f and vkCmdCopyBuffer %.1f; bytes read + "
              "written)\n",
              copy, bandwidth.kernel, bandwidth.copy_command);
  std::printf("\n| engine | model | dtype | weights MiB | test | tok/s | GB/s | roofline |\n|---|---|---|---:|---|---:|---:|---:|\n");
  const std::string name(m.name), dtype(dtype_name(matrix_dtype(m)));
  const auto row = [&](const std::string& test, double tps, double bytes_per_token) {
    const double gbs = bytes_per_token * tps / 1e9;
    char rates[64] = " | ";  // a prefill row has no roofline
    if (bytes_per_token > 0) std::snprintf(rates, sizeof rates, "%.1f | %.3f", gbs, gbs / copy);
    std::printf("| lathe | %s | %s | %.1f | %s | %.2f | %s |\n", name.c_str(), dtype.c_str(), weight_bytes(m) / (1 << 20),
                test.c_str(), tps, rates);
    std::fflush(stdout);
  };
  const std::vector<int32_t> depth_tokens = random_tokens(static_cast<size_t>(deepest), m.vocab, 23);
  const std::vector<int32_t> prompt = random_tokens(static_cast<size_t>(opt.pp), m.vocab, 17);
  // A sweep (--decode-tiles, --prefill-tiles): each tile in turn, the
  // other layout at the class's; else the class's tiles for both tests.
  struct Run {
    plan::Tile decode, prefill;
    bool pp, tg;
    const char* option;  // the sweep's, for an error
  };
  const auto [class_decode, class_prefill] = session.tiles();
  std::vector<Run> runs;
  for (const plan::Tile& t : parse_tiles("--decode-tiles", opt.decode_tiles))
    runs.push_back({t, class_prefill == class_decode ? t : class_prefill, false, true, "--decode-tiles"});
  for (const plan::Tile& t : parse_tiles("--prefill-tiles", opt.prefill_tiles))
    runs.push_back({class_decode, t, true, false, "--prefill-tiles"});
  const bool sweep = !runs.empty();
  if (!sweep) runs.push_back({class_decode, class_prefill, true, true, ""});
  for (const Run& run : runs) {
    try {
      session.set_tiles(run.decode, run.prefill);
    } catch (const Error& e) {
      // A tile the kernels run but this device cannot hold (the tiled
      // layout's shared memory) is skipped, so that one list serves every
      // GPU; any other is the option's error.
      const plan::Tile& t = run.pp ? run.prefill : run.decode;
      if (!sweep || !plan::tile_fits(t)) throw Error(e.kind(), std::string(run.option) + ": " + e.what());
      std::fprintf(stderr, "%s: tile %s skipped: %s\n", run.option, plan::tile_text(t).c_str(), e.what());
      continue;
    }
    for (int64_t d : opt.depths) {
      // The best time of `test` after the cache holds d tokens; a sweep's
      // tile first runs untimed, which makes its pipelines.
      const auto best_seconds = [&](const auto& test) {
        double best = 1e30;
        for (int r = sweep ? -1 : 0; r < opt.repeats; ++r) {
          session.reset();
          if (d > 0) session.prefill(std::span(depth_tokens).first(static_cast<size_t>(d)));
          const Clock::time_point start = Clock::now();
          test();
          if (r >= 0) best = std::min(best, seconds_since(start));
        }
        return best;
      };
      const std::string at = " @ d" + std::to_string(d);
      if (run.pp)
        row("pp" + std::to_string(opt.pp) + at + (sweep ? " tile " + plan::tile_text(run.prefill) : ""),
            static_cast<double>(opt.pp) / best_seconds([&] { session.prefill(prompt); }), 0);
      // The mean step reads the cache at d + tg / 2 positions.
      if (run.tg)
        row("tg" + std::to_string(opt.tg) + at + (sweep ? " tile " + plan::tile_text(run.decode) : ""),
            static_cast<double>(opt.tg) / best_seconds([&] { session.generate_greedy(1, static_cast<int32_t>(opt.tg)); }),
            decode_bytes(m, d + opt.tg / 2));
    }
  }
  return 0;
}

// An encoder's table: inputs of --length tokens, --batches of them a pass
// (Session::encode: one pass, each input its own sequence), the best of
// --repeats after a warm-up pass; embeddings/s and tokens/s, and each
// batch's throughput over the first batch's, measured in this one run.
int run_encoder(const Options& opt) {
  const ModelInfo& m = model_info();
  const std::unique_ptr<vk::Context> context = open_device(opt.device);
  vk::Device& device = context->device();
  const int64_t most = *std::max_element(opt.batches.begin(), opt.batches.end());
  SessionOptions so;
  so.context = opt.length;
  so.sequences = most;
  Session session(device, m, so);
  upload_random(session);
  const int repeats = opt.quick ? 1 : opt.repeats;
  std::printf("device: %s (driver %s), class %s; %lld-token inputs, best of %d passes after a warm-up\n",
              device.info().name.c_str(), device.info().driver_name.c_str(),
              std::string(session.device_class().name).c_str(), static_cast<long long>(opt.length), repeats);
  std::printf("\n| model | dtype | batch | embeddings/s | tokens/s | ms a pass | throughput vs batch %lld |\n",
              static_cast<long long>(opt.batches.front()));
  std::printf("|---|---|---:|---:|---:|---:|---:|\n");
  double first = 0;
  for (const int64_t batch : opt.batches) {
    std::vector<std::vector<int32_t>> inputs;
    for (int64_t i = 0; i < batch; ++i)
      inputs.push_back(random_tokens(static_cast<size_t>(opt.length), m.vocab, 31 + static_cast<uint32_t>(i)));
    double best = 1e30;
    for (int r = -1; r < repeats; ++r) {
      const Clock::time_point start = Clock::now();
      session.encode(inputs);
      if (r >= 0) best = std::min(best, seconds_since(start));
    }
    const double per_second = static_cast<double>(batch) / best;
    if (first == 0) first = per_second;
    std::printf("| %s | %s | %lld | %.2f | %.1f | %.1f | %.2f |\n", std::string(m.name).c_str(),
                std::string(dtype_name(matrix_dtype(m))).c_str(), static_cast<long long>(batch), per_second,
                per_second * static_cast<double>(opt.length), best * 1e3, per_second / first);
    std::fflush(stdout);
  }
  if (opt.quick) std::printf("--quick: single timings, not a measurement\n");
  return 0;
}

// An encoder-decoder's table: a source of --length tokens encoded in one
// pass (Session::source), then --steps greedy decode steps of the decoder
// after its start token (each reading the decoder's weights, its cache and
// the source's cross-attention cache); the best of --repeats after a
// warm-up round.
int run_encoder_decoder(const Options& opt) {
  const ModelInfo& m = model_info();
  const std::unique_ptr<vk::Context> context = open_device(opt.device);
  vk::Device& device = context->device();
  const int64_t steps = opt.steps ? opt.steps : opt.quick ? 4 : 32;
  SessionOptions so;
  so.context = std::min(m.max_context, std::max<int64_t>(opt.length, steps + 1));
  Session session(device, m, so);
  upload_random(session);
  const int repeats = opt.quick ? 1 : opt.repeats;
  const std::vector<int32_t> source = random_tokens(static_cast<size_t>(opt.length), m.vocab, 31);
  double best_encode = 1e30, best_decode = 1e30;
  for (int r = -1; r < repeats; ++r) {
    Clock::time_point start = Clock::now();
    session.source(0, source);
    const double encode = seconds_since(start);
    session.prefill(std::vector<int32_t>{m.decoder_start});
    start = Clock::now();
    session.generate_greedy(session.argmax(), steps);
    const double decode = seconds_since(start);
    if (r >= 0) best_encode = std::min(best_encode, encode), best_decode = std::min(best_decode, decode);
  }
  std::printf("device: %s (driver %s), class %s; best of %d rounds after a warm-up\n", device.info().name.c_str(),
              device.info().driver_name.c_str(), std::string(session.device_class().name).c_str(), repeats);
  std::printf("\n| model | dtype | source tokens | encode tok/s | ms an encode | decode steps | decode tok/s |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|\n");
  std::printf("| %s | %s | %lld | %.1f | %.1f | %lld | %.1f |\n", std::string(m.name).c_str(),
              std::string(dtype_name(matrix_dtype(m))).c_str(), static_cast<long long>(opt.length),
              static_cast<double>(opt.length) / best_encode, best_encode * 1e3, static_cast<long long>(steps),
              static_cast<double>(steps) / best_decode);
  if (opt.quick) std::printf("--quick: single timings, not a measurement\n");
  return 0;
}

// --profile ROWS[,ROWS…]: the device time of each kernel in one pass of ROWS
// rows after --profile-depth cached tokens (128; timestamps between
// dispatches; 1 row: a
// decode step's layout), under each device class the device meets, one
// table a class and pass, each class's weights uploaded once: where a pass's
// time goes, and a kernel's forms side by side in one run (a Mamba-2 scan
// runs chunked on a class with chunked_scan and as the recurrence on the
// others; a dot class's decode quantizes x first).
int run_profile(const Options& opt) {
  const ModelInfo& m = model_info();
  const std::unique_ptr<vk::Context> context = open_device(opt.device);
  vk::Device& device = context->device();
  const plan::DeviceFeatures features = vk::device_features(device.info());
  const int64_t cached = opt.profile_depth;
  for (const std::string& name : opt.profile_classes) {
    const auto& classes = m.plan.classes;
    const auto c = std::find_if(classes.begin(), classes.end(), [&](const plan::DeviceClass& k) { return k.name == name; });
    if (c == classes.end())  // a list for several models: a dot class is in a block model's plan alone
      std::printf("--profile-classes: %s is not a class of %s's plan\n", name.c_str(), std::string(m.name).c_str());
    else if (!plan::meets(*c, features))
      throw Error(ErrorKind::InvalidArgument, "--profile-classes: " + name + " is not met by " + device.info().name);
  }
  for (const plan::DeviceClass& c : m.plan.classes) {
    if (!plan::meets(c, features)) continue;
    if (!opt.profile_classes.empty() &&
        std::find(opt.profile_classes.begin(), opt.profile_classes.end(), c.name) == opt.profile_classes.end())
      continue;
    SessionOptions so;
    const int64_t most = *std::max_element(opt.profile.begin(), opt.profile.end());
    so.max_chunk = std::max<int64_t>(most, 128);  // (a deeper cache in chunks of 128)
    so.context = cached + most;
    so.device_class = std::string(c.name);
    so.mla_form = opt.mla_form;
    so.attention_splits = opt.attention_splits;
    Session session(device, m, so);
    upload_random(session);
    if (cached > 0) session.prefill(random_tokens(static_cast<size_t>(cached), m.vocab, 7));
    for (const int64_t r : opt.profile) {
      const uint32_t rows = static_cast<uint32_t>(r);
      session.profile(rows);  // its pipelines made and compiled
      std::map<std::string, std::pair<int, double>> by_kernel;
      double total = 0;
      for (const Session::KernelTime& k : session.profile(rows)) {
        by_kernel[k.kernel].first++;
        by_kernel[k.kernel].second += k.microseconds;
        total += k.microseconds;
      }
      std::printf("\n%s on %s, class %s: a pass of %u rows after %lld cached, %.1f ms\n\n", std::string(m.name).c_str(),
                  device.info().name.c_str(), std::string(c.name).c_str(), rows, static_cast<long long>(cached),
                  total / 1e3);
      std::printf("| kernel | dispatches | us each | share |\n|---|---:|---:|---:|\n");
      for (const auto& [name, v] : by_kernel)
        std::printf("| %s | %d | %.1f | %.1f %% |\n", name.c_str(), v.first, v.second / v.first, 100 * v.second / total);
      std::fflush(stdout);
    }
  }
  return 0;
}

// A vision model's table: one photo-sized image (640 × 480, a pattern)
// made into the tower's input on the host as the checkpoint's processor
// does (resize, crop or tile, normalize, unfold), through the tower
// (patches/s, and the matmuls' GFLOP/s: 2 · rows · the tower's matrix
// values, attention's 4 · rows² · width a layer), then a prompt of
// --length text tokens around the image's marker: its time to the first
// token (the steps and the prompt's pass), beside the pass of a text
// prompt of as many rows; the best of --repeats after a warm-up round. A
// splice's image fills rows of the prompt; a cross-attention decoder's
// (Llama 3.2 Vision) goes into its cross layers' caches first (the image
// pass's column), its marker one row.
int run_vision(const Options& opt) {
  const ModelInfo& m = model_info();
  const ModelInfo& t = *vision_info();
  const plan::VisionLink& link = *m.vision;
  const std::unique_ptr<vk::Context> context = open_device(opt.device);
  vk::Device& device = context->device();
  Session tower(device, t);
  upload_random(tower);
  SessionOptions so;
  so.context = (link.cross ? 1 : link.expanded_rows()) + opt.length + 1;
  Session decoder(device, m, so);
  upload_random(decoder);

  image::Preprocess p;
  p.processor = "CLIPImageProcessor (bench)";
  p.rule = image::SizeRule::ShortestEdge;
  p.edge = link.image_size;
  p.do_center_crop = true;
  p.crop_height = p.crop_width = link.image_size;
  p.mean = {0.48145466, 0.4578275, 0.40821073};
  p.std = {0.26862954, 0.26130258, 0.27577711};
  if (link.variable) {  // Pixtral's: the longer side to the largest, whole patches
    p.processor = "PixtralImageProcessor (bench)";
    p.rule = image::SizeRule::LongestEdge;
    p.patch_height = p.patch_width = link.patch;
    p.do_center_crop = false;
  }
  if (link.tiles > 0) {  // Mllama's: fitted to the best canvas of tiles, bilinear
    p.processor = "MllamaImageProcessor (bench)";
    p.rule = image::SizeRule::Tiles;
    p.height = p.width = link.image_size;
    p.max_tiles = link.tiles;
    p.resample = image::Resample::Bilinear;
    p.convert_alpha_on_white = true;
    p.do_center_crop = false;
  }
  image::Image photo{640, 480, std::vector<uint8_t>(640 * 480 * 3), {}};
  for (size_t i = 0; i < photo.rgb.size(); ++i) photo.rgb[i] = static_cast<uint8_t>((i * 7 + i / 1920 * 3) & 0xFF);

  // The prompt: half the text, the image's marker, the other half.
  std::vector<int32_t> ids = random_tokens(static_cast<size_t>(opt.length), link.marker, 41);
  ids.insert(ids.begin() + static_cast<std::ptrdiff_t>(ids.size() / 2), static_cast<int32_t>(link.marker));
  const text::ImageInput shape = text::image_input(link, p, photo, t.plan.input_row_floats, "the bench image");
  const int64_t rows =
      static_cast<int64_t>(ids.size()) + (link.cross ? 0 : link.expanded_rows(shape.grid) - 1);
  const std::vector<int32_t> text = random_tokens(static_cast<size_t>(rows), link.marker, 43);

  double matrix_values = 0;
  for (const ManifestEntry& e : t.manifest)
    if (read_as_matrix(e.role, e.bias, e.rank) && e.rank >= 2) matrix_values += static_cast<double>(e.elements());
  const int64_t tower_rows = static_cast<int64_t>(shape.rows.size()) / t.plan.input_row_floats;
  const double flops = 2.0 * static_cast<double>(tower_rows) * matrix_values +
                       4.0 * static_cast<double>(tower_rows * tower_rows) * static_cast<double>(t.hidden * t.layers);

  const int repeats = opt.quick ? 1 : opt.repeats;
  double best_pre = 1e30, best_encode = 1e30, best_images = 1e30, best_prompt = 1e30, best_text = 1e30,
         best_total = 1e30;
  for (int r = -1; r < repeats; ++r) {
    const Clock::time_point start = Clock::now();
    const text::ImageInput input = text::image_input(link, p, photo, t.plan.input_row_floats, "the bench image");
    const double pre = seconds_since(start);
    const Clock::time_point encode_start = Clock::now();
    const text::ImageFeatures features = text::image_features(tower, link, input);
    const double encode = seconds_since(encode_start);
    decoder.reset();
    double images = 0;
    Clock::time_point prompt_start = Clock::now();
    if (link.cross) {
      text::cross_images(decoder, link, 0, ids, std::span(&features, 1));
      images = seconds_since(prompt_start);
      prompt_start = Clock::now();
      (void)decoder.prefill(0, ids);
    } else {
      const text::SplicedPrompt prompt = text::splice_images(link, ids, std::span(&features, 1), m.hidden);
      prompt_start = Clock::now();
      (void)decoder.prefill(0, prompt.ids, prompt.at, prompt.features);
    }
    const double pass = seconds_since(prompt_start), total = seconds_since(start);
    decoder.reset();
    const Clock::time_point text_start = Clock::now();
    (void)decoder.prefill(0, text);
    const double text_pass = seconds_since(text_start);
    if (r < 0) continue;
    best_pre = std::min(best_pre, pre);
    best_encode = std::min(best_encode, encode);
    best_images = std::min(best_images, images);
    best_prompt = std::min(best_prompt, pass);
    best_text = std::min(best_text, text_pass);
    best_total = std::min(best_total, total);
  }
  std::printf("device: %s (driver %s), class %s; one %lld × %lld image (%lld patch rows), %lld text tokens; best of %d "
              "after a warm-up\n",
              device.info().name.c_str(), device.info().driver_name.c_str(),
              std::string(decoder.device_class().name).c_str(), static_cast<long long>(photo.width),
              static_cast<long long>(photo.height), static_cast<long long>(tower_rows),
              static_cast<long long>(opt.length), repeats);
  std::printf("\n| model | tower dtype | preprocess ms | encode ms | patches/s | tower GFLOP/s | image pass ms | prompt rows "
              "| prompt pass ms | text pass ms (as many rows) | TTFT ms |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  char image_pass[32] = "-";
  if (link.cross) std::snprintf(image_pass, sizeof image_pass, "%.1f", best_images * 1e3);
  std::printf("| %s | %s | %.1f | %.1f | %.0f | %.1f | %s | %lld | %.1f | %.1f | %.1f |\n", std::string(m.name).c_str(),
              std::string(dtype_name(matrix_dtype(t))).c_str(), best_pre * 1e3, best_encode * 1e3,
              static_cast<double>(tower_rows) / best_encode, flops / best_encode / 1e9, image_pass,
              static_cast<long long>(rows), best_prompt * 1e3, best_text * 1e3, best_total * 1e3);
  if (opt.quick) std::printf("--quick: single timings, not a measurement\n");
  return 0;
}

// A grammar's mask beside a decode step (issue 47): the model's decode step
// at context 128, then the mask of a JSON schema's constraint over a
// synthetic byte-level vocabulary of each size, timed at every step of
// documents sampled from random logits; the ratio of the two, measured in
// this run.
int run_grammar_mask(const Options& opt) {
  const ModelInfo& m = model_info();
  const std::unique_ptr<vk::Context> context = open_device(opt.device);
  vk::Device& device = context->device();
  const int64_t steps = opt.steps ? opt.steps : opt.quick ? 4 : 32;
  SessionOptions so;
  so.context = std::min<int64_t>(m.max_context, 128 + steps + 1);
  Session session(device, m, so);
  upload_random(session);
  session.warm_up(128);
  const DecodeSpeed decode = decode_tps(session, 128, steps);
  const double step_ms = 1e3 / decode.median_tps;
  // A person: nested objects, an array of objects, enums, bounded integers,
  // strings, a number, a boolean (tests/serve/structured.cjs's shape).
  const std::string schema = R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 24}, "age": {"type": "integer", "minimum": 0, "maximum": 120},
      "role": {"enum": ["admin", "editor", "viewer"]}, "active": {"type": "boolean"}, "score": {"type": "number"},
      "address": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 16},
                  "zip": {"type": "integer", "minimum": 10000, "maximum": 99999}},
                  "required": ["city", "zip"], "additionalProperties": false},
      "skills": {"type": "array", "maxItems": 4, "items": {"type": "object",
                 "properties": {"skill": {"type": "string", "maxLength": 12}, "level": {"type": "integer", "minimum": 1, "maximum": 5}},
                 "required": ["skill", "level"], "additionalProperties": false}}},
    "required": ["name", "age", "role", "active", "score", "address", "skills"], "additionalProperties": false})";
  std::printf("device: %s (driver %s), class %s; %s decode at context 128: %.2f ms a step (median of %lld)\n",
              device.info().name.c_str(), device.info().driver_name.c_str(),
              std::string(session.device_class().name).c_str(), std::string(m.name).c_str(), step_ms,
              static_cast<long long>(steps));
  std::printf("\n| vocabulary | trie build ms | masks timed | documents | mask µs mean | median | p90 | max "
              "| mean / decode step |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int64_t size : opt.mask_vocabs) {
    const bench::MaskCost c = bench::measure_mask(bench::synthetic_vocabulary(static_cast<int32_t>(size)), schema,
                                                  opt.quick ? 2 : 8, opt.quick ? 60 : 400);
    std::printf("| %d | %.0f | %lld | %lld | %.0f | %.0f | %.0f | %.0f | %.1f %% |\n", c.vocab, c.build_ms,
                static_cast<long long>(c.steps), static_cast<long long>(c.documents), c.mean_us, c.median_us, c.p90_us,
                c.max_us, 100 * c.mean_us / 1e3 / step_ms);
    std::fflush(stdout);
  }
  if (opt.quick) std::printf("--quick: few documents and steps, not a measurement\n");
  return 0;
}

}  // namespace

// Speculative decoding's cost: a verification pass of k rows (the token and
// k − 1 proposals; Session::verify) at --profile-depth cached tokens, against
// a decode step, each the median of several, cut back after each.
int run_verify(const Options& opt) {
  const ModelInfo& m = model_info();
  const std::unique_ptr<vk::Context> context = open_device(opt.device);
  vk::Device& device = context->device();
  const int64_t depth = opt.profile_depth, repeats = opt.quick ? 3 : 15;
  SessionOptions so;
  so.context = std::min<int64_t>(m.max_context, depth + opt.verify + 1);
  so.verify_rows = opt.verify;
  so.max_chunk = std::max<int64_t>(so.max_chunk, opt.verify);
  Session session(device, m, so);
  upload_random(session);
  session.warm_up(std::min<int64_t>(depth, so.max_chunk));
  std::vector<int32_t> prompt(static_cast<size_t>(depth));
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 7919 + 3) % static_cast<size_t>(m.vocab));
  if (depth > 0) session.prefill(prompt);
  const auto median_ms = [&](const std::function<void()>& pass) {
    std::vector<double> ms;
    for (int64_t r = -1; r < repeats; ++r) {  // one untimed: a first dispatch at a new size
      const auto start = std::chrono::steady_clock::now();
      pass();
      const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      session.truncate(0, depth);
      if (r >= 0) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  const double step = median_ms([&] { session.decode(5); });
  std::printf("device: %s (driver %s), class %s; %s at %lld cached tokens: a decode step %.2f ms (median of %lld)\n",
              device.info().name.c_str(), device.info().driver_name.c_str(),
              std::string(session.device_class().name).c_str(), std::string(m.name).c_str(),
              static_cast<long long>(depth), step, static_cast<long long>(repeats));
  std::printf("\n| rows verified | ms a pass | vs a decode step | ms a row |\n|---:|---:|---:|---:|\n");
  for (int64_t k = 1; k <= opt.verify; ++k) {
    const std::vector<int32_t> rows(static_cast<size_t>(k), 5);
    const double pass = median_ms([&] { session.verify(0, rows); });
    std::printf("| %lld | %.2f | %.2f× | %.2f |\n", static_cast<long long>(k), pass, pass / step,
                pass / static_cast<double>(k));
    std::fflush(stdout);
  }
  if (opt.quick) std::printf("--quick: few repeats, not a measurement\n");
  return 0;
}

int main(int argc, char** argv) {
  CLI::App app{"Prefill and decode tokens/s of " + std::string(model_info().name) +
               " with the memory-bandwidth roofline (random weights)"};
  Options opt;
  app.add_option("--device", opt.device,
                 "Vulkan device: index or part of a name (default: LATHE_DEVICE, else the best)");
  app.add_flag("--quick", opt.quick, "A short smoke run: small STREAM buffers, single timings, few decode steps");
  app.add_option("--steps", opt.steps, "Decode steps timed at each context (default: 32 @128, 16 @2048)")
      ->check(CLI::PositiveNumber);
  app.add_option("--streams", opt.streams,
                 "Instead of the table: aggregate tok/s of batched decode steps of each of these many sequences")
      ->delimiter(',')
      ->check(CLI::Range(1, 128));
  app.add_option("--depths", opt.depths,
                 "Instead of the table: llama-bench's tests (pp and tg tokens after each of these many cached tokens) "
                 "with the device's copy bandwidth (bench/gpu/run)")
      ->delimiter(',')
      ->check(CLI::NonNegativeNumber);
  app.add_option("--pp", opt.pp, "With --depths: prompt tokens of the prefill test (default 512)")->check(CLI::Range(1, 4096));
  app.add_option("--tg", opt.tg, "With --depths: decode steps of the generation test (default 128)")->check(CLI::Range(1, 4096));
  app.add_option("--repeats", opt.repeats, "With --depths: runs of each test, the best counts (default 3)")->check(CLI::Range(1, 100));
  app.add_option("--decode-tiles", opt.decode_tiles,
                 "With --depths: a sweep of the decode test over these matmul tiles, rows,tokens,texels[,subgroups]/… "
                 "(tokens 1), instead of the device class's");
  app.add_option("--prefill-tiles", opt.prefill_tiles,
                 "With --depths: a sweep of the prefill test over these matmul tiles (tokens 8, or tiled: 32 or 64)");
  app.add_option("--batches", opt.batches, "An encoder's: inputs a pass, one table row each (default 1,32)")
      ->delimiter(',')
      ->check(CLI::Range(1, 256));
  app.add_option("--length", opt.length,
                 "An encoder's: tokens an input; an encoder-decoder's: of the source; a vision model's: text tokens "
                 "around the image (default 128)")->check(CLI::Range(1, 1 << 20));
  app.add_option("--profile", opt.profile,
                 "Instead of the table: device time per kernel of a pass of this many rows (a list: each in turn; 1: "
                 "a decode step) after --profile-depth cached tokens, under each device class the device meets")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  app.add_option("--profile-depth", opt.profile_depth, "With --profile: tokens cached before each pass (default 128)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  app.add_option("--profile-classes", opt.profile_classes,
                 "With --profile: these device classes alone, in the plan's order, those not in the model's plan "
                 "skipped (default every one the device meets)")
      ->delimiter(',');
  app.add_option("--attention-splits", opt.attention_splits,
                 "With --depths or --profile: attention's key ranges instead of the device class's (a measurement)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--mla-form", opt.mla_form,
                 "With --depths or --profile: latent attention's form in every prompt chunk, absorbed or expanded "
                 "(default: the device class's, expanded from the plan's fewest rows where the class has it)")
      ->check(CLI::IsMember({"absorbed", "expanded"}));
  app.add_option("--grammar-mask", opt.mask_vocabs,
                 "Instead of the table: a JSON schema's mask over synthetic vocabularies of these sizes, beside a "
                 "decode step (e.g. 32000,150000)")
      ->delimiter(',')
      ->check(CLI::Range(300, 1 << 20));
  app.add_option("--verify", opt.verify,
                 "Instead of the table: a verification pass (speculative decoding) of 1 … this many rows at "
                 "--profile-depth cached tokens, against a decode step (e.g. 9: a token and 8 proposals)")
      ->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);
  try {
    if (opt.verify > 0) return run_verify(opt);
    if (!opt.mask_vocabs.empty()) return run_grammar_mask(opt);
    if (!opt.profile.empty()) return run_profile(opt);
    if (model_info().encoder) return run_encoder(opt);
    if (model_info().encoder_decoder) return run_encoder_decoder(opt);
    if (vision_info() != nullptr && opt.depths.empty() && opt.streams.empty()) return run_vision(opt);
    if (!opt.depths.empty()) return run_depths(opt);
    return opt.streams.empty() ? run(opt) : run_streams(opt);
  } catch (const Error& e) {
    std::cerr << "lathe_bench: " << to_string(e.kind()) << ": " << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "lathe_bench: " << e.what() << "\n";
  }
  return 1;
}
