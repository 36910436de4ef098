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

SamplingOptions draft_sampling(const SamplingOptions& model) {
  SamplingOptions o;
  o.temperature = model.temperature;
  o.top_k = model.top_k;
  o.top_p = model.top_p;
  o.min_p = model.min_p;
  o.seed = model.seed ^ 0x9e3779b97f4a7c15ull;
  return o;
}

namespace {

// The softmax's largest probability: 1 / Σ exp(l − max).
double top_probability(std::span<const float> logits) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double total = 0;
  for (float l : logits) total += std::exp(static_cast<double>(l) - max);
  return 1 / total;
}

}  // namespace

SessionDraft::SessionDraft(Session& session) : session_(session) {
  if (!session_.verifies())
    throw Error(ErrorKind::InvalidArgument, std::string(session_.model().name) +
                                                ": a draft must be a decoder whose cache cuts back (no state-space "
                                                "layer): its rejected proposals are forgotten");
}
int64_t SessionDraft::context() const { return session_.context(); }
int64_t SessionDraft::rewind_floor(int64_t sequence) const { return session_.rewind_floor(sequence); }
void SessionDraft::truncate(int64_t sequence, int64_t position) { session_.truncate(sequence, position); }
std::vector<float> SessionDraft::prefill(int64_t sequence, std::span<const int32_t> tokens) {
  return session_.prefill(sequence, tokens);
}
std::vector<float> SessionDraft::decode(std::span<const Step> steps) {
  std::vector<Session::Step> rows;
  for (const Step& s : steps) rows.push_back({s.sequence, s.token});
  return session_.decode(rows);
}

Draft::Draft(DraftModel& model, int64_t sequences, float min_p)
    : model_(model), min_p_(min_p), cached_(static_cast<size_t>(std::max<int64_t>(sequences, 1))) {}

Draft::Proposals Draft::propose(std::span<const int32_t> text, size_t most, Sampler& sampler) {
  const Want want{0, text, most, &sampler};
  return std::move(propose(std::span(&want, 1)).front());
}

std::vector<Draft::Proposals> Draft::propose(std::span<const Want> wants) {
  std::vector<Proposals> out(wants.size());
  std::vector<std::vector<float>> logits(wants.size());
  std::vector<size_t> active;
  // Each sequence's cache brought to its text: what it still holds of it
  // (cut back to exactly), the rest prefilled.
  for (size_t w = 0; w < wants.size(); ++w) {
    const Want& want = wants[w];
    std::vector<int32_t>& cached = cached_.at(static_cast<size_t>(want.sequence));
    const std::span<const int32_t> text = want.text;
    const int64_t room = model_.context() - static_cast<int64_t>(text.size());
    if (text.empty() || want.most == 0 || room < 1) continue;
    size_t common = 0;
    while (common < std::min(cached.size(), text.size() - 1) && cached[common] == text[common]) ++common;
    if (static_cast<int64_t>(common) < model_.rewind_floor(want.sequence)) common = 0;
    model_.truncate(want.sequence, static_cast<int64_t>(common));
    cached.assign(text.begin(), text.end());
    logits[w] = model_.prefill(want.sequence, text.subspan(common));
    active.push_back(w);
  }
  // Then a token of each a round, each round's fed in one batched step.
  while (!active.empty()) {
    std::vector<DraftModel::Step> steps;
    std::vector<size_t> fed;
    for (size_t w : active) {
      const Want& want = wants[w];
      check_logits(logits[w], "the draft's step");
      const int64_t room = model_.context() - static_cast<int64_t>(want.text.size());
      const size_t most = std::min<size_t>(want.most, static_cast<size_t>(room));
      if (min_p_ > 0 && top_probability(logits[w]) < min_p_) continue;
      std::vector<float> q;
      const int32_t token = want.sampler->sample(logits[w], q);
      out[w].tokens.push_back(token);
      out[w].q.push_back(std::move(q));
      if (out[w].tokens.size() == most) continue;
      steps.push_back({want.sequence, token});
      cached_.at(static_cast<size_t>(want.sequence)).push_back(token);
      fed.push_back(w);
    }
    if (steps.empty()) break;
    const std::vector<float> rows = model_.decode(steps);
    const size_t vocab = rows.size() / steps.size();
    for (size_t i = 0; i < fed.size(); ++i)
      logits[fed[i]].assign(rows.begin() + static_cast<std::ptrdiff_t>(i * vocab),
                            rows.begin() + static_cast<std::ptrdiff_t>((i + 1) * vocab));
    active = fed;
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
