// A build with a draft model (`lathe gen --draft`): the pair checked
// (spec::validate_draft), and the draft's build emitted beside the model's
// in a namespace of its own (emit::draft_namespace), model.cpp defining
// draft_info() from it; the model drafting for itself compiles in process.
#include <doctest/doctest.h>

#include <string>

#include "generator/clang/check.hpp"
#include "generator/clang/format.hpp"
#include "generator/emit/emit_cpp.hpp"
#include "generator/lower/model_plan.hpp"
#include "generator/spec/parse.hpp"

using namespace lathe;

namespace {

// tests/specs/<path>, parsed; its file as the build names it (relative).
spec::Spec load(const std::string& path) {
  const std::string file = "tests/specs/" + path;
  spec::Diagnostics diag(file);
  auto s = spec::parse_spec_file(std::string(LATHE_SOURCE_DIR) + "/" + file, diag);
  REQUIRE_MESSAGE(s, diag.format());
  s->file = file;
  return *s;
}

// validate_draft's errors for a model and a draft: the model's, then the draft's.
std::string draft_errors(const spec::Spec& model, const spec::Spec& draft) {
  spec::Diagnostics model_diag(model.file), draft_diag(draft.file);
  spec::validate_draft(model, draft, model_diag, draft_diag);
  return model_diag.format() + draft_diag.format();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a draft of the model's vocabulary, a plain decoder, is accepted, and so is the model itself") {
  const spec::Spec model = load("tiny/llama-gqa.toml");
  CHECK(draft_errors(model, load("draft/llama-gqa-draft.toml")).empty());
  CHECK(draft_errors(model, model).empty());
}

TEST_CASE("a draft that cannot propose the model's tokens is refused at its line, naming the model") {
  const spec::Spec model = load("tiny/llama-gqa.toml");
  CHECK(draft_errors(model, load("tiny/gpt2.toml")) ==
        "tests/specs/tiny/gpt2.toml:11:9: [dims] vocab = 199, the model's (tests/specs/tiny/llama-gqa.toml) is 211: a "
        "draft proposes the model's tokens\n");
  const std::string encoder = draft_errors(model, load("encoder/bert.toml"));
  CHECK(contains(encoder, "tests/specs/encoder/bert.toml:8:9: stack = \"encoder\": the draft of "
                          "tests/specs/tiny/llama-gqa.toml must be a decoder"));
  CHECK(contains(draft_errors(model, load("encdec/t5.toml")), "stack = \"encoder-decoder\""));
  CHECK(contains(draft_errors(model, load("tiny/mamba.toml")),
                 "tests/specs/tiny/mamba.toml:15:1: [ssm]: the draft of tests/specs/tiny/llama-gqa.toml cannot have "
                 "state-space (Mamba) layers"));
  CHECK(contains(draft_errors(model, load("tiny/granite-hybrid.toml")), "[ssm]"));  // a hybrid's state too
  CHECK(contains(draft_errors(model, load("vision/tiny-llava.toml")), "[vision]: the draft of"));
}

TEST_CASE("a model that cannot verify proposals is refused at its line, naming the draft") {
  const spec::Spec draft = load("draft/llama-gqa-draft.toml");
  const spec::Spec mamba = load("tiny/mamba.toml");
  CHECK(contains(draft_errors(mamba, draft),
                 "tests/specs/tiny/mamba.toml:15:1: a model of state-space (Mamba) layers cannot verify a draft's "
                 "proposals (--draft tests/specs/draft/llama-gqa-draft.toml)"));
  const spec::Spec bert = load("encoder/bert.toml");
  CHECK(contains(draft_errors(bert, bert), "tests/specs/encoder/bert.toml:8:9: an encoder cannot verify"));
}

TEST_CASE("model.cpp defines draft_info() from the draft's namespace, or null without a draft") {
  const spec::Spec model = load("tiny/llama-gqa.toml");
  CHECK(emit::draft_namespace("tiny-llama-gqa") == "tiny_llama_gqa_draft");
  const std::string with = emit::emit_model_source(model, model.file, "tiny_llama_gqa_draft");
  CHECK(contains(with, "#include \"draft.hpp\""));
  CHECK(contains(with, "LATHE_MODEL_INFO(models::tiny_llama_gqa_draft, nullptr)"));
  const std::string without = emit::emit_model_source(model, model.file);
  CHECK_FALSE(contains(without, "draft.hpp"));
  CHECK(contains(without, "return nullptr;  // no draft"));
}

// The generated code of two models side by side in one translation unit:
// model.cpp with model.hpp and draft.hpp of the same spec, told apart by
// their namespaces alone.
TEST_CASE("a model drafting for itself: model.cpp compiles with both builds in process") {
  const spec::Spec model = load("tiny/llama-gqa.toml");
  spec::Diagnostics diag(model.file);
  const auto plan = lower::plan_model(model, diag);
  REQUIRE_MESSAGE(plan, diag.format());
  const std::string ns = emit::draft_namespace(model.name);
  const std::string draft = emit::emit_model_header(model, *plan, model.file, "draft.hpp", ns);
  CHECK(contains(draft, "namespace lathe::models::" + ns + " {"));
  CHECK(contains(draft, "inline constexpr const char* model_name = \"tiny-llama-gqa\";"));  // its own name
  clang::CheckOptions options;
  options.header_name = "model.cpp";
  options.include_dirs = {LATHE_SOURCE_DIR};
  options.headers = {{"model.hpp", emit::emit_model_header(model, *plan, model.file, "model.hpp")},
                     {"draft.hpp", draft}};
  const clang::CheckResult r = clang::check_generated(emit::emit_model_source(model, model.file, ns), options);
  CHECK_MESSAGE(r.ok, r.format());
}
