// The lowering of an op graph to the plan, without a device: the fusions,
// the packing of q/k/v, the column views, the in-place residual, the kernel
// list derived from the dispatches, and the errors for graphs the kernels
// cannot run (at the spec line of the op at fault).
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "generator/lower/lowering.hpp"
#include "generator/lower/model_plan.hpp"
#include "generator/spec/parse.hpp"

using namespace lathe;
using typed::Vector;
using typed::Weight;

namespace {

// A one-layer Llama-shaped model: d 16, 2 query heads over 1 KV head of 8,
// SwiGLU 32, vocab 40, f16 weights (the manifest's dtypes, by tensor).
const std::vector<DType> kDTypes(12, DType::F16);

typed::Schedule llama(bool standalone_add = false) {
  typed::Recorder r;
  auto x = r.embed(Weight<40, 16>{0}, 1.0);
  auto h = r.rmsnorm(x, Vector<16>{1}, 1e-5);
  auto q = r.matmul(Weight<16, 16>{2}, h);
  auto k = r.matmul(Weight<8, 16>{3}, h);
  auto v = r.matmul(Weight<8, 16>{4}, h);
  r.rope<2, 1, 8, 8>(q, k, typed::RopePairing::Neox, 10000.0);
  auto a = r.attention<2, 1, 8>(q, k, v, 0, 0.35);
  if (standalone_add) {
    x = r.add(x, a);  // a residual without the matmul of its branch
  } else {
    x = r.add(x, r.matmul(Weight<16, 16>{5}, a));
  }
  auto m = r.rmsnorm(x, Vector<16>{6}, 1e-5);
  auto g = r.matmul(Weight<32, 16>{7}, m);
  auto u = r.matmul(Weight<32, 16>{8}, m);
  x = r.add(x, r.matmul(Weight<16, 32>{9}, r.gated(g, u, typed::Activation::SiLU)));
  r.logits(Weight<40, 16>{11}, r.rmsnorm(x, Vector<16>{10}, 1e-5));
  return std::move(r.schedule());
}

// A spec file of the checkout (its path from the source root), parsed and planned.
struct Planned {
  spec::Spec spec;
  lower::ModelPlan model;
};
Planned planned(const std::string& file) {
  spec::Diagnostics diagnostics(file);
  const auto s = spec::parse_spec_file(std::string(LATHE_SOURCE_DIR "/") + file, diagnostics);
  REQUIRE_MESSAGE(s, diagnostics.format());
  auto model = lower::plan_model(*s, diagnostics);
  REQUIRE_MESSAGE(model, diagnostics.format());
  return {*s, std::move(*model)};
}

std::vector<std::string> names(const lower::Plan& p) {
  std::vector<std::string> out;
  for (const lower::Dispatch& d : p.dispatches) out.push_back(p.kernel_name(d));
  return out;
}

}  // namespace

TEST_SUITE("lowering") {

TEST_CASE("a Llama layer lowers to six dispatches with norms folded and q, k, v packed") {
  const lower::Plan p = lower::lower(llama(), kDTypes);
  CHECK(names(p) == std::vector<std::string>{"embed_16_f16", "matmul_16_f16_norm", "rope_kv_8_neox", "attention",
                                             "attention_combine", "matmul_16_f16_residual",
                                             "matmul_16_f16_gated_silu_norm", "matmul_32_f16_residual",
                                             "matmul_16_f16_norm", "argmax"});
  REQUIRE(p.packs.size() == 1);
  CHECK(plan::weight_members(p.packs[0]) == std::vector<int32_t>{2, 3, 4});
  CHECK(p.packs[0].bias_count == 0);

  const lower::Dispatch& qkv = p.dispatches[1];
  CHECK(qkv.binding("w").resource == plan::Resource::Pack);
  CHECK(qkv.push_value("n") == 32);  // 16 + 8 + 8 rows
  CHECK(qkv.groups_x == 32);
  // The norm folds in: x is the embedding's slot, the scale the attn_norm tensor.
  CHECK(qkv.binding("x").index == p.dispatches[0].binding("y").index);
  CHECK(qkv.binding("norm_scale").resource == plan::Resource::Weight);
  CHECK(qkv.binding("norm_scale").index == 1);

  // q, k, v are column views of the packed output: offsets 0, 16, 24, stride 32.
  const lower::Dispatch& rope = p.dispatches[2];
  CHECK(rope.push == push::words(push::AttentionPush{.q_offset = 0, .q_stride = 32, .k_offset = 16, .k_stride = 32,
                                                     .v_offset = 24, .v_stride = 32}));
  CHECK(rope.binding("q").index == qkv.binding("y").index);

  // The residual adds write the residual stream in place.
  CHECK(p.dispatches[5].binding("y").index == p.dispatches[0].binding("y").index);
  CHECK(p.dispatches[7].binding("y").index == p.dispatches[0].binding("y").index);
  // The gated MLP reads gate and up together.
  CHECK(p.dispatches[6].binding("w").index == 7);
  CHECK(p.dispatches[6].binding("w2").index == 8);
  // The LM head and the argmax serve the last row (unless the session keeps every row's logits).
  CHECK(p.dispatches[8].last_row);
  CHECK(p.dispatches[8].binding("y").resource == plan::Resource::Logits);
  CHECK(p.dispatches[9].last_row);
  // One workgroup per KV head.
  CHECK(p.dispatches[3].groups_x == 1);
  CHECK(p.dispatches[3].grid == plan::Grid::Split);
}

TEST_CASE("split attention: the combine pass runs only when split, and attention writes the partials") {
  const lower::Plan p = lower::lower(llama(), kDTypes);
  CHECK(plan::dispatch_count(*lower::View(p), true) == 10);
  CHECK(plan::dispatch_count(*lower::View(p), false) == 9);
  CHECK(p.kernel_name(p.dispatches[3]) == "attention");
  CHECK(p.dispatches[3].binding("partials").resource == plan::Resource::Partials);
  CHECK(p.kernel_name(p.dispatches[4]) == "attention_combine");
  CHECK(p.dispatches[4].split_only);
  CHECK(p.dispatches[4].groups_x == 2);  // one per query head
}

TEST_CASE("the kernel list is exactly the instances the dispatches use, each once") {
  const lower::Plan p = lower::lower(llama(), kDTypes);
  std::vector<bool> used(p.kernels.size(), false);
  for (const lower::Dispatch& d : p.dispatches) used.at(d.kernel) = true;
  CHECK(std::count(used.begin(), used.end(), true) == static_cast<long>(p.kernels.size()));
  for (size_t i = 0; i < p.kernels.size(); ++i)
    for (size_t j = i + 1; j < p.kernels.size(); ++j) CHECK(p.kernels[i].name() != p.kernels[j].name());
}

TEST_CASE("the lowering builds core/plan.hpp's dispatches, named by their family's interface") {
  const lower::Plan p = lower::lower(llama(), kDTypes);
  const lower::View view(p);
  REQUIRE(view->dispatches.size() == p.dispatches.size());
  REQUIRE(view->kernels.size() == p.kernels.size());
  for (size_t i = 0; i < p.dispatches.size(); ++i) {
    const lower::Dispatch& d = p.dispatches[i];
    CHECK(d.family == p.kernel(d).family);
    CHECK(view->kernels[d.kernel].name == p.kernel_name(d));
    CHECK(view->dispatches[i].bindings == d.bindings);
    CHECK(view->dispatches[i].push == d.push);
    CHECK(view->dispatches[i].layer == d.layer);
  }
  CHECK(view->kernels[p.dispatches[1].kernel].width == 16);  // matmul: its input width
  CHECK(view->packs.size() == p.packs.size());
  CHECK(view->slot_widths.size() == p.slot_widths.size());
  // A name its family lacks is refused, as is `rows`, which the runtime sets.
  lower::Dispatch d = p.dispatches[1];
  CHECK_THROWS_AS(d.bind("table", plan::weight(0)), std::logic_error);
  CHECK_THROWS_AS((void)d.binding("q"), std::logic_error);
  CHECK_THROWS_AS(d.set_push("rows", 1), std::logic_error);
  CHECK_THROWS_AS(d.set_push("q_offset", 1), std::logic_error);
  d.set_push("x_row0", 3);
  CHECK(d.push[2] == 3);  // MatmulPush's third word
}

TEST_CASE("a graph the kernels cannot run is refused naming the op") {
  try {
    lower::lower(llama(true), kDTypes);
    FAIL("a standalone residual add was lowered");
  } catch (const lower::LowerError& e) {
    CHECK(e.op() == 7);  // the add
    CHECK(std::string(e.what()).find("residual add must follow the matmul") != std::string::npos);
  }
}

TEST_CASE("a spec's plan: every dispatch attributed to its spec line, and sizes for the runtime") {
  const Planned planned_spec = planned("tests/specs/tiny/llama-gqa.toml");
  const spec::Spec* s = &planned_spec.spec;
  const lower::ModelPlan* model = &planned_spec.model;
  for (const lower::Dispatch& d : model->plan.dispatches) {
    CHECK(s->where(model->graph.keys[d.op]).line > 0);
    CHECK(d.line == static_cast<uint32_t>(s->where(model->graph.keys[d.op]).line));
  }
  CHECK(model->plan.scalars.cache_row_bytes == s->dims.kv_heads * s->dims.head_dim * 2);  // f16 cache
  CHECK(model->plan.scalars.partials_row_floats == s->dims.heads * (s->dims.head_dim + 2));
  // Per layer: the q/k/v matmul, rope_kv, attention, its combine, o, gate·up, down.
  size_t layer0 = 0;
  for (const lower::Dispatch& d : model->plan.dispatches) layer0 += d.layer == 0;
  CHECK(layer0 == 7);
  CHECK(lower::describe(*model).find("matmul_") != std::string::npos);
}

// rope_kv spreads a row's heads over a column of workgroups (rope_kv.comp):
// one a query head, so that a decode step's append is not one subgroup's
// loop over every head (31 µs of an 8B step on an H200); one where a q/k
// norm sums a whole projection before any of the row is rotated in place.
TEST_CASE("rope_kv: a workgroup a query head, one where a q/k norm spans a whole projection") {
  const lower::Plan p = lower::lower(llama(), kDTypes);
  const lower::Dispatch& rope = p.dispatches[2];
  REQUIRE(p.kernel_name(rope) == "rope_kv_8_neox");
  CHECK(rope.grid == plan::Grid::Heads);
  CHECK(rope.groups_x == 2);
  for (const auto& [file, parts] : std::vector<std::pair<std::string, uint32_t>>{
           {"tests/specs/tiny/qwen3.toml", 0}, {"tests/specs/tiny/qk-norm-whole.toml", 1},
           {"tests/specs/tiny/deepseek-mla.toml", 1}}) {
    CAPTURE(file);
    const Planned planned_spec = planned(file);
    size_t ropes = 0;
    for (const lower::Dispatch& d : planned_spec.model.plan.dispatches) {
      if (planned_spec.model.plan.kernel(d).family != kernels::Family::RopeKv) continue;
      ++ropes;
      CHECK(d.grid == plan::Grid::Heads);
      CHECK(d.groups_x == (parts ? parts : static_cast<uint32_t>(planned_spec.spec.dims.heads)));
    }
    CHECK(ropes > 0);
  }
}

// A Mamba model (tests/specs/tiny/mamba.toml): five dispatches a layer, the
// norm folded into in_proj and the residual into out_proj, the scan with
// dt_proj inside; each layer's conv windows and scan states bound as plan
// resources, no KV cache.
TEST_CASE("a Mamba layer lowers to in_proj, ssm_conv, x_proj, ssm_scan and out_proj, with its state per layer") {
  const Planned planned_spec = planned("tests/specs/tiny/mamba.toml");
  const spec::Spec* s = &planned_spec.spec;
  const lower::ModelPlan* model = &planned_spec.model;
  const lower::Plan& p = model->plan;
  std::vector<std::string> layer1;
  for (const lower::Dispatch& d : p.dispatches)
    if (d.layer == 1) layer1.push_back(p.kernel_name(d));
  CHECK(layer1 == std::vector<std::string>{"matmul_32_f16_norm", "ssm_conv", "matmul_64_f16", "ssm_scan",
                                           "matmul_64_f16_residual"});
  CHECK(p.scalars.state_layers == s->dims.layers);
  CHECK(p.scalars.conv_state_floats == s->ssm.d_inner * (s->ssm.d_conv - 1));
  CHECK(p.scalars.scan_state_floats == s->ssm.d_inner * s->ssm.d_state);
  CHECK(p.windows.empty());
  CHECK(s->cache_layers() == 0);
  for (const lower::Dispatch& d : p.dispatches) {
    const kernels::Family f = p.kernel(d).family;
    if (f != kernels::Family::SsmConv && f != kernels::Family::SsmScan) continue;
    CHECK(d.grid == plan::Grid::Channels);
    CHECK(d.groups_x == (s->ssm.d_inner + kernels::kSsmChannelsPerGroup - 1) / kernels::kSsmChannelsPerGroup);
    const plan::Binding state = d.binding("state");
    CHECK(state.resource == (f == kernels::Family::SsmConv ? plan::Resource::ConvState : plan::Resource::ScanState));
    CHECK(state.index == d.layer);
  }
}

// Mamba-2's scan in its two forms: the recurrence for decode steps (and every
// pass of a class without chunked_scan), the chunked form for a prompt chunk
// on a class with it; a decode step counts the first only.
TEST_CASE("a Mamba-2 layer's scan: the recurrence for decode steps, the chunked form for a GPU class's prompt chunks") {
  const Planned mamba2 = planned("models/mamba2-130m.toml");
  const lower::Plan& p = mamba2.model.plan;
  std::vector<std::string> layer3;
  std::vector<plan::Form> forms;
  for (const lower::Dispatch& d : p.dispatches)
    if (d.layer == 3) layer3.push_back(p.kernel_name(d)), forms.push_back(d.form);
  CHECK(layer3 == std::vector<std::string>{"matmul_768_f32_norm", "ssm_conv", "mamba2_scan", "mamba2_chunk",
                                           "matmul_1536_f32_residual_norm"});
  CHECK(forms == std::vector<plan::Form>{plan::Form::Any, plan::Form::Any, plan::Form::Recurrent, plan::Form::Chunked,
                                         plan::Form::Any});
  const lower::Dispatch* step = nullptr;
  const lower::Dispatch* chunk = nullptr;
  for (const lower::Dispatch& d : p.dispatches) {
    if (d.layer != 3) continue;
    if (d.form == plan::Form::Recurrent) step = &d;
    if (d.form == plan::Form::Chunked) chunk = &d;
  }
  REQUIRE(step);
  REQUIRE(chunk);
  CHECK(step->groups_x == 1536 / kernels::kSsmChannelsPerGroup);
  // 24 heads of 64 channels × 128 states: 16 channels (8 KiB of states) a workgroup, 4 a head.
  CHECK(kernels::mamba2_chunk_channels(64, 128) == 16);
  CHECK(chunk->groups_x == 24 * 4);
  for (const char* b : {"io", "u", "xz", "dt_bias", "a_log", "d", "state", "y"}) {  // one scan, the same buffers
    CAPTURE(b);
    CHECK(chunk->binding(b).resource == step->binding(b).resource);
    CHECK(chunk->binding(b).index == step->binding(b).index);
  }
  CHECK(chunk->binding("state").resource == plan::Resource::ScanState);
  CHECK(plan::dispatch_count(*lower::View(p), false) == p.dispatches.size() - 24);  // a decode step: no chunked form
  std::vector<std::string> chunked;
  for (const plan::DeviceClass& c : p.classes)
    if (c.chunked_scan) chunked.push_back(std::string(c.name));
  CHECK(chunked == std::vector<std::string>{"gpu-coop", "gpu-coop-khr", "gpu"});  // the gpu class and its copies on matrix units
  CHECK(kernels::mamba2_chunk_channels(12, 5) == 12);
  CHECK(kernels::mamba2_chunk_channels(64, 64) == 32);
  CHECK(kernels::mamba2_chunk_channels(7, 4096) == 1);
}

// Latent attention in its two forms: absorbed (the query into the latent's
// space, attention over the cached latent, the values out of it) in decode
// steps and short chunks; expanded (the rotary query alone, every cached key
// expanded per head, attention at the heads' widths into the values' slot)
// in a GPU class's prompt chunks of 171 rows or more, where DeepSeek-V2's
// widths make it fewer multiply-adds. A decode step counts the first only.
TEST_CASE("latent attention: absorbed for decode steps, expanded for a GPU class's long prompt chunks") {
  const Planned lite = planned("models/deepseek-v2-lite.toml");
  const lower::Plan& p = lite.model.plan;
  std::vector<std::string> names;
  std::vector<plan::Form> forms;
  for (const lower::Dispatch& d : p.dispatches)
    if (d.layer == 3 && (d.form != plan::Form::Any || p.kernel(d).family == kernels::Family::MlaPrefill))
      names.push_back(p.kernel_name(d)), forms.push_back(d.form);
  CHECK(names == std::vector<std::string>{"mla_query", "mla_query_rope", "attention", "attention_combine", "mla_values",
                                          "mla_prefill_expand", "mla_prefill_attend"});
  using plan::Form;
  CHECK(forms == std::vector<Form>{Form::Absorbed, Form::Expanded, Form::Absorbed, Form::Absorbed, Form::Absorbed,
                                   Form::Expanded, Form::Expanded});
  const lower::Dispatch* values = nullptr;
  const lower::Dispatch* attend = nullptr;
  const lower::Dispatch* query = nullptr;
  const lower::Dispatch* rope_only = nullptr;
  for (const lower::Dispatch& d : p.dispatches) {
    if (d.layer != 3) continue;
    const std::string name = p.kernel_name(d);
    if (name == "mla_values") values = &d;
    if (name == "mla_prefill_attend") attend = &d;
    if (name == "mla_query") query = &d;
    if (name == "mla_query_rope") rope_only = &d;
  }
  REQUIRE(values);
  REQUIRE(attend);
  REQUIRE(query);
  REQUIRE(rope_only);
  // Either form leaves the heads' values in the same slot; both queries in one.
  CHECK(attend->binding("out").index == values->binding("y").index);
  CHECK(rope_only->binding("y").index == query->binding("y").index);
  CHECK(attend->binding("r").index == query->binding("y").index);
  CHECK(attend->binding("q").index == query->binding("x").index);
  CHECK(attend->binding("e").resource == plan::Resource::Expanded);
  CHECK(attend->binding("k_cache").resource == plan::Resource::KCache);
  CHECK(attend->binding("k_cache").index == 3);
  // 16 heads × (128 + 128) f32 a key; 256 MiB of them.
  CHECK(p.scalars.expanded_row_floats == 16 * 256);
  CHECK(p.scalars.expanded_rows == 16384);
  CHECK(p.scalars.expanded_min_rows == 171);
  // A decode step: no expanded form (3 a layer), no combine (attention not split).
  CHECK(plan::dispatch_count(*lower::View(p), false) == p.dispatches.size() - 27 * 3 - 27);
  std::vector<std::string> expanded;
  for (const plan::DeviceClass& c : p.classes)
    if (c.expanded_mla) expanded.push_back(std::string(c.name));
  CHECK(expanded == std::vector<std::string>{"gpu-coop", "gpu-coop-khr", "gpu"});
}

// A mixture whose experts of a role are over max_part_bytes together: each
// role's experts bound in parts of whole experts (3 of 8 at 36,864 bytes), a
// dispatch a part from its expert0, every one over all the routed experts.
TEST_CASE("experts over max_part_bytes together are bound in parts of whole experts, a dispatch each") {
  const Planned planned_spec = planned("tests/specs/tiny/moe-split-experts.toml");
  const lower::ModelPlan* model = &planned_spec.model;
  const lower::Plan& p = model->plan;
  std::vector<uint32_t> firsts;
  std::vector<size_t> sizes;
  for (const lower::Dispatch& d : p.dispatches) {
    if (d.layer != 1 || d.grid != plan::Grid::Experts) continue;
    CHECK(p.kernel_name(d).ends_with("_part3"));
    CHECK(d.groups_z == 8);  // every routed expert: the part's run
    firsts.push_back(d.push_value("expert0"));
    const plan::Binding w = d.binding("w");
    REQUIRE(w.resource == plan::Resource::Pack);
    sizes.push_back(plan::weight_members(p.packs[static_cast<size_t>(w.index)]).size());
  }
  // gate/up, then down: parts of experts 0-2, 3-5, 6-7 each.
  CHECK(firsts == std::vector<uint32_t>{0, 3, 6, 0, 3, 6});
  CHECK(sizes == std::vector<size_t>{3, 3, 2, 3, 3, 2});
}

// Sliding windows by pattern: windowed layers run an attention instance with
// their window and get a ring cache in the plan; the others see every key.
TEST_CASE("windowed and full layers: their attention instances and the plan's per-layer windows") {
  const auto plan_of = [](const std::string& attention) {
    const std::string text = "[model]\nname = \"w\"\n[dims]\nhidden = 64\nlayers = 4\nheads = 4\nkv_heads = 2\n"
                             "intermediate = 96\nvocab = 211\nmax_context = 160\n[norm]\nkind = \"rmsnorm\"\n"
                             "[attention]\n" + attention + "\n[weights]\ndtype = \"f16\"\npreset = \"hf-llama\"\n";
    spec::Diagnostics diagnostics("w.toml");
    const auto s = spec::parse_spec_string(text, "w.toml", diagnostics);
    REQUIRE_MESSAGE(s, diagnostics.format());
    auto model = lower::plan_model(*s, diagnostics);
    REQUIRE_MESSAGE(model, diagnostics.format());
    // Each layer's attention instance, in layer order.
    std::vector<std::string> per_layer;
    for (const lower::Dispatch& d : model->plan.dispatches)
      if (model->plan.kernel(d).family == kernels::Family::Attention) {
        CHECK(d.layer == static_cast<int32_t>(per_layer.size()));
        per_layer.push_back(model->plan.kernel_name(d));
      }
    return std::pair{per_layer, model->plan.windows};
  };
  using Names = std::vector<std::string>;
  using Windows = std::vector<int64_t>;
  {  // Mistral: every layer
    const auto [names, windows] = plan_of("sliding_window = 8");
    CHECK(names == Names{"attention_w8", "attention_w8", "attention_w8", "attention_w8"});
    CHECK(windows == Windows{8, 8, 8, 8});
  }
  {  // Gemma 2: the even layers
    const auto [names, windows] = plan_of("sliding_window = 8\nwindow_pattern = [true, false]");
    CHECK(names == Names{"attention_w8", "attention", "attention_w8", "attention"});
    CHECK(windows == Windows{8, 0, 8, 0});
  }
  {  // Gemma 3's rule with a period of 3: layer i slides iff (i + 1) mod 3 ≠ 0
    const auto [names, windows] = plan_of("sliding_window = 6\nwindow_pattern = [true, true, false]");
    CHECK(names == Names{"attention_w6", "attention_w6", "attention", "attention_w6"});
    CHECK(windows == Windows{6, 6, 0, 6});
  }
  {  // no window
    const auto [names, windows] = plan_of("");
    CHECK(names == Names{"attention", "attention", "attention", "attention"});
    CHECK(windows == Windows{0, 0, 0, 0});
  }
}

// Norms after a branch (sandwich: Gemma 2/3; branch_output: OLMo 2) run as
// a norm that adds into the residual stream; norms before a branch fold into
// its projections; windowed layers of a spec with local_theta rotate by
// their own table; a soft-capped LM head caps in its epilogue.
TEST_CASE("sandwich and branch-output norms, local RoPE bases, soft-capped logits") {
  const auto layer0 = [](const std::string& sections) {
    const std::string text = "[model]\nname = \"n\"\n[dims]\nhidden = 64\nlayers = 2\nheads = 4\nkv_heads = 2\n"
                             "intermediate = 96\nvocab = 211\nmax_context = 160\n" + sections +
                             "\n[weights]\ndtype = \"f16\"\npreset = \"hf-llama\"\n";
    spec::Diagnostics diagnostics("n.toml");
    const auto s = spec::parse_spec_string(text, "n.toml", diagnostics);
    REQUIRE_MESSAGE(s, diagnostics.format());
    auto model = lower::plan_model(*s, diagnostics);
    REQUIRE_MESSAGE(model, diagnostics.format());
    std::vector<std::string> out;  // layer 0's kernels, and the LM head's
    for (const lower::Dispatch& d : model->plan.dispatches)
      if (d.layer == 0 || (d.layer < 0 && model->plan.kernel(d).family == kernels::Family::Matmul))
        out.push_back(model->plan.kernel_name(d));
    return out;
  };
  using Names = std::vector<std::string>;
  CHECK(layer0("[norm]\nplacement = \"sandwich\"\nunit_offset = true\n[output]\nsoftcap = 30.0") ==
        Names{"matmul_64_f16_norm", "rope_kv_16_neox", "attention", "attention_combine", "matmul_64_f16",
              "norm_64_residual", "matmul_64_f16_gated_silu_norm", "matmul_96_f16", "norm_64_residual",
              "matmul_64_f16_norm_softcap"});
  CHECK(layer0("[norm]\nplacement = \"branch_output\"") ==
        Names{"matmul_64_f16", "rope_kv_16_neox", "attention", "attention_combine", "matmul_64_f16",
              "norm_64_residual", "matmul_64_f16_gated_silu", "matmul_96_f16", "norm_64_residual",
              "matmul_64_f16_norm"});
  // Post-norm: the norms come after the residual adds and stay in buffers
  // (the stream reads them again); parallel with a shared norm: one norm
  // read by both branches; with two: the MLP's taken before the attention's add.
  CHECK(layer0("[norm]\nkind = \"layernorm\"\nplacement = \"post\"\nfinal = false") ==
        Names{"matmul_64_f16", "rope_kv_16_neox", "attention", "attention_combine", "matmul_64_f16_residual",
              "norm_64", "matmul_64_f16_gated_silu", "matmul_96_f16_residual", "norm_64", "matmul_64_f16_norm"});
  CHECK(layer0("[norm]\nkind = \"layernorm\"\nplacement = \"parallel\"") ==
        Names{"norm_64", "matmul_64_f16", "rope_kv_16_neox", "attention", "attention_combine", "matmul_64_f16_residual",
              "matmul_64_f16_gated_silu", "matmul_96_f16_residual", "matmul_64_f16_norm"});
  CHECK(layer0("[norm]\nkind = \"layernorm\"\nplacement = \"parallel\"\nparallel_shared = false") ==
        Names{"matmul_64_f16_norm", "rope_kv_16_neox", "attention", "attention_combine", "norm_64",
              "matmul_64_f16_residual", "matmul_64_f16_gated_silu", "matmul_96_f16_residual", "matmul_64_f16_norm"});
  const Names local = layer0(
      "[attention]\nsliding_window = 8\nwindow_pattern = [true, false]\n[position]\ntheta = 1e6\nlocal_theta = 1e4");
  CHECK(std::count(local.begin(), local.end(), "rope_kv_16_neox_local") == 1);
  // A mixture of experts: the MLP's norm folded into the router and the
  // gated experts. With Qwen2-MoE's gated shared expert the norm is a
  // dispatch of its own (four matmuls read it), the gate's logit is a 7th
  // row of the router's matmul, and the combine adds the shared expert.
  CHECK(layer0("[moe]\nexperts = 6\ntop_k = 2\nexpert_intermediate = 32") ==
        Names{"matmul_64_f16_norm", "rope_kv_16_neox", "attention", "attention_combine", "matmul_64_f16_residual",
              "matmul_64_f16_norm", "moe_route", "matmul_64_f16_gated_silu_norm_experts", "matmul_32_f16_experts_slot",
              "moe_combine", "matmul_64_f16_norm"});
  CHECK(layer0("[moe]\nexperts = 6\ntop_k = 2\nexpert_intermediate = 32\nshared_experts = 1\n"
               "shared_intermediate = 80\nshared_expert_gate = true") ==
        Names{"matmul_64_f16_norm", "rope_kv_16_neox", "attention", "attention_combine", "matmul_64_f16_residual",
              "norm_64", "matmul_64_f16", "moe_route", "matmul_64_f16_gated_silu_experts", "matmul_32_f16_experts_slot",
              "matmul_64_f16_gated_silu", "matmul_80_f16", "moe_combine_shared_gated", "matmul_64_f16_norm"});
}

TEST_CASE("a matrix over max_part_bytes is split into row ranges, each read by a dispatch of its own") {
  // f16 rows 16 wide take 32 bytes: at 1024 bytes the 40-row embedding
  // table (tied or not, the head's the same) splits 32 + 8; the stacked
  // q/k/v (32 rows), gate, up (32 each) and down (16 rows of 64 bytes) fit.
  const lower::Plan p = lower::lower(llama(), kDTypes, 1024);
  CHECK(p.scalars.max_part_bytes == 1024);
  REQUIRE(p.parts.size() == 4);
  const auto part = [&](size_t i) { return std::array<int64_t, 3>{p.parts[i].tensor, p.parts[i].row0, p.parts[i].rows}; };
  CHECK(part(0) == std::array<int64_t, 3>{0, 0, 32});
  CHECK(part(1) == std::array<int64_t, 3>{0, 32, 8});
  CHECK(part(2) == std::array<int64_t, 3>{11, 0, 32});
  CHECK(part(3) == std::array<int64_t, 3>{11, 32, 8});
  CHECK(names(p) == std::vector<std::string>{"embed_16_f16", "embed_16_f16", "matmul_16_f16_norm", "rope_kv_8_neox",
                                             "attention", "attention_combine", "matmul_16_f16_residual",
                                             "matmul_16_f16_gated_silu_norm", "matmul_32_f16_residual",
                                             "matmul_16_f16_norm", "matmul_16_f16_norm", "argmax"});
  // The gather: each range's tokens.
  CHECK(p.dispatches[0].binding("table").resource == plan::Resource::Part);
  CHECK(p.dispatches[0].binding("table").index == 0);
  CHECK(p.dispatches[0].push_value("token0") == 0);
  CHECK(p.dispatches[0].push_value("tokens") == 32);
  CHECK(p.dispatches[1].binding("table").index == 1);
  CHECK(p.dispatches[1].push_value("token0") == 32);
  CHECK(p.dispatches[1].push_value("tokens") == 8);
  // The head: each range's columns of the logits, 40 wide; both the last row's.
  for (size_t i : {9u, 10u}) {
    const lower::Dispatch& d = p.dispatches[i];
    CHECK(d.last_row);
    CHECK(d.binding("w").resource == plan::Resource::Part);
    CHECK(d.binding("w").index == static_cast<int32_t>(i - 7));
    CHECK(d.push_value("col0") == (i == 9 ? 0u : 32u));
    CHECK(d.push_value("n") == (i == 9 ? 32u : 8u));
    CHECK(d.groups_x == d.push_value("n"));
    CHECK(d.push_value("y_stride") == 40);
  }
  // A matrix bound whole writes its own width.
  CHECK(p.dispatches[2].binding("w").resource == plan::Resource::Pack);
  CHECK(p.dispatches[2].push_value("y_stride") == 32);
  CHECK(p.dispatches[2].push_value("col0") == 0);

  // At 512 bytes q, k and v (1024 bytes together) do not stack, k and v
  // (512) do; gate and up split alike, each gated dispatch reading one range
  // of both.
  const lower::Plan q = lower::lower(llama(), kDTypes, 512);
  const std::vector<std::string> n = names(q);
  CHECK(std::count(n.begin(), n.end(), "embed_16_f16") == 3);  // 16 + 16 + 8 rows
  CHECK(std::count(n.begin(), n.end(), "matmul_16_f16_gated_silu_norm") == 2);
  REQUIRE(q.packs.size() == 1);
  CHECK(plan::weight_members(q.packs[0]) == std::vector<int32_t>{3, 4});
  for (const lower::Dispatch& d : q.dispatches) {
    if (q.kernel_name(d) != "matmul_16_f16_gated_silu_norm") continue;
    const plan::Part& gate = q.parts[static_cast<size_t>(d.binding("w").index)];
    const plan::Part& up = q.parts[static_cast<size_t>(d.binding("w2").index)];
    CHECK(gate.tensor == 7);
    CHECK(up.tensor == 8);
    CHECK(gate.row0 == up.row0);
    CHECK(gate.rows == 16);
    CHECK(d.push_value("col0") == gate.row0);
    CHECK(d.push_value("y_stride") == 32);
  }
  // A row over the limit cannot be split.
  CHECK_THROWS_WITH_AS(lower::lower(llama(), kDTypes, 16), doctest::Contains("over max_part_bytes (16)"),
                       lower::LowerError);
}

TEST_CASE("max_part_bytes: read from the spec, range-checked, and refused where a matrix cannot be split") {
  const auto plan = [](const std::string& sections, const std::string& weights) {
    const std::string text = "[model]\nname = \"n\"\n[dims]\nhidden = 64\nlayers = 1\nheads = 4\nkv_heads = 2\n"
                             "intermediate = 96\nvocab = 211\nmax_context = 160\n" + sections +
                             "\n[weights]\ndtype = \"f16\"\npreset = \"hf-llama\"\n" + weights;
    spec::Diagnostics diagnostics("n.toml");
    const auto s = spec::parse_spec_string(text, "n.toml", diagnostics);
    std::optional<lower::ModelPlan> model;
    if (s) model = lower::plan_model(*s, diagnostics);
    return std::make_pair(std::move(model), diagnostics.format());
  };
  // The 211-row tables (embedding, head) of 128-byte rows: 128 rows a
  // range; the rest fit (q/k/v stacked: exactly 16384 bytes).
  const auto [split, none] = plan("", "max_part_bytes = 16384");
  REQUIRE_MESSAGE(split, none);
  CHECK(split->plan.scalars.max_part_bytes == 16384);
  CHECK(split->plan.parts.size() == 4);
  CHECK(split->plan.packs.size() == 1);
  CHECK(lower::describe(*split).find("part1: model.embed_tokens.weight rows 128..211 (max_part_bytes 16384)") !=
        std::string::npos);
  const auto [whole, message] = plan("", "");
  REQUIRE_MESSAGE(whole, message);
  CHECK(whole->plan.parts.empty());
  CHECK(whole->plan.scalars.max_part_bytes == kDefaultMaxPartBytes);
  const auto [small, too_small] = plan("", "max_part_bytes = 1000");
  CHECK_FALSE(small);
  CHECK_MESSAGE(too_small.find("n.toml:15") != std::string::npos, too_small);
  CHECK(too_small.find("1024") != std::string::npos);
  // The experts' matrices are bound in parts of whole experts (6 of 4,096
  // bytes: 4 and 2 at 16,384), never an expert's rows apart: one expert over
  // the limit is refused, by name.
  const auto [moe, experts] = plan("[moe]\nexperts = 6\ntop_k = 2\nexpert_intermediate = 32", "max_part_bytes = 16384");
  REQUIRE_MESSAGE(moe, experts);
  const auto [big, expert] = plan("[moe]\nexperts = 6\ntop_k = 2\nexpert_intermediate = 512", "max_part_bytes = 16384");
  CHECK_FALSE(big);
  CHECK_MESSAGE(expert.find("one expert's matrix takes 65536 bytes, over max_part_bytes (16384)") !=
                    std::string::npos,
                expert);
  // Phi-3's fused gate_up (192 rows of 128 bytes) and GPT-2's learned
  // position table (f32) are not split either: refused, by name.
  using Case = std::pair<std::string, std::string>;
  for (const auto& [tiny, expected] : {Case{"phi3", "a fused gate_up tensor over max_part_bytes (16384 bytes)"},
                                       Case{"gpt2", "the position table is over max_part_bytes"}}) {
    CAPTURE(tiny);
    const std::string path = LATHE_SOURCE_DIR "/tests/specs/tiny/" + tiny + ".toml";
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(text.find("[weights]") != std::string::npos);
    spec::Diagnostics diagnostics(path);
    const auto s = spec::parse_spec_string(text + "max_part_bytes = 16384\n", path, diagnostics);  // [weights] is last
    REQUIRE_MESSAGE(s, diagnostics.format());
    CHECK_FALSE(lower::plan_model(*s, diagnostics));
    CHECK_MESSAGE(diagnostics.format().find(expected) != std::string::npos, diagnostics.format());
  }
}

TEST_CASE("a graph the kernels cannot run is an error of lathe gen at the spec line of the op at fault") {
  const std::string path = "tests/specs/tiny/llama-gqa.toml";
  spec::Diagnostics diagnostics(path);
  const auto s = spec::parse_spec_file(LATHE_SOURCE_DIR "/" + path, diagnostics);
  REQUIRE(s);
  spec::Manifest manifest = spec::build_manifest(*s);
  lower::Graph graph = lower::build_graph(*s, manifest);
  // Layer 0's attention output added to the residual stream without the o
  // projection between them: no kernel adds two activations.
  auto& ops = graph.schedule.ops;
  size_t o = 0;
  while (ops[o].kind != typed::OpKind::MatMul || ops[o + 1].kind != typed::OpKind::Add) ++o;
  const uint32_t attention = ops[o].in[0];
  ops[o + 1].in[1] = attention;
  ops.erase(ops.begin() + static_cast<long>(o));
  graph.keys.erase(graph.keys.begin() + static_cast<long>(o));
  graph.handles.erase(graph.handles.begin() + static_cast<long>(o));
  const std::string key = graph.keys[o];  // the add's
  CHECK_FALSE(lower::plan_graph(*s, std::move(manifest), std::move(graph), diagnostics));
  REQUIRE(diagnostics.size() == 1);
  CHECK(diagnostics.items()[0].loc.line == s->where(key).line);
  CHECK(diagnostics.items()[0].loc.line > 0);
  CHECK(diagnostics.format().find(path + ":" + std::to_string(s->where(key).line)) != std::string::npos);
  CHECK(diagnostics.format().find("residual add must follow the matmul") != std::string::npos);
}

}  // TEST_SUITE

TEST_CASE("device classes: a class by what the device reports, one for every device, block weights batch narrower") {
  using lathe::plan::DeviceClass;
  using lathe::plan::DeviceFeatures;
  const std::vector<DType> dense = {DType::F16, DType::F32};
  const std::vector<DType> blocks = {DType::F16, DType::Q4_K};
  const std::vector<DeviceClass> classes = lathe::lower::device_classes(dense);
  CHECK(lathe::plan::classes_valid(classes));
  CHECK(lathe::plan::classes_valid(lathe::lower::device_classes(blocks)));
  const auto index = [&](std::string_view name) {
    const auto at = std::find_if(classes.begin(), classes.end(), [&](const DeviceClass& c) { return c.name == name; });
    REQUIRE(at != classes.end());
    return static_cast<size_t>(at - classes.begin());
  };
  const size_t gpu = index("gpu");
  {  // a prompt's attention unsplit, a step's split: each pass records the combine by its own count
    std::vector<DeviceClass> own = classes;
    own[gpu].splits = 1;
    CHECK(lathe::plan::classes_valid(own));
    own[gpu].decode_splits = 0;
    CHECK_FALSE(lathe::plan::classes_valid(own));
  }
  const auto pick = [&](bool cpu, uint32_t subgroup, uint32_t shared = 32768) {
    const int32_t i = lathe::plan::first_met(classes, DeviceFeatures{cpu, subgroup, shared, 1024});
    REQUIRE(i >= 0);
    return std::string(classes[static_cast<size_t>(i)].name);
  };
  CHECK(pick(true, 8) == "cpu");          // lavapipe on 256-bit vectors
  CHECK(pick(true, 16) == "cpu");         // on 512-bit
  CHECK(pick(true, 4) == "cpu-narrow");   // on 128-bit: the decode layout for prompts too
  CHECK(pick(false, 32, 49152) == "gpu");  // NVIDIA, Intel
  CHECK(pick(false, 64, 65536) == "gpu");  // AMD
  CHECK(pick(false, 4) == "gpu");          // the tiled layout needs no subgroup operations
  CHECK(pick(false, 32, 16384) == "gpu-basic");  // the least shared memory Vulkan allows: under the tiled layout's
  CHECK(pick(true, 8, 0) == "cpu");              // the CPU classes need none
  for (const DeviceClass& c : classes) {
    CAPTURE(c.name);
    if (c.cpu_only) CHECK((c.prefill == c.decode) == (c.min_subgroup < lathe::plan::Tile::kPrefillTokens));
    else CHECK((c.prefill == c.decode) == (c.min_shared == 0));
    CHECK(c.min_shared == std::max(c.prefill.shared_bytes(true), c.attention_rows > 1 ? lathe::plan::kAttentionStageBytes : 0u));
    CHECK(c.splits == (c.cpu_only ? 1u : 16u));
    // A step's ranges: 64 on the measured GPU classes (bench/README.md, "Fourth GPU run"), as many as a prompt's elsewhere.
    CHECK(c.decode_splits == (c.cpu_only ? 1u : c.name == "gpu-basic" ? 16u : 64u));
  }
  CHECK(classes[0].batch == lathe::plan::Tile{64, 4, 1});
  CHECK(lathe::lower::device_classes(blocks)[1].batch == lathe::plan::Tile{16, 4, 2});
  CHECK(classes[gpu].prefill == lathe::plan::Tile{64, 32, 1});  // tiled: 4 × 4 sums an invocation
  CHECK(classes[gpu].min_shared == 22784);  // 64 and 64 gated rows, 32 tokens, 32 values of K: lavapipe's 32 KiB hold it
  CHECK(classes[gpu].attention_rows == 4);  // a prompt's attention: 4 rows a workgroup over staged keys
  CHECK(lathe::plan::first_met(classes, DeviceFeatures{false, 64, 65536, 128}) == gpu + 1);  // 4 subgroups of 64 lanes: too many invocations
  CHECK(classes[gpu].decode == lathe::plan::Tile{1, 1, 2, 4});  // a subgroup a row: thousands in flight on a GPU
  CHECK(lathe::plan::tile_text(classes[gpu].decode) == "1×1×2 in 4 subgroups");
  CHECK(lathe::plan::parse_tile("1,1,2,4") == classes[gpu].decode);
  CHECK(lathe::plan::parse_tile("1,1,2") == lathe::plan::Tile{1, 1, 2, 1});
  CHECK_FALSE(lathe::plan::parse_tile("1,1,2,4,5"));
  CHECK_FALSE(lathe::plan::tile_fits({32, 8, 1, 2}));  // subgroups a workgroup: the decode layout's alone
  // What would leave a device without a class, or run a tile matmul cannot, is refused.
  std::vector<DeviceClass> bad = classes;
  bad.pop_back();
  bad.pop_back();
  CHECK_FALSE(lathe::plan::classes_valid(bad));  // a GPU with 4 lanes gets nothing
  bad = classes;
  bad[0].prefill.rows = 65;
  CHECK_FALSE(lathe::plan::classes_valid(bad));
  bad = classes;
  bad[1].min_subgroup = 1;
  bad[1].prefill = {32, 8, 1};  // the prefill layout on 4 lanes
  CHECK_FALSE(lathe::plan::classes_valid(bad));
  bad = classes;
  bad[gpu].min_shared = 16384;  // a tiled prefill over the shared memory the class asks for
  CHECK_FALSE(lathe::plan::classes_valid(bad));
  bad = classes;
  bad[gpu].prefill = {32, 32, 1};  // tiled rows are 64 or 128, tokens 32 or 64
  CHECK_FALSE(lathe::plan::classes_valid(bad));
  bad[gpu].prefill = {64, 16, 1};
  CHECK_FALSE(lathe::plan::classes_valid(bad));
  bad = classes;
  bad.back().min_shared = 1;  // the last class needs nothing
  CHECK_FALSE(lathe::plan::classes_valid(bad));
  CHECK(lathe::plan::needs_text(classes[0]) == "a CPU device with subgroups of 8 lanes or more");
  CHECK(lathe::plan::needs_text(classes[gpu]) == "22784 bytes of shared memory or more, workgroups of 4 subgroups");
  bad = classes;
  bad[0].attention_rows = 4;  // staged attention needs the shared memory the class asks for
  CHECK_FALSE(lathe::plan::classes_valid(bad));
  CHECK(lathe::plan::needs_text(classes.back()) == "nothing");
}

TEST_CASE("block weights: dot classes first where met (on a CPU only when named), and a quantize before each matmul of block weights") {
  using lathe::plan::DeviceClass;
  using lathe::plan::DeviceFeatures;
  using lathe::plan::Variant;
  const std::vector<DeviceClass> classes = lathe::lower::device_classes(std::vector<DType>{DType::F16, DType::Q4_K});
  REQUIRE(lathe::plan::classes_valid(classes));
  std::vector<std::string> names;
  for (const DeviceClass& c : classes) names.emplace_back(c.name);
  CHECK(names == std::vector<std::string>{"cpu-dot", "cpu", "cpu-narrow", "gpu-coop-dot", "gpu-coop", "gpu-coop-khr-dot",
                                          "gpu-coop-khr", "gpu-dot", "gpu", "gpu-basic"});
  for (const DeviceClass& c : classes) {
    CAPTURE(c.name);
    const bool dot = std::string_view(c.name).ends_with("-dot");
    CHECK(lathe::plan::uses(c, Variant::Dot) == dot);
    CHECK((lathe::plan::needs_text(c).find("integer dot products") != std::string::npos) == dot);
    // lavapipe runs the dot layout slower than the exact one: the CPU's is
    // taken only when named; the GPU's passed their tests on an H200.
    CHECK(c.forced_only == (dot && c.cpu_only));
    CHECK(c.verified.empty() == (c.cpu_only || c.name == std::string_view("gpu") || c.name == std::string_view("gpu-basic")));
  }
  const DeviceClass& gpu_dot = classes[7];
  REQUIRE(gpu_dot.name == std::string_view("gpu-dot"));
  // lavapipe takes the exact class by default; a GPU with integer dot
  // products and no matrix units the dot one, and with NV's the coop-dot one.
  const DeviceFeatures lavapipe{true, 8, 32768, 1024, true}, gpu{false, 32, 49152, 1024, true};
  DeviceFeatures nv = gpu;
  nv.coop_nv = true;
  CHECK(classes[static_cast<size_t>(lathe::plan::first_met(classes, lavapipe))].name == std::string_view("cpu"));
  CHECK(classes[static_cast<size_t>(lathe::plan::first_met(classes, gpu))].name == std::string_view("gpu-dot"));
  CHECK(classes[static_cast<size_t>(lathe::plan::first_met(classes, nv))].name == std::string_view("gpu-coop-dot"));
  // A device without integer dot products does not meet them.
  CHECK(lathe::plan::meets(classes[0], lavapipe));
  CHECK_FALSE(lathe::plan::meets(gpu_dot, DeviceFeatures{false, 32, 49152, 1024, false}));
  CHECK(classes[static_cast<size_t>(lathe::plan::first_met(classes, DeviceFeatures{false, 32, 49152, 1024, false}))].name ==
        std::string_view("gpu"));
  CHECK(lathe::plan::needs_text(classes[0]) ==
        "a CPU device with subgroups of 8 lanes or more, integer dot products (shaderIntegerDotProduct)");
  // The dot layout runs in decode and batched steps; the variant needs its feature.
  CHECK(gpu_dot.decode.layout() == lathe::kernels::Layout::Dot);
  CHECK(gpu_dot.prefill.layout() == lathe::kernels::Layout::Tiled);
  CHECK(classes[3].decode.layout() == lathe::kernels::Layout::Dot);
  CHECK(classes[3].prefill.layout() == lathe::kernels::Layout::Coop);
  // A GPU's dot layout takes 1 row a subgroup (measured), its exact twin 2;
  // the CPU's keeps its twin's tile.
  CHECK(gpu_dot.decode.rows == 1);
  CHECK(classes[8].decode.rows == 2);
  CHECK(classes[0].decode.rows == classes[1].decode.rows);
  std::vector<DeviceClass> bad = classes;
  bad.back().decode.variant = Variant::Dot;  // the last class needs nothing: no integer dot products
  CHECK_FALSE(lathe::plan::classes_valid(bad));
  CHECK_FALSE(lathe::plan::tile_fits({64, 32, 1, 1, Variant::Dot}));  // integer dot products decode only

  // Every matmul of block weights reads a quantize just before it, of its
  // own input and norm, into the last slot; dense plans have none.
  const Planned q4 = planned("tests/specs/tiny/quant-q4_k.toml");
  const lower::Plan& p = q4.model.plan;
  const int32_t xq = static_cast<int32_t>(p.slot_widths.size()) - 1;
  size_t quantizes = 0, dots = 0;
  for (size_t i = 0; i < p.dispatches.size(); ++i) {
    const lower::Dispatch& d = p.dispatches[i];
    const lower::KernelKey& k = p.kernel(d);
    if (k.family == kernels::Family::Quantize) {
      ++quantizes;
      CHECK(d.form == plan::Form::Quantized);
      CHECK(d.grid == plan::Grid::Heads);  // a row's blocks over a row of workgroups
      CHECK(d.groups_x == kernels::quantize_groups(k.width));
      CHECK(d.binding("xq") == plan::activation(xq));
      REQUIRE(i + 1 < p.dispatches.size());
      const lower::Dispatch& m = p.dispatches[i + 1];
      CHECK(p.kernel(m).family == kernels::Family::Matmul);
      CHECK(m.binding("x") == d.binding("x"));
      CHECK(m.binding("norm_scale") == d.binding("norm_scale"));
      CHECK(k.epilogue.norm == p.kernel(m).epilogue.norm);
      CHECK(k.width == p.kernel(m).width);
    }
    if (k.family == kernels::Family::Matmul && is_block_dtype(k.dtype)) {
      ++dots;
      CHECK(d.binding("xq") == plan::activation(xq));
      CHECK(i > 0);
      CHECK(p.kernel(p.dispatches[i - 1]).family == kernels::Family::Quantize);
    }
  }
  CHECK(quantizes == dots);  // no two consecutive matmuls of one input here: qkv and gate_up are packed
  CHECK(dots > 0);
  CHECK(p.slot_widths[static_cast<size_t>(xq)] == kernels::xq_row_words(512));  // the widest K: the down projection's
  // A decode step counts none of them (they run on a dot class alone).
  CHECK(plan::dispatch_count(*lower::View(p), true) == p.dispatches.size() - quantizes);
  const Planned dense = planned("tests/specs/tiny/llama-gqa.toml");
  for (const lower::Dispatch& d : dense.model.plan.dispatches) CHECK(d.form != plan::Form::Quantized);
}

TEST_CASE("device classes: the gpu class on matrix units, NV's or KHR's, first where met") {
  using lathe::plan::DeviceClass;
  using lathe::plan::DeviceFeatures;
  using lathe::plan::Tile;
  using lathe::plan::Variant;
  const std::vector<DType> dtypes = {DType::F16, DType::F32};
  const std::vector<DeviceClass> classes = lathe::lower::device_classes(dtypes);
  REQUIRE(lathe::plan::classes_valid(classes));
  std::vector<std::string_view> names;
  for (const DeviceClass& c : classes) names.push_back(c.name);
  REQUIRE(names == std::vector<std::string_view>{"cpu", "cpu-narrow", "gpu-coop", "gpu-coop-khr", "gpu", "gpu-basic"});
  const DeviceClass &nv = classes[2], &khr = classes[3], &gpu = classes[4];
  for (const DeviceClass* c : {&nv, &khr}) {
    CAPTURE(c->name);
    CHECK_FALSE(c->forced_only);  // verified on an H200
    CHECK_FALSE(c->verified.empty());
    CHECK(c->decode == gpu.decode);
    CHECK(c->batch == gpu.batch);
    CHECK(c->prefill.rows == gpu.prefill.rows);
    CHECK(c->prefill.tokens == gpu.prefill.tokens);
    CHECK(c->prefill.texels == gpu.prefill.texels);
    CHECK(c->splits == gpu.splits);
    CHECK(c->attention_rows == gpu.attention_rows);
    CHECK(c->min_shared == std::max(c->prefill.shared_bytes(true), lathe::plan::kAttentionStageBytes));
    CHECK(c->min_shared < gpu.min_shared);
  }
  CHECK(nv.prefill.layout() == lathe::kernels::Layout::Coop);
  CHECK(khr.prefill.layout() == lathe::kernels::Layout::CoopKhr);
  CHECK((lathe::plan::uses(nv, Variant::Coop) && !lathe::plan::uses(nv, Variant::CoopKhr) &&
         lathe::plan::uses(khr, Variant::CoopKhr) && !lathe::plan::uses(khr, Variant::Coop)));
  // 64 + 64 gated rows and 32 tokens of 40 f16, 4 × 2 blocks of 256 f32, the norm's 64 + 128 words.
  CHECK(nv.prefill.shared_bytes(true) == 21760);
  CHECK(gpu.prefill.shared_bytes(true) == 22784);  // the tiled layout's, as before
  // Never more shared memory than the tiled layout's tile, for every tile either runs.
  for (uint32_t rows : {64u, 128u})
    for (uint32_t tokens : {32u, 64u})
      for (uint32_t texels = 1; texels <= 4; ++texels)
        for (bool gated : {false, true}) {
          const Tile tiled{rows, tokens, texels}, coop{rows, tokens, texels, 1, Variant::Coop};
          CAPTURE(lathe::plan::tile_text(coop));
          CHECK(lathe::plan::tile_fits(coop));
          CHECK(coop.shared_bytes(gated) <= tiled.shared_bytes(gated));
          CHECK(coop.shared_bytes(gated) == Tile{rows, tokens, texels, 1, Variant::CoopKhr}.shared_bytes(gated));
        }
  CHECK_FALSE(lathe::plan::tile_fits({32, 8, 1, 1, Variant::Coop}));  // matrix units take tiled prompts only
  CHECK_FALSE(lathe::plan::tile_fits({32, 1, 2, 1, Variant::CoopKhr}));

  // A device with both extensions gets NV's, one with KHR's alone KHR's.
  DeviceFeatures both{false, 32, 49152, 1024};
  both.coop_nv = both.coop_khr = true;
  CHECK(classes[static_cast<size_t>(lathe::plan::first_met(classes, both))].name == "gpu-coop");
  DeviceFeatures khr_only = both;
  khr_only.coop_nv = false;
  CHECK(classes[static_cast<size_t>(lathe::plan::first_met(classes, khr_only))].name == "gpu-coop-khr");
  CHECK(lathe::plan::meets(nv, both));
  CHECK(lathe::plan::meets(khr, both));
  DeviceFeatures nv_only = both;
  nv_only.coop_khr = false;
  CHECK(lathe::plan::meets(nv, nv_only));
  CHECK_FALSE(lathe::plan::meets(khr, nv_only));
  CHECK_FALSE(lathe::plan::meets(nv, DeviceFeatures{false, 32, 49152, 1024}));
  CHECK(lathe::plan::needs_text(nv).find("VK_NV_cooperative_matrix") != std::string::npos);
  CHECK(lathe::plan::needs_text(khr).find("VK_KHR_cooperative_matrix") != std::string::npos);
  CHECK(lathe::plan::class_text(khr).find("verified on NVIDIA H200") != std::string::npos);
  CHECK(lathe::plan::tile_text(khr.prefill) == "64×32×1 (coop-khr)");
  // A variant's feature is a need of whatever class runs it (plan::uses):
  // a device without it does not meet the class, whichever tile runs it.
  DeviceClass moved = gpu;
  moved.prefill.variant = Variant::Coop;
  CHECK_FALSE(lathe::plan::meets(moved, DeviceFeatures{false, 32, 49152, 1024}));
  CHECK(lathe::plan::meets(moved, nv_only));
  moved.prefill.variant = Variant::CoopKhr;
  CHECK_FALSE(lathe::plan::meets(moved, nv_only));
}

TEST_CASE("flash classes: a prompt's attention in flash tiles planned for the model, taken only when named") {
  using lathe::plan::DeviceClass;
  using lathe::plan::Flash;
  // 8B's attention (8 KV heads of 4 query heads, 128 wide, an f16 cache):
  // 32 lines of 4 heads × 8 rows by multiply-adds (16 KiB of f32 queries)
  // within lavapipe's 32 KiB, on matrix units within 48 KiB; 1 head a
  // workgroup (MHA) 64 rows; a tile that fits nothing is none.
  CHECK(lathe::plan::flash_tile(false, 4, 128, true, 32768) == Flash{8, 16});
  CHECK(lathe::plan::flash_shared_bytes(false, 32, 16, 128, true) == 26880);
  CHECK(lathe::plan::flash_tile(true, 4, 128, true, 49152) == Flash{8, 16});
  CHECK(lathe::plan::flash_shared_bytes(true, 32, 32, 128, true) > 49152);  // 32 keys: 256 bytes over
  CHECK(lathe::plan::flash_tile(false, 1, 64, true, 32768) == Flash{64, 16});
  CHECK(lathe::plan::flash_tile(false, 3, 64, true, 32768) == Flash{16, 32});  // 48 lines: a multiple of 16 and of 3
  CHECK(lathe::plan::flash_tile(false, 3, 128, true, 32768) == Flash{});   // 48 lines of 128 f32 are over
  CHECK(lathe::plan::flash_tile(true, 4, 72, true, 49152) == Flash{});  // matrix units take 16 dims a step
  CHECK(lathe::plan::flash_tile(false, 8, 512, false, 16384) == Flash{});
  // A larger flash tile is never under a smaller one's bytes.
  CHECK(lathe::plan::flash_shared_bytes(true, 64, 16, 128, true) > lathe::plan::flash_shared_bytes(true, 32, 16, 128, true));

  const Planned gqa = planned("tests/specs/tiny/llama-gqa.toml");  // 4 heads over 2, 16 wide
  const std::vector<DeviceClass>& classes = gqa.model.plan.classes;
  REQUIRE(lathe::plan::classes_valid(classes));
  std::vector<std::string_view> names;
  for (const DeviceClass& c : classes) names.push_back(c.name);
  CHECK(names == std::vector<std::string_view>{"cpu", "cpu-narrow", "gpu-coop", "gpu-coop-khr", "gpu", "gpu-coop-flash",
                                               "gpu-coop-khr-flash", "gpu-flash", "gpu-basic"});
  const bool f16 = gqa.spec.cache.dtype == DType::F16;
  for (const DeviceClass& c : classes) {
    CAPTURE(c.name);
    const bool flash = std::string_view(c.name).ends_with("-flash");
    CHECK((c.flash.rows > 0) == flash);
    if (!flash) continue;
    const auto base = std::find_if(classes.begin(), classes.end(), [&](const DeviceClass& b) {
      return std::string_view(c.name) == std::string(b.name) + "-flash";
    });
    REQUIRE(base != classes.end());
    CHECK(c.forced_only);
    CHECK(c.verified.empty());
    CHECK(c.decode == base->decode);
    CHECK(c.prefill == base->prefill);
    CHECK(c.batch == base->batch);
    CHECK(c.attention_rows == 1);  // the flash tile replaces the staged rows
    CHECK(c.splits == base->splits);
    const bool coop = c.prefill.layout() != lathe::kernels::Layout::Tiled;
    CHECK(c.flash == lathe::plan::flash_tile(coop, 2, 16, f16, coop ? 49152 : 32768));
    CHECK(c.flash == Flash{32, 32});  // 64 lines of 2 heads, 32 keys: small enough for every budget
    CHECK(c.min_shared == std::max(base->min_shared, lathe::plan::flash_shared_bytes(coop, 64, 32, 16, f16)));
    CHECK(lathe::plan::class_text(c).find("flash tiles of 32 rows × 32 keys") != std::string::npos);
    // A device that meets the class's base meets it (the tiles are small).
    CHECK(lathe::plan::meets(c, lathe::plan::DeviceFeatures{false, 32, 49152, 1024, false, true, true}));
  }
  // The first class met is never a flash one: they are taken only when named.
  CHECK(classes[static_cast<size_t>(lathe::plan::first_met(classes, {false, 32, 49152, 1024, false, true, true}))].name ==
        std::string_view("gpu-coop"));
  std::vector<DeviceClass> bad(classes.begin(), classes.end());
  bad[7].flash.keys = 24;  // keys a tile: 16 or 32
  CHECK_FALSE(lathe::plan::classes_valid(bad));
  bad = classes;
  bad[0].flash = {8, 16};  // a CPU class's prompts are not tiled
  CHECK_FALSE(lathe::plan::classes_valid(bad));
  // A model without attention (Mamba-2) plans none.
  for (const DeviceClass& c : planned("tests/specs/tiny/mamba2.toml").model.plan.classes) CHECK(c.flash.rows == 0);
}

// A splice [vision]: the tower's build, an encoder over an image's unfolded
// patches (the host's input rows copied in, the patch matmul, the positions
// and the class token, pre_layrnorm folded into the first projections), its
// layers up to the feature layer and the projector writing the output; the
// decoder's embedding splicing the host's rows. The towers the device does
// not run yet are refused at [vision], naming the part.
TEST_CASE("a vision tower's build: input rows, patch matmul, positions and class, layers, projector to the output") {
  const Planned llava = planned("tests/specs/vision/tiny-llava.toml");
  const spec::Spec& s = llava.spec;
  spec::Diagnostics diagnostics(s.file);
  const auto tower = lower::plan_tower(s, diagnostics);
  REQUIRE_MESSAGE(tower, diagnostics.format());
  const lower::Plan& p = tower->plan;
  const std::vector<std::string> n = names(p);
  REQUIRE(n.size() > 4);
  const int64_t unfolded = s.vision.channels * s.vision.patch * s.vision.patch;
  CHECK(n[0] == "embed_rows_" + std::to_string(unfolded));                      // the host's rows
  CHECK(n[1].starts_with("matmul_" + std::to_string(unfolded) + "_f16"));       // the patch embedding
  CHECK(n[2] == "embed_rows_" + std::to_string(s.vision.dims.hidden) + "_pos_f16_class");
  CHECK(p.scalars.input_row_floats == unfolded);
  CHECK(p.dispatches[0].binding("x") == plan::input());
  // The tower's layers up to feature_layer −2: one of its two.
  int32_t last_block = -1;
  for (const lower::Dispatch& d : p.dispatches) last_block = std::max(last_block, d.block);
  CHECK(last_block == s.vision.layers_run() - 1);
  // The projector's second linear writes the output, the decoder's width.
  const lower::Dispatch& out = p.dispatches.back();
  CHECK(out.binding("y") == plan::logits());
  CHECK(p.kernel_name(out).starts_with("matmul_" + std::to_string(s.vision.projector.intermediate > 0
                                                                       ? s.vision.projector.intermediate
                                                                       : s.dims.hidden)));
  CHECK(p.scalars.cache_row_bytes == s.vision.dims.kv_heads * s.vision.dims.head_dim * 2);  // the tower's own heads
  // The layers past the feature layer: in the checkpoint, read by no build,
  // stated with their shapes for random weights; the audit tolerates them.
  const spec::Manifest vision = spec::build_vision_manifest(s);
  size_t past = 0;
  for (const spec::TensorSpec& t : vision.tensors) {
    if (t.layer < s.vision.layers_run()) continue;
    ++past;
    CHECK(std::find(tower->others.begin(), tower->others.end(), t.name) != tower->others.end());
  }
  REQUIRE(past > 0);
  REQUIRE(tower->unread.tensors.size() == past);
  for (const spec::TensorSpec& t : tower->unread.tensors) CHECK(t.layer >= s.vision.layers_run());
  const auto first_past = std::find_if(vision.tensors.begin(), vision.tensors.end(), [&](const spec::TensorSpec& t) {
    return t.layer >= s.vision.layers_run();
  });
  CHECK(tower->unread.tensors.front().name == first_past->name);
  CHECK(tower->unread.tensors.front().shape == first_past->shape);
  CHECK(llava.model.unread.tensors.empty());  // the decoder's build states none

  // The decoder's embedding takes the host's rows where a row is flagged.
  const lower::Plan& decoder = llava.model.plan;
  CHECK(decoder.kernel_name(decoder.dispatches[0]).ends_with("_splice"));
  CHECK(decoder.dispatches[0].binding("x") == plan::input());
  CHECK(decoder.scalars.input_row_floats == s.dims.hidden);

  // Patches of 27 values (3 · 3²): read as whole texels of the f16 weight's
  // rows, 32, the host's rows padded to them.
  const Planned p3 = planned("tests/specs/vision/tiny-llava-p3.toml");
  spec::Diagnostics p3_diagnostics(p3.spec.file);
  const auto p3_tower = lower::plan_tower(p3.spec, p3_diagnostics);
  REQUIRE_MESSAGE(p3_tower, p3_diagnostics.format());
  CHECK(names(p3_tower->plan)[0] == "embed_rows_32");
  CHECK(names(p3_tower->plan)[1].starts_with("matmul_32_f16"));
  CHECK(p3_tower->plan.scalars.input_row_floats == 32);

  // Gemma 3's pooled projector: the layers' output, the grid pooled and
  // normed in one kernel, the projection ([in, out], held [out][in]) writing
  // the output; the decoder's attention lets an image's rows see each other.
  const Planned gemma3 = planned("tests/specs/vision/tiny-gemma3.toml");
  spec::Diagnostics g_diagnostics(gemma3.spec.file);
  const auto g_tower = lower::plan_tower(gemma3.spec, g_diagnostics);
  REQUIRE_MESSAGE(g_tower, g_diagnostics.format());
  const std::vector<std::string> g_names = names(g_tower->plan);
  const spec::Vision& gv = gemma3.spec.vision;
  REQUIRE(g_names.size() > 2);
  CHECK(g_names[g_names.size() - 2] ==
        "norm_" + std::to_string(gv.dims.hidden) + "_pool" + std::to_string(gv.grid() / gv.projector.pooled_side()));
  CHECK(g_names.back().starts_with("matmul_" + std::to_string(gv.dims.hidden) + "_"));
  CHECK(g_tower->plan.dispatches.back().binding("y") == plan::logits());
  const auto projection = std::find_if(g_tower->manifest.tensors.begin(), g_tower->manifest.tensors.end(),
                                       [](const spec::TensorSpec& t) { return t.role == Role::ProjIn; });
  REQUIRE(projection != g_tower->manifest.tensors.end());
  CHECK(projection->in_out);
  CHECK(projection->shape == std::vector<int64_t>{gv.dims.hidden, gemma3.spec.dims.hidden});
  bool image_spans = false;
  for (const std::string& kernel : names(gemma3.model.plan))
    image_spans = image_spans || kernel.starts_with("attention_images");
  CHECK(image_spans);
  for (const std::string& kernel : names(llava.model.plan)) CHECK(kernel.find("_images") == std::string::npos);

  // Pixtral's tower in Mistral 3: no position table (2D RoPE turns q and k
  // in each layer's rope_kv, whose table is ordered for it), then the
  // merger (its norm merging blocks of 4 rows, merging_layer) and the mlp.
  const Planned pixtral = planned("tests/specs/vision/tiny-pixtral.toml");
  spec::Diagnostics p_diagnostics(pixtral.spec.file);
  const auto p_tower = lower::plan_tower(pixtral.spec, p_diagnostics);
  REQUIRE_MESSAGE(p_tower, p_diagnostics.format());
  const spec::Vision& pv = pixtral.spec.vision;
  CHECK(lower::tower_spec(pixtral.spec).position.rope_grid == pv.grid());
  const std::vector<std::string> p_names = names(p_tower->plan);
  const auto merge = std::find(p_names.begin(), p_names.end(), "norm_" + std::to_string(pv.dims.hidden) + "_merge4");
  REQUIRE(merge != p_names.end());
  // After it: merging_layer, linear_1 (φ its epilogue) and linear_2, writing the output.
  CHECK(std::count_if(merge, p_names.end(), [](const std::string& kernel) { return kernel.starts_with("matmul_"); }) == 3);
  CHECK(p_tower->plan.dispatches.back().binding("y") == plan::logits());
  for (const spec::TensorSpec& t : p_tower->manifest.tensors) CHECK(t.role != Role::PosEmbed);
  bool rotated = false;
  for (const std::string& kernel : p_names) rotated = rotated || kernel.starts_with("rope_kv_");
  CHECK(rotated);


  // Llama 3.2 Vision's tiled tower: the tiles' embeddings (tiles.comp, the
  // class, tile and gated position tables), the pre-norm zeroing the
  // padding rows, the local layers (hidden state 1 kept), the post-norm and
  // the tile embedding after them, the global layer with both residuals
  // gated in the matmul epilogue, the states stacked (one dispatch each),
  // and the linear projector writing the output.
  const std::string mllama_file = "tests/specs/vision/tiny-mllama.toml";
  spec::Diagnostics m_diagnostics(mllama_file);
  const auto mllama = spec::parse_spec_file(std::string(LATHE_SOURCE_DIR "/") + mllama_file, m_diagnostics);
  REQUIRE(mllama);
  const auto m_tower = lower::plan_tower(*mllama, m_diagnostics);
  REQUIRE_MESSAGE(m_tower, m_diagnostics.format());
  const spec::Vision& mv = mllama->vision;
  const std::vector<std::string> m_names = names(m_tower->plan);
  const std::string h = std::to_string(mv.dims.hidden);
  const int64_t tile_rows = mv.positions_count();  // 17: the class row and 16 patches
  CHECK(tile_rows == 17);
  CHECK(spec::tile_padding(tile_rows) == 7);
  REQUIRE(m_names.size() > 6);
  CHECK(m_names[2] == "tiles_" + h + "_bf16_embed");
  CHECK(m_names[3] == "norm_" + h + "_zero" + std::to_string(mv.tiles * tile_rows));
  CHECK(std::count(m_names.begin(), m_names.end(), "tiles_" + h + "_bf16_post") == 1);
  CHECK(std::count_if(m_names.begin(), m_names.end(),
                      [](const std::string& k) { return k.find("_residual_gated") != std::string::npos; }) == 2);
  for (int64_t slot = 0; slot <= 1; ++slot)
    CHECK(std::count(m_names.begin(), m_names.end(), "tiles_" + h + "_stack1_" + std::to_string(slot)) == 1);
  CHECK(m_names.back().starts_with("matmul_" + std::to_string(2 * mv.dims.hidden) + "_"));
  CHECK(m_tower->plan.dispatches.back().binding("y") == plan::logits());
  // The global layer is block 2, after the two local ones, with a cache of its own.
  int32_t m_last_block = -1;
  for (const lower::Dispatch& d : m_tower->plan.dispatches) m_last_block = std::max(m_last_block, d.block);
  CHECK(m_last_block == mv.dims.layers + mv.global_layers - 1);
  CHECK(lower::tower_spec(*mllama).dims.layers == mv.dims.layers + mv.global_layers);
  CHECK(m_tower->unread.tensors.empty());
  for (const spec::TensorSpec& t : m_tower->manifest.tensors)
    if (t.role == Role::AttnGate || t.role == Role::MlpGate) CHECK(t.layer == mv.dims.layers);
}
