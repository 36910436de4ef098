// What the server's scheduler needs of a model on a device: independent
// sequences, each with a KV-cache region of its own, a chunk of one
// sequence's prompt at a time, and one decode pass over several sequences.
// SessionEngine puts a Session behind it; the scheduler's unit tests put a
// fake one.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/plan.hpp"
#include "runtime/generate/images.hpp"
#include "runtime/model/session.hpp"

namespace lathe::serve {

class Engine {
 public:
  virtual ~Engine() = default;

  virtual int64_t sequences() const = 0;  // KV-cache regions
  virtual int64_t context() const = 0;    // positions of each
  virtual int64_t vocab() const = 0;

  // Empties one sequence's cache.
  virtual void reset(int64_t sequence) = 0;
  // Appends `tokens` to one sequence; the logits of the last row [vocab].
  // (An encoder-decoder's SessionEngine: `tokens` are the whole prompt, its
  // source; the logits are those of the decoder's start token.)
  virtual std::vector<float> prefill(int64_t sequence, std::span<const int32_t> tokens) = 0;
  using Step = Session::Step;  // {sequence, token}
  // One token for each of several distinct sequences: logits
  // [steps.size()][vocab], row i for steps[i]. A row must not depend on the
  // other rows (the same token decoded alone gives the same logits).
  virtual std::vector<float> decode(std::span<const Step> steps) = 0;
  // A vision model's (a [vision] splice): one image's features
  // [rows][width] from its tower input (PromptImages::inputs), and a chunk
  // of a prompt whose rows `at` (increasing, into `tokens`) take `features`
  // ([at.size()][width]) in place of their tokens' embeddings. Others
  // throw Error(Unsupported).
  virtual std::vector<float> encode_image(const text::ImageInput& input);
  virtual std::vector<float> prefill_spliced(int64_t sequence, std::span<const int32_t> tokens,
                                             std::span<const int64_t> at, std::span<const float> features);
  // A decoder that cross-attends to images (Llama 3.2 Vision): the images'
  // features (image_features' rows of each, in the prompt's order) into the
  // sequence's cross-attention caches, tiles[i] of image i's its own
  // (Session::images), before the sequence's first prompt chunk. Others
  // throw Error(Unsupported).
  virtual void cross_images(int64_t sequence, std::span<const float> features, std::span<const int64_t> tiles);
  // Whether a prompt is a source the decoder attends to (an encoder-decoder)
  // rather than the start of the sequence the decoder continues.
  virtual bool prompt_is_source() const { return false; }
  // Prompt reuse: whether a sequence's cache cuts back and copies into
  // another (Session::truncate and copy; an encoder-decoder's and an image
  // cross-attention decoder's do not: their sequences hold more than it);
  // the lowest position it cuts back to exactly (Session::rewind_floor);
  // the cut; the copy. The default: no reuse (the others throw Unsupported).
  virtual bool reuses_caches() const { return false; }
  virtual int64_t rewind_floor(int64_t sequence) const;
  virtual void truncate(int64_t sequence, int64_t position);
  virtual void copy(int64_t from, int64_t to, int64_t count);
  // Speculative decoding: whether a pass verifies proposals, and the pass
  // (Session::verify: each sequence's tokens together, consecutive
  // positions; the logits of every row). The default: none (Unsupported).
  virtual bool verifies() const { return false; }
  virtual std::vector<float> verify(std::span<const Step> rows);
};

// A Session as an Engine; a vision model's with its tower's session
// (vision_info()) and the link between them.
class SessionEngine final : public Engine {
 public:
  explicit SessionEngine(Session& session, Session* tower = nullptr, const plan::VisionLink* link = nullptr)
      : session_(session), tower_(tower), link_(link) {}
  int64_t sequences() const override;
  int64_t context() const override;
  int64_t vocab() const override;
  void reset(int64_t sequence) override;
  std::vector<float> prefill(int64_t sequence, std::span<const int32_t> tokens) override;
  std::vector<float> decode(std::span<const Step> steps) override;
  std::vector<float> encode_image(const text::ImageInput& input) override;
  std::vector<float> prefill_spliced(int64_t sequence, std::span<const int32_t> tokens, std::span<const int64_t> at,
                                     std::span<const float> features) override;
  void cross_images(int64_t sequence, std::span<const float> features, std::span<const int64_t> tiles) override;
  bool prompt_is_source() const override { return session_.model().encoder_decoder; }
  bool reuses_caches() const override { return session_.copies(); }
  int64_t rewind_floor(int64_t sequence) const override { return session_.rewind_floor(sequence); }
  void truncate(int64_t sequence, int64_t position) override { session_.truncate(sequence, position); }
  void copy(int64_t from, int64_t to, int64_t count) override { session_.copy(from, to, count); }
  bool verifies() const override { return session_.verifies(); }
  std::vector<float> verify(std::span<const Step> rows) override { return session_.verify(rows); }

 private:
  Session& session_;
  Session* tower_;
  const plan::VisionLink* link_;
};

}  // namespace lathe::serve
