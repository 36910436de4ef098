// End to end on a tiny random-weight model (one binary per model of
// tests/specs/tiny/, its model_info() names the spec): the GPU forward pass of the
// generated build against the CPU reference, prefill against step-by-step
// decode, greedy tokens, and the errors a caller can hit. Validation on.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <span>

#include "core/manifest.hpp"
#include "generator/spec/parse.hpp"
#include "runtime/error.hpp"
#include "runtime/generate/generate.hpp"
#include "runtime/model/session.hpp"
#include "runtime/reference/reference.hpp"
#include "runtime/vk/device_features.hpp"
#include "runtime/vk/pipeline.hpp"
#include "runtime/weights/dtype.hpp"
#include "runtime/weights/gguf.hpp"
#include "runtime/weights/safetensors.hpp"
#include "tests/harness/test_model.hpp"
#include "tests/harness/vulkan_harness.hpp"

using namespace lathe;
using namespace lathe::test;

namespace {

size_t argmax(const float* row, size_t n) { return static_cast<size_t>(std::max_element(row, row + n) - row); }

// The test weights as a checkpoint holds them: each tensor in its manifest dtype.
std::vector<weights::TensorToWrite> checkpoint_tensors() {
  std::vector<weights::TensorToWrite> tensors;
  for (const ManifestEntry& e : model_info().manifest) {
    if (e.slice > 0) continue;  // a stacked tensor is written whole, at its first slice: [n][rows][cols]
    const std::vector<float>& values = test_weights().tensors.at(std::string(e.name));
    weights::TensorToWrite t{std::string(e.name), e.dtype, e.stored_shape(), {}};
    if (e.slice == 0) t.shape.insert(t.shape.begin(), static_cast<int64_t>(values.size()) / e.elements());
    t.data = is_block_dtype(e.dtype) ? quantized_blocks().at(t.name) : weights::encode_values(e.dtype, values);
    tensors.push_back(std::move(t));
  }
  return tensors;
}

// Safetensors has no block dtypes: a model with Q8_0 tensors has GGUF checkpoints only.
bool has_block_dtypes() {
  for (const ManifestEntry& e : model_info().manifest)
    if (is_block_dtype(e.dtype)) return true;
  return false;
}

}  // namespace

TEST_SUITE("model") {

TEST_CASE_FIXTURE(test::VulkanTest, "prefill logits of every row match the CPU reference") {
  SessionOptions options;
  options.all_logits = true;
  options.max_chunk = 16;  // 37 tokens: chunks of 16, 16 and 5 rows, positions carried across
  Session session(device, model_info(), options);
  upload_all(session);
  const std::vector<int32_t> tokens = random_tokens(37, 7);
  const std::vector<float> logits = session.prefill(tokens);
  reference::Reference ref(test_spec(), test_weights());
  const std::vector<float> expected = ref.forward(tokens);
  const size_t V = static_cast<size_t>(model_info().vocab);
  REQUIRE(logits.size() == expected.size());
  const double worst = worst_row_error(logits, expected, V);
  MESSAGE("worst row normalized error " << worst << " (tolerance " << tolerance(session) << ")");
  CHECK(worst < tolerance(session));
  CHECK(session.position() == 37);
}

TEST_CASE_FIXTURE(test::VulkanTest, "a prefill of N tokens equals N single decode steps") {
  const std::vector<int32_t> tokens = random_tokens(20, 11);
  SessionOptions options;
  options.all_logits = true;
  Session whole(device, model_info(), options);
  upload_all(whole);
  const std::vector<float> prefilled = whole.prefill(tokens);
  Session steps(device, model_info());
  upload_all(steps);
  const size_t V = static_cast<size_t>(model_info().vocab);
  for (size_t t = 0; t < tokens.size(); ++t) {
    const std::vector<float> one = steps.decode(tokens[t]);
    CAPTURE(t);
    // Decode and prefill sum in different orders (K split across lanes vs in
    // sequence): float rounding, which an f16 cache can round up to its own
    // precision; far below any bug of positions or cache (errors of 0.1–1).
    // A dot class's decode quantizes x (its prompts do not), a coop class's
    // prompts round it to f16 (its decode does not): their tolerances.
    const plan::DeviceClass& c = steps.device_class();
    CHECK(normalized_error(one.data(), &prefilled[t * V], V) <
          (plan::uses(c, plan::Variant::Dot) ? kDotTolerance
           : rounds_prompts_to_f16(c)     ? kCoopTolerance
           : model_info().cache_dtype == DType::F16 ? 1e-3
                                                   : 1e-4));
  }
  CHECK(steps.position() == static_cast<int64_t>(tokens.size()));
}

TEST_CASE_FIXTURE(test::VulkanTest, "greedy decoding after a prompt picks the reference's tokens for 64 steps") {
  Session session(device, model_info());
  upload_all(session);
  reference::Reference ref(test_spec(), test_weights());
  const std::vector<int32_t> prompt = random_tokens(9, 3);
  const std::vector<float> last = session.prefill(prompt);
  const std::vector<float> ref_all = ref.forward(prompt);
  const size_t V = static_cast<size_t>(model_info().vocab);
  CHECK(normalized_error(last.data(), &ref_all[(prompt.size() - 1) * V], V) < tolerance(session));
  const int32_t first = session.argmax();
  CHECK(first == static_cast<int32_t>(argmax(&ref_all[(prompt.size() - 1) * V], V)));

  if (plan::uses(session.device_class(), plan::Variant::Dot)) {
    // A dot class's decode quantizes x, which moves a random model's logits
    // by a few percent (kDotTolerance): near ties of the reference flip. Each
    // step's logits against the reference's instead, the device's pick fed on.
    int32_t token = first;
    for (int i = 0; i < 64; ++i) {
      const std::vector<float> got = session.decode(token);
      const std::vector<float> row = ref.forward({token});
      CAPTURE(i);
      CHECK(normalized_error(got.data(), row.data(), V) < tolerance(session));
      token = static_cast<int32_t>(argmax(got.data(), V));
    }
    CHECK(session.position() == static_cast<int64_t>(prompt.size()) + 64);
    return;
  }
  const std::vector<int32_t> picks = session.generate_greedy(first, 64);
  // The reference follows the device's picks (teacher forcing), so one near
  // tie cannot derail the rest: each pick must be the reference's argmax, or
  // within float rounding of it (a gap far below a wrong token's 0.1–1).
  int32_t token = first;
  int ties = 0;
  for (size_t i = 0; i < picks.size(); ++i) {
    const std::vector<float> row = ref.forward({token});
    const size_t best = argmax(row.data(), V);
    const float gap = row[best] - row[static_cast<size_t>(picks[i])];
    if (static_cast<size_t>(picks[i]) != best) {
      ++ties;
      MESSAGE("step " << i << ": the device picked " << picks[i] << ", the reference " << best << ", "
                      << gap << " below it");
    }
    CHECK_MESSAGE(gap <= 1e-3f * std::max(1.0f, std::abs(row[best])), "step " << i);
    token = picks[i];
  }
  CHECK(ties <= 2);
  CHECK(session.position() == static_cast<int64_t>(prompt.size()) + 64);
}

// Model-independent; one quantized model shows it (a K-quant start was seconds
// of pipelines the run never used).
TEST_CASE_FIXTURE(test::VulkanTest, "a session creates a layout's pipelines when a pass first needs it" *
                  doctest::skip(model_info().name != std::string_view("tiny-quant-q4-k-m"))) {
  SessionOptions options;
  options.pipeline_cache = "-";
  options.sequences = 2;
  const std::shared_ptr<vk::Pipelines> pipelines = vk::Pipelines::shared(device, "-");  // the session's
  Session session(device, model_info(), options);
  upload_all(session);
  const size_t decode_layout = pipelines->size();
  CHECK(decode_layout > 0);
  session.prefill(random_tokens(3, 1));  // under 8 rows: the decode layout
  session.decode(1);
  CHECK(pipelines->size() == decode_layout);
  session.prefill(random_tokens(9, 2));  // the prefill layout's matmuls
  const size_t with_prefill = pipelines->size();
  CHECK(with_prefill > decode_layout);
  session.decode(std::vector<Session::Step>{{0, 1}, {1, 2}});  // the batch layout's
  CHECK(pipelines->size() > with_prefill);
}

// A matrix over the spec's max_part_bytes runs as row ranges (plan::Part):
// the gather of tokens at both ends of every range of the embedding table,
// the LM head's columns of each range (tiny-split-rows: every projection),
// prompt and decode against the reference. LATHE_EXPECT_PART_OVER_DEVICE_LIMIT
// (the large-head test) also requires a matrix that this device could not
// bind whole: more texels than its maxTexelBufferElements.
TEST_CASE_FIXTURE(test::VulkanTest, "matrices split into row ranges give the reference's logits" *
                  doctest::skip(model_info().plan.parts.empty())) {
  const ModelInfo& m = model_info();
  const size_t V = static_cast<size_t>(m.vocab);
  std::map<int32_t, int64_t> split_bytes;  // tensor → its bytes on the device
  std::vector<int32_t> tokens = {0, static_cast<int32_t>(V - 1)};
  for (const plan::Part& part : m.plan.parts) {
    const ManifestEntry& e = m.manifest[static_cast<size_t>(part.tensor)];
    split_bytes[part.tensor] += device_tensor_bytes(e.dtype, 2, part.rows, e.shape[1]);
    if (e.role == Role::Embed)
      for (int64_t t : {part.row0, part.row0 + part.rows - 1}) tokens.push_back(static_cast<int32_t>(t));
  }
  int64_t largest = 0;
  for (const auto& [tensor, bytes] : split_bytes) largest = std::max(largest, bytes);
  MESSAGE(m.plan.parts.size() << " row ranges of " << split_bytes.size() << " matrices, the largest " << largest
                              << " bytes; this device's texel views hold " << device.info().max_texel_buffer_elements * 16);
  if (std::getenv("LATHE_EXPECT_PART_OVER_DEVICE_LIMIT"))
    CHECK(static_cast<uint64_t>(largest) > device.info().max_texel_buffer_elements * 16);

  SessionOptions options;
  options.all_logits = true;
  options.max_chunk = 8;  // chunks carry positions across
  Session session(device, m, options);
  upload_all(session);
  const std::vector<float> logits = session.prefill(tokens);
  const std::vector<float> step = session.decode(tokens[2]);
  reference::Reference ref(test_spec(), test_weights());
  const std::vector<float> expected = ref.forward(tokens);
  const std::vector<float> expected_step = ref.forward({tokens[2]});
  REQUIRE(logits.size() == expected.size());
  double worst = worst_row_error(logits, expected, V);
  worst = std::max(worst, normalized_error(step.data(), expected_step.data(), V));
  MESSAGE(tokens.size() << " prompt rows and a decode step: worst normalized error " << worst);
  CHECK(worst < tolerance(session));
  CHECK(argmax(step.data(), V) == argmax(expected_step.data(), V));
}

// Model-independent: one model shows it.
TEST_CASE_FIXTURE(test::VulkanTest, "tiles set for a measurement give the reference's logits, others are refused" *
                  doctest::skip(model_info().name != std::string_view("tiny-llama-gqa"))) {
  Session session(device, model_info());
  upload_all(session);
  const plan::Tile decode{1, 1, 2}, prefill{2, 8, 1};
  session.set_tiles(decode, prefill);
  CHECK(session.tiles() == std::make_pair(decode, prefill));
  const std::vector<int32_t> prompt = random_tokens(12, 9);  // over 8 rows: the prefill layout
  const std::vector<float> last = session.prefill(prompt);
  const std::vector<float> step = session.decode(prompt[0]);
  reference::Reference ref(test_spec(), test_weights());
  const std::vector<float> expected = ref.forward(prompt);
  const std::vector<float> expected_step = ref.forward({prompt[0]});
  const size_t V = static_cast<size_t>(model_info().vocab);
  CHECK(normalized_error(last.data(), &expected[(prompt.size() - 1) * V], V) < tolerance(session));
  CHECK(normalized_error(step.data(), expected_step.data(), V) < tolerance(session));
  for (const auto& [d, p] : {std::pair<plan::Tile, plan::Tile>{{1, 2, 2}, prefill}, {{65, 1, 1}, prefill},
                             {decode, {4, 4, 1}}, {decode, {4, 8, 9}}}) {
    CAPTURE(d.rows);
    CAPTURE(p.tokens);
    CHECK_THROWS_AS(session.set_tiles(d, p), Error);
  }
  CHECK(session.tiles() == std::make_pair(decode, prefill));  // as they were
}

// Latent attention's two forms (plan::Form), each forced in every prompt
// chunk: the chunks (16, 16, 8 rows, the later ones re-expanding the keys
// before them) give the reference's logits either way, and the forms agree
// within f32's roundings; the decode steps after them are the absorbed
// form's. A bad form name is refused.
TEST_CASE_FIXTURE(test::VulkanTest, "latent attention's absorbed and expanded prompt forms give the reference's logits" *
                  doctest::skip(model_info().plan.expanded_row_floats == 0)) {
  const std::vector<int32_t> tokens = random_tokens(40, 29);
  reference::Reference ref(test_spec(), test_weights());
  const std::vector<float> expected = ref.forward(tokens);
  const std::vector<float> expected_step = ref.forward({tokens[3]});
  const size_t V = static_cast<size_t>(model_info().vocab);
  std::vector<std::vector<float>> by_form;
  for (const char* form : {"absorbed", "expanded"}) {
    CAPTURE(form);
    SessionOptions options;
    options.all_logits = true;
    options.max_chunk = 16;
    options.mla_form = form;
    Session session(device, model_info(), options);
    upload_all(session);
    by_form.push_back(session.prefill(tokens));
    const double worst = worst_row_error(by_form.back(), expected, V);
    const double step = normalized_error(session.decode(tokens[3]).data(), expected_step.data(), V);
    MESSAGE(form << ": worst row normalized error " << worst << ", the step after " << step);
    CHECK(worst < tolerance(session));
    CHECK(step < tolerance(session));
  }
  CHECK(worst_row_error(by_form[1], by_form[0], V) < 1e-4);
  SessionOptions bad;
  bad.mla_form = "compressed";
  CHECK_THROWS_WITH_AS(Session(device, model_info(), bad), doctest::Contains("mla_form: 'compressed'"), Error);
}

// Model-independent: one model shows it.
TEST_CASE_FIXTURE(test::VulkanTest, "a model without latent attention refuses its expanded form, runs the absorbed" *
                  doctest::skip(model_info().name != std::string_view("tiny-llama-gqa"))) {
  SessionOptions expanded;
  expanded.mla_form = "expanded";
  CHECK_THROWS_WITH_AS(Session(device, model_info(), expanded), doctest::Contains("has no expanded form"), Error);
  SessionOptions absorbed;
  absorbed.mla_form = "absorbed";  // what it runs anyway
  CHECK_NOTHROW(Session(device, model_info(), absorbed));
}

// Model-independent: one model shows it. Split attention's partials are one
// storage binding of max_chunk rows × splits: a chunk so long that the
// class's 16 ranges would exceed maxStorageBufferRange takes fewer ranges
// (before, the session's descriptors were refused), with the same logits.
TEST_CASE_FIXTURE(test::VulkanTest, "a long chunk's split attention takes the key ranges its partials' binding holds" *
                  doctest::skip(model_info().name != std::string_view("tiny-llama-gqa"))) {
  const plan::DeviceFeatures features = vk::device_features(device.info());
  const plan::DeviceClass* split = nullptr;
  for (const plan::DeviceClass& c : model_info().plan.classes)
    if (c.splits > 2 && plan::meets(c, features)) split = &c;
  REQUIRE(split);
  const uint64_t range = device.info().max_storage_buffer_range, row = model_info().plan.partials_row_floats * 4;
  SessionOptions options;
  options.device_class = std::string(split->name);
  options.max_chunk = static_cast<int64_t>(range / (row * split->splits)) + 1;  // the class's ranges do not fit
  options.context = 64;
  Session session(device, model_info(), options);
  upload_all(session);
  const std::vector<int32_t> prompt = random_tokens(12, 13);
  const std::vector<float> last = session.prefill(prompt);
  const std::vector<float> step = session.decode(prompt[2]);
  reference::Reference ref(test_spec(), test_weights());
  const size_t V = static_cast<size_t>(model_info().vocab);
  const std::vector<float> expected = ref.forward(prompt);
  CHECK(normalized_error(last.data(), &expected[(prompt.size() - 1) * V], V) < tolerance(session));
  CHECK(normalized_error(step.data(), ref.forward({prompt[2]}).data(), V) < tolerance(session));
}

// Model-independent: one model shows it. The memory a session counts (and
// checks against the device) holds split attention's partials: a chunk's
// rows × key ranges × heads × (head_dim + 2) f32.
TEST_CASE_FIXTURE(test::VulkanTest, "the memory a session counts holds split attention's partials" *
                  doctest::skip(model_info().name != std::string_view("tiny-llama-gqa"))) {
  SessionOptions options;
  options.max_chunk = 32;
  options.attention_splits = 1;
  const Session::Memory whole = Session(device, model_info(), options).memory();
  options.attention_splits = 4;
  const Session::Memory split = Session(device, model_info(), options).memory();
  CHECK(split.activations - whole.activations == uint64_t{32} * 4 * static_cast<uint64_t>(model_info().plan.partials_row_floats) * 4);
  CHECK(split.weights == whole.weights);
  CHECK(split.cache == whole.cache);
}

TEST_CASE_FIXTURE(test::VulkanTest, "decode continues from the cache position, not from 0") {
  // The same token at position 0 and after a prompt gives different logits,
  // and the latter are the reference's.
  Session session(device, model_info());
  upload_all(session);
  const std::vector<int32_t> prompt = random_tokens(12, 5);
  session.prefill(prompt);
  const std::vector<float> later = session.decode(prompt[0]);
  session.reset();
  const std::vector<float> first = session.decode(prompt[0]);
  const size_t V = static_cast<size_t>(model_info().vocab);
  CHECK(normalized_error(later.data(), first.data(), V) > 1e-3);
  reference::Reference ref(test_spec(), test_weights());
  ref.forward(prompt);
  const std::vector<float> expected = ref.forward({prompt[0]});
  CHECK(normalized_error(later.data(), expected.data(), V) < tolerance(session));
}

TEST_CASE_FIXTURE(test::VulkanTest, "bad calls are refused with the numbers, before anything runs") {
  SessionOptions options;
  options.context = 8;
  Session session(device, model_info(), options);
  try {
    session.prefill(random_tokens(2, 1));
    FAIL("a forward pass ran without weights");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("not loaded") != std::string::npos);
  }
  upload_all(session);
  try {
    session.prefill(random_tokens(9, 1));
    FAIL("9 tokens fit a context of 8");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidArgument);
    CHECK(std::string(e.what()).find("context of 8 positions is full: 0 cached + 9 new") != std::string::npos);
  }
  const int32_t vocab = static_cast<int32_t>(model_info().vocab);
  try {
    session.decode(vocab);
    FAIL("a token outside the vocabulary ran");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("token id " + std::to_string(vocab) + " is outside the vocabulary") !=
          std::string::npos);
  }
  CHECK(session.position() == 0);
  options.context = model_info().max_context + 1;
  CHECK_THROWS_AS(Session(device, model_info(), options), Error);
  const std::vector<float> one(3);
  CHECK_THROWS_AS(session.upload(0, DType::F32, std::as_bytes(std::span(one))), Error);
}

TEST_CASE_FIXTURE(test::VulkanTest, "batched decode steps of several sequences give each the bits it gets alone") {
  // Four sequences with prompts of different lengths (one a single token,
  // one over two chunks), then decode steps of changing sets of them, in
  // changing order: each row must equal, bit for bit, the same token decoded
  // in a session that runs that sequence alone.
  SessionOptions options;
  options.max_chunk = 16;
  options.sequences = 4;
  Session batched(device, model_info(), options);
  upload_all(batched);
  options.sequences = 1;
  Session alone(device, model_info(), options);
  upload_all(alone);
  const size_t V = static_cast<size_t>(model_info().vocab);
  const std::vector<std::vector<int32_t>> prompts = {random_tokens(13, 21), random_tokens(1, 22), random_tokens(30, 23),
                                                     random_tokens(6, 24)};
  // Each sequence's token stream after its prompt, and the logits alone gives it.
  constexpr size_t kSteps = 10;
  std::vector<std::vector<int32_t>> streams;
  std::vector<std::vector<std::vector<float>>> expected(prompts.size());
  for (size_t s = 0; s < prompts.size(); ++s) {
    streams.push_back(random_tokens(kSteps, 31 + static_cast<uint32_t>(s)));
    alone.reset();
    expected[s].push_back(alone.prefill(prompts[s]));
    for (int32_t token : streams[s]) expected[s].push_back(alone.decode(token));
  }
  std::vector<size_t> done(prompts.size(), 0);  // tokens of each stream fed
  auto same = [&](const float* row, size_t s, size_t step) {
    CAPTURE(s);
    CAPTURE(step);
    CHECK(std::memcmp(row, expected[s][step].data(), V * sizeof(float)) == 0);
  };
  auto step = [&](const std::vector<size_t>& which) {
    std::vector<Session::Step> steps;
    for (size_t s : which) steps.push_back({static_cast<int64_t>(s), streams[s][done[s]]});
    const std::vector<float> logits = batched.decode(steps);
    REQUIRE(logits.size() == which.size() * V);
    for (size_t i = 0; i < which.size(); ++i) same(&logits[i * V], which[i], ++done[which[i]]);
  };
  // Prompts go in out of order, between decode steps of the others.
  same(batched.prefill(0, prompts[0]).data(), 0, 0);
  same(batched.prefill(3, prompts[3]).data(), 3, 0);
  step({0, 3});
  same(batched.prefill(2, prompts[2]).data(), 2, 0);
  step({3, 2, 0});
  same(batched.prefill(1, prompts[1]).data(), 1, 0);
  for (int i = 0; i < 4; ++i) step({0, 1, 2, 3});
  step({1});
  step({2, 1});
  batched.reset(3);  // sequence 3 leaves; the same prompt again takes its cache
  CHECK(batched.position(3) == 0);
  same(batched.prefill(3, prompts[3]).data(), 3, 0);
  done[3] = 0;
  step({3, 0, 1, 2});
  for (size_t s = 0; s < prompts.size(); ++s)
    CHECK(batched.position(static_cast<int64_t>(s)) == static_cast<int64_t>(prompts[s].size() + done[s]));

  // What alone gives is the reference's (other tests check it in depth; here
  // sequence 2's last step), fed in the same calls: the prompt, then a token
  // each (dynamic NTK RoPE rotates by the length of each call).
  reference::Reference ref(test_spec(), test_weights());
  ref.forward(prompts[2]);
  std::vector<float> last;
  for (size_t i = 0; i < done[2]; ++i) last = ref.forward({streams[2][i]});
  CHECK(normalized_error(expected[2][done[2]].data(), last.data(), V) < tolerance(alone));

  // Bad steps are refused before anything runs.
  const std::vector<Session::Step> twice = {{1, 0}, {1, 0}};
  CHECK_THROWS_WITH_AS(batched.decode(twice), doctest::Contains("sequence 1 is named twice"), Error);
  const std::vector<Session::Step> outside = {{4, 0}};
  CHECK_THROWS_WITH_AS(batched.decode(outside), doctest::Contains("sequence 4 is outside [0, 4)"), Error);
  CHECK(batched.position(1) == static_cast<int64_t>(prompts[1].size() + done[1]));
}

TEST_CASE_FIXTURE(test::VulkanTest, "a sequence cut back or a prefix copied goes on with the bits of a cold one") {
  // Prompt reuse and speculative decoding stand on these: a prompt's first
  // two chunks cached, the rest prefilled after a copy or a cut, must give
  // the logits (the bits) of the same chunks prefilled cold.
  SessionOptions options;
  options.max_chunk = 16;
  options.sequences = 3;
  Session session(device, model_info(), options);
  upload_all(session);
  options.sequences = 1;
  Session cold(device, model_info(), options);
  upload_all(cold);
  const size_t V = static_cast<size_t>(model_info().vocab);
  const std::vector<int32_t> head = random_tokens(32, 41), tail = random_tokens(5, 42), extra = random_tokens(7, 43),
                             steps = random_tokens(3, 44);
  cold.prefill(head);
  const std::vector<float> after_tail = cold.prefill(tail);
  std::vector<std::vector<float>> decoded;
  for (int32_t t : steps) decoded.push_back(cold.decode(t));
  const auto same = [&](const std::vector<float>& got, const std::vector<float>& want) {
    REQUIRE(got.size() == V);
    CHECK(std::memcmp(got.data(), want.data(), V * sizeof(float)) == 0);
  };

  // A copy of the head into sequence 1 (whose own tokens it replaces).
  session.prefill(1, extra);
  session.prefill(0, head);
  session.copy(0, 1, 32);
  CHECK(session.position(1) == 32);
  same(session.prefill(1, tail), after_tail);
  same(session.decode(std::vector<Session::Step>{{1, steps[0]}}), decoded[0]);

  // Sequence 0 goes past the head, then is cut back to it.
  session.prefill(0, extra);
  session.decode(std::vector<Session::Step>{{0, steps[1]}});
  const int64_t floor = session.rewind_floor(0);
  MESSAGE("rewind floor " << floor << " of " << session.position(0));
  if (model_info().plan.state_layers > 0) CHECK(floor == session.position(0));  // a state holds its whole history
  if (floor <= 32) {
    session.truncate(0, 32);
    same(session.prefill(0, tail), after_tail);
    // The whole of it copied into sequence 2: both go on alike, batched.
    session.copy(0, 2, session.position(0));
    const std::vector<Session::Step> both = {{0, steps[0]}, {2, steps[0]}};
    const std::vector<float> rows = session.decode(both);
    CHECK(std::memcmp(rows.data(), decoded[0].data(), V * sizeof(float)) == 0);
    CHECK(std::memcmp(&rows[V], decoded[0].data(), V * sizeof(float)) == 0);
  } else {
    CHECK_THROWS_WITH_AS(session.truncate(0, 32), doctest::Contains("cuts back exactly to 0 or to ["), Error);
    CHECK_THROWS_WITH_AS(session.copy(0, 2, 32), doctest::Contains("a copy takes 0 or ["), Error);
  }
  // A cut to 0 always holds.
  session.truncate(0, 0);
  session.prefill(0, head);
  same(session.prefill(0, tail), after_tail);

  // Bad cuts and copies are refused, naming the numbers.
  const int64_t held = session.position(0);
  const std::string past = std::to_string(held + 1);
  CHECK_THROWS_WITH_AS(session.truncate(0, held + 1), doctest::Contains(("not to " + past).c_str()), Error);
  CHECK_THROWS_WITH_AS(session.copy(0, 0, 1), doctest::Contains("into itself"), Error);
  CHECK_THROWS_WITH_AS(session.copy(0, 1, held + 1), doctest::Contains(("not " + past).c_str()), Error);
  CHECK_THROWS_WITH_AS(session.copy(0, 3, 1), doctest::Contains("sequence 3 is outside [0, 3)"), Error);
  CHECK(session.position(0) == held);
}

TEST_CASE_FIXTURE(test::VulkanTest, "a verification pass gives each row the bits of a decode step, rejected rows cut back") {
  // Speculative decoding: proposals verified in one pass must give the logits
  // plain decoding gives them, so that greedy output is the same bit for bit.
  SessionOptions options;
  options.max_chunk = 16;
  options.verify_rows = 6;
  Session session(device, model_info(), options);
  upload_all(session);
  const std::vector<int32_t> prompt = random_tokens(11, 51), proposals = random_tokens(6, 52),
                             other = random_tokens(4, 53);
  session.prefill(prompt);
  if (model_info().plan.state_layers > 0) {
    CHECK_THROWS_WITH_AS(session.verify(0, proposals), doctest::Contains("state-space"), Error);
    return;
  }
  options.verify_rows = 0;
  Session steps(device, model_info(), options);
  upload_all(steps);
  steps.prefill(prompt);
  const size_t V = static_cast<size_t>(model_info().vocab);
  std::vector<std::vector<float>> stepped;
  for (size_t i = 0; i < 3; ++i) stepped.push_back(steps.decode(proposals[i]));
  for (int32_t t : other) stepped.push_back(steps.decode(t));

  const std::vector<float> rows = session.verify(0, proposals);
  REQUIRE(rows.size() == proposals.size() * V);
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(std::memcmp(&rows[i * V], stepped[i].data(), V * sizeof(float)) == 0);
  }
  CHECK(session.position() == 17);
  // Three accepted: the other three cut back, and the next proposals go on from there.
  session.truncate(0, 14);
  const std::vector<float> again = session.verify(0, other);
  for (size_t i = 0; i < other.size(); ++i) {
    CAPTURE(i);
    CHECK(std::memcmp(&again[i * V], stepped[3 + i].data(), V * sizeof(float)) == 0);
  }
  CHECK_THROWS_WITH_AS(session.verify(0, random_tokens(7, 54)), doctest::Contains("at most 6"), Error);
  CHECK(session.position() == 18);
}

TEST_CASE_FIXTURE(test::VulkanTest, "speculation by prompt lookup gives the greedy tokens of plain decoding") {
  // generate() with proposals from the prompt and the output, verified a
  // pass at a time and cut back where refused, against plain decode steps:
  // the same tokens, since each verified row has a decode step's bits.
  const text::Tokenizer tokenizer =
      text::Tokenizer::from_hf(LATHE_SOURCE_DIR "/tests/data/tokenizers/llama2-special.json");
  const std::vector<int32_t> motif = random_tokens(6, 61);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 3; ++i) prompt.insert(prompt.end(), motif.begin(), motif.end());
  text::GenerateOptions plain;
  plain.sampling.temperature = 0;
  plain.max_new_tokens = 40;
  plain.stop_at_eos = false;
  text::GenerateOptions speculated = plain;
  speculated.lookup = 2;
  speculated.draft_max = 4;
  SessionOptions options;
  options.verify_rows = 5;
  Session session(device, model_info(), options);
  upload_all(session);
  text::Sampler greedy(plain.sampling);
  const auto quiet = [](std::string_view) {};
  if (model_info().plan.state_layers > 0) {
    CHECK_THROWS_WITH_AS(text::generate(session, tokenizer, greedy, prompt, speculated, quiet),
                         doctest::Contains("no speculative decoding"), Error);
    return;
  }
  const text::GenerateStats with = text::generate(session, tokenizer, greedy, prompt, speculated, quiet);
  session.reset();
  const text::GenerateStats without = text::generate(session, tokenizer, greedy, prompt, plain, quiet);
  MESSAGE(with.draft_accepted << " of " << with.draft_tokens << " proposals kept, " << with.target_passes
                              << " passes for " << with.new_tokens << " tokens");
  CHECK(with.tokens == without.tokens);
  CHECK(with.draft_tokens > 0);  // the motif repeats: lookup proposes
  CHECK(with.new_tokens == 40);
}

// Issue 29's one-machine split: the one device opened again as a second
// (and third) logical device, each a pipeline stage of the model's layers.
TEST_CASE_FIXTURE(test::VulkanTest, "a split over devices gives one device's logits bit for bit") {
  const int64_t layers = model_info().layers;
  if (model_info().plan.carried.empty() || layers < 2) {
    MESSAGE(model_info().name << ": " << layers << " layer(s), carried slots " << model_info().plan.carried.size()
                              << ": nothing to split");
    return;
  }
  vk::Device second(device.info()), third(device.info());
  // Two stages (the first a layer), and three where there are layers for it.
  std::vector<std::vector<int64_t>> splits = {{1, layers - 1}};
  if (layers >= 3) splits.push_back({layers - 2, 1, 1});
  const size_t V = static_cast<size_t>(model_info().vocab);
  const std::vector<int32_t> prompt = random_tokens(37, 41), stream = random_tokens(48, 42);
  SessionOptions options;
  options.max_chunk = 16;  // 37 tokens: chunks of 16, 16 and 5 rows
  options.sequences = 2;
  Session one(device, model_info(), options);
  upload_all(one);
  const std::vector<float> one_prompt = one.prefill(prompt);
  std::vector<std::vector<float>> one_steps;
  for (int32_t t : stream) one_steps.push_back(one.decode(t));
  const std::vector<float> one_other = one.prefill(1, std::span(prompt).first(5));
  const std::vector<Session::Step> both = {{1, stream[0]}, {0, stream[1]}};
  const std::vector<float> one_batched = one.decode(both);
  one.reset();
  const std::vector<int32_t> one_greedy = one.generate_greedy(prompt[0], 12);
  for (const std::vector<int64_t>& stages : splits) {
    CAPTURE(stages.size());
    options.stages = stages;
    std::vector<vk::Device*> devices = {&device, &second, &third};
    devices.resize(stages.size());
    Session split(devices, model_info(), options);
    CHECK(split.stages() == stages.size());
    upload_all(split);
    CHECK(std::memcmp(split.prefill(prompt).data(), one_prompt.data(), V * sizeof(float)) == 0);
    for (size_t i = 0; i < stream.size(); ++i) {
      CAPTURE(i);
      CHECK(std::memcmp(split.decode(stream[i]).data(), one_steps[i].data(), V * sizeof(float)) == 0);
    }
    CHECK(std::memcmp(split.prefill(1, std::span(prompt).first(5)).data(), one_other.data(), V * sizeof(float)) == 0);
    CHECK(std::memcmp(split.decode(both).data(), one_batched.data(), 2 * V * sizeof(float)) == 0);
    split.reset();
    CHECK(split.generate_greedy(prompt[0], 12) == one_greedy);  // argmax's pick handed back to the first stage
    // Each stage holds its layers' weights and caches; together at least one device's.
    const std::vector<Session::Memory> parts = split.stage_memory();
    REQUIRE(parts.size() == stages.size());
    uint64_t weights = 0, cache = 0;
    for (const Session::Memory& m : parts) {
      CHECK(m.weights < one.memory().weights);
      weights += m.weights;
      cache += m.cache;
    }
    CHECK(weights >= one.memory().weights);
    CHECK(cache == one.memory().cache);
    // What --split memory balances (Session::split_need) is what each stage
    // then holds: its layers' and its end's (a model whose caches are not
    // one a layer, or that keeps Mamba states, spreads them alike: their sum).
    const Session::SplitNeed need = Session::split_need(model_info(), options);
    REQUIRE(need.layers.size() == static_cast<size_t>(layers));
    const bool cache_a_layer =
        model_info().plan.windows.size() == static_cast<size_t>(layers) && model_info().plan.state_layers == 0;
    int64_t first_layer = 0, needed = 0, held = 0;
    for (size_t k = 0; k < stages.size(); ++k) {
      CAPTURE(k);
      int64_t stage = (k == 0 ? need.first : 0) + (k + 1 == stages.size() ? need.last : 0);
      for (int64_t l = first_layer; l < first_layer + stages[k]; ++l) stage += need.layers[static_cast<size_t>(l)];
      first_layer += stages[k];
      const int64_t stage_held = static_cast<int64_t>(parts[k].weights + parts[k].cache + parts[k].state);
      if (cache_a_layer) CHECK(stage_held == stage);
      needed += stage;
      held += stage_held;
    }
    CHECK(std::abs(held - needed) < layers);  // (a spread cache's remainder)
  }
  // Every row's logits (all_logits), read chunk by chunk as the last stage
  // finishes each while the stages before it run the next ones.
  SessionOptions every = options;
  every.all_logits = true;
  every.stages.clear();
  Session one_all(device, model_info(), every);
  upload_all(one_all);
  const std::vector<float> one_rows = one_all.prefill(prompt);
  every.stages = splits.back();
  std::vector<vk::Device*> all_devices = {&device, &second, &third};
  all_devices.resize(every.stages.size());
  Session split_all(all_devices, model_info(), every);
  upload_all(split_all);
  const std::vector<float> split_rows = split_all.prefill(prompt);
  REQUIRE(split_rows.size() == one_rows.size());
  CHECK(std::memcmp(split_rows.data(), one_rows.data(), one_rows.size() * sizeof(float)) == 0);
  CHECK(std::memcmp(split_all.decode(stream[0]).data(), one_all.decode(stream[0]).data(), V * sizeof(float)) == 0);
  // A prompt whose last chunk is one row (16, 16, 1): that chunk runs as a
  // decode step on every stage, as on one device.
  one_all.reset();
  split_all.reset();
  const std::span<const int32_t> odd = std::span(prompt).first(33);
  CHECK(std::memcmp(split_all.prefill(odd).data(), one_all.prefill(odd).data(), 33 * V * sizeof(float)) == 0);

  // Devices and stages that do not match, and layers that are not the model's.
  options.stages = {1, layers - 1};
  const std::vector<vk::Device*> lone = {&device};
  CHECK_THROWS_WITH_AS(Session(lone, model_info(), options), doctest::Contains("1 device(s) for 2 pipeline stage(s)"), Error);
  options.stages = {1, layers};
  const std::vector<vk::Device*> pair = {&device, &second};
  const std::string sum = "= " + std::to_string(layers + 1) + ", not the " + std::to_string(layers);
  CHECK_THROWS_WITH_AS(Session(pair, model_info(), options), doctest::Contains(sum.c_str()), Error);
  options.stages = {0, layers};
  CHECK_THROWS_WITH_AS(Session(pair, model_info(), options), doctest::Contains("a pipeline stage of 0 layers"), Error);
}

}  // TEST_SUITE

TEST_SUITE("model") {


TEST_CASE_FIXTURE(test::VulkanTest, "a safetensors checkpoint loads to the logits of a direct upload") {
  if (has_block_dtypes()) return;
  std::vector<weights::TensorToWrite> tensors = checkpoint_tensors();
  // Tensors the spec says a checkpoint may carry beyond its weights (GPT-2's
  // mask buffers) are tolerated.
  for (std::string_view pattern : model_info().ignored_tensors) {
    std::string name(pattern);
    if (const size_t at = name.find("{layer}"); at != std::string::npos) name.replace(at, 7, "1");
    tensors.push_back({name, DType::F32, {2, 2}, std::vector<std::byte>(16)});
  }
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("lathe-model-test-" + std::string(model_info().name) + ".safetensors")).string();
  weights::write_safetensors(path, tensors);
  const std::vector<int32_t> tokens = random_tokens(10, 9);
  Session loaded(device, model_info());
  loaded.load(path);
  Session direct(device, model_info());
  upload_all(direct);
  const std::vector<float> a = loaded.prefill(tokens), b = direct.prefill(tokens);
  // Vectors (norm scales, biases) reach the device as f32 either way; only
  // their checkpoint rounding differs.
  CHECK(normalized_error(a.data(), b.data(), a.size()) < 1e-2);

  // The same tensors under one more prefix, as GPT2LMHeadModel.save_pretrained
  // writes "transformer.h.0…" for "h.0…": matched through it, the same logits.
  std::vector<weights::TensorToWrite> prefixed = tensors;
  for (weights::TensorToWrite& t : prefixed) t.name = "transformer." + t.name;
  weights::write_safetensors(path, prefixed);
  Session renamed(device, model_info());
  renamed.load(path);
  CHECK(renamed.prefill(tokens) == a);

  // One tensor of the wrong shape: refused, naming it, before any upload.
  weights::TensorToWrite& bad = tensors[1];
  bad.shape.back() += 1;
  int64_t elements = 1;
  for (int64_t n : bad.shape) elements *= n;
  bad.data.resize(static_cast<size_t>(elements) * weights::dtype_size(bad.dtype));
  weights::write_safetensors(path, tensors);
  Session refused(device, model_info());
  try {
    refused.load(path);
    FAIL("a checkpoint with a wrongly shaped tensor loaded");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadFile);
    CHECK(std::string(e.what()).find(bad.name) != std::string::npos);
  }
  std::filesystem::remove(path);
}

}  // TEST_SUITE

TEST_SUITE("model") {

// Every class of the plan whose needs the device meets runs here, forced
// (lavapipe meets the GPU classes too, but for those on matrix units): its tiles and key ranges give the
// reference's logits in every layout (a prompt in chunks of the prefill
// layout, a tiled one's over two tiles of tokens, and a last one of the
// decode layout, a batched step, a decode step). A GPU class splits attention into 16 key ranges (a step's
// into 64), more than the first rows have keys: empty ranges too. The class the
// device gets anyway, which every other test runs, and a class that adds no
// tile, key-range count or flash tile (a prompt's attention) to those already run (a narrow class: the decode
// layout for prompts too) are not run again.
TEST_CASE_FIXTURE(test::VulkanTest, "each device class the device meets, forced, gives the reference's logits") {
  const plan::DeviceFeatures features = vk::device_features(device.info());
  const std::span<const plan::DeviceClass> classes = model_info().plan.classes;
  const int32_t chosen = plan::first_met(classes, features);
  REQUIRE(chosen >= 0);
  std::vector<plan::Tile> tiles_run;   // the tiles and key-range counts some session has run
  std::vector<std::pair<uint32_t, uint32_t>> splits_run;  // a prompt's and a step's
  std::vector<plan::Flash> flash_run = {plan::Flash{}};  // and flash tiles (none: attention.comp)
  const auto adds = [&](const plan::DeviceClass& c) {  // records what is new
    const std::pair<uint32_t, uint32_t> ranges{c.splits, c.decode_splits};
    bool added = std::find(splits_run.begin(), splits_run.end(), ranges) == splits_run.end();
    if (added) splits_run.push_back(ranges);
    if (std::find(flash_run.begin(), flash_run.end(), c.flash) == flash_run.end()) {
      added = true;
      flash_run.push_back(c.flash);
    }
    for (const plan::Tile& t : {c.decode, c.prefill, c.batch})
      if (std::find(tiles_run.begin(), tiles_run.end(), t) == tiles_run.end()) {
        added = true;
        tiles_run.push_back(t);
      }
    return added;
  };
  adds(classes[static_cast<size_t>(chosen)]);
  reference::Reference ref(test_spec(), test_weights());
  const std::vector<int32_t> tokens = random_tokens(35, 17);
  const std::vector<float> expected = ref.forward(tokens);
  const std::vector<float> next = ref.forward({tokens[0]});
  const std::vector<float> after = ref.forward({tokens[1]});
  // Sequence 1: a prompt of 9, then token 9 in a step of its own.
  reference::Reference ref1(test_spec(), test_weights());
  ref1.forward(std::vector<int32_t>(tokens.begin(), tokens.begin() + 9));
  const std::vector<float> step9 = ref1.forward({tokens[9]});
  const size_t V = static_cast<size_t>(model_info().vocab);
  int ran = 0;
  for (const plan::DeviceClass& c : classes) {
    // A class on matrix units (gpu-coop, gpu-coop-khr) runs where the device
    // has their cooperative matrices; lavapipe has none.
    if (!plan::meets(c, features) && (plan::uses(c, plan::Variant::Coop) || plan::uses(c, plan::Variant::CoopKhr)))
      MESSAGE("class " << c.name << " not run: it needs " << plan::needs_text(c) << ", which " << device.info().name << " lacks");
    if (!plan::meets(c, features) || !adds(c)) continue;
    CAPTURE(c.name);
    SessionOptions options;
    options.all_logits = true;
    options.max_chunk = c.prefill.tiled() ? 33 : 8;  // 33 + 2: two tiles of tokens (32 and 1), then the decode layout
    options.sequences = 2;
    options.device_class = std::string(c.name);
    Session session(device, model_info(), options);
    CHECK(session.device_class().name == c.name);
    upload_all(session);
    const std::vector<float> logits = session.prefill(0, tokens);
    double worst = worst_row_error(logits, expected, V);
    session.prefill(1, std::span(tokens).first(9));
    const std::vector<Session::Step> steps = {{0, tokens[0]}, {1, tokens[9]}};
    const std::vector<float> batched = session.decode(steps);
    worst = std::max(worst, normalized_error(batched.data(), next.data(), V));
    worst = std::max(worst, normalized_error(&batched[V], step9.data(), V));
    worst = std::max(worst, normalized_error(session.decode(tokens[1]).data(), after.data(), V));  // sequence 0 alone
    MESSAGE("class " << c.name << ": worst normalized error " << worst);
    CHECK(worst < tolerance(&c));
    ++ran;
  }
  if (features.cpu) CHECK(ran >= 1);  // lavapipe: a GPU class at least
  SessionOptions unknown;
  unknown.device_class = "tpu";
  CHECK_THROWS_WITH_AS(Session(device, model_info(), unknown),
                       doctest::Contains("device class 'tpu' (LATHE_DEVICE_CLASS) is not one of"), Error);
}

// With max_chunk = 1 a windowed layer's cache is a ring of exactly W
// positions (W + max_chunk − 1): 32 positions wrap a window of 8 four times.
TEST_CASE_FIXTURE(test::VulkanTest, "one row a chunk (a ring of exactly the window) decodes past the window") {
  SessionOptions options;
  options.all_logits = true;
  options.max_chunk = 1;
  Session session(device, model_info(), options);
  upload_all(session);
  reference::Reference ref(test_spec(), test_weights());
  const std::vector<int32_t> tokens = random_tokens(32, 17);
  const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + 12);
  const std::vector<float> logits = session.prefill(prompt);  // 12 chunks of one row
  const std::vector<float> expected = ref.forward(prompt);
  const size_t V = static_cast<size_t>(model_info().vocab);
  double worst = worst_row_error(logits, expected, V);
  for (size_t t = prompt.size(); t < tokens.size(); ++t)
    worst = std::max(worst, normalized_error(session.decode(tokens[t]).data(), ref.forward({tokens[t]}).data(), V));
  MESSAGE("worst normalized error over 32 positions, one row a chunk: " << worst);
  CHECK(worst < tolerance(session));
  CHECK(session.position() == 32);
}

}  // TEST_SUITE

TEST_SUITE("model") {

TEST_CASE_FIXTURE(test::VulkanTest, "a sharded checkpoint directory loads to the logits of a direct upload") {
  if (has_block_dtypes()) return;
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("lathe-model-test-sharded-" + std::string(model_info().name));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // Alternate tensors between two shards, as Hugging Face's sharding does by size.
  std::vector<weights::TensorToWrite> shards[2];
  std::string map;
  size_t i = 0;
  for (weights::TensorToWrite& t : checkpoint_tensors()) {
    const size_t shard = i++ % 2;
    map += std::string(map.empty() ? "" : ", ") + "\"" + t.name + "\": \"model-0000" + std::to_string(shard + 1) +
           "-of-00002.safetensors\"";
    shards[shard].push_back(std::move(t));
  }
  for (size_t s = 0; s < 2; ++s)
    weights::write_safetensors((dir / ("model-0000" + std::to_string(s + 1) + "-of-00002.safetensors")).string(), shards[s]);
  std::ofstream(dir / "model.safetensors.index.json") << "{\"metadata\": {}, \"weight_map\": {" << map << "}}";

  const std::vector<int32_t> tokens = random_tokens(6, 21);
  Session loaded(device, model_info());
  loaded.load(dir.string());
  Session direct(device, model_info());
  upload_all(direct);
  const std::vector<float> a = loaded.prefill(tokens), b = direct.prefill(tokens);
  CHECK(normalized_error(a.data(), b.data(), a.size()) < 1e-2);  // vectors: checkpoint rounding only
  fs::remove_all(dir);
}

}  // TEST_SUITE

TEST_SUITE("model") {

TEST_CASE_FIXTURE(test::VulkanTest, "a GGUF checkpoint of the same tensors loads to the logits of a direct upload") {
  std::vector<weights::GgufTensorToWrite> tensors;
  for (weights::TensorToWrite& t : checkpoint_tensors())
    tensors.push_back({t.name, t.dtype, t.shape, std::move(t.data)});
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("lathe-model-test-" + std::string(model_info().name) + ".gguf")).string();
  weights::write_gguf(path, {{"general.name", weights::GgufValue(std::string(model_info().name))}}, tensors);
  const std::vector<int32_t> tokens = random_tokens(5, 17);
  Session loaded(device, model_info());
  loaded.load(path);
  Session direct(device, model_info());
  upload_all(direct);
  const std::vector<float> a = loaded.prefill(tokens), b = direct.prefill(tokens);
  CHECK(normalized_error(a.data(), b.data(), a.size()) < 1e-2);  // vectors: checkpoint rounding only

  // Metadata that contradicts the build, which shapes cannot show (twice the
  // heads at half the width; a Mamba model, without heads: twice the layers):
  // refused, naming the key.
  const std::string key = model_info().heads > 0 ? "llama.attention.head_count" : "llama.block_count";
  const int64_t twice = 2 * (model_info().heads > 0 ? model_info().heads : model_info().layers);
  weights::write_gguf(path,
                      {{"general.architecture", weights::GgufValue(std::string("llama"))},
                       {key, weights::GgufValue(static_cast<uint32_t>(twice))}},
                      tensors);
  Session contradicted(device, model_info());
  CHECK_THROWS_WITH_AS(contradicted.load(path), doctest::Contains((key + " is").c_str()), Error);
  std::filesystem::remove(path);
  if (has_block_dtypes()) return;  // the checkpoint was quantized already

  // Q8_0 blocks into an f16 build, dequantized at upload: the logits move by the quantization only.
  Session quantized(device, model_info());
  const ModelInfo& m = model_info();
  for (size_t i = 0; i < m.manifest.size(); ++i) {
    const std::span<const float> values = entry_values(m.manifest[i]);
    if (m.manifest[i].rank == 2 && values.size() % 32 == 0)
      quantized.upload(i, DType::Q8_0, weights::quantize_q8_0(values));
    else
      quantized.upload(i, DType::F32, std::as_bytes(values));
  }
  const std::vector<float> q = quantized.prefill(tokens);
  const double e = normalized_error(q.data(), b.data(), q.size());
  MESSAGE("Q8_0 weights: normalized logit error " << e);
  CHECK(e < 5e-2);
  CHECK(e > 0);  // the blocks really were quantized
}

}  // TEST_SUITE
