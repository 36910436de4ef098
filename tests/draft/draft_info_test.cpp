// A build with a draft (lathe_add_model's DRAFT, `lathe gen --draft`): its
// draft_info() is the draft spec's build, in a namespace of its own, beside
// the model's. Linked with tiny_llama_gqa_drafted (a smaller draft) and
// tiny_llama_gqa_self_drafted (the model drafting for itself); LATHE_DRAFT_NAME
// and LATHE_DRAFT_LAYERS say which draft the build carries.
#include <doctest/doctest.h>

#include <string_view>

#include "runtime/model/model_info.hpp"

TEST_CASE("a drafted build's draft_info() is its draft spec's build") {
  const lathe::ModelInfo& model = lathe::model_info();
  const lathe::ModelInfo* draft = lathe::draft_info();
  REQUIRE(draft != nullptr);
  CHECK(draft->name == std::string_view(LATHE_DRAFT_NAME));
  CHECK(draft->layers == LATHE_DRAFT_LAYERS);
  CHECK(draft->vocab == model.vocab);
  CHECK(draft->output_width == model.vocab);  // logits: it proposes the model's tokens
  CHECK_FALSE(draft->encoder);
  CHECK_FALSE(draft->encoder_decoder);
  CHECK(draft->vision == nullptr);
  CHECK(lathe::vision_info() == nullptr);
  CHECK(model.name == std::string_view("tiny-llama-gqa"));
}

TEST_CASE("a draft's kernels are its own, in its plan's order") {
  const lathe::ModelInfo& model = lathe::model_info();
  const lathe::ModelInfo* draft = lathe::draft_info();
  REQUIRE(draft != nullptr);
  // Even a model drafting for itself has a table of its own (its namespace's).
  CHECK(draft->kernels.data() != model.kernels.data());
  CHECK(draft->manifest.data() != model.manifest.data());
  REQUIRE(draft->kernels.size() == draft->plan.kernels.size());
  for (size_t i = 0; i < draft->kernels.size(); ++i) CHECK(draft->kernels[i].name == draft->plan.kernels[i].name);
}
