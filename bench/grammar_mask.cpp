#include "bench/grammar_mask.hpp"

#include <algorithm>
#include <chrono>
#include <random>
#include <set>

#include "runtime/generate/constraint.hpp"
#include "runtime/generate/sampler.hpp"

namespace lathe::bench {

std::vector<std::string> synthetic_vocabulary(int32_t size) {
  std::vector<std::string> tokens;
  std::set<std::string> seen;
  const auto add = [&](std::string t) {
    if (static_cast<int32_t>(tokens.size()) < size && seen.insert(t).second) tokens.push_back(std::move(t));
  };
  add("");  // id 0: the end token
  for (int b = 0; b < 256; ++b) add(std::string(1, static_cast<char>(b)));
  for (const char* p : {"\":", "\": ", "{\"", "\"}", "},", "\",", "\"]", "[\"", "[{", "}]", ", \"", "\n", "\n\n",
                        "  ", "    ", "\t", "\":\"", "\",\"", "null", "true", "false", "\\n", "\\\"", "...", "--"})
    add(p);
  std::mt19937 rng(47);
  const std::string consonants = "bcdfghjklmnpqrstvwxyz", vowels = "aeiou";
  const auto pick = [&](const std::string& from) { return from[rng() % from.size()]; };
  while (static_cast<int32_t>(tokens.size()) < size) {
    const uint32_t kind = rng() % 100;
    std::string t;
    if (kind < 70) {  // a word: 1–4 syllables, a leading space most often, sometimes a capital
      const int syllables = 1 + static_cast<int>(rng() % 4);
      for (int s = 0; s < syllables; ++s) {
        t += pick(consonants);
        t += pick(vowels);
        if (rng() % 3 == 0) t += pick(consonants);
      }
      if (rng() % 4 == 0) t[0] = static_cast<char>(t[0] - 'a' + 'A');
      if (rng() % 10 < 6) t = " " + t;
    } else if (kind < 78) {  // digits
      const int n = 1 + static_cast<int>(rng() % 3);
      for (int i = 0; i < n; ++i) t += static_cast<char>('0' + rng() % 10);
    } else if (kind < 84) {  // spaces and newlines
      t = std::string(1 + rng() % 16, rng() % 3 == 0 ? '\n' : ' ');
    } else if (kind < 90) {  // punctuation runs
      const std::string punct = "{}[]():;,.!?\"'-_/\\*#=+<>";
      const int n = 1 + static_cast<int>(rng() % 3);
      for (int i = 0; i < n; ++i) t += pick(punct);
    } else {  // a character of 2–4 UTF-8 bytes, alone or after a space
      const uint32_t cp = kind < 95 ? 0x80 + rng() % 0x780 : kind < 99 ? 0x800 + rng() % 0xD000 : 0x10000 + rng() % 0x10000;
      if (cp >= 0xD800 && cp < 0xE000) continue;
      if (rng() % 2) t += ' ';
      if (cp < 0x800) {
        t += static_cast<char>(0xC0 | (cp >> 6));
      } else if (cp < 0x10000) {
        t += static_cast<char>(0xE0 | (cp >> 12));
        t += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      } else {
        t += static_cast<char>(0xF0 | (cp >> 18));
        t += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        t += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      }
      t += static_cast<char>(0x80 | (cp & 0x3F));
    }
    add(std::move(t));
  }
  return tokens;
}

MaskCost measure_mask(const std::vector<std::string>& tokens, const std::string& schema, int documents,
                      int max_steps) {
  using Clock = std::chrono::steady_clock;
  MaskCost cost;
  cost.vocab = static_cast<int32_t>(tokens.size());
  const Clock::time_point build = Clock::now();
  auto vocabulary = std::make_shared<const text::GrammarVocabulary>(
      text::GrammarVocabulary{tokens, grammar::Vocabulary(tokens)});
  cost.build_ms = std::chrono::duration<double, std::milli>(Clock::now() - build).count();
  const auto g = text::compile_grammar(text::GrammarSource::JsonSchema, schema, "the bench schema");
  std::vector<double> times;
  std::vector<float> logits(tokens.size());
  for (int d = 0; d < documents; ++d) {
    text::Constraint c(g, vocabulary, {0});
    text::SamplingOptions o;
    o.temperature = 1;
    o.seed = static_cast<uint64_t>(d) + 1;
    text::Sampler sampler(o);
    std::mt19937_64 rng(static_cast<uint64_t>(d) * 977 + 5);
    std::normal_distribution<float> normal(0, 2);
    for (int step = 0; step < max_steps; ++step) {
      for (float& l : logits) l = normal(rng);
      const Clock::time_point start = Clock::now();
      c.mask(logits);
      times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
      const int32_t token = sampler.sample(logits);
      if (token == 0) {
        ++cost.documents;
        break;
      }
      c.accept(token);
      if (c.finished()) {
        ++cost.documents;
        break;
      }
    }
  }
  cost.steps = static_cast<int64_t>(times.size());
  if (times.empty()) return cost;
  double sum = 0;
  for (double t : times) sum += t;
  cost.mean_us = sum / static_cast<double>(times.size());
  std::sort(times.begin(), times.end());
  cost.median_us = times[times.size() / 2];
  cost.p90_us = times[times.size() * 9 / 10];
  cost.max_us = times.back();
  return cost;
}

}  // namespace lathe::bench
