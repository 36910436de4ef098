#include "runtime/generate/generate.hpp"

#include <chrono>
#include <optional>

#include "runtime/error.hpp"
#include "runtime/generate/speculate.hpp"

namespace lathe::text {

std::vector<int32_t> encode_prompt(const Session& session, const Tokenizer& tokenizer, std::string_view prompt) {
  // An encoder-decoder's prompt is a new source every time.
  return tokenizer.encode(prompt, /*add_special=*/session.position() == 0 || session.model().encoder_decoder);
}

GenerateStats generate(Session& session, const Tokenizer& tokenizer, Sampler& sampler, std::string_view prompt,
                       const GenerateOptions& options, const std::function<void(std::string_view)>& on_text) {
  return generate(session, tokenizer, sampler, encode_prompt(session, tokenizer, prompt), options, on_text);
}

namespace {

// generate() of ids, or of a prompt with images spliced (`images`, whose ids
// are `ids`).
GenerateStats run(Session& session, const Tokenizer& tokenizer, Sampler& sampler, std::span<const int32_t> ids,
                  const SplicedPrompt* images, const GenerateOptions& options,
                  const std::function<void(std::string_view)>& on_text) {
  using Clock = std::chrono::steady_clock;
  GenerateStats stats;
  if (ids.empty()) throw Error(ErrorKind::InvalidArgument, "the prompt encodes to no tokens (and the vocabulary adds no BOS)");
  // An encoder-decoder: the prompt is the source, encoded into sequence 0;
  // the decoder starts again from its start token.
  const bool source = session.model().encoder_decoder;
  if (source && static_cast<int64_t>(ids.size()) > session.context())
    throw Error(ErrorKind::InvalidArgument, "the prompt's " + std::to_string(ids.size()) + " tokens do not fit the " +
                                                std::to_string(session.context()) +
                                                " positions of the context (raise --context, up to the spec's max_context)");
  if (!source && session.position() + static_cast<int64_t>(ids.size()) > session.context())
    throw Error(ErrorKind::InvalidArgument, "the prompt's " + std::to_string(ids.size()) + " tokens do not fit the " +
                                                std::to_string(session.context() - session.position()) +
                                                " free positions of the context (raise --context, up to the spec's max_context)");
  stats.prompt_tokens = ids.size();
  if (!source)  // a source is not the decoder's history, which penalties look back on
    for (int32_t id : ids) sampler.accept(id);

  std::vector<int32_t> eos;
  if (options.stop_at_eos && tokenizer.eos()) eos.push_back(*tokenizer.eos());
  StopChecker stop(eos, options.stop, options.max_new_tokens);
  // The prompt's text is the caller's; the continuation decodes on from it.
  StreamDecoder decoder(tokenizer, /*skip_special=*/true, /*start_of_text=*/false);
  std::optional<Constraint> constraint;
  if (options.grammar)
    constraint.emplace(options.grammar,
                       options.vocabulary ? options.vocabulary
                                          : grammar_vocabulary(tokenizer, static_cast<int32_t>(session.model().vocab)),
                       eos);

  const Clock::time_point start = Clock::now();
  std::vector<float> logits = images ? session.prefill(0, ids, images->at, images->features) : session.prompt(0, ids);
  if (options.max_new_tokens == 0) {  // the prompt read, nothing sampled
    stats.prefill_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    stats.stop_reason = "max tokens";
    return stats;
  }
  Clock::time_point prefilled{};
  int32_t token = -1;
  // Speculation: the rows of the last verification pass (each the logits
  // after one of its tokens), the row whose logits decide the next token,
  // the proposal that row judges (-1: none; the token is sampled plainly),
  // and the position of the pass's first row.
  const bool speculate = (options.lookup > 0 || options.draft != nullptr) && !constraint;
  if (speculate && (source || session.model().plan.state_layers > 0))
    throw Error(ErrorKind::Unsupported,
                std::string(session.model().name) +
                    (source ? " is an encoder-decoder" : " has state-space layers, whose state cannot be cut back") +
                    ": no speculative decoding (--lookup, a draft)");
  std::vector<int32_t> history(ids.begin(), ids.end()), proposed;
  std::vector<std::vector<float>> drawn;  // a draft's: each proposal's distribution
  Sampler draft_sampler(draft_sampling(sampler.options()));
  std::vector<float> verified;
  size_t row = 0;
  int32_t proposal = -1;
  int64_t base = 0;
  bool verifying = false;
  const size_t vocab = logits.size();
  std::span<const float> current = logits;
  while (true) {
    // A NaN row is the model's fault, not a token to sample: named by its step.
    check_logits(current, stats.new_tokens == 0 ? std::string("the prompt's pass")
                                                : "decode step " + std::to_string(stats.new_tokens));
    if (proposal >= 0) {
      token = sampler.sample_proposal(current, proposal,
                                      drawn.empty() ? std::span<const float>() : std::span<const float>(drawn[row]));
      if (token == proposal) ++stats.draft_accepted;
    } else {
      token = constraint ? constraint->sample(sampler, current) : sampler.sample(current);
    }
    if (stats.new_tokens == 0) prefilled = Clock::now();
    ++stats.new_tokens;
    stats.tokens.push_back(token);
    history.push_back(token);
    const StopChecker::Step step = stop.push(token, decoder.push(token));
    if (!step.text.empty()) on_text(step.text);
    if (step.stop) {
      stats.stop_reason = step.reason;
      break;
    }
    if (constraint && constraint->finished()) {
      stats.stop_reason = "grammar";
      break;
    }
    // The cache holds every token before this one (a verification's rows
    // past it are not yet kept).
    const int64_t fed = verifying ? base + static_cast<int64_t>(row) + 1 : session.position();
    if (fed >= session.context()) {
      stats.stop_reason = "context full";
      break;
    }
    if (proposal >= 0 && token == proposal) {  // kept: the next row judges the next proposal, or is the target's own
      ++row;
      current = std::span<const float>(verified).subspan(row * vocab, vocab);
      proposal = row < proposed.size() ? proposed[row] : -1;
      continue;
    }
    if (verifying) session.truncate(0, fed);  // the rows past the target's own token are rejected
    verifying = false;
    proposal = -1;
    ++stats.target_passes;
    // Proposals that fit the context and the tokens still to come.
    size_t most = static_cast<size_t>(std::max(options.draft_max, 0));
    most = std::min<size_t>(most, static_cast<size_t>(session.context() - fed - 1));
    if (options.max_new_tokens > 0)
      most = std::min<size_t>(most, static_cast<size_t>(options.max_new_tokens) - stats.new_tokens - 1);
    proposed.clear();
    drawn.clear();
    if (speculate && most > 0 && options.draft) {
      Draft::Proposals p = options.draft->propose(history, most, draft_sampler);
      proposed = std::move(p.tokens);
      drawn = std::move(p.q);
    } else if (speculate && most > 0) {
      proposed = lookup_proposals(history, options.lookup, most);
    }
    if (proposed.empty()) {
      logits = session.decode(token);
      current = logits;
      continue;
    }
    std::vector<int32_t> rows = {token};
    rows.insert(rows.end(), proposed.begin(), proposed.end());
    base = session.position();
    verified = session.verify(0, rows);
    stats.draft_tokens += proposed.size();
    verifying = true;
    row = 0;
    current = std::span<const float>(verified).first(vocab);
    proposal = proposed[0];
  }
  // A verification's rows past the last token are not kept.
  if (verifying) session.truncate(0, base + static_cast<int64_t>(row) + 1);
  // What is still held back: text that might have begun a stop string, and
  // the bytes of an unfinished character (dropped after a stop string).
  const bool stop_string = stats.stop_reason.rfind("stop string", 0) == 0;
  const std::string rest = stop.flush() + (stop_string ? std::string() : decoder.flush());
  if (!rest.empty()) on_text(rest);
  // The last pick was printed: the cache keeps it too, for a conversation
  // that goes on (an EOS or a stop string ends the turn unfed).
  if ((stats.stop_reason == "max tokens" || stats.stop_reason == "grammar") && session.position() < session.context())
    session.decode(token);
  const Clock::time_point done = Clock::now();
  stats.prefill_seconds = std::chrono::duration<double>(prefilled - start).count();
  stats.decode_seconds = std::chrono::duration<double>(done - prefilled).count();
  return stats;
}

}  // namespace

GenerateStats generate(Session& session, const Tokenizer& tokenizer, Sampler& sampler, std::span<const int32_t> ids,
                       const GenerateOptions& options, const std::function<void(std::string_view)>& on_text) {
  return run(session, tokenizer, sampler, ids, nullptr, options, on_text);
}

GenerateStats generate(Session& session, const Tokenizer& tokenizer, Sampler& sampler, const SplicedPrompt& prompt,
                       const GenerateOptions& options, const std::function<void(std::string_view)>& on_text) {
  return run(session, tokenizer, sampler, prompt.ids, &prompt, options, on_text);
}

}  // namespace lathe::text
