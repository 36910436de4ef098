#include "runtime/generate/speculate.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/error.hpp"
#include "runtime/model/session.hpp"
#include "runtime/text/tokenize/tokenizer.hpp"

namespace lathe::text {

std::vector<int32_t> lookup_proposals(std::span<const int32_t> history, int32_t ngram, size_t most) {
  const size_t size = history.size();
  if (most == 0) return {};
  for (size_t n = std::min(static_cast<size_t>(std::max(ngram, 0)), size > 0 ? size - 1 : 0); n >= 1; --n) {
    const std::span<const int32_t> tail = history.subspan(size - n);
    // The latest earlier place it ends at, before the tail itself: an
    // occurrence ending at `end` is followed by history[end, …).
    for (size_t end = size - 1; end >= n; --end) {
      if (!std::equal(tail.begin(), tail.end(), history.begin() + static_cast<std::ptrdiff_t>(end - n))) continue;
      const size_t take = std::min(most, size - end);
      return {history.begin() + static_cast<std::ptrdiff_t>(end),
              history.begin() + static_cast<std::ptrdiff_t>(end + take)};
    }
  }
  return {};
}

namespace {

SamplingOptions draft_sampling(const SamplingOptions& model) {
  SamplingOptions o;
  o.temperature = model.temperature;
  o.top_k = model.top_k;
  o.top_p = model.top_p;
  o.min_p = model.min_p;
  o.seed = model.seed ^ 0x9e3779b97f4a7c15ull;  // its own draws, replayed by the same seed
  return o;
}

// The softmax's largest probability: 1 / Σ exp(l − max).
double top_probability(std::span<const float> logits) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double total = 0;
  for (float l : logits) total += std::exp(static_cast<double>(l) - max);
  return 1 / total;
}

}  // namespace

Draft::Draft(Session& session, const SamplingOptions& sampling, float min_p)
    : session_(session), sampler_(draft_sampling(sampling)), min_p_(min_p) {
  if (!session_.verifies())
    throw Error(ErrorKind::InvalidArgument, std::string(session_.model().name) +
                                                ": a draft must be a decoder whose cache cuts back (no state-space "
                                                "layer): its rejected proposals are forgotten");
}

Draft::Proposals Draft::propose(std::span<const int32_t> text, size_t most) {
  Proposals out;
  if (text.empty() || most == 0) return out;
  // What the cache still holds of the text, cut back to exactly.
  size_t common = 0;
  while (common < std::min(cached_.size(), text.size() - 1) && cached_[common] == text[common]) ++common;
  if (static_cast<int64_t>(common) < session_.rewind_floor(0)) common = 0;
  session_.truncate(0, static_cast<int64_t>(common));
  cached_.resize(common);
  // The draft's context holds the text and the proposals fed after it.
  const int64_t room = session_.context() - static_cast<int64_t>(text.size());
  if (room < 1) return out;
  most = std::min<size_t>(most, static_cast<size_t>(room));
  const std::span<const int32_t> rest = text.subspan(common);
  std::vector<float> logits = session_.prefill(0, rest);
  cached_.insert(cached_.end(), rest.begin(), rest.end());
  for (size_t j = 0; j < most; ++j) {
    check_logits(logits, "the draft's step");
    if (min_p_ > 0 && top_probability(logits) < min_p_) break;
    std::vector<float> q;
    const int32_t token = sampler_.sample(logits, q);
    out.tokens.push_back(token);
    out.q.push_back(std::move(q));
    if (j + 1 == most) break;
    logits = session_.decode(token);
    cached_.push_back(token);
  }
  return out;
}

std::string vocabulary_mismatch(const Tokenizer& model, const Tokenizer& draft) {
  if (model.vocab_size() != draft.vocab_size())
    return "the model's tokenizer has " + std::to_string(model.vocab_size()) + " tokens, the draft's " +
           std::to_string(draft.vocab_size());
  for (int32_t id = 0; id < model.vocab_size(); ++id)
    if (model.token_bytes(id) != draft.token_bytes(id) || model.is_special(id) != draft.is_special(id))
      return "token " + std::to_string(id) + " is \"" + model.token_text(id) + "\" to the model and \"" +
             draft.token_text(id) + "\" to the draft";
  return "";
}

}  // namespace lathe::text
