// A build with a draft (lathe_add_model's DRAFT): generate() with the
// draft proposing, against plain decoding, on the device with validation.
// The draft of tiny_llama_gqa_drafted is a smaller random decoder (most
// proposals refused, each refusal cut back in both models); the draft of
// tiny_llama_gqa_self_drafted is the model itself with the model's weights
// (every greedy proposal kept). Greedy tokens must be plain decoding's.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string_view>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/generate/generate.hpp"
#include "runtime/generate/speculate.hpp"
#include "runtime/model/model_info.hpp"
#include "tests/harness/test_model.hpp"
#include "tests/harness/vulkan_harness.hpp"

using namespace lathe;
using namespace lathe::test;

namespace {

// The draft's weights: the model's test weights where the draft is the
// model itself (each value off by up to `jitter` of itself: a draft that
// agrees with the model often, not always), else small random values (norm
// scales 1).
void upload_draft(Session& draft, bool self, float jitter = 0) {
  if (self && jitter == 0) return upload_all(draft);
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> value(-0.1f, 0.1f), off(-jitter, jitter);
  for (size_t i = 0; i < draft.model().manifest.size(); ++i) {
    const ManifestEntry& e = draft.model().manifest[i];
    std::vector<float> values(static_cast<size_t>(e.elements()));
    const bool scale = std::string_view(e.name).find("norm") != std::string_view::npos;
    if (self) {
      const std::span<const float> model = entry_values(e);
      for (size_t k = 0; k < values.size(); ++k) values[k] = model[k] * (1 + off(rng));
    } else {
      for (float& v : values) v = scale ? 1.0f : value(rng);
    }
    draft.upload(i, DType::F32, std::as_bytes(std::span(values)));
  }
}

}  // namespace

TEST_CASE_FIXTURE(test::VulkanTest, "a draft's proposals verified and cut back give the greedy tokens of plain decoding") {
  const ModelInfo* d = draft_info();
  REQUIRE(d != nullptr);
  const bool self = d->manifest.size() == model_info().manifest.size() && d->hidden == model_info().hidden &&
                    d->layers == model_info().layers;
  const text::Tokenizer tokenizer =
      text::Tokenizer::from_hf(LATHE_SOURCE_DIR "/tests/data/tokenizers/llama2-special.json");
  const std::vector<int32_t> prompt = random_tokens(12, 71);
  text::GenerateOptions plain;
  plain.sampling.temperature = 0;
  plain.max_new_tokens = 40;
  plain.stop_at_eos = false;
  SessionOptions options;
  options.verify_rows = 5;
  Session session(device, model_info(), options);
  upload_all(session);
  Session draft_session(device, *d, {});
  upload_draft(draft_session, self);
  text::SessionDraft model(draft_session);
  text::Draft draft(model, 1, 0.0f);
  text::GenerateOptions drafted = plain;
  drafted.draft = &draft;
  drafted.draft_max = 4;
  const auto quiet = [](std::string_view) {};
  text::Sampler greedy(plain.sampling);
  const text::GenerateStats with = text::generate(session, tokenizer, greedy, prompt, drafted, quiet);
  session.reset();
  const text::GenerateStats without = text::generate(session, tokenizer, greedy, prompt, plain, quiet);
  MESSAGE(with.draft_accepted << " of " << with.draft_tokens << " proposals kept, " << with.target_passes
                              << " passes for " << with.new_tokens << " tokens");
  CHECK(with.tokens == without.tokens);
  CHECK(with.draft_tokens > 0);
  if (self) CHECK(with.draft_accepted == with.draft_tokens);  // the model's own picks
  else CHECK(with.draft_accepted < with.draft_tokens);        // refusals, cut back

  // Again on the same sessions: the draft's cache is cut back to what the
  // new text shares with it.
  session.reset();
  const text::GenerateStats again = text::generate(session, tokenizer, greedy, prompt, drafted, quiet);
  CHECK(again.tokens == without.tokens);
}

TEST_CASE_FIXTURE(test::VulkanTest, "sampled with a draft, the tokens follow the model's distribution") {
  // The speculative rule on the device, end to end: tokens sampled at
  // temperature 1 with top-k 6, the second judged against the draft's
  // proposal (drawn from the draft's own distribution q), over many seeds;
  // the first two's joint histogram against the model's exact
  // p(t1) · p(t2 | t1).
  const ModelInfo* d = draft_info();
  REQUIRE(d != nullptr);
  const bool self = d->layers == model_info().layers && d->hidden == model_info().hidden;
  const text::Tokenizer tokenizer =
      text::Tokenizer::from_hf(LATHE_SOURCE_DIR "/tests/data/tokenizers/llama2-special.json");
  const std::vector<int32_t> prompt = random_tokens(10, 81);
  text::GenerateOptions options;
  options.sampling.temperature = 1;
  options.sampling.top_k = 6;
  options.max_new_tokens = 3;  // after the first, room for one proposal (and the model's own token after it)
  options.stop_at_eos = false;
  SessionOptions so;
  so.verify_rows = 3;
  Session session(device, model_info(), so);
  upload_all(session);
  // The exact distribution: p(t1) after the prompt, p(t2 | t1) after each t1 it may take.
  const auto chain = [&](const std::vector<float>& logits) {
    std::vector<float> p;
    text::Sampler(options.sampling).sample(logits, p);
    return p;
  };
  const std::vector<float> first = chain(session.prefill(prompt));
  std::map<std::pair<int32_t, int32_t>, double> expected;
  for (int32_t t1 = 0; t1 < static_cast<int32_t>(first.size()); ++t1) {
    if (first[static_cast<size_t>(t1)] == 0) continue;
    session.reset();
    session.prefill(prompt);
    const std::vector<float> second = chain(session.decode(t1));
    for (int32_t t2 = 0; t2 < static_cast<int32_t>(second.size()); ++t2)
      if (second[static_cast<size_t>(t2)] > 0)
        expected[{t1, t2}] = static_cast<double>(first[static_cast<size_t>(t1)]) * second[static_cast<size_t>(t2)];
  }
  // The model itself, its weights a little off: proposals kept and refused
  // alike (a stranger's are nearly all refused).
  Session draft_session(device, *d, {});
  upload_draft(draft_session, self, self ? 0.5f : 0.0f);
  text::SessionDraft model(draft_session);
  text::Draft draft(model, 1, 0.0f);
  options.draft = &draft;
  options.draft_max = 2;
  constexpr int kRuns = 2000;
  std::map<std::pair<int32_t, int32_t>, int> seen;
  size_t proposed = 0, kept = 0;
  for (int i = 0; i < kRuns; ++i) {
    options.sampling.seed = static_cast<uint64_t>(i) * 7919 + 1;
    text::Sampler sampler(options.sampling);
    session.reset();
    const text::GenerateStats s = text::generate(session, tokenizer, sampler, prompt, options, [](std::string_view) {});
    REQUIRE(s.tokens.size() == 3);
    ++seen[{s.tokens[0], s.tokens[1]}];
    proposed += s.draft_tokens;
    kept += s.draft_accepted;
  }
  // Pearson's chi-square, the cells expected fewer than 5 times pooled.
  double chi2 = 0, pooled_expected = 0;
  int pooled_seen = 0, cells = 0;
  for (const auto& [pair, p] : expected) {
    const double e = p * kRuns;
    const int o = seen.count(pair) ? seen.at(pair) : 0;
    if (e < 5) {
      pooled_expected += e;
      pooled_seen += o;
      continue;
    }
    chi2 += (o - e) * (o - e) / e;
    ++cells;
  }
  if (pooled_expected > 0) {
    chi2 += (pooled_seen - pooled_expected) * (pooled_seen - pooled_expected) / pooled_expected;
    ++cells;
  }
  for (const auto& [pair, o] : seen) CHECK_MESSAGE(expected.count(pair), "a pair the model cannot give");
  // The critical value of chi-square at p = 0.001 for `cells − 1` degrees
  // of freedom, by the Wilson–Hilferty approximation (z = 3.09).
  const double k = cells - 1, z = 3.09;
  const double critical = k * std::pow(1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k)), 3);
  MESSAGE("chi-square " << chi2 << " over " << cells << " cells (critical " << critical << "); " << kept << " of "
                        << proposed << " proposals kept");
  CHECK(chi2 < critical);
  CHECK(proposed > 0);
  if (self) CHECK((kept > proposed / 10 && kept < proposed * 9 / 10));  // both ways of the rule taken
}
