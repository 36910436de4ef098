// Constrained decoding (issue 47) between the model's logits and the
// sampler: a grammar (GBNF, or a JSON schema compiled into one; grammar.hpp)
// masks every token that would take the output off the documents it
// accepts, so that whatever the sampler picks the text stays a prefix of
// one, and the end of generation is allowed only where the text is whole.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/generate/sampler.hpp"
#include "runtime/grammar/grammar.hpp"
#include "runtime/text/tokenize/tokenizer.hpp"

namespace lathe::text {

// The tokenizer's vocabulary as a grammar sees it, over the model's `vocab`
// logits: each token's bytes (Tokenizer::token_bytes); special and control
// tokens, tokens that decode to nothing and the rows past the tokenizer's
// size (an embedding padded past it) empty, never allowed. Built once per
// model (a trie of every token's bytes) and shared by every constrained
// generation.
struct GrammarVocabulary {
  std::vector<std::string> bytes;  // [vocab]
  grammar::Vocabulary trie;        // of bytes
};
std::shared_ptr<const GrammarVocabulary> grammar_vocabulary(const Tokenizer& tokenizer, int32_t vocab);

// The grammar of a request or a command line: GBNF text, or a JSON schema
// (its text), or any JSON object. `name` is what errors call it. Throws
// lathe::Error(InvalidArgument) naming the line and column, or the schema's
// keyword, at fault.
enum class GrammarSource { Gbnf, JsonSchema, JsonObject };
std::shared_ptr<const grammar::Grammar> compile_grammar(GrammarSource source, const std::string& text,
                                                        const std::string& name);

// One generation's constraint.
class Constraint {
 public:
  // `ends`: the tokens that end generation (the EOS), allowed only where the
  // text so far is a whole document.
  Constraint(std::shared_ptr<const grammar::Grammar> grammar, std::shared_ptr<const GrammarVocabulary> vocabulary,
             std::vector<int32_t> ends);

  // logits[id] = −∞ for every token the grammar refuses here (logits holds
  // the vocabulary's size). Throws Error(InvalidArgument) when it refuses
  // every token and the end (a grammar whose text the vocabulary cannot
  // spell, as a character no token holds).
  void mask(std::span<float> logits);
  // The sampled token (one mask() allowed): the grammar moves past its bytes.
  void accept(int32_t token);
  // One constrained step: the logits masked (a copy: `logits` stays the
  // model's, for logprobs), the sampler's pick among what is left, and the
  // grammar moved past it. Throws as mask() does, and where the model gives
  // −∞ to every token the grammar allows (Sampler::sample).
  int32_t sample(Sampler& sampler, std::span<const float> logits);
  // The text is a whole document and nothing may follow it: generation is over.
  bool finished() const { return !matcher_.can_continue(); }
  // The text so far is a whole document.
  bool complete() const { return matcher_.can_end(); }

 private:
  grammar::Matcher matcher_;
  std::shared_ptr<const GrammarVocabulary> vocabulary_;
  std::vector<int32_t> ends_;
  std::vector<uint8_t> allowed_;  // scratch: [vocab]
  std::vector<float> masked_;     // scratch: [vocab], sample()'s logits
};

}  // namespace lathe::text
