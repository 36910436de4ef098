// Text in, text out: a prompt through a tokenizer, a session and a sampler,
// with the continuation streamed as it is produced. The model executable's
// generate, chat and bench commands, and examples/, use this.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/generate/constraint.hpp"
#include "runtime/generate/images.hpp"
#include "runtime/generate/sampler.hpp"
#include "runtime/generate/speculate.hpp"
#include "runtime/model/session.hpp"
#include "runtime/text/tokenize/tokenizer.hpp"

namespace lathe::text {

struct GenerateOptions {
  SamplingOptions sampling;
  int32_t max_new_tokens = 64;  // 0: none (the prompt is only read); < 0: no limit
  std::vector<std::string> stop;  // stop strings: the text ends right before one
  bool stop_at_eos = true;        // the tokenizer's EOS ends the text
  // The text a grammar accepts (constraint.hpp), or null: every step masks
  // the tokens that would leave it, and a whole document with nothing more
  // allowed ends the text (stop reason "grammar"). `vocabulary` is the
  // model's grammar_vocabulary (null: built on each call).
  std::shared_ptr<const grammar::Grammar> grammar;
  std::shared_ptr<const GrammarVocabulary> vocabulary;
  // Speculative decoding by prompt lookup (speculate.hpp), n-grams up to
  // `lookup` long (0: off): up to draft_max tokens proposed a step, verified
  // in one pass of the target (Session::verify: its session's verify_rows
  // must hold draft_max + 1), the longest agreeing prefix kept with one
  // token of the target's own (Sampler::sample_proposal), the rejected rows
  // cut back. Greedy output is the same, bit for bit, as without it. Not
  // with a grammar (its steps run plainly), nor on a model without a
  // verification pass (Error(Unsupported) naming why).
  int32_t lookup = 0;
  int32_t draft_max = 8;
  // A draft model proposes instead (speculate.hpp; not owned), each
  // proposal judged against the distribution it was drawn from.
  Draft* draft = nullptr;
};

struct GenerateStats {
  size_t prompt_tokens = 0;
  size_t new_tokens = 0;
  double prefill_seconds = 0;  // the prompt's pass, to its first sampled token
  double decode_seconds = 0;   // every later token's decode step and sampling
  std::string stop_reason;     // "eos", "stop string \"…\"", "max tokens", "context full", "grammar"
  // Speculation: tokens proposed and kept, and the target's passes after
  // the prompt (decode steps and verifications).
  size_t draft_tokens = 0, draft_accepted = 0, target_passes = 0;
  std::vector<int32_t> tokens;  // the tokens sampled, in order
};

// The ids of `prompt` as the session's cache continues it: with the
// tokenizer's BOS (and whatever else its post-processor adds) when the cache
// is empty, as they are otherwise.
std::vector<int32_t> encode_prompt(const Session& session, const Tokenizer& tokenizer, std::string_view prompt);

// Appends `prompt_ids` to the session's cache, then samples up to
// max_new_tokens tokens, each fed back through a decode step, and hands each
// printable piece of text to `on_text` as soon as it is complete UTF-8 and
// cannot be the start of a stop string. The cache keeps the prompt and every
// fed token, so a later call continues the conversation. Throws
// Error(InvalidArgument) when the prompt is empty or alone does not fit the
// context. An encoder-decoder: the prompt is encoded as sequence 0's new
// source and the decoder starts from its start token.
GenerateStats generate(Session& session, const Tokenizer& tokenizer, Sampler& sampler,
                       std::span<const int32_t> prompt_ids, const GenerateOptions& options,
                       const std::function<void(std::string_view)>& on_text);
// The same for a prompt whose image rows take a vision tower's features
// (splice_images).
GenerateStats generate(Session& session, const Tokenizer& tokenizer, Sampler& sampler, const SplicedPrompt& prompt,
                       const GenerateOptions& options, const std::function<void(std::string_view)>& on_text);
// The same for text: encode_prompt, then the above.
GenerateStats generate(Session& session, const Tokenizer& tokenizer, Sampler& sampler, std::string_view prompt,
                       const GenerateOptions& options, const std::function<void(std::string_view)>& on_text);

}  // namespace lathe::text
