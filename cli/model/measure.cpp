// Speed: profile (device time per kernel of one pass) and bench (prefill
// and decode speed, the best of several rounds).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cli/model/commands.hpp"
#include "cli/model/common.hpp"
#include "runtime/error.hpp"
#include "runtime/generate/generate.hpp"
#include "runtime/model/model_info.hpp"
#include "runtime/model/session.hpp"
#include "runtime/vk/device.hpp"

namespace lathe::cli {

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

int cmd_bench_speculative(const TextOptions& o, int64_t prompt, int64_t steps, int repeat) {
  using lathe::text::GenerateStats;
  const lathe::ModelInfo& m = lathe::model_info();
  const lathe::text::Tokenizer tokenizer = load_tokenizer(o.tokenizer, o.weights, "bench with speculation");
  const auto checkpoint = checked(o.weights);
  lathe::vk::Context vk(device_options(o.device));
  lathe::SessionOptions options;
  options.context = std::min<int64_t>(m.max_context, prompt + steps + 1);
  options.max_chunk = std::max<int64_t>(1, std::min<int64_t>(prompt, 512));
  options.verify_rows = std::min<int64_t>(o.generate.draft_max + 1, options.max_chunk);
  lathe::Session session(vk.devices(), m, split_over(options, vk));
  load_weights(session, checkpoint.get(), !o.no_check);
  std::optional<DraftSession> draft;
  if (const lathe::ModelInfo* d = lathe::draft_info())
    draft.emplace(*d, o.draft_weights, o.draft_min_p, !o.no_check, tokenizer, vk.device(), session.context(), 1);
  // A prompt of one motif of 16 tokens over and over: text that repeats, as
  // lookup needs (a draft proposes whatever it proposes).
  std::vector<int32_t> tokens(static_cast<size_t>(prompt));
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<int32_t>((i % 16 * 7919 + 1) % static_cast<size_t>(m.vocab));
  lathe::text::GenerateOptions plain;
  plain.sampling.temperature = 0;
  plain.max_new_tokens = static_cast<int32_t>(steps);
  plain.stop_at_eos = false;
  lathe::text::GenerateOptions speculated = plain;
  speculated.lookup = o.generate.lookup;
  speculated.draft_max = static_cast<int32_t>(options.verify_rows - 1);
  speculated.draft = draft ? &draft->draft : nullptr;
  const auto decode_tps = [](const GenerateStats& s) {
    return static_cast<double>(s.new_tokens - 1) / std::max(s.decode_seconds, 1e-9);
  };
  double best_plain = 0, best_speculated = 0;
  GenerateStats last;
  for (int r = 0; r < repeat + 1; ++r) {  // the first round warms up (pipelines, caches)
    lathe::text::Sampler greedy(plain.sampling);
    session.reset();
    const GenerateStats a = lathe::text::generate(session, tokenizer, greedy, tokens, plain, [](std::string_view) {});
    session.reset();
    last = lathe::text::generate(session, tokenizer, greedy, tokens, speculated, [](std::string_view) {});
    if (a.tokens != last.tokens)
      throw Error(ErrorKind::BadFile, "speculation changed the greedy tokens: a verified row's bits are not a decode "
                                      "step's (a bug: please report it)");
    if (r == 0) continue;
    best_plain = std::max(best_plain, decode_tps(a));
    best_speculated = std::max(best_speculated, decode_tps(last));
  }
  const std::string how = draft ? "a draft (" + std::string(draft->session.model().name) + ")"
                                : "--lookup " + std::to_string(o.generate.lookup);
  std::printf("%s on %s (class %s): decode %lld tokens: plain %.1f tok/s, with %s %.1f tok/s (%.2fx; best of %d); "
              "%zu of %zu proposals kept, %.2f tokens a model pass\n",
              std::string(m.name).c_str(), vk.device().info().name.c_str(), std::string(session.device_class().name).c_str(),
              static_cast<long long>(steps), best_plain, how.c_str(), best_speculated, best_speculated / best_plain,
              repeat, last.draft_accepted, last.draft_tokens,
              static_cast<double>(last.new_tokens - 1) / static_cast<double>(std::max<size_t>(last.target_passes, 1)));
  return 0;
}

}  // namespace lathe::cli
