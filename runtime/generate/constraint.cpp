#include "runtime/generate/constraint.hpp"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "runtime/error.hpp"
#include "runtime/grammar/json_schema.hpp"

namespace lathe::text {

std::shared_ptr<const GrammarVocabulary> grammar_vocabulary(const Tokenizer& tokenizer, int32_t vocab) {
  std::vector<std::string> bytes(static_cast<size_t>(std::max(vocab, 0)));
  const int32_t known = std::min(vocab, tokenizer.vocab_size());
  for (int32_t id = 0; id < known; ++id)
    if (!tokenizer.is_special(id)) bytes[static_cast<size_t>(id)] = std::string(tokenizer.token_bytes(id));
  grammar::Vocabulary trie(bytes);
  return std::make_shared<const GrammarVocabulary>(GrammarVocabulary{std::move(bytes), std::move(trie)});
}

std::shared_ptr<const grammar::Grammar> compile_grammar(GrammarSource source, const std::string& text,
                                                        const std::string& name) {
  switch (source) {
    case GrammarSource::Gbnf:
      return grammar::Grammar::parse(text, name);
    case GrammarSource::JsonObject:
      return grammar::Grammar::parse(grammar::json_object_gbnf(), name);
    case GrammarSource::JsonSchema: {
      nlohmann::ordered_json schema;  // in the order written: the output's keys follow the schema's properties
      try {
        schema = nlohmann::ordered_json::parse(text);
      } catch (const nlohmann::json::exception& e) {
        throw Error(ErrorKind::InvalidArgument, name + ": not JSON: " + e.what());
      }
      return grammar::Grammar::parse(grammar::schema_to_gbnf(schema, name), name + " (as a grammar)");
    }
  }
  throw Error(ErrorKind::InvalidArgument, name + ": unknown grammar source");
}

Constraint::Constraint(std::shared_ptr<const grammar::Grammar> grammar,
                       std::shared_ptr<const GrammarVocabulary> vocabulary, std::vector<int32_t> ends)
    : matcher_(std::move(grammar)), vocabulary_(std::move(vocabulary)), ends_(std::move(ends)) {}

void Constraint::mask(std::span<float> logits) {
  vocabulary_->trie.allowed(matcher_, allowed_);
  const bool end = matcher_.can_end();
  for (int32_t id : ends_)
    if (id >= 0 && static_cast<size_t>(id) < allowed_.size()) allowed_[static_cast<size_t>(id)] = end ? 1 : 0;
  const size_t n = std::min(logits.size(), allowed_.size());
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    if (allowed_[i]) any = true;
    else logits[i] = -std::numeric_limits<float>::infinity();
  }
  for (size_t i = n; i < logits.size(); ++i) logits[i] = -std::numeric_limits<float>::infinity();
  if (!any)
    throw Error(ErrorKind::InvalidArgument,
                end ? "the grammar's document is complete but the vocabulary has no end-of-text token to end it"
                    : "the grammar allows no token of the vocabulary here (it asks for text no token spells)");
}

void Constraint::accept(int32_t token) {
  if (std::find(ends_.begin(), ends_.end(), token) != ends_.end()) return;
  const std::vector<std::string>& bytes = vocabulary_->bytes;
  if (token < 0 || static_cast<size_t>(token) >= bytes.size() || bytes[static_cast<size_t>(token)].empty() ||
      !matcher_.accept(bytes[static_cast<size_t>(token)]))
    throw Error(ErrorKind::InvalidArgument, "token " + std::to_string(token) + " is not one the grammar allows here");
}

int32_t Constraint::sample(Sampler& sampler, std::span<const float> logits) {
  masked_.assign(logits.begin(), logits.end());
  mask(masked_);
  const int32_t token = sampler.sample(masked_);
  accept(token);
  return token;
}

}  // namespace lathe::text
