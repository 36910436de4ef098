// Speculative decoding's proposers (issue 48): tokens guessed ahead of the
// target model, which verifies them in one pass (Session::verify) and keeps
// the longest agreeing prefix plus one token of its own
// (Sampler::sample_proposal decides each).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/generate/sampler.hpp"

namespace lathe {
class Session;
}

namespace lathe::text {

class Tokenizer;

// Prompt lookup: the longest n-gram (n from `ngram` down to 1) that ends
// the history and also occurs earlier in it, at its latest earlier place;
// the tokens that followed it there, at most `most` (none: no match).
// Text that repeats itself (code being edited, a document quoted, a
// summary of the prompt) is proposed from its earlier copy.
std::vector<int32_t> lookup_proposals(std::span<const int32_t> history, int32_t ngram, size_t most);

// What proposing needs of a draft model: a Session's calls on its
// sequences (SessionDraft), or a test's stand-in.
class DraftModel {
 public:
  virtual ~DraftModel() = default;
  virtual int64_t context() const = 0;
  virtual int64_t rewind_floor(int64_t sequence) const = 0;
  virtual void truncate(int64_t sequence, int64_t position) = 0;
  virtual std::vector<float> prefill(int64_t sequence, std::span<const int32_t> tokens) = 0;  // the last row's logits
  struct Step {
    int64_t sequence = 0;
    int32_t token = 0;
  };
  virtual std::vector<float> decode(std::span<const Step> steps) = 0;  // a row each
};

// A draft model's session: a smaller decoder of the model's vocabulary
// (draft_info()), a sequence for each of the model's. Throws
// Error(InvalidArgument) for one whose cache cannot cut back (a
// state-space layer): rejected proposals must be forgotten.
class SessionDraft final : public DraftModel {
 public:
  explicit SessionDraft(Session& session);
  int64_t context() const override;
  int64_t rewind_floor(int64_t sequence) const override;
  void truncate(int64_t sequence, int64_t position) override;
  std::vector<float> prefill(int64_t sequence, std::span<const int32_t> tokens) override;
  std::vector<float> decode(std::span<const Step> steps) override;

 private:
  Session& session_;
};

// The sampling options a draft draws with, from the model's: its
// temperature, top-k, top-p and min-p (no penalties, no bias), a seed of
// its own (the same seed replays its draws).
SamplingOptions draft_sampling(const SamplingOptions& model);

// A draft model proposing: each sequence's cache kept to the text it was
// last given, cut back to what the next text shares with it, and the
// sequences that propose together drafting in batched decode steps.
class Draft {
 public:
  // `min_p`: a sequence stops proposing where the draft's likeliest token
  // has a lower probability (its softmax): one the model would likely refuse.
  Draft(DraftModel& model, int64_t sequences, float min_p);
  struct Proposals {
    std::vector<int32_t> tokens;
    std::vector<std::vector<float>> q;  // per token, the distribution it was drawn from [vocab]
  };
  // Up to `most` tokens continuing `text` (a generation's tokens so far,
  // its last one not yet fed to the model) in the draft's `sequence`, drawn
  // by `sampler` (draft_sampling's); fewer where its context ends or it is
  // unsure.
  struct Want {
    int64_t sequence = 0;
    std::span<const int32_t> text;
    size_t most = 0;
    Sampler* sampler = nullptr;
  };
  std::vector<Proposals> propose(std::span<const Want> wants);
  Proposals propose(std::span<const int32_t> text, size_t most, Sampler& sampler);  // sequence 0

 private:
  DraftModel& model_;
  float min_p_;
  std::vector<std::vector<int32_t>> cached_;  // per sequence: the tokens its cache holds, in order
};

// Whether a draft's tokenizer spells every token as the model's does: ""
// when it does, else what differs, naming the first token ("token 17 is
// "ab" to the model and "a" to the draft", or the two sizes).
std::string vocabulary_mismatch(const Tokenizer& model, const Tokenizer& draft);

}  // namespace lathe::text
