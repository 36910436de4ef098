#include "runtime/generate/sampler.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>

#include "runtime/error.hpp"

namespace lathe::text {

namespace {

std::string number(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", v);
  return buffer;
}

// For messages: a stop string such as "\n\n" shown as the escape it is written as.
std::string escaped(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      default: out += c;
    }
  }
  return out;
}

[[noreturn]] void invalid(const std::string& message) { throw Error(ErrorKind::InvalidArgument, message); }

void validate(const SamplingOptions& o) {
  if (std::isinf(o.temperature)) invalid("--temp " + number(o.temperature) + ": must be finite");
  if (!(o.temperature >= 0)) invalid("--temp " + number(o.temperature) + ": must be >= 0 (0: greedy)");
  if (o.top_k < 0) invalid("--top-k " + std::to_string(o.top_k) + ": must be >= 0 (0: off)");
  if (!(o.top_p > 0 && o.top_p <= 1)) invalid("--top-p " + number(o.top_p) + ": must be in (0, 1]");
  if (!(o.min_p >= 0 && o.min_p < 1)) invalid("--min-p " + number(o.min_p) + ": must be in [0, 1)");
  if (std::isinf(o.repetition_penalty)) {
    invalid("--repeat-penalty " + number(o.repetition_penalty) + ": must be finite");
  }
  if (!(o.repetition_penalty > 0)) invalid("--repeat-penalty " + number(o.repetition_penalty) + ": must be > 0");
  for (const auto& [name, v] : {std::pair{"--presence-penalty", o.presence_penalty},
                                 std::pair{"--frequency-penalty", o.frequency_penalty}}) {
    if (!(v >= -2 && v <= 2)) invalid(std::string(name) + " " + number(v) + ": must be in [-2, 2]");
  }
  if (o.repetition_window < 0) {
    invalid("--repeat-last-n " + std::to_string(o.repetition_window) + ": must be >= 0 (0: every token seen)");
  }
}

// Larger value first; among equal values the lower id, so that the kept set
// and its order never depend on the standard library's nth_element.
struct ByValueThenId {
  template <class C>
  bool operator()(const C& a, const C& b) const {
    return a.value > b.value || (a.value == b.value && a.id < b.id);
  }
};

}  // namespace

Sampler::Sampler(SamplingOptions options) : options_(options), rng_(options.seed) { validate(options_); }

void Sampler::reset() {
  recent_.clear();
  recent_next_ = 0;
  seen_.clear();
  generated_.clear();
  rng_.seed(options_.seed);
}

void Sampler::accept(int32_t token) {
  if (token < 0) invalid("Sampler::accept: token " + std::to_string(token) + " is negative");
  const size_t window = static_cast<size_t>(options_.repetition_window);
  if (window == 0) {
    if (seen_.insert(token).second) recent_.push_back(token);
  } else if (recent_.size() < window) {
    recent_.push_back(token);  // grows to the window, not allocated up front: the window may be huge
  } else {
    recent_[recent_next_] = token;
    recent_next_ = (recent_next_ + 1) % window;
  }
}

void Sampler::apply_repetition_penalty() {
  if (options_.repetition_penalty == 1 || recent_.empty()) return;
  std::span<const int32_t> ids = recent_;
  if (options_.repetition_window > 0) {
    // The ring may repeat a token; HF's gather/scatter penalizes it once.
    window_ids_.assign(recent_.begin(), recent_.end());
    std::sort(window_ids_.begin(), window_ids_.end());
    window_ids_.erase(std::unique(window_ids_.begin(), window_ids_.end()), window_ids_.end());
    ids = window_ids_;
  }
  const float penalty = options_.repetition_penalty;
  for (int32_t id : ids) {
    if (static_cast<size_t>(id) >= candidates_.size()) continue;
    float& l = candidates_[static_cast<size_t>(id)].value;
    l = l > 0 ? l / penalty : l * penalty;
  }
}

void Sampler::apply_presence_frequency_penalties() {
  if (options_.presence_penalty == 0 && options_.frequency_penalty == 0) return;
  for (const auto& [id, count] : generated_) {
    if (static_cast<size_t>(id) >= candidates_.size()) continue;
    candidates_[static_cast<size_t>(id)].value -=
        options_.presence_penalty + options_.frequency_penalty * static_cast<float>(count);
  }
}

// Puts the largest candidates of [sorted, end) into [sorted, target), in
// order; [0, sorted) already holds larger ones, in order. For a prefix that
// is small against the range, std::partial_sort (a heap of the prefix, one
// comparison for most of the rest) beats nth_element + sort several times
// over; at 256k candidates the two cross near 1/64 of the range.
void Sampler::sort_prefix(size_t sorted, size_t target, size_t end) {
  const auto first = candidates_.begin() + static_cast<std::ptrdiff_t>(sorted);
  const auto middle = candidates_.begin() + static_cast<std::ptrdiff_t>(target);
  const auto last = candidates_.begin() + static_cast<std::ptrdiff_t>(end);
  if ((target - sorted) * 64 <= end - sorted) {
    std::partial_sort(first, middle, last, ByValueThenId{});
  } else {
    if (middle < last) std::nth_element(first, middle, last, ByValueThenId{});
    std::sort(first, middle, ByValueThenId{});
  }
}

// Top-p over a large unsorted range: a histogram of the probability mass by
// the float's bits (exponent and three mantissa bits, monotone in p ≥ 0:
// eight buckets per octave) finds the bucket where the mass, summed from the
// top, reaches the threshold; every candidate of that bucket or above moves
// to the front and only those are sorted. They include the whole nucleus,
// and with a peaked distribution they are a small part of a 256k vocabulary.
// Returns how many were sorted. (llama.cpp buckets its top-p the same way.)
size_t Sampler::sort_nucleus_candidates(size_t end, double threshold) {
  constexpr size_t kBuckets = 1024;  // p ≤ 1.0f = 0x3f800000: bucket ≤ 0x3f8
  auto bucket = [](float p) { return static_cast<size_t>(std::bit_cast<uint32_t>(p) >> 20); };
  std::array<double, kBuckets> mass{};
  for (size_t i = 0; i < end; ++i) mass[bucket(candidates_[i].value)] += candidates_[i].value;
  size_t cut = kBuckets;
  double cumulative = 0;
  while (cut > 0) {
    cumulative += mass[--cut];
    if (cumulative >= threshold) break;
  }
  const auto first = candidates_.begin();
  const auto middle = std::partition(first, first + static_cast<std::ptrdiff_t>(end),
                                     [&](const Candidate& c) { return bucket(c.value) >= cut; });
  std::sort(first, middle, ByValueThenId{});
  return static_cast<size_t>(middle - first);
}

double Sampler::distribution(std::span<const float> logits, size_t& end) {
  if (logits.empty()) invalid("Sampler::sample: the logits are empty");
  if (logits.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    invalid("Sampler::sample: " + std::to_string(logits.size()) + " logits are more than int32 token ids can name");
  }
  const size_t n = logits.size();
  candidates_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(logits[i])) invalid("Sampler::sample: logits[" + std::to_string(i) + "] is NaN");
    candidates_[i] = {logits[i], static_cast<int32_t>(i)};
  }
  for (const auto& [id, bias] : options_.logit_bias) {
    if (id < 0 || static_cast<size_t>(id) >= n)
      invalid("Sampler::sample: logit_bias names token " + std::to_string(id) + ", outside the " + std::to_string(n) +
              " logits");
    candidates_[static_cast<size_t>(id)].value += bias;
  }
  apply_repetition_penalty();
  apply_presence_frequency_penalties();

  // 2. Greedy: the first maximum is the lowest id among ties.
  if (options_.temperature == 0) {
    size_t best = 0;
    for (size_t i = 1; i < n; ++i) {
      if (candidates_[i].value > candidates_[best].value) best = i;
    }
    if (candidates_[best].value == -std::numeric_limits<float>::infinity()) {
      invalid("Sampler::sample: every logit is -inf");
    }
    candidates_[0] = {1.0f, static_cast<int32_t>(best)};
    end = 1;
    return 1;
  }

  // 3. Top-k on the penalized logits (dividing by T > 0 keeps their order).
  end = n;            // candidates_[0, end) are still in the running
  size_t sorted = 0;  // candidates_[0, sorted) are the largest, in order
  if (options_.top_k > 0 && static_cast<size_t>(options_.top_k) < n) {
    end = static_cast<size_t>(options_.top_k);
    sort_prefix(0, end, n);
    sorted = end;
  }

  // 2 and 4. exp((l - max) / T): the maximum maps to exactly 1, the scale
  // min-p measures against, and no quotient overflows however small T is.
  float max = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < end; ++i) max = std::max(max, candidates_[i].value);
  if (max == -std::numeric_limits<float>::infinity()) invalid("Sampler::sample: every logit is -inf");
  const float t = options_.temperature;
  const bool infinite = std::isinf(max);  // +inf logits: uniform among them
  double total = 0;
  for (size_t i = 0; i < end; ++i) {
    float& v = candidates_[i].value;
    v = infinite ? (v == max ? 1.0f : 0.0f) : std::exp((v - max) / t);
    total += v;
  }

  // 6. Min-p, before top-p (see the header): a stable filter, so a sorted
  // prefix stays sorted and an unsorted range stays in id order.
  const double softmax_total = total;
  if (options_.min_p > 0) {
    const float threshold = options_.min_p;  // · p_max, which is 1 here
    size_t kept = 0;
    total = 0;
    for (size_t i = 0; i < end; ++i) {
      if (candidates_[i].value >= threshold) {
        total += candidates_[i].value;
        candidates_[kept++] = candidates_[i];
      }
    }
    if (sorted == end) sorted = kept;
    end = kept;
  }

  // 5. Top-p: the smallest prefix by probability whose share of the
  // softmax of step 4 reaches top_p.
  if (options_.top_p < 1) {
    const double threshold = static_cast<double>(options_.top_p) * softmax_total;
    if (sorted == 0 && end > 4096) sorted = sort_nucleus_candidates(end, threshold);
    double cumulative = 0;
    size_t i = 0;
    while (i < end) {
      if (i == sorted) {
        // Sort ahead rather than the whole range: at least twice what is
        // sorted, and at least (threshold - cumulative) / p_last more, since
        // no token still to come is more probable than the last one taken.
        size_t target = std::max<size_t>(64, 2 * sorted);
        if (i > 0) {
          const double last = candidates_[i - 1].value;
          if (last == 0) break;  // only p = 0 is left: rounding kept us below the threshold
          const double more = std::ceil((threshold - cumulative) / last);
          target = more >= static_cast<double>(end - i) ? end : std::max(target, i + static_cast<size_t>(more));
        }
        target = std::min(target, end);
        sort_prefix(sorted, target, end);
        sorted = target;
      }
      cumulative += candidates_[i++].value;
      if (cumulative >= threshold) break;
    }
    end = i;
    total = cumulative;
  }

  return total;
}

size_t Sampler::draw(size_t end, double total) {
  // 7 and 8. Renormalizing is scaling u by the kept total. The kept range is
  // either sorted or in id order, so the walk does not depend on the
  // standard library either.
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  const double target = u * total;
  double cumulative = 0;
  size_t pick = end;
  for (size_t i = 0; i < end; ++i) {
    cumulative += candidates_[i].value;
    if (cumulative > target) {
      pick = i;
      break;
    }
  }
  if (pick == end) {
    // u · total rounded up to total: the last token with any probability.
    pick = end - 1;
    while (pick > 0 && candidates_[pick].value == 0) --pick;
  }
  return pick;
}

int32_t Sampler::remember(int32_t token) {
  accept(token);
  ++generated_[token];
  return token;
}

int32_t Sampler::sample(std::span<const float> logits) {
  size_t end = 0;
  const double total = distribution(logits, end);
  // Greedy draws nothing from the RNG.
  return remember(candidates_[options_.temperature == 0 ? 0 : draw(end, total)].id);
}

int32_t Sampler::sample(std::span<const float> logits, std::vector<float>& probabilities) {
  size_t end = 0;
  const double total = distribution(logits, end);
  probabilities.assign(logits.size(), 0.0f);
  for (size_t i = 0; i < end; ++i)
    probabilities[static_cast<size_t>(candidates_[i].id)] = static_cast<float>(candidates_[i].value / total);
  return remember(candidates_[options_.temperature == 0 ? 0 : draw(end, total)].id);
}

int32_t Sampler::sample_proposal(std::span<const float> logits, int32_t proposal, std::span<const float> draft) {
  if (!draft.empty() && draft.size() != logits.size())
    invalid("Sampler::sample_proposal: the draft's " + std::to_string(draft.size()) + " probabilities are not the " +
            std::to_string(logits.size()) + " logits'");
  size_t end = 0;
  const double total = distribution(logits, end);
  if (options_.temperature == 0) return remember(candidates_[0].id);
  const auto q = [&](int32_t id) {
    return draft.empty() ? (id == proposal ? 1.0 : 0.0) : static_cast<double>(draft[static_cast<size_t>(id)]);
  };
  double p = 0;  // of the proposal
  for (size_t i = 0; i < end; ++i)
    if (candidates_[i].id == proposal) p = candidates_[i].value / total;
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  const double qd = q(proposal);
  if (qd > 0 && u * qd < p) return remember(proposal);
  // Rejected: max(0, p − q) over the tokens p keeps (the others have p = 0).
  double residual = 0;
  for (size_t i = 0; i < end; ++i) {
    float& v = candidates_[i].value;
    v = static_cast<float>(std::max(0.0, v / total - q(candidates_[i].id)));
    residual += v;
  }
  if (residual <= 0) {  // p ≤ q everywhere p is (rounding): p itself
    distribution(logits, end);
    return remember(candidates_[draw(end, total)].id);
  }
  return remember(candidates_[draw(end, residual)].id);
}

StopChecker::StopChecker(std::vector<int32_t> eos_ids, std::vector<std::string> stop_strings, int32_t max_new_tokens)
    : eos_ids_(std::move(eos_ids)), stop_strings_(std::move(stop_strings)), max_new_tokens_(max_new_tokens) {
  for (size_t i = 0; i < stop_strings_.size(); ++i) {
    if (stop_strings_[i].empty()) invalid("stop string " + std::to_string(i) + " is empty");
  }
}

StopChecker::Step StopChecker::push(int32_t token, std::string_view piece) {
  if (!stop_reason_.empty()) return {"", true, stop_reason_};
  ++generated_;
  if (std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end()) {
    stop_reason_ = "eos";
    return {flush(), true, stop_reason_};
  }
  pending_ += piece;

  // The earliest stop string in what is held back and the new piece. Held
  // text never contains a whole one, so a match always involves the piece.
  size_t match = std::string::npos;
  const std::string* matched = nullptr;
  for (const std::string& s : stop_strings_) {
    const size_t at = pending_.find(s);
    if (at < match) {
      match = at;
      matched = &s;
    }
  }
  if (matched) {
    stop_reason_ = "stop string \"" + escaped(*matched) + "\"";
    Step step{pending_.substr(0, match), true, stop_reason_};
    pending_.clear();
    return step;
  }

  if (max_new_tokens_ > 0 && generated_ >= max_new_tokens_) {
    stop_reason_ = "max tokens";
    return {flush(), true, stop_reason_};
  }

  // Hold back the longest tail that is a proper prefix of some stop string:
  // every place a stop string could still start lies within it.
  size_t hold = 0;
  for (const std::string& s : stop_strings_) {
    for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len) {
      if (std::string_view(pending_).substr(pending_.size() - len) == std::string_view(s).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  Step step{pending_.substr(0, pending_.size() - hold), false, ""};
  pending_.erase(0, pending_.size() - hold);
  return step;
}

std::string StopChecker::flush() {
  std::string text = std::move(pending_);
  pending_.clear();
  return text;
}

}  // namespace lathe::text
