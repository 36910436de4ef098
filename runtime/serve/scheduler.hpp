// Continuous batching: requests share an Engine's sequences. One engine
// thread owns the Engine; HTTP handler threads submit requests and read
// their tokens back through a Generation each.
//
// Each step of the engine thread:
//   1. admits queued requests (oldest first) into free sequences;
//   2. releases the sequences of requests whose client went away
//      (Generation::cancel) and of finished ones;
//   3. runs one chunk (SchedulerOptions::chunk tokens) of the prompt of the
//      oldest request still prefilling; after its last chunk, samples the
//      request's first token (and its other choices', each from a copy of
//      the prompt's cache);
//   4. runs one decode pass over every request that has a token to feed,
//      and samples each row with the request's own Sampler.
// A prompt is always cut into the same chunks, whatever else runs, and a
// decode row does not depend on the others (Engine::decode): a request's
// tokens are the same alone or beside others, for a given seed.
//
// Prompt reuse (SchedulerOptions::reuse_prompts): a sequence keeps its cache
// after its request, and remembers the prompt tokens whose rows a cold
// prefill would give bit for bit: those of whole chunks (a prompt's last,
// shorter chunk, and the generated tokens' single rows, sum in other
// orders). A new request whose prompt begins with such tokens skips their
// prefill: whole chunks of them, so that its remaining chunks are a cold
// run's, in its own sequence cut back to them, or copied on the device from
// another sequence (one still running too). Its tokens are then those a
// cold server gives.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/generate/constraint.hpp"
#include "runtime/generate/images.hpp"
#include "runtime/generate/sampler.hpp"
#include "runtime/generate/speculate.hpp"
#include "runtime/serve/engine.hpp"
#include "runtime/text/tokenize/tokenizer.hpp"

namespace lathe::serve {

// A chat prompt's images (a vision model's, spliced in place of image
// tokens): each distinct image's tower input, and the prompt's rows their
// features take. The engine thread encodes each distinct image once, before
// the request's first prompt chunk, and frees its input.
struct PromptImages {
  std::vector<text::ImageInput> inputs;  // distinct images' tower input (text::image_input)
  std::vector<uint32_t> order;           // per image in the prompt, in order: its index in inputs
  std::vector<int64_t> at;               // the prompt's rows that take features, increasing; image i's
                                         // are at[starts[i], starts[i + 1])
  std::vector<size_t> starts;            // one more than order
  bool whole = false;                    // an image's rows see each other both ways: a chunk cuts none
  // The decoder cross-attends to the images (Llama 3.2 Vision): no row is
  // spliced (at and starts empty); the images, in order, go into the
  // sequence's cross-attention caches before its first chunk.
  bool cross = false;
  int64_t marker = -1;  // its image marker: a token the prompt holds past the vocabulary (Llama 3.2 Vision's)
  bool empty() const { return order.empty(); }
};

struct GenerationRequest {
  std::vector<int32_t> prompt;  // token ids; 1 ≤ size, size + max_tokens ≤ the engine's context
  PromptImages images;
  text::SamplingOptions sampling;
  int32_t max_tokens = 16;  // ≥ 1
  std::vector<std::string> stop;
  int32_t top_logprobs = -1;  // < 0: no log-probabilities; else the sampled token's and that many alternatives'
  // The text a grammar accepts (response_format, grammar; constraint.hpp):
  // each step samples among the tokens that keep the text a prefix of one
  // of its documents; a whole document that nothing may follow finishes
  // with "stop". Null: any text.
  std::shared_ptr<const grammar::Grammar> grammar;
};

struct TokenLogprob {
  int32_t token;
  float logprob;  // log softmax of the model's logits (before penalties, temperature, truncation)
};

// One sampled token, and the text that became printable with it (empty
// while a character is incomplete or text may start a stop string; more
// than the token's when held-back text is released).
struct TokenEvent {
  int32_t token = -1;  // -1: no token, only text released when generation ended
  std::string text;
  float logprob = 0;
  std::vector<TokenLogprob> top;  // the top_logprobs most likely, most likely first
};

struct Finish {
  std::string reason;  // "stop" (EOS or a stop string), "length" (max_tokens or a full context), "cancelled", "error"
  std::string error;   // reason "error": what the engine threw
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;  // tokens sampled
  int64_t cached_tokens = 0;      // prompt tokens whose prefill a cached prefix spared
};

// The handler's end of one request.
class Generation {
 public:
  // Moves the events produced since the last call into `out`, waiting up to
  // `timeout` for one. Returns the finish once generation is over and every
  // event has been taken.
  std::optional<Finish> wait(std::vector<TokenEvent>& out, std::chrono::milliseconds timeout);
  // The client went away: the engine thread frees the sequence at its next step.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

 private:
  friend class Scheduler;
  void push(TokenEvent event);
  void finish(Finish finish);

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<TokenEvent> events_;
  std::optional<Finish> finish_;
  std::atomic<bool> cancelled_ = false;
};

struct SchedulerOptions {
  int64_t chunk = 64;         // prompt tokens per prefill pass
  int64_t queue_limit = 64;   // requests waiting for a sequence; beyond it submit() refuses
  bool reuse_prompts = true;  // cached prefixes skip their prefill (where the engine reuses caches)
  // Speculative decoding by prompt lookup (text::lookup_proposals): each
  // request without a grammar proposes up to draft_max tokens a step from
  // n-grams up to `lookup` long (0: off), every request's verified in the
  // one decode pass, at most `pass_rows` rows in all (the engine's).
  // Greedy requests get the tokens they get without it.
  int32_t lookup = 0;
  int32_t draft_max = 8;
  int64_t pass_rows = 0;  // 0: a row a sequence
  // A draft model proposing instead (not owned; a sequence for each of the
  // engine's): every speculating request's draft steps batched together.
  text::Draft* draft = nullptr;
};

struct SchedulerStats {
  int64_t queued = 0, active = 0;                   // now
  int64_t requests = 0;                             // finished, every reason
  int64_t prompt_tokens = 0, completion_tokens = 0;  // of finished and running requests
  int64_t decode_steps = 0;                          // decode passes
  int64_t images = 0;                                // images encoded (an image twice in a request: once)
  int64_t cached_tokens = 0;                         // prompt tokens whose prefill reuse spared
  int64_t draft_tokens = 0, draft_accepted = 0;      // speculation: tokens proposed, and kept
  double busy_seconds = 0;                           // engine time (prefill and decode)
};

class Scheduler {
 public:
  // `tokenizer` decodes the text and names the EOS; both must outlive the scheduler.
  Scheduler(Engine& engine, const text::Tokenizer& tokenizer, SchedulerOptions options = {});
  ~Scheduler();  // cancels everything and joins the engine thread
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request; nullptr when the queue is full. Throws
  // Error(InvalidArgument) for a request the engine cannot run (empty
  // prompt, prompt + max_tokens beyond the context, bad sampling options,
  // images whose rows are not the prompt's).
  std::shared_ptr<Generation> submit(GenerationRequest request);
  // `choices` samples of one prompt (OpenAI's n): choice i with seed
  // sampling.seed + i. The prompt is prefilled once; each other choice's
  // sequence takes a copy of its cache (where the engine reuses caches and
  // the choices hold sequences at once; else each prefills it, reusing what
  // it can). Empty when the queue has no room for all of them.
  std::vector<std::shared_ptr<Generation>> submit(GenerationRequest request, int32_t choices);

  SchedulerStats stats() const;
  int64_t sequences() const { return engine_.sequences(); }
  int64_t context() const { return engine_.context(); }
  int64_t queue_limit() const { return options_.queue_limit; }

 private:
  struct Slot;
  struct Queued {
    GenerationRequest request;
    std::shared_ptr<Generation> generation;
    uint64_t group = 0;  // the choices of one request share it
    int32_t choice = 0;
  };
  // A sequence's cache past its request: the prompt tokens whose rows a
  // cold prefill gives bit for bit (whole chunks), and when it last served.
  struct Held {
    std::vector<int32_t> tokens;
    uint64_t used = 0;
  };
  void run();
  // Places a request admitted from the queue into a free sequence: the one
  // whose cache it reuses most, or a copy of another's cached prefix, or a
  // choice waiting for its first choice's prompt.
  void place(Queued& queued);  // moves the request into its slot once placed
  // The prompt tokens a request may take from sequence `from`'s cache: whole
  // chunks of the prefix it shares with the held tokens, short of the
  // prompt's last token, and a cut the cache can make exactly.
  int64_t reusable(const GenerationRequest& request, size_t from) const;
  bool step();  // one iteration; false when stopping
  // Samples the slot's next token; the finish reason when it was the last, else "".
  // `proposal` ≥ 0: a speculated token this row judges (Sampler::sample_proposal).
  // `q`: the distribution a draft drew it from (empty: a point mass, as lookup proposes).
  std::string sample(Slot& slot, std::span<const float> logits, int32_t proposal = -1,
                     std::span<const float> q = {});
  void release(size_t index, Finish finish);

  Engine& engine_;
  const text::Tokenizer& tokenizer_;
  SchedulerOptions options_;
  // The vocabulary as grammars see it: built by the engine thread at the
  // first request with a grammar (a trie of every token's bytes).
  std::shared_ptr<const text::GrammarVocabulary> grammar_vocabulary_;

  mutable std::mutex mutex_;  // guards queue_, stopping_, stats_
  std::condition_variable wake_;
  std::deque<Queued> queue_;
  uint64_t groups_ = 0;
  bool stopping_ = false;
  SchedulerStats stats_;

  std::vector<std::unique_ptr<Slot>> slots_;  // [sequences]; engine thread only
  std::vector<Held> held_;                    // [sequences]; engine thread only
  uint64_t admitted_ = 0;                     // admission order, for prefill fairness
  std::thread thread_;
};

}  // namespace lathe::serve
