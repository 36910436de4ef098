#include "runtime/serve/scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/plan.hpp"
#include "runtime/error.hpp"

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
  thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  for (auto& [request, generation] : queue_) generation->finish({"cancelled", "", 0, 0});
  for (auto& slot : slots_)
    if (slot) slot->generation->finish({"cancelled", "", static_cast<int64_t>(slot->request.prompt.size()), slot->generated});
}

std::shared_ptr<Generation> Scheduler::submit(GenerationRequest request) {
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
  auto generation = std::make_shared<Generation>();
  {
    std::lock_guard lock(mutex_);
    // The queue limit counts requests that must wait: those that a free
    // sequence takes at the next step do not (with --queue 0, every free
    // sequence still takes a request).
    const int64_t free = std::max<int64_t>(engine_.sequences() - stats_.active, 0);
    if (static_cast<int64_t>(queue_.size()) >= options_.queue_limit + free) return nullptr;
    queue_.emplace_back(std::move(request), generation);
    ++stats_.queued;
  }
  wake_.notify_all();
  return generation;
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
  std::exception_ptr failure;
  try {
    engine_.reset(static_cast<int64_t>(index));
  } catch (...) {
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

std::string Scheduler::sample(Slot& slot, std::span<const float> logits) {
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
    event.token = slot.sampler.sample(logits);
  }
  ++slot.generated;
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

bool Scheduler::step() {
  // 1. Admit, waiting while there is nothing to do.
  {
    std::unique_lock lock(mutex_);
    auto has_free = [&] { return std::any_of(slots_.begin(), slots_.end(), [](auto& s) { return !s; }); };
    auto has_active = [&] { return std::any_of(slots_.begin(), slots_.end(), [](auto& s) { return s != nullptr; }); };
    wake_.wait(lock, [&] { return stopping_ || has_active() || (!queue_.empty() && has_free()); });
    if (stopping_) return false;
    for (auto& slot : slots_) {
      if (slot || queue_.empty()) continue;
      auto [request, generation] = std::move(queue_.front());
      queue_.pop_front();
      --stats_.queued;
      if (generation->cancelled()) {  // gone before it began
        generation->finish({"cancelled", "", static_cast<int64_t>(request.prompt.size()), 0});
        ++stats_.requests;
        continue;
      }
      ++stats_.active;
      stats_.prompt_tokens += static_cast<int64_t>(request.prompt.size());
      slot = std::make_unique<Slot>(std::move(request), std::move(generation), tokenizer_, admitted_++,
                                    engine_.prompt_is_source());
    }
  }
  const Clock::time_point start = Clock::now();
  try {
    // 2. Clients gone.
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i] && slots_[i]->generation->cancelled()) release(i, {"cancelled", "", 0, 0});

    // 3. One prompt chunk, of the request admitted first.
    Slot* prefilling = nullptr;
    size_t prefilling_index = 0;
    for (size_t i = 0; i < slots_.size(); ++i) {
      Slot* s = slots_[i].get();
      if (s && s->prefilled < s->request.prompt.size() && (!prefilling || s->admitted < prefilling->admitted)) {
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
      if (s.prefilled == s.request.prompt.size()) {
        std::vector<std::vector<float>>().swap(s.features);  // the prompt is in the cache
        const std::string reason = sample(s, logits);
        if (!reason.empty()) release(prefilling_index, {reason, s.error, 0, 0});
      }
    }

    // 4. One decode pass over every request with a token to feed.
    std::vector<Engine::Step> steps;
    std::vector<size_t> rows;
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i] && slots_[i]->next >= 0) {
        steps.push_back({static_cast<int64_t>(i), slots_[i]->next});
        rows.push_back(i);
      }
    if (!steps.empty()) {
      const std::vector<float> logits = engine_.decode(steps);
      const size_t vocab = logits.size() / steps.size();
      for (size_t r = 0; r < rows.size(); ++r) {
        Slot& s = *slots_[rows[r]];
        ++s.position;
        const std::string reason = sample(s, std::span(logits).subspan(r * vocab, vocab));
        if (!reason.empty()) release(rows[r], {reason, s.error, 0, 0});
      }
      std::lock_guard lock(mutex_);
      ++stats_.decode_steps;
    }
  } catch (const std::exception& e) {
    // The engine failed: every running request ends with the error; the
    // server goes on with fresh sequences.
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
