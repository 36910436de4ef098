// Token sampling and stop conditions for generation loops (no Vulkan: the
// logits come back from the device as a float array of vocab_size entries).
//
// Sampler::sample applies, in this order (llama.cpp's and Hugging Face's
// usual chain):
//   1. repetition penalty  logits of the tokens in the recent window:
//                          l > 0 ? l / penalty : l · penalty (CTRL, HF's
//                          RepetitionPenaltyLogitsProcessor); a token counts
//                          once however often it occurs in the window
//   1b. presence and       OpenAI's: l −= presence · [count > 0] +
//       frequency          frequency · count, where count is how often
//       penalties          sample() returned the token since the last
//                          reset() (the generated tokens only: accept()ed
//                          prompt tokens do not count)
//   2. temperature         l / T; T = 0 is greedy: the argmax (ties: the
//                          lowest id), without steps 3–8 and without
//                          drawing from the RNG
//   3. top-k               keep the k largest logits (ties: the lower ids)
//   4. softmax             over what top-k kept
//   5. top-p               keep the smallest set of most probable tokens
//                          whose probability sums to ≥ top_p
//   6. min-p               drop tokens with p < min_p · p_max
//   7. renormalize
//   8. draw                u in [0, 1) from the top 53 bits of one
//                          std::mt19937_64 output (not std::uniform_real_-
//                          distribution, whose algorithm differs between
//                          standard libraries), walked over the kept tokens
//                          in a deterministic order: the same seed gives the
//                          same tokens on every platform
// Top-p and min-p both keep a prefix of the tokens sorted by probability, so
// the implementation applies min-p (a linear filter) before top-p (which
// must sort): the set kept is the same as in the order above, and top-p has
// fewer tokens to sort. Top-p's threshold is measured against the softmax of
// step 4, not against what min-p left.
//
// Options are validated on construction: lathe::Error(InvalidArgument)
// naming the command-line option, e.g. "--top-p 1.5: must be in (0, 1]".
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace lathe::text {

struct SamplingOptions {
  float temperature = 0;           // --temp; 0: greedy (argmax; ties → lowest id)
  int32_t top_k = 0;               // --top-k; 0: off
  float top_p = 1;                 // --top-p; 1: off (nucleus: smallest set whose probability ≥ top_p)
  float min_p = 0;                 // --min-p; 0: off (drop tokens with p < min_p · p_max)
  float repetition_penalty = 1;    // --repeat-penalty; 1: off
  int32_t repetition_window = 64;  // --repeat-last-n; how many recent tokens count (0: every token seen)
  float presence_penalty = 0;      // --presence-penalty; in [-2, 2], 0: off
  float frequency_penalty = 0;     // --frequency-penalty; in [-2, 2], 0: off
  uint64_t seed = 0;
  // Added to a token's logit before everything else (OpenAI's logit_bias:
  // −100 all but bans a token, +100 all but forces it); ids checked by sample().
  std::vector<std::pair<int32_t, float>> logit_bias;
};

class Sampler {
 public:
  explicit Sampler(SamplingOptions options);

  // logits: [vocab_size]. Returns the token id and remembers it for the
  // repetition penalty. Throws Error(InvalidArgument) when the logits are
  // empty, hold a NaN (naming its index) or are all -inf. +inf logits are
  // allowed: the pick is among them, uniformly. Remembered tokens at or
  // beyond logits.size() are ignored.
  int32_t sample(std::span<const float> logits);
  // The same, and the distribution the token was drawn from into
  // `probabilities` ([vocab]; greedy: 1 at the argmax): a draft model's q.
  int32_t sample(std::span<const float> logits, std::vector<float>& probabilities);
  // Speculative decoding's rule: `proposal`, drawn by a draft from its
  // distribution `draft` (q, over the vocabulary; empty: a point mass on
  // the proposal, as prompt lookup proposes), is kept with probability
  // min(1, p / q), p being the distribution sample() draws from (the chain
  // above, step 7); otherwise the token is drawn from max(0, p − q)
  // renormalized. Whatever q, the token's distribution is p. Greedy: the
  // argmax, as sample() picks it (the proposal kept exactly where it is the
  // argmax). Remembered as sample() remembers its token.
  int32_t sample_proposal(std::span<const float> logits, int32_t proposal, std::span<const float> draft = {});
  // A token the caller fed (the prompt), for the repetition penalty.
  void accept(int32_t token);
  // Forgets the history and restarts the RNG from the seed.
  void reset();

  const SamplingOptions& options() const { return options_; }

 private:
  struct Candidate {
    float value;  // the logit, then the unnormalized probability
    int32_t id;
  };

  // Steps 1–7: candidates_[0, end) the tokens kept, their values the
  // unnormalized probabilities, whose sum it returns; greedy: the argmax
  // alone, probability 1.
  double distribution(std::span<const float> logits, size_t& end);
  size_t draw(size_t end, double total);  // step 8: the index into candidates_ of a draw
  int32_t remember(int32_t token);        // the token into the penalties' history
  void apply_repetition_penalty();
  void apply_presence_frequency_penalties();
  void sort_prefix(size_t sorted, size_t target, size_t end);
  size_t sort_nucleus_candidates(size_t end, double threshold);

  SamplingOptions options_;
  std::mt19937_64 rng_;
  // The repetition window. repetition_window > 0: a ring of the last
  // repetition_window tokens, recent_next_ the slot the next one overwrites
  // once it is full. repetition_window == 0: every distinct token seen, in
  // order of first sight, and seen_ holding the same ids (a set, not flags
  // indexed by id: accept() does not know the vocabulary's size).
  std::vector<int32_t> recent_;
  size_t recent_next_ = 0;
  std::unordered_set<int32_t> seen_;
  // How often sample() returned each token: the presence and frequency penalties.
  std::unordered_map<int32_t, int32_t> generated_;
  // Scratch kept between calls so that sampling does not allocate:
  std::vector<Candidate> candidates_;  // [vocab_size]
  std::vector<int32_t> window_ids_;    // [≤ repetition_window] distinct ids of the window
};

// Stop conditions for a generation loop: EOS ids, stop strings (matched on
// the decoded text, across token boundaries) and a limit on new tokens.
// Text that could still be the start of a stop string is held back until it
// either completes one (and is dropped with everything after it) or cannot.
class StopChecker {
 public:
  // Throws Error(InvalidArgument) for an empty stop string.
  // max_new_tokens ≤ 0: no limit (llama.cpp's -n -1).
  StopChecker(std::vector<int32_t> eos_ids, std::vector<std::string> stop_strings, int32_t max_new_tokens);

  struct Step {
    std::string text;    // what may be printed now
    bool stop = false;   // generation is over: the token was the last
    std::string reason;  // when stopping: "eos", "stop string \"…\"" or "max tokens"
  };
  // Feed each new token and its decoded text piece (StreamDecoder::push).
  // On EOS the piece is not printed and held-back text is released; on a
  // stop string the text ends right before it; on reaching max_new_tokens
  // the piece and everything held back are released. After a stop every
  // push answers stop again, with no text.
  Step push(int32_t token, std::string_view piece);
  // Held-back text, when generation ends otherwise.
  std::string flush();

 private:
  std::vector<int32_t> eos_ids_;
  std::vector<std::string> stop_strings_;
  int32_t max_new_tokens_;
  int32_t generated_ = 0;
  std::string pending_;  // printed nowhere yet: may be the start of a stop string
  std::string stop_reason_;  // non-empty once stopped
};

}  // namespace lathe::text
