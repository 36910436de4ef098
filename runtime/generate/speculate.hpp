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

// A draft model proposing: a session of a smaller decoder of the model's
// vocabulary (draft_info()), its cache kept to the text it was last given
// and cut back to what the next text shares with it.
class Draft {
 public:
  // `sampling`: the model's sampling options; the draft samples with their
  // temperature, top-k, top-p and min-p (no penalties, no bias), its own
  // seed. `min_p`: drafting stops where the draft's likeliest token has a
  // lower probability (its softmax), a proposal the model would likely
  // refuse. Throws Error(InvalidArgument) for a draft whose session cannot
  // cut back (a state-space layer).
  Draft(Session& session, const SamplingOptions& sampling, float min_p);
  struct Proposals {
    std::vector<int32_t> tokens;
    std::vector<std::vector<float>> q;  // per token, the distribution it was drawn from [vocab]
  };
  // Up to `most` tokens continuing `text` (the generation's tokens so far,
  // its last one not yet fed to the model); fewer where the draft's
  // context ends or it is unsure (min_p).
  Proposals propose(std::span<const int32_t> text, size_t most);
  Session& session() { return session_; }

 private:
  Session& session_;
  Sampler sampler_;
  float min_p_;
  std::vector<int32_t> cached_;  // the tokens the draft's cache holds, in order
};

// Whether a draft's tokenizer spells every token as the model's does: ""
// when it does, else what differs, naming the first token ("token 17 is
// "ab" to the model and "a" to the draft", or the two sizes).
std::string vocabulary_mismatch(const Tokenizer& model, const Tokenizer& draft);

}  // namespace lathe::text
