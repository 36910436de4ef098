// A build with a draft (lathe_add_model's DRAFT): generate() with the
// draft proposing, against plain decoding, on the device with validation.
// The draft of tiny_llama_gqa_drafted is a smaller random decoder (most
// proposals refused, each refusal cut back in both models); the draft of
// tiny_llama_gqa_self_drafted is the model itself with the model's weights
// (every greedy proposal kept). Greedy tokens must be plain decoding's.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/generate/generate.hpp"
#include "runtime/generate/speculate.hpp"
#include "runtime/model/model_info.hpp"
#include "tests/harness/test_model.hpp"
#include "tests/harness/vulkan_harness.hpp"

using namespace lathe;
using namespace lathe::test;

namespace {

// The draft's weights: the model's test weights where the draft is the
// model itself, else small random values (norm scales 1).
void upload_draft(Session& draft, bool self) {
  if (self) return upload_all(draft);
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> value(-0.1f, 0.1f);
  for (size_t i = 0; i < draft.model().manifest.size(); ++i) {
    const ManifestEntry& e = draft.model().manifest[i];
    std::vector<float> values(static_cast<size_t>(e.elements()));
    const bool scale = std::string_view(e.name).find("norm") != std::string_view::npos;
    for (float& v : values) v = scale ? 1.0f : value(rng);
    draft.upload(i, DType::F32, std::as_bytes(std::span(values)));
  }
}

}  // namespace

TEST_CASE_FIXTURE(test::VulkanTest, "a draft's proposals verified and cut back give the greedy tokens of plain decoding") {
  const ModelInfo* d = draft_info();
  REQUIRE(d != nullptr);
  const bool self = d->manifest.size() == model_info().manifest.size() && d->hidden == model_info().hidden &&
                    d->layers == model_info().layers;
  const text::Tokenizer tokenizer =
      text::Tokenizer::from_hf(LATHE_SOURCE_DIR "/tests/data/tokenizers/llama2-special.json");
  const std::vector<int32_t> prompt = random_tokens(12, 71);
  text::GenerateOptions plain;
  plain.sampling.temperature = 0;
  plain.max_new_tokens = 40;
  plain.stop_at_eos = false;
  SessionOptions options;
  options.verify_rows = 5;
  Session session(device, model_info(), options);
  upload_all(session);
  Session draft_session(device, *d, {});
  upload_draft(draft_session, self);
  text::SessionDraft model(draft_session);
  text::Draft draft(model, 1, 0.0f);
  text::GenerateOptions drafted = plain;
  drafted.draft = &draft;
  drafted.draft_max = 4;
  const auto quiet = [](std::string_view) {};
  text::Sampler greedy(plain.sampling);
  const text::GenerateStats with = text::generate(session, tokenizer, greedy, prompt, drafted, quiet);
  session.reset();
  const text::GenerateStats without = text::generate(session, tokenizer, greedy, prompt, plain, quiet);
  MESSAGE(with.draft_accepted << " of " << with.draft_tokens << " proposals kept, " << with.target_passes
                              << " passes for " << with.new_tokens << " tokens");
  CHECK(with.tokens == without.tokens);
  CHECK(with.draft_tokens > 0);
  if (self) CHECK(with.draft_accepted == with.draft_tokens);  // the model's own picks
  else CHECK(with.draft_accepted < with.draft_tokens);        // refusals, cut back

  // Again on the same sessions: the draft's cache is cut back to what the
  // new text shares with it.
  session.reset();
  const text::GenerateStats again = text::generate(session, tokenizer, greedy, prompt, drafted, quiet);
  CHECK(again.tokens == without.tokens);
}
