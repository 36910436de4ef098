// Token sampling (runtime/generate/sampler.hpp): greedy ties, seeds, the
// empirical distribution of temperature sampling against softmax(l / T),
// top-k / top-p / min-p keeping exactly the sets they should (logits built
// from known probabilities), the order of the chain, the repetition penalty
// and its window, option validation messages, and the StopChecker holding
// back text that may start a stop string.
#include "runtime/generate/sampler.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "runtime/error.hpp"

using namespace lathe;
using namespace lathe::text;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Logits whose softmax is `probs` (which need not sum to 1).
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  const double max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p;
  for (float l : logits) p.push_back(std::exp((l - max) / temperature));
  const double total = std::accumulate(p.begin(), p.end(), 0.0);
  for (double& v : p) v /= total;
  return p;
}

std::vector<int> histogram(Sampler& sampler, const std::vector<float>& logits, int draws) {
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) {
    const int32_t t = sampler.sample(logits);
    REQUIRE(t >= 0);
    REQUIRE(static_cast<size_t>(t) < logits.size());
    ++counts[static_cast<size_t>(t)];
  }
  return counts;
}

std::set<int32_t> drawn(const std::vector<int>& counts) {
  std::set<int32_t> ids;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > 0) ids.insert(static_cast<int32_t>(i));
  }
  return ids;
}

// Pearson's chi-square of observed counts against expected probabilities
// (cells with p = 0 must be empty).
double chi_square(const std::vector<int>& counts, const std::vector<double>& p, int draws) {
  double chi2 = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) {
      CHECK(counts[i] == 0);
      continue;
    }
    const double expected = p[i] * draws;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return chi2;
}

double max_abs_diff(const std::vector<int>& counts, const std::vector<double>& p, int draws) {
  double worst = 0;
  for (size_t i = 0; i < p.size(); ++i) worst = std::max(worst, std::abs(counts[i] / double(draws) - p[i]));
  return worst;
}

template <class F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  FAIL("no lathe::Error thrown");
  return Error(ErrorKind::Io, "unreachable");
}

SamplingOptions with_temperature(float t, uint64_t seed = 1) {
  SamplingOptions o;
  o.temperature = t;
  o.seed = seed;
  return o;
}

std::vector<float> random_logits(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> logits(n);
  for (float& l : logits) l = static_cast<float>(static_cast<double>(rng() >> 11) * 0x1.0p-53 * 8.0 - 4.0);
  return logits;
}

}  // namespace

TEST_SUITE("sampler") {

  TEST_CASE("sampler: greedy is the argmax, ties to the lowest id") {
    Sampler greedy(SamplingOptions{});
    CHECK(greedy.sample(std::vector<float>{1, 3, 2, 3}) == 1);
    CHECK(greedy.sample(std::vector<float>{-kInf, -5, -5, -kInf}) == 1);
    CHECK(greedy.sample(std::vector<float>{0.5f}) == 0);
    CHECK(greedy.sample(std::vector<float>{1, kInf, 2, kInf}) == 1);
    // Top-k, top-p and min-p never drop the argmax, so greedy ignores them.
    SamplingOptions o;
    o.top_k = 2;
    o.top_p = 0.1f;
    o.min_p = 0.5f;
    Sampler filtered(o);
    CHECK(filtered.sample(std::vector<float>{1, 3, 2, 3}) == 1);
    const std::vector<float> logits = random_logits(1000, 7);
    const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
    CHECK(greedy.sample(logits) == best);
  }

  TEST_CASE("sampler: logit_bias shifts a token's logit before the choice, and names an id outside the logits") {
    SamplingOptions o;
    o.logit_bias = {{1, -100.0f}, {2, 0.5f}};
    Sampler biased(o);
    CHECK(biased.sample(std::vector<float>{1, 3, 2.6f, 0}) == 2);  // 3 − 100 < 2.6 + 0.5
    o.logit_bias = {{4, 1.0f}};
    Sampler outside(o);
    CHECK_THROWS_WITH(outside.sample(std::vector<float>{1, 3, 2, 0}), doctest::Contains("logit_bias names token 4"));
  }

  TEST_CASE("sampler: the same seed gives the same tokens, another seed others") {
    const std::vector<float> logits = random_logits(500, 3);
    auto run = [&](Sampler& s) {
      std::vector<int32_t> tokens;
      for (int i = 0; i < 64; ++i) tokens.push_back(s.sample(logits));
      return tokens;
    };
    Sampler a(with_temperature(1, 42)), b(with_temperature(1, 42)), c(with_temperature(1, 43));
    const auto first = run(a);
    CHECK(first == run(b));
    CHECK(first != run(c));
    CHECK(std::set<int32_t>(first.begin(), first.end()).size() > 10);  // it does sample
    a.reset();
    CHECK(run(a) == first);  // reset restarts the RNG from the seed

    // The draw is pinned to mt19937_64's bits, not to a standard library's
    // distribution: with two equal tokens, the first output of the engine
    // seeded with 5 decides.
    std::mt19937_64 engine(5);
    const double u = static_cast<double>(engine() >> 11) * 0x1.0p-53;
    Sampler coin(with_temperature(1, 5));
    CHECK(coin.sample(std::vector<float>{0, 0}) == (u < 0.5 ? 0 : 1));
  }

  TEST_CASE("sampler: temperature sampling follows softmax(l / T)") {
    const std::vector<float> logits{1.0f, 0.5f, -0.3f, 2.0f, 0.0f, -1.0f, 1.5f, -2.0f};
    constexpr int draws = 20000;
    // Chi-square critical value for 7 degrees of freedom at p = 0.001.
    constexpr double critical = 24.32;
    for (float t : {0.7f, 1.0f, 2.5f}) {
      CAPTURE(t);
      Sampler sampler(with_temperature(t, 1234));
      const std::vector<int> counts = histogram(sampler, logits, draws);
      const std::vector<double> p = softmax(logits, t);
      CHECK(chi_square(counts, p, draws) < critical);
      CHECK(max_abs_diff(counts, p, draws) < 0.015);
    }
  }

  TEST_CASE("sampler: top-k = 1 is greedy") {
    SamplingOptions o = with_temperature(1.3f, 9);
    o.top_k = 1;
    Sampler top1(o);
    Sampler greedy(SamplingOptions{});
    for (uint64_t seed = 0; seed < 50; ++seed) {
      const std::vector<float> logits = random_logits(300, seed);
      CHECK(top1.sample(logits) == greedy.sample(logits));
    }
    CHECK(top1.sample(std::vector<float>{2, 5, 5, 1}) == 1);  // ties: the lower id
  }

  TEST_CASE("sampler: top-k draws only among the k best, by softmax over them") {
    const std::vector<float> logits = random_logits(1000, 11);
    constexpr int32_t k = 10;
    std::vector<int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
    const std::set<int32_t> best(order.begin(), order.begin() + k);

    SamplingOptions o = with_temperature(1.5f, 5);
    o.top_k = k;
    Sampler sampler(o);
    constexpr int draws = 20000;
    const std::vector<int> counts = histogram(sampler, logits, draws);
    CHECK(drawn(counts) == best);

    std::vector<float> masked(logits.size(), -kInf);
    for (int32_t id : best) masked[size_t(id)] = logits[size_t(id)];
    const std::vector<double> p = softmax(masked, 1.5);
    CHECK(chi_square(counts, p, draws) < 27.88);  // 9 degrees of freedom, p = 0.001
    CHECK(max_abs_diff(counts, p, draws) < 0.015);

    // k at or above the vocabulary is no limit.
    o.top_k = 8;
    Sampler wide(o);
    CHECK(drawn(histogram(wide, {0, 0, 0}, 300)).size() == 3);
  }

  TEST_CASE("sampler: top-p keeps exactly the nucleus") {
    // Ids shuffled so that the nucleus is not a prefix of the vocabulary.
    //                                  0     1     2     3     4     5
    const std::vector<float> logits = logits_of({0.06, 0.25, 0.04, 0.4, 0.15, 0.1});
    constexpr int draws = 20000;
    auto run = [&](float top_p) {
      SamplingOptions o = with_temperature(1, 77);
      o.top_p = top_p;
      Sampler sampler(o);
      return histogram(sampler, logits, draws);
    };
    // 0.4 < 0.5 ≤ 0.65: the two most probable.
    CHECK(drawn(run(0.5f)) == std::set<int32_t>{3, 1});
    // 0.65 < 0.75 ≤ 0.8: three, drawn by their renormalized probabilities.
    const std::vector<int> counts = run(0.75f);
    CHECK(drawn(counts) == std::set<int32_t>{3, 1, 4});
    const std::vector<double> p{0, 0.25 / 0.8, 0, 0.4 / 0.8, 0.15 / 0.8, 0};
    CHECK(max_abs_diff(counts, p, draws) < 0.015);
    CHECK(chi_square(counts, p, draws) < 13.82);  // 2 degrees of freedom, p = 0.001
    // Below the first token's probability: that token alone.
    CHECK(drawn(run(0.3f)) == std::set<int32_t>{3});
    // 0.9 < 0.93 ≤ 0.96: all but the least probable.
    CHECK(drawn(run(0.93f)) == std::set<int32_t>{0, 1, 3, 4, 5});
    CHECK(drawn(run(1.0f)).size() == 6);
  }

  TEST_CASE("sampler: top-p on a large vocabulary with a small nucleus") {
    // 200k tokens: ten share 90% of the mass, the rest share 10%.
    std::vector<double> probs(200000, 0.1 / (200000 - 10));
    for (size_t i = 0; i < 10; ++i) probs[i * 19997] = 0.09;
    const std::vector<float> logits = logits_of(probs);
    SamplingOptions o = with_temperature(1, 3);
    o.top_p = 0.85f;
    Sampler sampler(o);
    std::set<int32_t> seen;
    for (int i = 0; i < 300; ++i) seen.insert(sampler.sample(logits));
    std::set<int32_t> nucleus;
    for (int32_t i = 0; i < 10; ++i) nucleus.insert(i * 19997);
    CHECK(seen == nucleus);
  }

  TEST_CASE("sampler: top-k, top-p and min-p on 20k tokens agree with a full sort, draw for draw") {
    // The sampler sorts only what it must (a partial sort for top-k, a
    // histogram of the mass and a partial sort for top-p); this reference
    // sorts everything and draws with the same u, the first output of
    // mt19937_64(seed). Same arithmetic: float probabilities, double sums in
    // the same order (the logits' order after top-k, else the ids').
    const std::vector<float> logits = random_logits(20000, 21);
    using Entry = std::pair<float, int32_t>;  // logit, then probability; id
    auto descending = [](const Entry& a, const Entry& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    auto reference = [&](const SamplingOptions& o) {
      std::vector<Entry> e;
      for (size_t i = 0; i < logits.size(); ++i) e.emplace_back(logits[i], static_cast<int32_t>(i));
      if (o.top_k > 0) {
        std::sort(e.begin(), e.end(), descending);
        e.resize(static_cast<size_t>(o.top_k));
      }
      float max = -kInf;
      for (const Entry& x : e) max = std::max(max, x.first);
      double total = 0;
      for (Entry& x : e) {
        x.first = std::exp((x.first - max) / o.temperature);
        total += x.first;
      }
      if (o.top_k == 0) std::sort(e.begin(), e.end(), descending);
      std::vector<Entry> kept;
      double cumulative = 0, kept_total = 0;
      for (const auto& [q, id] : e) {
        if (q >= o.min_p) {
          kept.emplace_back(q, id);
          kept_total += q;
        }
        cumulative += q;
        if (cumulative >= static_cast<double>(o.top_p) * total) break;
      }
      std::mt19937_64 engine(o.seed);
      const double target = static_cast<double>(engine() >> 11) * 0x1.0p-53 * kept_total;
      double walked = 0;
      for (const auto& [q, id] : kept) {
        walked += q;
        if (walked > target) return id;
      }
      return kept.back().second;
    };
    for (int32_t top_k : {0, 100, 5000}) {  // off, the partial_sort and the nth_element path
      for (float t : {0.5f, 1.0f}) {
        for (float top_p : {0.3f, 0.9f, 0.99f}) {
          for (float min_p : {0.0f, 0.001f}) {
            CAPTURE(top_k);
            CAPTURE(t);
            CAPTURE(top_p);
            CAPTURE(min_p);
            for (uint64_t seed = 0; seed < 8; ++seed) {
              SamplingOptions o = with_temperature(t, seed);
              o.top_k = top_k;
              o.top_p = top_p;
              o.min_p = min_p;
              Sampler sampler(o);
              REQUIRE(sampler.sample(logits) == reference(o));
            }
          }
        }
      }
    }
  }

  TEST_CASE("sampler: min-p drops tokens below min_p · p_max") {
    //                                  0     1     2     3     4     5
    const std::vector<float> logits = logits_of({0.05, 0.5, 0.09, 0.2, 0.06, 0.1});
    SamplingOptions o = with_temperature(1, 8);
    o.min_p = 0.15f;  // threshold 0.075: keeps 0.5, 0.2, 0.1, 0.09
    Sampler sampler(o);
    constexpr int draws = 20000;
    const std::vector<int> counts = histogram(sampler, logits, draws);
    CHECK(drawn(counts) == std::set<int32_t>{1, 2, 3, 5});
    const std::vector<double> p{0, 0.5 / 0.89, 0.09 / 0.89, 0.2 / 0.89, 0, 0.1 / 0.89};
    CHECK(max_abs_diff(counts, p, draws) < 0.015);

    o.min_p = 0.5f;  // threshold 0.25: the top token alone
    Sampler strict(o);
    CHECK(drawn(histogram(strict, logits, 500)) == std::set<int32_t>{1});
  }

  TEST_CASE("sampler: the chain runs temperature → top-k → softmax → top-p → min-p") {
    const std::vector<float> logits = logits_of({0.4, 0.3, 0.2, 0.1});
    SUBCASE("top-p measures against the softmax of what top-k kept") {
      // Over all four, 0.4 < 0.5; over the top two, 0.4 / 0.7 = 0.57 ≥ 0.5.
      SamplingOptions o = with_temperature(1, 2);
      o.top_p = 0.5f;
      Sampler p_only(o);
      CHECK(drawn(histogram(p_only, logits, 2000)) == std::set<int32_t>{0, 1});
      o.top_k = 2;
      Sampler k_then_p(o);
      CHECK(drawn(histogram(k_then_p, logits, 2000)) == std::set<int32_t>{0});
    }
    SUBCASE("temperature comes before top-p") {
      // T = 1: 0.4 + 0.3 reach 0.6. T = 0.25 raises the probabilities to the
      // fourth power: 0.0256 / 0.0354 = 0.72 reaches it alone.
      SamplingOptions o = with_temperature(1, 2);
      o.top_p = 0.6f;
      Sampler warm(o);
      CHECK(drawn(histogram(warm, logits, 2000)) == std::set<int32_t>{0, 1});
      o.temperature = 0.25f;
      Sampler cold(o);
      CHECK(drawn(histogram(cold, logits, 2000)) == std::set<int32_t>{0});
    }
    SUBCASE("top-p measures against the softmax, not against what min-p left") {
      // The implementation filters min-p first (see sampler.hpp); that must
      // not change top-p's threshold. min-p 0.6 (p < 0.24 goes) keeps 0.4 and
      // 0.3. Top-p 0.55 over the softmax keeps the same two (0.4 < 0.55); had
      // it measured against 0.4 + 0.3 it would keep 0.4 / 0.7 = 0.57 alone.
      SamplingOptions o = with_temperature(1, 2);
      o.min_p = 0.6f;
      o.top_p = 0.55f;
      Sampler both(o);
      CHECK(drawn(histogram(both, logits, 3000)) == std::set<int32_t>{0, 1});
      // Where top-p keeps more than min-p, min-p decides: 0.9 < 0.95 keeps
      // four, min-p 0.3 (p < 0.12 goes) drops the 0.1.
      o.min_p = 0.3f;
      o.top_p = 0.95f;
      Sampler wider(o);
      CHECK(drawn(histogram(wider, logits, 3000)) == std::set<int32_t>{0, 1, 2});
    }
  }

  TEST_CASE("sampler: repetition penalty") {
    SamplingOptions o;
    o.repetition_penalty = 1.5f;
    SUBCASE("a positive logit is divided") {
      Sampler s(o);
      const std::vector<float> logits{2.0f, 1.8f, 0.5f};
      CHECK(s.sample(logits) == 0);  // and remembers 0: 2.0 / 1.5 = 1.33 < 1.8
      CHECK(s.sample(logits) == 1);
      CHECK(s.sample(logits) == 0);  // both remembered now: 1.33 > 1.2
    }
    SUBCASE("a negative logit is multiplied") {
      Sampler s(o);
      const std::vector<float> logits{-1.0f, -1.2f, -5.0f};
      s.accept(0);  // -1.0 · 1.5 = -1.5 < -1.2
      CHECK(s.sample(logits) == 1);
    }
    SUBCASE("a token repeated in the window is penalized once") {
      Sampler s(o);
      s.accept(0);
      s.accept(0);
      s.accept(0);
      CHECK(s.sample(std::vector<float>{2.0f, 1.3f}) == 0);  // 1.33 > 1.3; twice would be 0.89
    }
    SUBCASE("only the last repetition_window tokens count") {
      o.repetition_window = 2;
      Sampler s(o);
      const std::vector<float> logits{2.0f, 1.8f, 0.5f, 0.1f, 0.1f};
      s.accept(0);
      s.accept(3);
      CHECK(s.sample(logits) == 1);  // 0 is in the window
      s.reset();
      s.accept(0);
      s.accept(3);
      s.accept(4);
      CHECK(s.sample(logits) == 0);  // 0 has left it
    }
    SUBCASE("window 0: every token seen counts") {
      o.repetition_window = 0;
      Sampler s(o);
      s.accept(0);
      for (int32_t t = 0; t < 1000; ++t) s.accept(5 + t % 7);
      CHECK(s.sample(std::vector<float>{2.0f, 1.8f}) == 1);
      s.reset();
      CHECK(s.sample(std::vector<float>{2.0f, 1.8f}) == 0);
    }
    SUBCASE("ids beyond the vocabulary are ignored; penalty 1 is off") {
      Sampler s(o);
      s.accept(1000);
      CHECK(s.sample(std::vector<float>{2.0f, 1.8f}) == 0);
      o.repetition_penalty = 1;
      Sampler off(o);
      off.accept(0);
      CHECK(off.sample(std::vector<float>{2.0f, 1.8f}) == 0);
    }
    SUBCASE("with temperature, the penalized token becomes rarer") {
      o.temperature = 1;
      o.repetition_penalty = 4;
      o.repetition_window = 0;  // 0 stays penalized; 1, once drawn, too, but 0 · 4 = 0
      Sampler s(o);
      const std::vector<float> logits{3.0f, 0.0f};  // 3 / 4 = 0.75: p drops from 0.95 to 0.68
      s.accept(0);
      constexpr int draws = 20000;
      int zeros = 0;
      for (int i = 0; i < draws; ++i) zeros += s.sample(logits) == 0;
      CHECK(std::abs(zeros / double(draws) - softmax({0.75f, 0.0f}, 1)[0]) < 0.015);
    }
  }

  TEST_CASE("sampler: presence and frequency penalties (OpenAI's, over the generated tokens)") {
    SamplingOptions o;
    SUBCASE("presence: l - presence once a token was generated, however often") {
      o.presence_penalty = 0.5f;
      Sampler s(o);
      const std::vector<float> logits{2.0f, 1.6f, 0.0f};
      CHECK(s.sample(logits) == 0);  // 2.0 - 0.5 = 1.5 < 1.6
      CHECK(s.sample(logits) == 1);  // both generated: 1.5 > 1.1
      CHECK(s.sample(logits) == 0);  // still 1.5, not 1.0: presence counts once
    }
    SUBCASE("frequency: l - frequency · count") {
      o.frequency_penalty = 0.3f;
      Sampler s(o);
      const std::vector<float> logits{2.0f, 1.0f};
      CHECK(s.sample(logits) == 0);  // 2.0
      CHECK(s.sample(logits) == 0);  // 1.7
      CHECK(s.sample(logits) == 0);  // 1.4
      CHECK(s.sample(logits) == 0);  // 1.1
      CHECK(s.sample(logits) == 1);  // 0.8 < 1.0
    }
    SUBCASE("both: presence + frequency · count; prompt tokens do not count; reset forgets") {
      o.presence_penalty = 1;
      o.frequency_penalty = 1;
      Sampler s(o);
      for (int i = 0; i < 10; ++i) s.accept(0);
      const std::vector<float> logits{2.5f, 0.0f};
      CHECK(s.sample(logits) == 0);  // the prompt's tokens leave 2.5 as it is
      CHECK(s.sample(logits) == 0);  // 2.5 - 1 - 1 = 0.5 > 0
      CHECK(s.sample(logits) == 1);  // 2.5 - 1 - 2 = -0.5 < 0
      s.reset();
      CHECK(s.sample(logits) == 0);
    }
    SUBCASE("negative penalties encourage repeats; ids beyond the vocabulary are ignored") {
      o.presence_penalty = -1;
      Sampler s(o);
      CHECK(s.sample(std::vector<float>{1.0f, 1.5f}) == 1);
      CHECK(s.sample(std::vector<float>{1.0f, 0.6f, 1.55f}) == 1);  // 0.6 + 1 = 1.6 > 1.55
      CHECK(s.sample(std::vector<float>{0.5f}) == 0);               // token 1 is beyond this vocabulary
    }
  }

  TEST_CASE("sampler: options are validated, naming the option") {
    auto message = [](SamplingOptions o) {
      const Error e = error_of([&] { Sampler s(o); });
      CHECK(e.kind() == ErrorKind::InvalidArgument);
      return std::string(e.what());
    };
    SamplingOptions o;
    o.temperature = -0.5f;
    CHECK(message(o) == "--temp -0.5: must be >= 0 (0: greedy)");
    o.temperature = std::numeric_limits<float>::quiet_NaN();
    CHECK(message(o).rfind("--temp nan: must be >= 0", 0) == 0);
    o.temperature = kInf;
    CHECK(message(o) == "--temp inf: must be finite");
    o = {};
    o.top_k = -1;
    CHECK(message(o) == "--top-k -1: must be >= 0 (0: off)");
    o = {};
    o.top_p = 1.5f;
    CHECK(message(o) == "--top-p 1.5: must be in (0, 1]");
    o.top_p = 0;
    CHECK(message(o) == "--top-p 0: must be in (0, 1]");
    o = {};
    o.min_p = 1;
    CHECK(message(o) == "--min-p 1: must be in [0, 1)");
    o.min_p = -0.25f;
    CHECK(message(o) == "--min-p -0.25: must be in [0, 1)");
    o = {};
    o.repetition_penalty = 0;
    CHECK(message(o) == "--repeat-penalty 0: must be > 0");
    o.repetition_penalty = -1.1f;
    CHECK(message(o) == "--repeat-penalty -1.1: must be > 0");
    o = {};
    o.repetition_window = -1;
    CHECK(message(o) == "--repeat-last-n -1: must be >= 0 (0: every token seen)");
    o = {};
    o.presence_penalty = 2.5f;
    CHECK(message(o) == "--presence-penalty 2.5: must be in [-2, 2]");
    o = {};
    o.frequency_penalty = std::numeric_limits<float>::quiet_NaN();
    CHECK(message(o) == "--frequency-penalty nan: must be in [-2, 2]");
    // The edges that are allowed.
    o = {};
    o.top_p = 1;
    o.min_p = 0.99f;
    o.repetition_penalty = 0.5f;
    CHECK_NOTHROW(Sampler{o});
  }

  TEST_CASE("sampler: bad logits are errors naming the index") {
    for (float t : {0.0f, 1.0f}) {
      CAPTURE(t);
      Sampler s(with_temperature(t));
      const std::vector<float> logits{0, 1, std::numeric_limits<float>::quiet_NaN(), 2};
      Error e = error_of([&] { s.sample(logits); });
      CHECK(e.kind() == ErrorKind::InvalidArgument);
      CHECK(std::string(e.what()) == "Sampler::sample: logits[2] is NaN");
      e = error_of([&] { s.sample(std::vector<float>{-kInf, -kInf}); });
      CHECK(std::string(e.what()) == "Sampler::sample: every logit is -inf");
      e = error_of([&] { s.sample(std::vector<float>{}); });
      CHECK(std::string(e.what()) == "Sampler::sample: the logits are empty");
    }
    // -inf masks a token, +inf forces one (uniformly among several).
    Sampler s(with_temperature(1, 4));
    CHECK(drawn(histogram(s, {-kInf, 0, -kInf, 0}, 500)) == std::set<int32_t>{1, 3});
    CHECK(drawn(histogram(s, {kInf, 100, kInf, 0}, 500)) == std::set<int32_t>{0, 2});
    // A tiny temperature does not overflow: it is nearly greedy.
    Sampler cold(with_temperature(1e-30f, 4));
    CHECK(drawn(histogram(cold, {5, 100, 99, 0}, 200)) == std::set<int32_t>{1});
  }

  TEST_CASE("stop checker: EOS stops without printing its piece") {
    StopChecker stop({2, 7}, {}, 0);
    StopChecker::Step step = stop.push(5, "Hello");
    CHECK(step.text == "Hello");
    CHECK_FALSE(step.stop);
    step = stop.push(7, "</s>");
    CHECK(step.text.empty());
    CHECK(step.stop);
    CHECK(step.reason == "eos");
    step = stop.push(5, "more");  // after a stop: stop again, nothing printed
    CHECK(step.stop);
    CHECK(step.text.empty());
  }

  TEST_CASE("stop checker: a stop string split across three tokens") {
    StopChecker stop({}, {"###"}, 0);
    std::string printed;
    auto push = [&](std::string_view piece) {
      const StopChecker::Step step = stop.push(1, piece);
      printed += step.text;
      return step;
    };
    CHECK_FALSE(push("The answer is 4").stop);
    CHECK(printed == "The answer is 4");
    StopChecker::Step step = push(".#");
    CHECK_FALSE(step.stop);
    CHECK(step.text == ".");  // "#" may start "###": held back
    step = push("#");
    CHECK_FALSE(step.stop);
    CHECK(step.text.empty());
    step = push("# Question");
    CHECK(step.stop);
    CHECK(step.reason == "stop string \"###\"");
    CHECK(step.text.empty());
    CHECK(printed == "The answer is 4.");
    CHECK(stop.flush().empty());
  }

  TEST_CASE("stop checker: held-back text is released when it is no stop string") {
    StopChecker stop({}, {"\n\nUser:", "<|end|>"}, 0);
    std::string printed;
    auto push = [&](std::string_view piece) {
      const StopChecker::Step step = stop.push(1, piece);
      CHECK_FALSE(step.stop);
      printed += step.text;
      return step.text;
    };
    CHECK(push("Hi.\n") == "Hi.");
    CHECK(push("\nUs") == "");
    CHECK(push("ually") == "\n\nUsually");  // not "\n\nUser:" after all
    CHECK(push(" <|en") == " ");
    CHECK(push("d of") == "<|end of");
    CHECK(push(" it\n") == " it");
    CHECK(stop.flush() == "\n");  // generation ended otherwise
    CHECK(printed == "Hi.\n\nUsually <|end of it");

    // A stop string in the middle of a piece: the text before it is printed,
    // the rest of the piece is not; the reason escapes the newlines.
    StopChecker again({}, {"\n\nUser:"}, 0);
    const StopChecker::Step step = again.push(1, "Done.\n\nUser: next");
    CHECK(step.stop);
    CHECK(step.text == "Done.");
    CHECK(step.reason == "stop string \"\\n\\nUser:\"");

    CHECK(error_of([] { StopChecker bad({}, {"x", ""}, 0); }).what() == std::string("stop string 1 is empty"));
  }

  TEST_CASE("stop checker: max new tokens") {
    StopChecker stop({0}, {"STOP"}, 3);
    CHECK_FALSE(stop.push(5, "a").stop);
    CHECK_FALSE(stop.push(5, "b").stop);
    const StopChecker::Step step = stop.push(5, "cST");  // the last token: held text is released too
    CHECK(step.stop);
    CHECK(step.reason == "max tokens");
    CHECK(step.text == "cST");

    StopChecker unlimited({}, {}, 0);
    for (int i = 0; i < 10000; ++i) REQUIRE_FALSE(unlimited.push(1, "x").stop);

    // EOS as the last allowed token reports EOS.
    StopChecker eos_last({9}, {}, 2);
    CHECK_FALSE(eos_last.push(1, "a").stop);
    CHECK(eos_last.push(9, "").reason == "eos");
  }

  TEST_CASE("sampler: speculative sampling keeps the target's distribution whatever the draft") {
    // Proposals drawn from a draft q (a distribution, or a point mass as
    // prompt lookup proposes), each judged by sample_proposal: the tokens
    // must follow p = softmax(l / T) with top-k, whatever q.
    const std::vector<float> logits{1.0f, 0.5f, -0.3f, 2.0f, 0.0f, -1.0f, 1.5f, -2.0f};
    const std::vector<std::vector<double>> drafts = {
        {0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.65},  // far from p
        softmax(logits, 1.0),                              // p itself: every proposal kept
        {0.3, 0.0, 0.0, 0.0, 0.0, 0.7, 0.0, 0.0},          // two tokens only
        {},                                                // a point mass on token 6
    };
    constexpr int draws = 20000;
    constexpr double critical = 24.32;  // chi-square, 7 degrees of freedom, p = 0.001
    for (size_t d = 0; d < drafts.size(); ++d) {
      CAPTURE(d);
      Sampler sampler(with_temperature(1, 77 + d));
      std::mt19937_64 rng(9 + d);
      std::vector<float> q(drafts[d].begin(), drafts[d].end());
      std::vector<int> counts(logits.size(), 0);
      int kept = 0;
      for (int i = 0; i < draws; ++i) {
        int32_t proposal = 6;
        if (!q.empty()) {
          std::discrete_distribution<int32_t> pick(drafts[d].begin(), drafts[d].end());
          proposal = pick(rng);
        }
        const int32_t t = sampler.sample_proposal(logits, proposal, q);
        kept += t == proposal;
        ++counts[static_cast<size_t>(t)];
      }
      const std::vector<double> p = softmax(logits, 1.0);
      CHECK(chi_square(counts, p, draws) < critical);
      CHECK(max_abs_diff(counts, p, draws) < 0.015);
      if (d == 1) CHECK(kept == draws);
      if (d == 3) CHECK(std::abs(kept / double(draws) - p[6]) < 0.015);  // a point mass is kept with p(d)
    }
    // With top-k the distribution is top-k's; greedy keeps the argmax alone.
    SamplingOptions top2 = with_temperature(1, 5);
    top2.top_k = 2;
    Sampler narrow(top2);
    std::vector<int> counts(logits.size(), 0);
    for (int i = 0; i < draws; ++i) ++counts[static_cast<size_t>(narrow.sample_proposal(logits, i % 8))];
    const double p3 = std::exp(2.0) / (std::exp(2.0) + std::exp(1.5));
    CHECK(counts[3] + counts[6] == draws);
    CHECK(std::abs(counts[3] / double(draws) - p3) < 0.015);
    Sampler greedy(with_temperature(0));
    CHECK(greedy.sample_proposal(logits, 3) == 3);
    CHECK(greedy.sample_proposal(logits, 6) == 3);
    const std::vector<float> short_draft(3, 0.1f);
    CHECK_THROWS_AS(greedy.sample_proposal(logits, 3, short_draft), Error);
  }

}  // TEST_SUITE("sampler")
