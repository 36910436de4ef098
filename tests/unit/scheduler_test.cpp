// The server's scheduler (runtime/serve/scheduler.hpp) over a fake engine
// whose logits are a hash of a sequence's whole history: a request's tokens
// alone and beside others, prompts cut into fixed chunks, the queue limit,
// a cancelled request freeing its sequence, max_tokens and usage counts.
#include "runtime/serve/scheduler.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "runtime/error.hpp"

using namespace lathe;
using namespace lathe::serve;

namespace {

const text::Tokenizer& demo_tokenizer() {
  static const text::Tokenizer t = text::Tokenizer::from_sentencepiece(LATHE_SOURCE_DIR "/models/demo/tokenizer.model");
  return t;
}

// Logits of a history: a hash of every token so far, so any mix-up between
// sequences (a wrong cache, a wrong row) changes the tokens that follow.
class FakeEngine final : public Engine {
 public:
  FakeEngine(int64_t sequences, int64_t context, int32_t vocab, int32_t eos)
      : histories_(static_cast<size_t>(sequences)), context_(context), vocab_(vocab), eos_(eos) {}
  int64_t sequences() const override { return static_cast<int64_t>(histories_.size()); }
  int64_t context() const override { return context_; }
  int64_t vocab() const override { return vocab_; }
  void reset(int64_t s) override {
    std::lock_guard lock(mutex_);
    histories_.at(static_cast<size_t>(s)).clear();
    ++resets;
  }
  std::vector<float> prefill(int64_t s, std::span<const int32_t> tokens) override {
    std::lock_guard lock(mutex_);
    auto& h = histories_.at(static_cast<size_t>(s));
    h.insert(h.end(), tokens.begin(), tokens.end());
    REQUIRE(static_cast<int64_t>(h.size()) <= context_);
    chunks.push_back(tokens.size());
    return logits(h);
  }
  std::vector<float> decode(std::span<const Step> steps) override {
    {
      std::unique_lock lock(mutex_);
      gate_.wait(lock, [&] { return open_; });
    }
    std::lock_guard lock(mutex_);
    std::vector<float> out;
    std::vector<int64_t> seen;
    for (const Step& st : steps) {
      REQUIRE(std::find(seen.begin(), seen.end(), st.sequence) == seen.end());  // distinct sequences
      seen.push_back(st.sequence);
      auto& h = histories_.at(static_cast<size_t>(st.sequence));
      h.push_back(st.token);
      REQUIRE(static_cast<int64_t>(h.size()) <= context_);
      const std::vector<float> row = logits(h);
      out.insert(out.end(), row.begin(), row.end());
    }
    widest = std::max(widest, steps.size());
    return out;
  }
  // An image's features: its grid's rows of 2, from the input's first value.
  std::vector<float> encode_image(const text::ImageInput& input) override {
    std::lock_guard lock(mutex_);
    ++encoded;
    std::vector<float> out;
    for (int r = 0; r < input.grid.count(); ++r) out.insert(out.end(), {input.rows[0] * 10 + r, input.rows[0] * 10 + r + 0.5f});
    return out;
  }
  // A spliced row enters the history as a token made of its features.
  std::vector<float> prefill_spliced(int64_t s, std::span<const int32_t> tokens, std::span<const int64_t> at,
                                     std::span<const float> features) override {
    std::lock_guard lock(mutex_);
    REQUIRE(features.size() == at.size() * 2);
    auto& h = histories_.at(static_cast<size_t>(s));
    size_t next = 0;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (next < at.size() && at[next] == static_cast<int64_t>(i)) {
        REQUIRE(features[next * 2 + 1] == features[next * 2] + 0.5f);
        spliced.push_back(features[next * 2]);
        h.push_back(100000 + static_cast<int32_t>(features[next * 2]));
        ++next;
      } else {
        h.push_back(tokens[i]);
      }
    }
    REQUIRE(next == at.size());
    chunks.push_back(tokens.size());
    return logits(h);
  }
  // Prompt reuse, where `reuse` is set: a cut keeps a history's start, a
  // copy hands one over; below `floor` tokens from its end a history cuts
  // back no further (a ring's or a state's limit).
  bool reuses_caches() const override { return reuse; }
  int64_t rewind_floor(int64_t s) const override {
    std::lock_guard lock(mutex_);
    return std::max<int64_t>(static_cast<int64_t>(histories_.at(static_cast<size_t>(s)).size()) - floor, 0);
  }
  void truncate(int64_t s, int64_t position) override {
    std::lock_guard lock(mutex_);
    auto& h = histories_.at(static_cast<size_t>(s));
    REQUIRE(position <= static_cast<int64_t>(h.size()));
    REQUIRE(position >= static_cast<int64_t>(h.size()) - floor);
    h.resize(static_cast<size_t>(position));
    ++truncates;
  }
  void copy(int64_t from, int64_t to, int64_t count) override {
    std::lock_guard lock(mutex_);
    const auto& h = histories_.at(static_cast<size_t>(from));
    REQUIRE(from != to);
    REQUIRE(count <= static_cast<int64_t>(h.size()));
    REQUIRE(count >= static_cast<int64_t>(h.size()) - floor);
    histories_.at(static_cast<size_t>(to)).assign(h.begin(), h.begin() + count);
    ++copies;
  }
  // Speculation, where `reuse` is set: each row appended to its sequence's
  // history, its logits that history's.
  bool verifies() const override { return reuse; }
  std::vector<float> verify(std::span<const Step> rows) override {
    std::lock_guard lock(mutex_);
    std::vector<float> out;
    for (const Step& st : rows) {
      auto& h = histories_.at(static_cast<size_t>(st.sequence));
      h.push_back(st.token);
      REQUIRE(static_cast<int64_t>(h.size()) <= context_);
      const std::vector<float> row = logits(h);
      out.insert(out.end(), row.begin(), row.end());
    }
    widest = std::max(widest, rows.size());
    ++verifications;
    return out;
  }
  void hold(bool closed) {
    {
      std::lock_guard lock(mutex_);
      open_ = !closed;
    }
    gate_.notify_all();
  }

  std::vector<size_t> chunks;  // sizes of every prefill call
  size_t widest = 0;           // most rows of one decode
  int resets = 0;
  size_t nan_at = 0;           // > 0: the logits of a history this long are NaN (a broken model)
  int encoded = 0;             // images encoded
  std::vector<float> spliced;  // each spliced row's first feature, in order
  bool reuse = false;
  int64_t floor = std::numeric_limits<int32_t>::max();
  int truncates = 0, copies = 0, verifications = 0;
  int32_t cycle = 0;  // > 0: the likeliest token follows from the last, so text repeats (what lookup finds)

 private:
  std::vector<float> logits(const std::vector<int32_t>& h) const {
    uint64_t state = 1469598103934665603ull;
    for (int32_t t : h) state = (state ^ static_cast<uint64_t>(t)) * 1099511628211ull;
    std::vector<float> out(static_cast<size_t>(vocab_));
    for (size_t v = 0; v < out.size(); ++v) {
      state ^= state << 13, state ^= state >> 7, state ^= state << 17;
      out[v] = static_cast<float>(state % 10000) / 1000.0f;
    }
    if (cycle > 0 && !h.empty()) out[static_cast<size_t>((h.back() * 7 + 3) % cycle + 10)] += 100;
    out[static_cast<size_t>(eos_)] = -std::numeric_limits<float>::infinity();  // every request runs to max_tokens
    if (h.size() == nan_at) std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
    return out;
  }
  mutable std::mutex mutex_;
  std::condition_variable gate_;
  bool open_ = true;
  std::vector<std::vector<int32_t>> histories_;
  int64_t context_;
  int32_t vocab_, eos_;
};

// A draft model's stand-in: its likeliest token the FakeEngine's cycle's
// (so most proposals are kept), except after a token divisible by 5 (so
// some are not); its caches the histories it was given.
class FakeDraft final : public text::DraftModel {
 public:
  FakeDraft(int64_t sequences, int32_t vocab, int32_t cycle)
      : histories_(static_cast<size_t>(sequences)), vocab_(vocab), cycle_(cycle) {}
  int64_t context() const override { return 512; }
  int64_t rewind_floor(int64_t) const override { return 0; }
  void truncate(int64_t s, int64_t position) override {
    auto& h = histories_.at(static_cast<size_t>(s));
    REQUIRE(position <= static_cast<int64_t>(h.size()));
    h.resize(static_cast<size_t>(position));
  }
  std::vector<float> prefill(int64_t s, std::span<const int32_t> tokens) override {
    auto& h = histories_.at(static_cast<size_t>(s));
    h.insert(h.end(), tokens.begin(), tokens.end());
    return logits(h.back());
  }
  std::vector<float> decode(std::span<const Step> steps) override {
    std::vector<float> out;
    for (const Step& st : steps) {
      histories_.at(static_cast<size_t>(st.sequence)).push_back(st.token);
      const std::vector<float> row = logits(st.token);
      out.insert(out.end(), row.begin(), row.end());
    }
    widest = std::max(widest, steps.size());
    return out;
  }
  size_t widest = 0;

 private:
  std::vector<float> logits(int32_t last) const {
    std::vector<float> out(static_cast<size_t>(vocab_), 0.0f);
    out[static_cast<size_t>(last % 5 == 0 ? 12 : (last * 7 + 3) % cycle_ + 10)] = 100;
    return out;
  }
  std::vector<std::vector<int32_t>> histories_;
  int32_t vocab_, cycle_;
};

FakeEngine make_engine(int64_t sequences, int64_t context = 512) {
  const text::Tokenizer& t = demo_tokenizer();
  return FakeEngine(sequences, context, t.vocab_size(), *t.eos());
}

// An image's tower input: one value, `value`, and a grid of `rows` features.
text::ImageInput image_of(float value, int64_t rows) { return {{value, 0}, {}, {1, rows}}; }

GenerationRequest request(std::vector<int32_t> prompt, int32_t max_tokens, float temperature = 0, uint64_t seed = 0) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  return r;
}

std::vector<int32_t> prompt_of(int32_t first, size_t n) {
  std::vector<int32_t> p;
  for (size_t i = 0; i < n; ++i) p.push_back(static_cast<int32_t>((static_cast<size_t>(first) * 31 + i * 7) % 3000 + 10));
  return p;
}

struct Result {
  std::vector<int32_t> tokens;
  std::string text;
  Finish finish;
};

Result collect(Generation& g) {
  Result r;
  std::vector<TokenEvent> events;
  while (true) {
    const std::optional<Finish> f = g.wait(events, std::chrono::milliseconds(100));
    for (const TokenEvent& e : events) {
      if (e.token >= 0) r.tokens.push_back(e.token);
      r.text += e.text;
    }
    events.clear();
    if (f) {
      r.finish = *f;
      return r;
    }
  }
}

}  // namespace

TEST_CASE("scheduler: a request's tokens are the same alone and beside others") {
  for (float temperature : {0.0f, 0.9f}) {
    CAPTURE(temperature);
    std::vector<Result> alone;
    {
      FakeEngine engine = make_engine(1);
      Scheduler s(engine, demo_tokenizer());
      for (int i = 0; i < 6; ++i) {
        auto g = s.submit(request(prompt_of(i, 20 + 37 * static_cast<size_t>(i)), 12 + i, temperature, 100 + i));
        alone.push_back(collect(*g));
      }
    }
    FakeEngine engine = make_engine(4);
    Scheduler s(engine, demo_tokenizer());
    std::vector<std::shared_ptr<Generation>> running;
    for (int i = 0; i < 6; ++i)
      running.push_back(s.submit(request(prompt_of(i, 20 + 37 * static_cast<size_t>(i)), 12 + i, temperature, 100 + i)));
    for (int i = 0; i < 6; ++i) {
      CAPTURE(i);
      const Result r = collect(*running[static_cast<size_t>(i)]);
      CHECK(r.tokens == alone[static_cast<size_t>(i)].tokens);
      CHECK(r.text == alone[static_cast<size_t>(i)].text);
      CHECK(r.finish.reason == "length");
      CHECK(r.finish.completion_tokens == 12 + i);
      CHECK(r.finish.prompt_tokens == 20 + 37 * i);
    }
    CHECK(engine.widest > 1);  // they did share decode passes
    CHECK(engine.widest <= 4);
  }
}

TEST_CASE("scheduler: a prompt is prefilled in chunks of the same size, one chunk a step") {
  FakeEngine engine = make_engine(2);
  SchedulerOptions o;
  o.chunk = 64;
  Scheduler s(engine, demo_tokenizer(), o);
  const Result r = collect(*s.submit(request(prompt_of(1, 150), 3)));
  CHECK(engine.chunks == std::vector<size_t>{64, 64, 22});
  CHECK(r.tokens.size() == 3);
  const SchedulerStats stats = s.stats();
  CHECK(stats.requests == 1);
  CHECK(stats.prompt_tokens == 150);
  CHECK(stats.completion_tokens == 3);
  CHECK(stats.active == 0);
  CHECK(stats.queued == 0);
}

TEST_CASE("scheduler: beyond the queue limit submit refuses, a cancelled request frees its sequence") {
  FakeEngine engine = make_engine(1);
  SchedulerOptions o;
  o.queue_limit = 1;
  Scheduler s(engine, demo_tokenizer(), o);
  engine.hold(true);  // decode passes wait: the first request keeps the only sequence
  auto first = s.submit(request(prompt_of(1, 8), 400));
  REQUIRE(first);
  while (s.stats().active != 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto second = s.submit(request(prompt_of(2, 8), 4));
  REQUIRE(second);
  CHECK(s.stats().queued == 1);
  CHECK(s.submit(request(prompt_of(3, 8), 4)) == nullptr);  // the queue is full
  first->cancel();
  engine.hold(false);
  const Result a = collect(*first);
  CHECK(a.finish.reason == "cancelled");
  CHECK(a.finish.completion_tokens < 400);
  const Result b = collect(*second);
  CHECK(b.finish.reason == "length");
  CHECK(b.tokens.size() == 4);
  CHECK(engine.resets >= 2);  // the cancelled request's sequence, then the second's
}

TEST_CASE("scheduler: with a queue limit of 0 a free sequence still takes a request, a busy one refuses") {
  FakeEngine engine = make_engine(1);
  SchedulerOptions o;
  o.queue_limit = 0;
  Scheduler s(engine, demo_tokenizer(), o);
  engine.hold(true);
  auto first = s.submit(request(prompt_of(1, 8), 400));
  REQUIRE(first);  // --queue 0 once refused every request
  while (s.stats().active != 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(s.submit(request(prompt_of(2, 8), 4)) == nullptr);
  first->cancel();
  engine.hold(false);
  CHECK(collect(*first).finish.reason == "cancelled");
  while (s.stats().active != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto again = s.submit(request(prompt_of(3, 8), 4));
  REQUIRE(again);
  CHECK(collect(*again).tokens.size() == 4);
}

TEST_CASE("scheduler: stop strings end the text, requests that cannot run are refused") {
  FakeEngine engine = make_engine(1, 64);
  Scheduler s(engine, demo_tokenizer());
  const Result whole = collect(*s.submit(request(prompt_of(5, 10), 20)));
  REQUIRE(whole.text.size() > 4);
  GenerationRequest r = request(prompt_of(5, 10), 20);
  r.stop = {whole.text.substr(2, 3)};
  const Result cut = collect(*s.submit(r));
  CHECK(cut.finish.reason == "stop");
  CHECK(cut.text == whole.text.substr(0, whole.text.find(r.stop[0])));
  CHECK(cut.finish.completion_tokens < 20);

  auto refused = [&](GenerationRequest bad) {
    try {
      s.submit(std::move(bad));
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::InvalidArgument);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(refused(request(prompt_of(1, 60), 5)) == "the prompt's 60 tokens and max_tokens 5 exceed the context of 64 tokens");
  CHECK(refused(request({}, 5)) == "the prompt is empty");
  GenerationRequest bad_sampling = request(prompt_of(1, 4), 5, 0.5f);
  bad_sampling.sampling.presence_penalty = 3;
  CHECK(refused(bad_sampling) == "--presence-penalty 3: must be in [-2, 2]");
}

TEST_CASE("scheduler: NaN logits end the request with an error naming the decode step, never a token") {
  FakeEngine engine = make_engine(1, 64);
  engine.nan_at = 4 + 2;  // the prompt's 4 tokens, then two fed: the second decode step
  Scheduler s(engine, demo_tokenizer());
  const Result r = collect(*s.submit(request(prompt_of(2, 4), 10, 0.8f, 7)));
  CHECK(r.finish.reason == "error");
  CHECK(r.finish.error.rfind("decode step 2: the logits hold NaN at token 0 (", 0) == 0);
  CHECK(r.tokens.size() == 2);  // the prompt's pick and decode step 1's
}

TEST_CASE("scheduler: a prompt's images, each distinct one encoded once, their rows spliced in every chunk") {
  FakeEngine engine = make_engine(1);
  SchedulerOptions o;
  o.chunk = 4;
  Scheduler s(engine, demo_tokenizer(), o);
  // Ten tokens; image 0 at rows 1–2 and 7–8 (sent twice), image 1 at 4–5:
  // the chunks [0, 4), [4, 8), [8, 10) each hold some of them.
  GenerationRequest r = request(prompt_of(3, 10), 4);
  r.images.inputs = {image_of(1, 2), image_of(2, 2)};
  r.images.order = {0, 1, 0};
  r.images.at = {1, 2, 4, 5, 7, 8};
  r.images.starts = {0, 2, 4, 6};
  const Result spliced = collect(*s.submit(r));
  CHECK(engine.encoded == 2);
  CHECK(engine.spliced == std::vector<float>{10, 11, 20, 21, 10, 11});
  CHECK(engine.chunks == std::vector<size_t>{4, 4, 2});
  CHECK(s.stats().images == 2);
  CHECK(spliced.finish.prompt_tokens == 10);
  // The features decide what follows: other images, other tokens.
  r.images.inputs = {image_of(3, 2), image_of(2, 2)};
  const Result other = collect(*s.submit(r));
  CHECK(other.tokens != spliced.tokens);

  // Images whose rows see each other both ways (Gemma 3): a chunk ends
  // before an image it would cut, or, when the image starts it, after the
  // image (past the scheduler's chunk); the same tokens come of it.
  r.images.inputs = {image_of(1, 2), image_of(2, 2)};
  r.images.whole = true;
  engine.chunks.clear();
  CHECK(collect(*s.submit(r)).tokens == spliced.tokens);
  CHECK(engine.chunks == std::vector<size_t>{4, 3, 3});
  SchedulerOptions one;
  one.chunk = 1;
  Scheduler single(engine, demo_tokenizer(), one);
  engine.chunks.clear();
  CHECK(collect(*single.submit(r)).tokens == spliced.tokens);
  CHECK(engine.chunks == std::vector<size_t>{1, 2, 1, 2, 1, 2, 1});

  // Images that are not the prompt's rows are refused before they queue.
  GenerationRequest bad = r;
  bad.images.at = {1, 2, 4, 5, 7, 10};
  CHECK_THROWS_WITH_AS(s.submit(bad), doctest::Contains("row 10 is not an increasing row of the 10 prompt tokens"), Error);
  bad.images.at = {1, 2, 4, 5, 7};
  CHECK_THROWS_WITH_AS(s.submit(bad), doctest::Contains("5 spliced rows do not split into the 3 images' starts"), Error);
  bad = r;
  bad.images.order = {0, 1, 2};
  CHECK_THROWS_WITH_AS(s.submit(bad), doctest::Contains("image 2 is not among the 2 given"), Error);
  bad = r;
  bad.images.starts = {0, 3, 4, 6};
  CHECK_THROWS_WITH_AS(s.submit(bad), doctest::Contains("image 0 takes 3 rows, its features 2"), Error);
}

TEST_CASE("scheduler: images of their own sizes (Pixtral's), each row its own image's") {
  FakeEngine engine = make_engine(1);
  SchedulerOptions o;
  o.chunk = 3;
  Scheduler s(engine, demo_tokenizer(), o);
  // Image 0 of 3 rows at 1–3, image 1 of 1 at 5, image 0 again at 7–9.
  GenerationRequest r = request(prompt_of(3, 11), 2);
  r.images.inputs = {image_of(1, 3), image_of(2, 1)};
  r.images.order = {0, 1, 0};
  r.images.at = {1, 2, 3, 5, 7, 8, 9};
  r.images.starts = {0, 3, 4, 7};
  (void)collect(*s.submit(r));
  CHECK(engine.encoded == 2);
  CHECK(engine.spliced == std::vector<float>{10, 11, 12, 20, 10, 11, 12});
  CHECK(engine.chunks == std::vector<size_t>{3, 3, 3, 2});
}

TEST_CASE("scheduler: a request's grammar holds beside unconstrained requests, a whole document stops it") {
  FakeEngine engine = make_engine(3);
  Scheduler s(engine, demo_tokenizer());
  const std::string schema = R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 9},
      "w": {"enum": ["yes", "no"]}}, "required": ["n", "w"], "additionalProperties": false})";
  std::vector<std::shared_ptr<Generation>> constrained;
  std::vector<std::shared_ptr<Generation>> free;
  for (int i = 0; i < 3; ++i) {
    GenerationRequest r = request(prompt_of(i + 1, 12), 200, 1.0f, 50 + static_cast<uint64_t>(i));
    r.grammar = text::compile_grammar(text::GrammarSource::JsonSchema, schema, "schema");
    constrained.push_back(s.submit(std::move(r)));
    free.push_back(s.submit(request(prompt_of(i + 9, 12), 20, 1.0f, 70 + static_cast<uint64_t>(i))));
  }
  for (auto& g : constrained) {
    const Result r = collect(*g);
    CAPTURE(r.text);
    CHECK(r.finish.reason == "stop");  // the fake engine never samples EOS: the grammar ended it
    const nlohmann::json doc = nlohmann::json::parse(r.text);
    CHECK(doc.size() == 2);
    CHECK(doc.at("n").get<int64_t>() >= 1);
    CHECK(doc.at("n").get<int64_t>() <= 9);
    CHECK((doc.at("w") == "yes" || doc.at("w") == "no"));
  }
  for (auto& g : free) CHECK(collect(*g).finish.reason == "length");

  // A grammar whose only choice the model rules out (the end, which the
  // fake engine's logits never allow) ends its own request with an error,
  // not the others'.
  GenerationRequest bad = request(prompt_of(4, 6), 10, 1.0f, 3);
  bad.grammar = text::compile_grammar(text::GrammarSource::Gbnf, "root ::= \"\"\n", "gbnf");
  auto failing = s.submit(std::move(bad));
  auto beside = s.submit(request(prompt_of(5, 6), 10, 1.0f, 4));
  const Result f = collect(*failing);
  CHECK(f.finish.reason == "error");
  CHECK(f.finish.error.find("the request's grammar") != std::string::npos);
  CHECK(collect(*beside).finish.reason == "length");
}

TEST_CASE("scheduler: a prompt that begins with a cached prefix skips its whole chunks, its tokens a cold run's") {
  // A conversation's second turn (the first turn's prompt and answer, then
  // more) after the first, in one sequence, then the same again with the
  // first turn still running in another.
  const std::vector<int32_t> first = prompt_of(3, 22);
  std::vector<int32_t> second;
  SchedulerOptions o;
  o.chunk = 8;
  std::vector<Result> cold;
  {
    FakeEngine engine = make_engine(2);
    o.reuse_prompts = false;
    Scheduler s(engine, demo_tokenizer(), o);
    cold.push_back(collect(*s.submit(request(first, 5, 0.8f, 7))));
    second = first;
    second.insert(second.end(), cold[0].tokens.begin(), cold[0].tokens.end());
    for (int32_t t : prompt_of(9, 11)) second.push_back(t);
    cold.push_back(collect(*s.submit(request(second, 6, 0.8f, 8))));
    CHECK(cold[1].finish.cached_tokens == 0);
    CHECK(s.stats().cached_tokens == 0);
  }
  o.reuse_prompts = true;
  FakeEngine engine = make_engine(2);
  engine.reuse = true;
  Scheduler s(engine, demo_tokenizer(), o);
  const Result a = collect(*s.submit(request(first, 5, 0.8f, 7)));
  CHECK(a.tokens == cold[0].tokens);
  engine.chunks.clear();
  const Result b = collect(*s.submit(request(second, 6, 0.8f, 8)));
  CHECK(b.tokens == cold[1].tokens);
  CHECK(b.finish.cached_tokens == 16);  // the first prompt's whole chunks: 2 of 8
  CHECK(b.finish.prompt_tokens == static_cast<int64_t>(second.size()));
  CHECK(engine.chunks == std::vector<size_t>{8, 8, 6});  // 38 tokens from 16: the cold run's last chunks
  CHECK(engine.truncates == 1);
  CHECK(engine.copies == 0);
  CHECK(s.stats().cached_tokens == 16);

  // The first prompt's cache again, held by a sequence that is still
  // running: copied into the free one.
  engine.hold(true);
  auto running = s.submit(request(second, 200, 0.8f, 9));
  while (s.stats().active != 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto again = s.submit(request(first, 5, 0.8f, 7));
  engine.hold(false);
  const Result c = collect(*again);
  CHECK(c.tokens == cold[0].tokens);
  CHECK(c.finish.cached_tokens == 16);
  running->cancel();
  collect(*running);
  CHECK(engine.copies + engine.truncates == 3);

  // Where the cache cannot cut back that far (a ring's limit), nothing is reused.
  engine.floor = 0;
  const Result d = collect(*s.submit(request(first, 5, 0.8f, 7)));
  CHECK(d.tokens == cold[0].tokens);
  CHECK(d.finish.cached_tokens == 0);
}

TEST_CASE("scheduler: n choices prefill the prompt once, each sampled with its own seed") {
  const std::vector<int32_t> prompt = prompt_of(5, 30);
  SchedulerOptions o;
  o.chunk = 8;
  std::vector<Result> alone;
  {
    FakeEngine engine = make_engine(1);
    Scheduler s(engine, demo_tokenizer(), o);
    for (uint64_t i = 0; i < 3; ++i) alone.push_back(collect(*s.submit(request(prompt, 9, 0.9f, 40 + i))));
  }
  CHECK(alone[0].tokens != alone[1].tokens);
  for (int64_t sequences : {4, 2}) {
    CAPTURE(sequences);
    FakeEngine engine = make_engine(sequences);
    engine.reuse = true;
    Scheduler s(engine, demo_tokenizer(), o);
    const std::vector<std::shared_ptr<Generation>> choices = s.submit(request(prompt, 9, 0.9f, 40), 3);
    REQUIRE(choices.size() == 3);
    for (size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      const Result r = collect(*choices[i]);
      CHECK(r.tokens == alone[i].tokens);
      CHECK(r.finish.reason == "length");
    }
    // With sequences for all, the prompt's 4 chunks ran once and two copies
    // took it; with two, the third choice reused the first's whole chunks.
    if (sequences == 4) {
      CHECK(engine.chunks == std::vector<size_t>{8, 8, 8, 6});
      CHECK(engine.copies == 2);
    } else {
      CHECK(engine.chunks == std::vector<size_t>{8, 8, 8, 6, 6});
    }
    CHECK(s.stats().prompt_tokens == 30);
  }
  FakeEngine engine = make_engine(1);
  SchedulerOptions tight;
  tight.queue_limit = 1;
  Scheduler s(engine, demo_tokenizer(), tight);
  CHECK(s.submit(request(prompt, 4), 3).empty());  // one sequence and one place: no room for three
  CHECK_THROWS_AS(s.submit(request(prompt, 4), 0), Error);
}

TEST_CASE("scheduler: prompt lookup verifies every request's proposals in one pass, greedy tokens unchanged") {
  std::vector<Result> plain;
  const auto requests = [] {
    std::vector<GenerationRequest> r;
    for (int i = 0; i < 4; ++i) r.push_back(request(prompt_of(i, 12 + 5 * static_cast<size_t>(i)), 30 + i));
    return r;
  };
  {
    FakeEngine engine = make_engine(3);
    engine.cycle = 11;
    Scheduler s(engine, demo_tokenizer());
    for (GenerationRequest& r : requests()) plain.push_back(collect(*s.submit(std::move(r))));
  }
  FakeEngine engine = make_engine(3);
  engine.cycle = 11;
  engine.reuse = true;
  SchedulerOptions o;
  o.lookup = 3;
  o.draft_max = 4;
  o.pass_rows = 9;
  Scheduler s(engine, demo_tokenizer(), o);
  std::vector<std::shared_ptr<Generation>> running;
  for (GenerationRequest& r : requests()) running.push_back(s.submit(std::move(r)));
  for (size_t i = 0; i < running.size(); ++i) {
    CAPTURE(i);
    const Result r = collect(*running[i]);
    CHECK(r.tokens == plain[i].tokens);
    CHECK(r.finish.completion_tokens == plain[i].finish.completion_tokens);
  }
  const SchedulerStats stats = s.stats();
  MESSAGE(stats.draft_accepted << " of " << stats.draft_tokens << " proposals kept in " << stats.decode_steps
                               << " passes");
  CHECK(engine.verifications > 0);
  CHECK(stats.draft_tokens > 0);
  CHECK(stats.draft_accepted > stats.draft_tokens / 2);  // the text repeats
  CHECK(engine.widest <= 9);
  CHECK(engine.widest > 3);  // several requests' proposals in one pass
  CHECK(engine.truncates > 0);  // some were rejected and cut back
}

TEST_CASE("scheduler: a draft model's proposals for every request are drafted together, greedy tokens unchanged") {
  std::vector<Result> plain;
  const auto requests = [] {
    std::vector<GenerationRequest> r;
    for (int i = 0; i < 4; ++i) r.push_back(request(prompt_of(i, 12 + 5 * static_cast<size_t>(i)), 30 + i));
    return r;
  };
  {
    FakeEngine engine = make_engine(3);
    engine.cycle = 11;
    Scheduler s(engine, demo_tokenizer());
    for (GenerationRequest& r : requests()) plain.push_back(collect(*s.submit(std::move(r))));
  }
  FakeEngine engine = make_engine(3);
  engine.cycle = 11;
  engine.reuse = true;
  FakeDraft model(3, demo_tokenizer().vocab_size(), 11);
  text::Draft draft(model, 3, 0.5f);
  SchedulerOptions o;
  o.draft = &draft;
  o.draft_max = 4;
  o.pass_rows = 15;
  Scheduler s(engine, demo_tokenizer(), o);
  std::vector<std::shared_ptr<Generation>> running;
  for (GenerationRequest& r : requests()) running.push_back(s.submit(std::move(r)));
  for (size_t i = 0; i < running.size(); ++i) {
    CAPTURE(i);
    const Result r = collect(*running[i]);
    CHECK(r.tokens == plain[i].tokens);
  }
  const SchedulerStats stats = s.stats();
  MESSAGE(stats.draft_accepted << " of " << stats.draft_tokens << " proposals kept in " << stats.decode_steps
                               << " passes");
  CHECK(stats.draft_tokens > 0);
  CHECK(stats.draft_accepted > stats.draft_tokens / 2);
  CHECK(stats.draft_accepted < stats.draft_tokens);  // some refused, and cut back
  CHECK(model.widest > 1);                           // draft steps of several requests together
}
