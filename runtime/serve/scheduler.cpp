#include "runtime/serve/scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/plan.hpp"
#include "runtime/error.hpp"
#include "runtime/generate/speculate.hpp"

namespace lathe::serve {

namespace {

using Clock = std::chrono::steady_clock;

// log softmax(logits)[token] and the `top` most likely tokens' (ties: the lower id).
void fill_logprobs(std::span<const float> logits, TokenEvent& event, int32_t top) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
  const double log_total = max + std::log(sum);
  event.logprob = static_cast<float>(logits[static_cast<size_t>(event.token)] - log_total);
  if (top <= 0) return;
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  const size_t n = std::min(ids.size(), static_cast<size_t>(top));
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(), [&](int32_t a, int32_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
           (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
  });
  for (size_t i = 0; i < n; ++i)
    event.top.push_back({ids[i], static_cast<float>(logits[static_cast<size_t>(ids[i])] - log_total)});
}

}  // namespace

std::optional<Finish> Generation::wait(std::vector<TokenEvent>& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return !events_.empty() || finish_; });
  for (TokenEvent& e : events_) out.push_back(std::move(e));
  events_.clear();
  return finish_;
}

void Generation::push(TokenEvent event) {
  {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
  }
  changed_.notify_all();
}

void Generation::finish(Finish finish) {
  {
    std::lock_guard lock(mutex_);
    finish_ = std::move(finish);
  }
  changed_.notify_all();
}

// A request holding a sequence.
struct Scheduler::Slot {
  // `prompt_is_source`: an encoder-decoder's prompt is not the decoder's
  // history, which the sampler's penalties look back on.
  Slot(GenerationRequest r, std::shared_ptr<Generation> g, const text::Tokenizer& tokenizer, uint64_t order,
       bool prompt_is_source)
      : request(std::move(r)),
        generation(std::move(g)),
        sampler(request.sampling),
        stop(tokenizer.eos() ? std::vector<int32_t>{*tokenizer.eos()} : std::vector<int32_t>{}, request.stop,
             request.max_tokens),
        decoder(tokenizer, /*skip_special=*/true, /*start_of_text=*/false),
        admitted(order) {
    if (!prompt_is_source)
      for (int32_t id : request.prompt) sampler.accept(id);
  }
  GenerationRequest request;
  std::shared_ptr<Generation> generation;
  text::Sampler sampler;
  text::StopChecker stop;
  text::StreamDecoder decoder;
  uint64_t admitted;
  size_t prefilled = 0;     // prompt tokens in the cache
  int64_t position = 0;     // tokens in the cache
  int32_t next = -1;        // the sampled token still to feed; -1: none yet
  int64_t generated = 0;
  std::vector<std::vector<float>> features;  // per distinct image, once encoded
  std::optional<text::Constraint> constraint;  // the request's grammar
  std::string error;                           // finish reason "error": why
  uint64_t group = 0;    // Queued::group
  int32_t choice = 0;    // Queued::choice
  bool waiting = false;  // a later choice waiting for its first choice's prompt, to copy its cache
  int64_t cached = 0;    // prompt tokens reused
  std::vector<int32_t> history;  // with speculation: the prompt and every token sampled, for prompt lookup
  std::optional<text::Sampler> draft_sampler;  // a draft's draws for this request
};

namespace {

// A request's images, checked against its prompt: as the engine thread will
// read them.
void check_images(const PromptImages& images, size_t prompt) {
  if (images.empty() && images.at.empty() && images.inputs.empty()) return;
  const auto refuse = [](const std::string& what) { throw Error(ErrorKind::InvalidArgument, "the prompt's images: " + what); };
  if (images.cross) {  // no row spliced: each image of the order one of the inputs
    if (!images.at.empty() || !images.starts.empty()) refuse("a cross-attention decoder splices no rows");
    for (uint32_t k : images.order)
      if (k >= images.inputs.size() || images.inputs[k].tiles < 1)
        refuse("image " + std::to_string(k) + " is not among the " + std::to_string(images.inputs.size()) +
               " tiled images given");
    return;
  }
  if (images.starts.size() != images.order.size() + 1 || images.starts.front() != 0 ||
      images.starts.back() != images.at.size() || !std::is_sorted(images.starts.begin(), images.starts.end()))
    refuse(std::to_string(images.at.size()) + " spliced rows do not split into the " +
           std::to_string(images.order.size()) + " images' starts");
  for (size_t i = 0; i < images.at.size(); ++i)
    if (images.at[i] < 0 || images.at[i] >= static_cast<int64_t>(prompt) || (i > 0 && images.at[i] <= images.at[i - 1]))
      refuse("row " + std::to_string(images.at[i]) + " is not an increasing row of the " + std::to_string(prompt) +
             " prompt tokens");
  for (uint32_t k : images.order)
    if (k >= images.inputs.size()) refuse("image " + std::to_string(k) + " is not among the " +
                                          std::to_string(images.inputs.size()) + " given");
  for (const text::ImageInput& input : images.inputs)
    if (input.rows.empty()) refuse("an image without input rows");
  for (size_t i = 0; i < images.order.size(); ++i)
    if (images.starts[i + 1] - images.starts[i] != static_cast<size_t>(images.inputs[images.order[i]].grid.count()))
      refuse("image " + std::to_string(i) + " takes " + std::to_string(images.starts[i + 1] - images.starts[i]) +
             " rows, its features " + std::to_string(images.inputs[images.order[i]].grid.count()));
}

}  // namespace

Scheduler::Scheduler(Engine& engine, const text::Tokenizer& tokenizer, SchedulerOptions options)
    : engine_(engine), tokenizer_(tokenizer), options_(options) {
  if (options_.chunk < 1) throw Error(ErrorKind::InvalidArgument, "scheduler chunk must be at least 1");
  slots_.resize(static_cast<size_t>(engine_.sequences()));
  held_.resize(slots_.size());
  thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  for (Queued& q : queue_) q.generation->finish({"cancelled", "", 0, 0});
  for (auto& slot : slots_)
    if (slot) slot->generation->finish({"cancelled", "", static_cast<int64_t>(slot->request.prompt.size()), slot->generated});
}

std::shared_ptr<Generation> Scheduler::submit(GenerationRequest request) {
  std::vector<std::shared_ptr<Generation>> one = submit(std::move(request), 1);
  return one.empty() ? nullptr : std::move(one.front());
}

std::vector<std::shared_ptr<Generation>> Scheduler::submit(GenerationRequest request, int32_t choices) {
  if (choices < 1) throw Error(ErrorKind::InvalidArgument, "a request samples at least one choice");
  const int64_t prompt = static_cast<int64_t>(request.prompt.size());
  if (prompt == 0) throw Error(ErrorKind::InvalidArgument, "the prompt is empty");
  if (request.max_tokens < 1) throw Error(ErrorKind::InvalidArgument, "max_tokens must be at least 1");
  if (prompt + request.max_tokens > engine_.context())
    throw Error(ErrorKind::InvalidArgument, "the prompt's " + std::to_string(prompt) + " tokens and max_tokens " +
                                                std::to_string(request.max_tokens) + " exceed the context of " +
                                                std::to_string(engine_.context()) + " tokens");
  for (int32_t id : request.prompt)
    if (id < 0 || (id >= engine_.vocab() && !(request.images.cross && id == request.images.marker)))
      throw Error(ErrorKind::InvalidArgument, "token " + std::to_string(id) + " is outside the vocabulary of " +
                                                  std::to_string(engine_.vocab()));
  check_images(request.images, request.prompt.size());
  text::Sampler check(request.sampling);  // throws for bad options, here rather than on the engine thread
  (void)check;
  std::vector<std::shared_ptr<Generation>> generations;
  {
    std::lock_guard lock(mutex_);
    // The queue limit counts requests that must wait: those that a free
    // sequence takes at the next step do not (with --queue 0, every free
    // sequence still takes a request).
    const int64_t free = std::max<int64_t>(engine_.sequences() - stats_.active, 0);
    if (static_cast<int64_t>(queue_.size()) + choices > options_.queue_limit + free) return {};
    const uint64_t group = ++groups_, seed = request.sampling.seed;
    for (int32_t i = 0; i < choices; ++i) {
      generations.push_back(std::make_shared<Generation>());
      GenerationRequest r = i + 1 < choices ? request : std::move(request);
      r.sampling.seed = seed + static_cast<uint64_t>(i);
      queue_.push_back({std::move(r), generations.back(), group, i});
      ++stats_.queued;
    }
  }
  wake_.notify_all();
  return generations;
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Scheduler::run() {
  while (step()) {
  }
}

// Empties the sequence, then says the request is over: by the time its
// handler (or a test) sees the finish, the sequence and the counts are free.
void Scheduler::release(size_t index, Finish finish) {
  const std::unique_ptr<Slot> slot = std::move(slots_[index]);
  finish.prompt_tokens = static_cast<int64_t>(slot->request.prompt.size());
  finish.completion_tokens = slot->generated;
  finish.cached_tokens = slot->cached;
  // Its later choices waiting for its prompt prefill it themselves.
  if (slot->choice == 0)
    for (auto& other : slots_)
      if (other && other->waiting && other->group == slot->group) other->waiting = false;
  std::exception_ptr failure;
  try {
    // The cache stays for a later request where it holds reusable rows.
    if (finish.reason == "error") held_[index].tokens.clear();
    if (held_[index].tokens.empty()) engine_.reset(static_cast<int64_t>(index));
  } catch (...) {
    held_[index].tokens.clear();
    failure = std::current_exception();
  }
  {
    std::lock_guard lock(mutex_);
    ++stats_.requests;
    --stats_.active;
  }
  slot->generation->finish(std::move(finish));
  if (failure) std::rethrow_exception(failure);
}

std::string Scheduler::sample(Slot& slot, std::span<const float> logits, int32_t proposal,
                              std::span<const float> q) {
  TokenEvent event;
  check_logits(logits, slot.generated == 0 ? std::string("the prompt's pass")
                                           : "decode step " + std::to_string(slot.generated));
  if (slot.request.grammar && !slot.constraint) {
    if (!grammar_vocabulary_)
      grammar_vocabulary_ = text::grammar_vocabulary(tokenizer_, static_cast<int32_t>(engine_.vocab()));
    slot.constraint.emplace(slot.request.grammar, grammar_vocabulary_,
                            tokenizer_.eos() ? std::vector<int32_t>{*tokenizer_.eos()} : std::vector<int32_t>{});
  }
  if (slot.constraint) {
    try {
      event.token = slot.constraint->sample(slot.sampler, logits);
    } catch (const Error& e) {  // this request's grammar, not the engine: it alone ends
      slot.error = "the request's grammar: " + std::string(e.what());
      slot.next = -1;
      return "error";
    }
  } else {
    event.token = proposal >= 0 ? slot.sampler.sample_proposal(logits, proposal, q) : slot.sampler.sample(logits);
  }
  ++slot.generated;
  if (options_.lookup > 0 || options_.draft) {  // what prompt lookup and a draft continue
    if (slot.history.empty()) slot.history = slot.request.prompt;
    slot.history.push_back(event.token);
  }
  if (slot.request.top_logprobs >= 0) fill_logprobs(logits, event, slot.request.top_logprobs);
  const text::StopChecker::Step step = slot.stop.push(event.token, slot.decoder.push(event.token));
  event.text = step.text;
  {
    std::lock_guard lock(mutex_);
    ++stats_.completion_tokens;
  }
  std::string reason;
  if (step.stop) reason = step.reason == "max tokens" ? "length" : "stop";
  else if (slot.constraint && slot.constraint->finished()) reason = "stop";  // the document is whole
  else if (slot.position >= engine_.context()) reason = "length";  // nothing more fits
  if (!reason.empty()) {
    // Held back: a possible stop string's start and an unfinished
    // character (dropped after a stop string, as generate() does).
    const bool stop_string = step.reason.rfind("stop string", 0) == 0;
    event.text += slot.stop.flush() + (stop_string ? std::string() : slot.decoder.flush());
    slot.generation->push(std::move(event));
    slot.next = -1;
    return reason;
  }
  slot.next = event.token;
  slot.generation->push(std::move(event));
  return "";
}

int64_t Scheduler::reusable(const GenerationRequest& request, size_t from) const {
  const std::vector<int32_t>& held = held_[from].tokens;
  const size_t most = std::min(held.size(), request.prompt.size() - 1);  // a row is left to give the logits
  size_t common = 0;
  while (common < most && held[common] == request.prompt[common]) ++common;
  const int64_t take = static_cast<int64_t>(common) / options_.chunk * options_.chunk;
  return take > 0 && take >= engine_.rewind_floor(static_cast<int64_t>(from)) ? take : 0;
}

void Scheduler::place(Queued& q) {
  const GenerationRequest& request = q.request;
  std::vector<size_t> free;
  for (size_t i = 0; i < slots_.size(); ++i)
    if (!slots_[i]) free.push_back(i);
  const bool reuses = engine_.reuses_caches();
  // A later choice whose first choice is still prefilling the prompt waits
  // to copy its cache.
  bool waits = false;
  if (q.choice > 0 && reuses)
    for (const auto& s : slots_)
      waits = waits || (s && s->group == q.group && s->choice == 0 && s->prefilled < s->request.prompt.size());
  // The free sequence whose own cache serves most, then any sequence's.
  int64_t take = 0;
  size_t target = free.front();
  std::optional<size_t> from;
  if (!waits && reuses && options_.reuse_prompts && request.images.empty() && !engine_.prompt_is_source()) {
    for (size_t f : free)
      if (const int64_t k = reusable(request, f); k > take) take = k, target = f;
    for (size_t j = 0; j < slots_.size(); ++j)
      if (const int64_t k = slots_[j] ? reusable(request, j) : 0; k > take) take = k, from = j;
  }
  // Otherwise (or to copy into) the free sequence whose cache served longest ago.
  if (take == 0 || from)
    target = *std::min_element(free.begin(), free.end(),
                               [&](size_t a, size_t b) { return held_[a].used < held_[b].used; });
  Held& held = held_[target];
  held.tokens.clear();
  if (from) engine_.copy(static_cast<int64_t>(*from), static_cast<int64_t>(target), take);
  else if (take > 0) engine_.truncate(static_cast<int64_t>(target), take);
  else engine_.reset(static_cast<int64_t>(target));
  held.tokens.assign(request.prompt.begin(), request.prompt.begin() + take);
  held.used = admitted_;
  auto slot = std::make_unique<Slot>(std::move(q.request), std::move(q.generation), tokenizer_, admitted_++,
                                     engine_.prompt_is_source());
  slot->group = q.group;
  slot->choice = q.choice;
  slot->waiting = waits;
  slot->prefilled = static_cast<size_t>(take);
  slot->position = take;
  slot->cached = take;
  slots_[target] = std::move(slot);
  std::lock_guard lock(mutex_);
  stats_.cached_tokens += take;
}

bool Scheduler::step() {
  // 1. Admit, waiting while there is nothing to do.
  std::vector<Queued> admitted;
  size_t placed = 0;
  {
    std::unique_lock lock(mutex_);
    auto has_free = [&] { return std::any_of(slots_.begin(), slots_.end(), [](auto& s) { return !s; }); };
    auto has_active = [&] { return std::any_of(slots_.begin(), slots_.end(), [](auto& s) { return s != nullptr; }); };
    wake_.wait(lock, [&] { return stopping_ || has_active() || (!queue_.empty() && has_free()); });
    if (stopping_) return false;
    int64_t free = std::count(slots_.begin(), slots_.end(), nullptr);
    while (free > 0 && !queue_.empty()) {
      Queued q = std::move(queue_.front());
      queue_.pop_front();
      --stats_.queued;
      if (q.generation->cancelled()) {  // gone before it began
        q.generation->finish({"cancelled", "", static_cast<int64_t>(q.request.prompt.size()), 0});
        ++stats_.requests;
        continue;
      }
      ++stats_.active;
      if (q.choice == 0) stats_.prompt_tokens += static_cast<int64_t>(q.request.prompt.size());
      admitted.push_back(std::move(q));
      --free;
    }
  }
  const Clock::time_point start = Clock::now();
  try {
    for (; placed < admitted.size(); ++placed) place(admitted[placed]);

    // 2. Clients gone.
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i] && slots_[i]->generation->cancelled()) release(i, {"cancelled", "", 0, 0});

    // 3. One prompt chunk, of the request admitted first.
    Slot* prefilling = nullptr;
    size_t prefilling_index = 0;
    for (size_t i = 0; i < slots_.size(); ++i) {
      Slot* s = slots_[i].get();
      if (s && !s->waiting && s->prefilled < s->request.prompt.size() &&
          (!prefilling || s->admitted < prefilling->admitted)) {
        prefilling = s;
        prefilling_index = i;
      }
    }
    if (prefilling) {
      Slot& s = *prefilling;
      PromptImages& images = s.request.images;
      const size_t end = std::min(s.request.prompt.size(), s.prefilled + static_cast<size_t>(options_.chunk));
      const size_t n = (images.whole ? plan::whole_images_end(images.at, images.starts, s.prefilled, end) : end) - s.prefilled;
      const std::span<const int32_t> chunk = std::span(s.request.prompt).subspan(s.prefilled, n);
      if (images.cross && !images.empty() && s.prefilled == 0) {
        // The images into the sequence's cross-attention caches, each
        // distinct one encoded once; the chunks then run as text.
        std::vector<std::vector<float>> encoded;
        for (text::ImageInput& input : images.inputs) {
          encoded.push_back(engine_.encode_image(input));
          std::lock_guard lock(mutex_);
          ++stats_.images;
        }
        std::vector<float> features;
        std::vector<int64_t> tiles;
        for (uint32_t k : images.order) {
          features.insert(features.end(), encoded[k].begin(), encoded[k].end());
          tiles.push_back(images.inputs[k].tiles);
        }
        engine_.cross_images(static_cast<int64_t>(prefilling_index), features, tiles);
        images.inputs.clear();
      }
      if (!images.empty() && !images.cross && s.features.empty()) {
        // Before the first chunk: each distinct image through the tower, once.
        for (text::ImageInput& input : images.inputs) {
          s.features.push_back(engine_.encode_image(input));
          input = {};
          std::lock_guard lock(mutex_);
          ++stats_.images;
        }
      }
      // The chunk's spliced rows, and their features.
      std::vector<int64_t> at;
      std::vector<float> features;
      const auto first = std::lower_bound(images.at.begin(), images.at.end(), static_cast<int64_t>(s.prefilled));
      for (auto it = first; it != images.at.end() && *it < static_cast<int64_t>(s.prefilled + n); ++it) {
        // Row k is row k − starts[i] of image i.
        const size_t k = static_cast<size_t>(it - images.at.begin());
        const size_t i = static_cast<size_t>(std::upper_bound(images.starts.begin(), images.starts.end(), k) -
                                             images.starts.begin()) - 1;
        const std::vector<float>& image = s.features[images.order[i]];
        const size_t rows = images.starts[i + 1] - images.starts[i], width = image.size() / rows, r = k - images.starts[i];
        at.push_back(*it - static_cast<int64_t>(s.prefilled));
        features.insert(features.end(), image.begin() + static_cast<std::ptrdiff_t>(r * width),
                        image.begin() + static_cast<std::ptrdiff_t>((r + 1) * width));
      }
      const std::vector<float> logits =
          at.empty() ? engine_.prefill(static_cast<int64_t>(prefilling_index), chunk)
                     : engine_.prefill_spliced(static_cast<int64_t>(prefilling_index), chunk, at, features);
      s.prefilled += n;
      s.position += static_cast<int64_t>(n);
      // Whole chunks of a text prompt are what a later request may reuse.
      if (options_.reuse_prompts && engine_.reuses_caches() && images.empty() && !engine_.prompt_is_source()) {
        const std::vector<int32_t>& prompt = s.request.prompt;
        held_[prefilling_index].tokens.assign(
            prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(
                                                 s.prefilled / static_cast<size_t>(options_.chunk) *
                                                 static_cast<size_t>(options_.chunk)));
      }
      if (s.prefilled == s.request.prompt.size()) {
        std::vector<std::vector<float>>().swap(s.features);  // the prompt is in the cache
        // The request's other choices: a copy of its cache each, and their
        // first tokens sampled from the same logits.
        for (size_t j = 0; j < slots_.size(); ++j) {
          Slot* other = slots_[j].get();
          if (!other || !other->waiting || other->group != s.group) continue;
          engine_.copy(static_cast<int64_t>(prefilling_index), static_cast<int64_t>(j), s.position);
          other->waiting = false;
          other->prefilled = s.prefilled;
          other->position = s.position;
          held_[j].tokens = held_[prefilling_index].tokens;
          const std::string reason = sample(*other, logits);
          if (!reason.empty()) release(j, {reason, other->error, 0, 0});
        }
        const std::string reason = sample(s, logits);
        if (!reason.empty()) release(prefilling_index, {reason, s.error, 0, 0});
      }
    }

    // 4. One decode pass over every request with a token to feed, with
    // each one's proposals where it speculates.
    std::vector<size_t> feeding;
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i] && slots_[i]->next >= 0) feeding.push_back(i);
    std::vector<Engine::Step> steps;
    std::vector<std::vector<int32_t>> proposed(feeding.size());
    std::vector<std::vector<std::vector<float>>> drawn(feeding.size());  // a draft's distributions
    int64_t spare = std::max<int64_t>(options_.pass_rows, static_cast<int64_t>(feeding.size())) -
                    static_cast<int64_t>(feeding.size());
    // What each may propose: what fits the pass, the context and the tokens still to come.
    std::vector<text::Draft::Want> wants;
    std::vector<size_t> wanting;
    const bool speculates = (options_.lookup > 0 || options_.draft) && engine_.verifies();
    for (size_t f = 0; f < feeding.size() && speculates; ++f) {
      Slot& s = *slots_[feeding[f]];
      if (s.request.grammar || spare <= 0) continue;
      const int64_t most = std::min<int64_t>({options_.draft_max, spare, engine_.context() - s.position - 1,
                                              static_cast<int64_t>(s.request.max_tokens) - s.generated - 1});
      if (most <= 0) continue;
      if (options_.draft) {
        if (!s.draft_sampler) s.draft_sampler.emplace(text::draft_sampling(s.request.sampling));
        wants.push_back({static_cast<int64_t>(feeding[f]), s.history, static_cast<size_t>(most), &*s.draft_sampler});
        wanting.push_back(f);
      } else {
        proposed[f] = text::lookup_proposals(s.history, options_.lookup, static_cast<size_t>(most));
      }
      spare -= most;
    }
    if (!wants.empty()) {  // the draft's steps of every request at once
      std::vector<text::Draft::Proposals> p = options_.draft->propose(wants);
      for (size_t i = 0; i < wanting.size(); ++i) {
        proposed[wanting[i]] = std::move(p[i].tokens);
        drawn[wanting[i]] = std::move(p[i].q);
      }
    }
    for (size_t f = 0; f < feeding.size(); ++f) {
      steps.push_back({static_cast<int64_t>(feeding[f]), slots_[feeding[f]]->next});
      for (int32_t t : proposed[f]) steps.push_back({static_cast<int64_t>(feeding[f]), t});
    }
    if (!steps.empty()) {
      const bool speculated = steps.size() > feeding.size();
      const std::vector<float> logits = speculated ? engine_.verify(steps) : engine_.decode(steps);
      const size_t vocab = logits.size() / steps.size();
      size_t row = 0, drafted = 0, kept = 0;
      for (size_t f = 0; f < feeding.size(); ++f) {
        Slot& s = *slots_[feeding[f]];
        const std::vector<int32_t>& mine = proposed[f];
        drafted += mine.size();
        // Row j judges proposal j (the last row: the target's own token);
        // the first rejected one's rows after it are cut back.
        for (size_t j = 0; j <= mine.size(); ++j) {
          ++s.position;
          const int32_t proposal = j < mine.size() ? mine[j] : -1;
          const std::string reason =
              sample(s, std::span(logits).subspan((row + j) * vocab, vocab), proposal,
                     j < drawn[f].size() ? std::span<const float>(drawn[f][j]) : std::span<const float>());
          const bool accepted = proposal >= 0 && reason.empty() && s.next == proposal;
          if (!reason.empty() || !accepted) {
            if (j < mine.size()) engine_.truncate(static_cast<int64_t>(feeding[f]), s.position);
            if (!reason.empty()) release(feeding[f], {reason, s.error, 0, 0});
            break;
          }
          ++kept;
        }
        row += 1 + mine.size();
      }
      std::lock_guard lock(mutex_);
      ++stats_.decode_steps;
      stats_.draft_tokens += static_cast<int64_t>(drafted);
      stats_.draft_accepted += static_cast<int64_t>(kept);
    }
  } catch (const std::exception& e) {
    // The engine failed: every running request ends with the error; the
    // server goes on with fresh sequences.
    for (Held& h : held_) h.tokens.clear();
    for (; placed < admitted.size(); ++placed) {  // admitted, never placed
      const Queued& q = admitted[placed];
      q.generation->finish({"error", e.what(), static_cast<int64_t>(q.request.prompt.size()), 0});
      std::lock_guard lock(mutex_);
      --stats_.active;
      ++stats_.requests;
    }
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i]) {
        try {
          release(i, {"error", e.what(), 0, 0});
        } catch (const std::exception&) {
          // The reset failed too; the slot is free all the same.
        }
      }
  }
  std::lock_guard lock(mutex_);
  stats_.busy_seconds += std::chrono::duration<double>(Clock::now() - start).count();
  return true;
}

}  // namespace lathe::serve
