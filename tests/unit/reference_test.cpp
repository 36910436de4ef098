// The CPU reference forward pass: hand-computed cases, prefill against
// decode, GQA head mapping, cache positions, layouts and fusions.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/manifest.hpp"
#include "generator/spec/parse.hpp"
#include "runtime/reference/reference.hpp"

using namespace lathe;
using namespace lathe::reference;

namespace {

spec::Spec parse(const std::string& text) {
  spec::Diagnostics diag("ref.toml");
  auto s = spec::parse_spec_string(text, "ref.toml", diag);
  REQUIRE_MESSAGE(s, diag.format());
  return *s;
}

// A llama-shaped spec; `extra` is spliced in before [weights] (whole tables).
std::string llama(int hidden, int heads, int kv_heads, int intermediate, int vocab, int layers,
                  const std::string& extra = "", const std::string& weights_extra = "") {
  return "[model]\nname = \"t\"\n[dims]\nhidden = " + std::to_string(hidden) + "\nlayers = " + std::to_string(layers) +
         "\nheads = " + std::to_string(heads) + "\nkv_heads = " + std::to_string(kv_heads) +
         "\nintermediate = " + std::to_string(intermediate) + "\nvocab = " + std::to_string(vocab) +
         "\nmax_context = 64\n" + extra + "\n[weights]\npreset = \"hf-llama\"\n" + weights_extra;
}

const char* kGpt2Like = R"(
[model]
name = "gpt2-like"
[dims]
hidden = 8
layers = 2
heads = 2
intermediate = 16
vocab = 11
max_context = 32
[norm]
kind = "layernorm"
[attention]
bias = true
[position]
kind = "learned"
[mlp]
activation = "gelu_tanh"
gated = false
bias = true
[embedding]
tied = true
[weights]
preset = "hf-gpt2"
layout = "LAYOUT"
fused_qkv = true
)";

std::string gpt2_like(const std::string& layout) {
  std::string s = kGpt2Like;
  s.replace(s.find("LAYOUT"), 6, layout);
  return s;
}

// hidden 2, one head, no position encoding, score scale 1, identity
// projections and an MLP that adds 0 (`attention` spliced into [attention]):
// the logits are x = h + attention(h), by hand.
spec::Spec identity_attention_spec(const std::string& attention = "") {
  return parse(llama(2, 1, 1, 2, 2, 1,
                     "[norm]\neps = 1e-12\nfinal = false\n[attention]\nscale = 1.0\n" + attention +
                         "[position]\nkind = \"none\"\n[mlp]\nactivation = \"relu\"\n"));
}

// Its weights: token 0 embeds as [1, 1], token 1 as [1, −1].
Weights identity_attention_weights() {
  Weights w;
  auto& t = w.tensors;
  const std::string L = "model.layers.0.";
  t["model.embed_tokens.weight"] = {1, 1, 1, -1};
  t[L + "input_layernorm.weight"] = {1, 1};
  for (const char* m : {"q_proj", "k_proj", "v_proj", "o_proj"}) t[L + "self_attn." + m + ".weight"] = {1, 0, 0, 1};
  t[L + "post_attention_layernorm.weight"] = {1, 1};
  for (const char* m : {"gate_proj", "up_proj", "down_proj"}) t[L + "mlp." + m + ".weight"] = {0, 0, 0, 0};
  t["lm_head.weight"] = {1, 0, 0, 1};
  return w;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

}  // namespace

TEST_CASE("reference: a hand-computed RMSNorm + attention + gated MLP layer") {
  // hidden 2, 1 head of dim 2, vocab 3, relu MLP of width 2, untied head.
  const spec::Spec s = parse(llama(2, 1, 1, 2, 3, 1, "[norm]\neps = 1e-12\n[mlp]\nactivation = \"relu\"\n"));
  Weights w;
  auto& t = w.tensors;
  const std::string L = "model.layers.0.";
  t["model.embed_tokens.weight"] = {1, 1, /* token 1: */ 2, -2, 0, 3};
  t[L + "input_layernorm.weight"] = {1, 2};
  t[L + "self_attn.q_proj.weight"] = {1, 0, 0, 1};
  t[L + "self_attn.k_proj.weight"] = {0, 1, 1, 0};
  t[L + "self_attn.v_proj.weight"] = {1, 0, 1, 1};  // rows [1 0], [1 1]
  t[L + "self_attn.o_proj.weight"] = {1, 0, 0, 1};
  t[L + "post_attention_layernorm.weight"] = {1, 1};
  t[L + "mlp.gate_proj.weight"] = {1, 0, 0, 1};
  t[L + "mlp.up_proj.weight"] = {2, 0, 0, 3};
  t[L + "mlp.down_proj.weight"] = {0.5f, 0, -0.5f, 0};
  t["model.norm.weight"] = {2, 1};
  t["lm_head.weight"] = {1, 0, 0, 1, 1, 1};
  Reference ref(s, w);
  // Token 1 at position 0: x = [2, -2]; rms 2 -> [1, -1] * [1, 2] = h = [1, -2].
  // One key: softmax = 1, attention output = v = [[1 0],[1 1]]·h = [1, -1]
  // (RoPE at position 0 is the identity); o = identity -> x = [3, -3].
  // rms 3 -> h = [1, -1]; gate = [1, -1] -> relu [1, 0]; up = [2, -3];
  // a = [2, 0]; down = [[.5 0],[-.5 0]]·a = [1, -1] -> x = [4, -4].
  // final norm: rms 4 -> [1, -1] * [2, 1] = [2, -1];
  // logits = [[1 0],[0 1],[1 1]]·[2, -1] = [2, -1, 1].
  const std::vector<float> logits = ref.forward({1});
  REQUIRE(logits.size() == 3);
  CHECK(logits[0] == doctest::Approx(2.0).epsilon(1e-9));
  CHECK(logits[1] == doctest::Approx(-1.0).epsilon(1e-9));
  CHECK(logits[2] == doctest::Approx(1.0).epsilon(1e-9));
  CHECK(ref.cache_len() == 1);
}

TEST_CASE("reference: a hand-computed two-token attention (no positions)") {
  // The second token's query attends to both keys with scores q·k.
  const Weights w = identity_attention_weights();  // the reference points into it
  Reference ref(identity_attention_spec(), w);
  // Tokens 0 then 1: normalized h0 = [1, 1], h1 = [1, -1] (rms 1); q = k = v = h.
  // Position 1: scores q1·k0 = 0, q1·k1 = 2; softmax = [1, e^2] / (1 + e^2);
  // out = (h0 + e^2 h1) / (1 + e^2); x1 = h1 + out; logits = x1.
  const std::vector<float> logits = ref.forward({0, 1});
  REQUIRE(logits.size() == 4);
  const double e2 = std::exp(2.0);
  CHECK(logits[0] == doctest::Approx(2.0).epsilon(1e-7));  // position 0: x = [1, 1] + v = [2, 2]
  CHECK(logits[1] == doctest::Approx(2.0).epsilon(1e-7));
  CHECK(logits[2] == doctest::Approx(1.0 + (1.0 + e2) / (1.0 + e2)).epsilon(1e-7));
  CHECK(logits[3] == doctest::Approx(-1.0 + (1.0 - e2) / (1.0 + e2)).epsilon(1e-7));
}

TEST_CASE("reference: a hand-computed window of 2 over three tokens") {
  // The two-token case's model with sliding_window = 2: the query at
  // position i sees keys i − 1 and i only (0 ≤ i − j < 2).
  const Weights w = identity_attention_weights();
  Reference ref(identity_attention_spec("sliding_window = 2\n"), w);
  // Tokens 1, 0, 1: h0 = [1, −1], h1 = [1, 1], h2 = [1, −1]; q = k = v = h.
  // Position 1 sees k0, k1: scores 0, 2, out = (h0 + e² h1) / (1 + e²).
  // Position 2 sees k1, k2 (not k0, whose score 2 would weigh e² more):
  // scores 0, 2, out = (h1 + e² h2) / (1 + e²); logits = x = h + out.
  const std::vector<float> logits = ref.forward({1, 0, 1});
  REQUIRE(logits.size() == 6);
  const double e2 = std::exp(2.0);
  CHECK(logits[2] == doctest::Approx(2.0).epsilon(1e-7));
  CHECK(logits[3] == doctest::Approx(1.0 + (e2 - 1.0) / (1.0 + e2)).epsilon(1e-7));
  CHECK(logits[4] == doctest::Approx(2.0).epsilon(1e-7));
  CHECK(logits[5] == doctest::Approx(-1.0 + (1.0 - e2) / (1.0 + e2)).epsilon(1e-7));
  // Without the window, position 2 would see all three keys.
  CHECK(logits[5] != doctest::Approx(-1.0 + (1.0 - 2 * e2) / (1.0 + 2 * e2)).epsilon(1e-3));
}

TEST_CASE("reference: RoPE rotates a known vector at position 1 (theta 10000), both pairings") {
  // rotary_dim 4: inv_freq = [1, 10000^(-1/2) = 0.01]; angles at position 1: 1 and 0.01.
  const double c1 = std::cos(1.0), s1 = std::sin(1.0), c2 = std::cos(0.01), s2 = std::sin(0.01);
  {
    // neox: pairs (0, 2) at angle 1 and (1, 3) at angle 0.01.
    double v[4] = {1, 2, 3, 4};
    apply_rope(v, 4, 10000.0, spec::RopePairing::Neox, 1);
    CHECK(v[0] == doctest::Approx(1 * c1 - 3 * s1));
    CHECK(v[2] == doctest::Approx(1 * s1 + 3 * c1));
    CHECK(v[1] == doctest::Approx(2 * c2 - 4 * s2));
    CHECK(v[3] == doctest::Approx(2 * s2 + 4 * c2));
  }
  {
    // interleaved: pairs (0, 1) at angle 1 and (2, 3) at angle 0.01.
    double v[4] = {1, 2, 3, 4};
    apply_rope(v, 4, 10000.0, spec::RopePairing::Interleaved, 1);
    CHECK(v[0] == doctest::Approx(1 * c1 - 2 * s1));
    CHECK(v[1] == doctest::Approx(1 * s1 + 2 * c1));
    CHECK(v[2] == doctest::Approx(3 * c2 - 4 * s2));
    CHECK(v[3] == doctest::Approx(3 * s2 + 4 * c2));
  }
  {
    // Partial rotation: dims past rotary_dim are untouched; position 0 is the identity.
    double v[6] = {1, 2, 3, 4, 5, 6};
    apply_rope(v, 4, 10000.0, spec::RopePairing::Neox, 1);
    CHECK(v[4] == 5);
    CHECK(v[5] == 6);
    double u[4] = {1, 2, 3, 4};
    apply_rope(u, 4, 10000.0, spec::RopePairing::Neox, 0);
    CHECK(u[0] == 1);
    CHECK(u[3] == 4);
  }
}

TEST_CASE("reference: a prefill of N tokens equals N single-token forwards") {
  for (const char* pairing : {"neox", "interleaved"}) {
    CAPTURE(pairing);
    const spec::Spec s = parse(llama(16, 4, 2, 24, 13, 2,
                                     std::string("[position]\npairing = \"") + pairing +
                                         "\"\n[attention]\nsliding_window = 3\n"));
    const Weights w = random_weights(s, 7, 0.5f);
    const std::vector<int32_t> tokens = {3, 1, 4, 1, 5, 9, 2};
    Reference prefill(s, w), decode(s, w);
    const std::vector<float> all = prefill.forward(tokens);
    CHECK(prefill.cache_len() == 7);
    for (size_t i = 0; i < tokens.size(); ++i) {
      const std::vector<float> one = decode.forward({tokens[i]});
      const std::vector<float> row(all.begin() + static_cast<std::ptrdiff_t>(i * 13),
                                   all.begin() + static_cast<std::ptrdiff_t>((i + 1) * 13));
      CHECK(max_diff(one, row) <= 1e-6);
    }
    // reset() starts over at position 0.
    prefill.reset();
    CHECK(prefill.cache_len() == 0);
    CHECK(max_diff(prefill.forward(tokens), all) == 0);
  }
}

TEST_CASE("reference: GQA query head h reads kv head h / (heads / kv_heads)") {
  // heads 4, kv_heads 2 equals heads 4, kv_heads 4 whose k and v rows are
  // [kv0, kv0, kv1, kv1]; with kv_heads 4 rows of their own it differs.
  const spec::Spec gqa = parse(llama(16, 4, 2, 24, 13, 1));
  const spec::Spec mha = parse(llama(16, 4, 4, 24, 13, 1));
  const spec::Spec mqa = parse(llama(16, 4, 1, 24, 13, 1));
  const Weights wg = random_weights(gqa, 11, 0.5f);
  Weights wm = random_weights(mha, 12, 0.5f);
  for (auto& [name, values] : wg.tensors)
    if (name.find("k_proj") == std::string::npos && name.find("v_proj") == std::string::npos)
      wm.tensors[name] = values;
  const int64_t hd = 4, d = 16;
  for (const char* proj : {"k_proj", "v_proj"}) {
    const std::string name = std::string("model.layers.0.self_attn.") + proj + ".weight";
    const std::vector<float>& src = wg.tensors.at(name);  // [2·hd, d]
    std::vector<float>& dst = wm.tensors.at(name);        // [4·hd, d]
    for (int64_t h = 0; h < 4; ++h)
      std::copy_n(src.begin() + (h / 2) * hd * d, hd * d, dst.begin() + h * hd * d);
  }
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5};
  const std::vector<float> lg = Reference(gqa, wg).forward(tokens);
  const std::vector<float> lm = Reference(mha, wm).forward(tokens);
  CHECK(max_diff(lg, lm) <= 1e-6);

  // kv heads that differ give different logits.
  Weights wm2 = wm;
  for (float& v : wm2.tensors.at("model.layers.0.self_attn.v_proj.weight")) v = -v * 0.5f;
  for (size_t i = 0; i < static_cast<size_t>(2 * hd * d); ++i)
    wm2.tensors.at("model.layers.0.self_attn.v_proj.weight")[i] = wm.tensors.at("model.layers.0.self_attn.v_proj.weight")[i];
  CHECK(max_diff(Reference(mha, wm2).forward(tokens), lg) > 1e-3);

  // MQA (kv_heads 1) against MHA with heads of their own.
  const Weights wq = random_weights(mqa, 13, 0.5f);
  Weights wm3 = random_weights(mha, 13, 0.5f);
  for (auto& [name, values] : wq.tensors)
    if (name.find("k_proj") == std::string::npos && name.find("v_proj") == std::string::npos)
      wm3.tensors[name] = values;
  CHECK(max_diff(Reference(mqa, wq).forward(tokens), Reference(mha, wm3).forward(tokens)) > 1e-3);
}

TEST_CASE("reference: decode positions continue from the cache, never restarting at 0") {
  const spec::Spec s = parse(llama(16, 4, 2, 24, 13, 2, "[position]\ntheta = 100.0\n"));
  const Weights w = random_weights(s, 21, 0.5f);
  // One layer's view: token 7 alone at position 0 and after 5 tokens.
  Reference fresh(s, w), later(s, w);
  const std::vector<float> at0 = fresh.forward({7});
  later.forward({1, 2, 3, 4, 5});
  CHECK(later.cache_len() == 5);
  const std::vector<float> at5 = later.forward({7});
  CHECK(later.cache_len() == 6);
  CHECK(max_diff(at0, at5) > 1e-4);

  // With the same 5 tokens cached, RoPE at position 5 is relative: a model
  // whose cache holds the same keys gives the same answer in both orders of
  // calls (5 then 1, or 6 at once).
  Reference once(s, w);
  const std::vector<float> all = once.forward({1, 2, 3, 4, 5, 7});
  CHECK(max_diff(std::vector<float>(all.end() - 13, all.end()), at5) <= 1e-6);

  // Learned positions: a GPT-2-like model reads table row position + offset.
  const spec::Spec g = parse(gpt2_like("in_out"));
  const Weights wg = random_weights(g, 22, 0.5f);
  Reference g0(g, wg), g5(g, wg);
  const std::vector<float> p0 = g0.forward({3});
  g5.forward({1, 2, 3, 4, 5});
  CHECK(max_diff(p0, g5.forward({3})) > 1e-4);
}

TEST_CASE("reference: a GPT-2-like spec runs, is deterministic and honours the in_out layout") {
  const spec::Spec g = parse(gpt2_like("in_out"));
  const Weights w1 = random_weights(g, 5, 0.3f);
  const Weights w2 = random_weights(g, 5, 0.3f);
  CHECK(w1.tensors == w2.tensors);
  CHECK(w1.tensors.size() == spec::build_manifest(g).tensors.size());
  CHECK(w1.tensors.at("h.0.ln_1.weight")[0] == doctest::Approx(1.0).epsilon(0.31));
  const std::vector<int32_t> tokens = {0, 10, 4, 4, 2};
  const std::vector<float> a = Reference(g, w1).forward(tokens);
  const std::vector<float> b = Reference(g, w2).forward(tokens);
  REQUIRE(a.size() == tokens.size() * 11);
  CHECK(a == b);
  for (float v : a) CHECK(std::isfinite(v));
  CHECK(max_diff(a, Reference(g, random_weights(g, 6, 0.3f)).forward(tokens)) > 1e-4);

  // The same model stored out_in (every linear weight transposed) gives the same logits.
  const spec::Spec o = parse(gpt2_like("out_in"));
  Weights wo;
  for (const spec::TensorSpec& t : spec::build_manifest(g).tensors) {
    const std::vector<float>& src = w1.tensors.at(t.name);
    if (!spec::is_linear(t.role) || t.bias) {
      wo.tensors[t.name] = src;
      continue;
    }
    const int64_t in = t.shape[0], out = t.shape[1];  // stored [in, out]
    std::vector<float> dst(src.size());
    for (int64_t i = 0; i < in; ++i)
      for (int64_t k = 0; k < out; ++k) dst[static_cast<size_t>(k * in + i)] = src[static_cast<size_t>(i * out + k)];
    wo.tensors[t.name] = std::move(dst);
  }
  CHECK(max_diff(Reference(o, wo).forward(tokens), a) <= 1e-6);
}

TEST_CASE("reference: fused qkv and fused gate_up equal the separate projections") {
  const std::string mlp = "[attention]\nbias = true\n[mlp]\nactivation = \"gelu_erf\"\nbias = true\n";
  const spec::Spec split = parse(llama(16, 4, 2, 24, 13, 1, mlp));
  for (const char* order : {"gate_up", "up_gate"}) {
    CAPTURE(order);
    const spec::Spec fused = parse(llama(16, 4, 2, 24, 13, 1,
                                         mlp.substr(0, mlp.size()) + "fused_gate_up = \"" + order + "\"\n",
                                         "fused_qkv = true\n"));
    const Weights wf = random_weights(fused, 31, 0.5f);
    Weights ws;
    const std::string L = "model.layers.0.";
    for (const auto& [name, values] : wf.tensors)
      if (name.find("qkv_proj") == std::string::npos && name.find("gate_up_proj") == std::string::npos)
        ws.tensors[name] = values;
    // qkv rows: q (16), k (8), v (8); the fused bias follows the same order.
    const int64_t d = 16;
    auto rows = [&](const std::string& name, int64_t first, int64_t count, int64_t width) {
      const std::vector<float>& src = wf.tensors.at(name);
      return std::vector<float>(src.begin() + first * width, src.begin() + (first + count) * width);
    };
    ws.tensors[L + "self_attn.q_proj.weight"] = rows(L + "self_attn.qkv_proj.weight", 0, 16, d);
    ws.tensors[L + "self_attn.k_proj.weight"] = rows(L + "self_attn.qkv_proj.weight", 16, 8, d);
    ws.tensors[L + "self_attn.v_proj.weight"] = rows(L + "self_attn.qkv_proj.weight", 24, 8, d);
    ws.tensors[L + "self_attn.q_proj.bias"] = rows(L + "self_attn.qkv_proj.bias", 0, 16, 1);
    ws.tensors[L + "self_attn.k_proj.bias"] = rows(L + "self_attn.qkv_proj.bias", 16, 8, 1);
    ws.tensors[L + "self_attn.v_proj.bias"] = rows(L + "self_attn.qkv_proj.bias", 24, 8, 1);
    const bool gate_first = std::string(order) == "gate_up";
    const int64_t g0 = gate_first ? 0 : 24, u0 = gate_first ? 24 : 0;
    ws.tensors[L + "mlp.gate_proj.weight"] = rows(L + "mlp.gate_up_proj.weight", g0, 24, d);
    ws.tensors[L + "mlp.up_proj.weight"] = rows(L + "mlp.gate_up_proj.weight", u0, 24, d);
    ws.tensors[L + "mlp.gate_proj.bias"] = rows(L + "mlp.gate_up_proj.bias", g0, 24, 1);
    ws.tensors[L + "mlp.up_proj.bias"] = rows(L + "mlp.gate_up_proj.bias", u0, 24, 1);
    const std::vector<int32_t> tokens = {4, 8, 12};
    CHECK(max_diff(Reference(fused, wf).forward(tokens), Reference(split, ws).forward(tokens)) <= 1e-6);
  }
}

TEST_CASE("reference: unsupported fields, missing tensors and bad inputs are refused") {
  const spec::Spec sinusoidal = parse(llama(16, 4, 2, 24, 13, 1, "[position]\nkind = \"sinusoidal\"\n"));
  CHECK_THROWS_WITH_AS(Reference(sinusoidal, random_weights(sinusoidal, 1, 0.5f)),
                       "reference: not supported: position.kind", std::invalid_argument);
  const spec::Spec s = parse(llama(16, 4, 2, 24, 13, 1));
  Weights w = random_weights(s, 1, 0.5f);
  w.tensors.erase("lm_head.weight");
  CHECK_THROWS_AS(Reference(s, w), std::invalid_argument);
  Reference ref(s, random_weights(s, 1, 0.5f));
  CHECK_THROWS_AS(ref.forward({13}), std::out_of_range);
  CHECK_THROWS_AS(ref.forward(std::vector<int32_t>(65, 0)), std::out_of_range);
  CHECK(ref.forward({}).empty());
}

TEST_CASE("reference: RoPE scaling frequencies as Hugging Face transformers computes them") {
  // Expected values: HF's _compute_llama3_parameters and _compute_yarn_parameters
  // (modeling_rope_utils.py) transcribed to plain Python floats, run with python3.
  SUBCASE("llama3 (Llama 3.2 1B's parameters): high frequencies kept, low ones slowed 32×, the band blended") {
    const spec::Spec s = parse(llama(128, 2, 1, 24, 13, 1,
                                     "[position]\ntheta = 500000.0\n[position.scaling]\nkind = \"llama3\"\n"
                                     "factor = 32.0\nlow_freq_factor = 1.0\nhigh_freq_factor = 4.0\n"
                                     "original_max_context = 8192\n"));
    const Rope rope = rope_of(s);
    REQUIRE(rope.inv_freq.size() == 32);
    CHECK(rope.scale == 1.0);
    CHECK(rope.inv_freq[0] == doctest::Approx(1.0).epsilon(1e-12));
    CHECK(rope.inv_freq[10] == doctest::Approx(0.016560440080994446).epsilon(1e-12));
    CHECK(rope.inv_freq[16] == doctest::Approx(0.00042955679655936815).epsilon(1e-12));
    CHECK(rope.inv_freq[20] == doctest::Approx(8.570255489881478e-06).epsilon(1e-12));
    CHECK(rope.inv_freq[31] == doctest::Approx(9.418306725434909e-08).epsilon(1e-12));
  }
  SUBCASE("yarn (factor 4 over 32768 positions, theta 1e6, head_dim 128): ramped over dims 23 … 40") {
    const spec::Spec s = parse(llama(256, 2, 1, 24, 13, 1,
                                     "[position]\ntheta = 1000000.0\n[position.scaling]\nkind = \"yarn\"\n"
                                     "factor = 4.0\noriginal_max_context = 32768\n"));
    const Rope rope = rope_of(s);
    REQUIRE(rope.inv_freq.size() == 64);
    CHECK(rope.scale == doctest::Approx(1.138629436111989).epsilon(1e-12));  // 0.1·ln 4 + 1
    CHECK(rope.inv_freq[0] == doctest::Approx(1.0).epsilon(1e-12));
    CHECK(rope.inv_freq[20] == doctest::Approx(0.01333521432163324).epsilon(1e-12));
    CHECK(rope.inv_freq[30] == doctest::Approx(0.0010643609812470017).epsilon(1e-12));
    CHECK(rope.inv_freq[40] == doctest::Approx(4.445698525097307e-05).epsilon(1e-12));
    CHECK(rope.inv_freq[63] == doctest::Approx(3.102344401879299e-07).epsilon(1e-12));
  }
  SUBCASE("linear: every frequency divided by the factor; the scale applies to cos and sin") {
    const spec::Spec s = parse(llama(16, 4, 2, 24, 13, 1,
                                     "[position]\ntheta = 10000.0\n[position.scaling]\nkind = \"linear\"\n"
                                     "factor = 2.0\n"));
    const Rope rope = rope_of(s);
    REQUIRE(rope.inv_freq.size() == 2);
    CHECK(rope.inv_freq[0] == doctest::Approx(0.5));
    CHECK(rope.inv_freq[1] == doctest::Approx(0.005));
    double v[4] = {1, 2, 3, 4};
    apply_rope(v, Rope{{0.0, 0.0}, 2.0}, spec::RopePairing::Neox, 5);  // angle 0: a pure scale
    CHECK(v[0] == 2);
    CHECK(v[3] == 8);
  }
}

namespace {

// Writes into the dense MLP of layer 0 of `wd` (width 48) the two experts
// `picked` of `ws` (width 24, Mixtral's names) as one: their gate and up
// stacked, their down side by side scaled by `weight`, so that it computes
// their weighted sum.
void stack_experts(const Weights& ws, Weights& wd, std::array<int, 2> picked, double weight) {
  const std::string L = "model.layers.0.";
  std::vector<float>& gate = wd.tensors.at(L + "mlp.gate_proj.weight");  // [48, 16]
  std::vector<float>& up = wd.tensors.at(L + "mlp.up_proj.weight");      // [48, 16]
  std::vector<float>& down = wd.tensors.at(L + "mlp.down_proj.weight");  // [16, 48]
  for (int slot = 0; slot < 2; ++slot) {
    const std::string x = L + "block_sparse_moe.experts." + std::to_string(picked[slot]) + ".";
    const std::vector<float>& w1 = ws.tensors.at(x + "w1.weight");  // [24, 16]
    const std::vector<float>& w3 = ws.tensors.at(x + "w3.weight");
    const std::vector<float>& w2 = ws.tensors.at(x + "w2.weight");  // [16, 24]
    std::copy(w1.begin(), w1.end(), gate.begin() + slot * 24 * 16);
    std::copy(w3.begin(), w3.end(), up.begin() + slot * 24 * 16);
    for (int o = 0; o < 16; ++o)
      for (int i = 0; i < 24; ++i) down[o * 48 + slot * 24 + i] = static_cast<float>(weight * w2[o * 24 + i]);
  }
}

}  // namespace

// Equal router logits: every expert has probability 1/E, and top-k takes the
// lowest indices (torch.topk on equal values), experts 0 and 1 of 4. Their
// weighted sum equals one dense MLP of twice the width whose gate and up are
// theirs stacked and whose down is theirs side by side, scaled by the
// weights: 1/2 each renormalized, 1/4 each not (Qwen2-MoE's
// norm_topk_prob = false). Experts 2 and 3 are far larger: picking either
// would show.
TEST_CASE("reference: MoE top-k takes the lowest experts on ties and weighs them as the router says") {
  for (const bool renormalize : {true, false}) {
    CAPTURE(renormalize);
    const std::string moe = std::string("[moe]\nexperts = 4\ntop_k = 2\nnorm_topk_prob = ") +
                            (renormalize ? "true" : "false") + "\n";
    const spec::Spec sparse = parse(llama(16, 4, 2, 24, 13, 1, moe));
    const spec::Spec dense = parse(llama(16, 4, 2, 48, 13, 1));
    Weights ws = random_weights(sparse, 3, 0.5f);
    Weights wd = random_weights(dense, 3, 0.5f);
    const std::string L = "model.layers.0.";
    for (auto& [name, values] : wd.tensors)  // the shared parts: the same values
      if (ws.tensors.count(name)) values = ws.tensors.at(name);
    for (float& v : ws.tensors.at(L + "block_sparse_moe.gate.weight")) v = 0.0f;
    for (int e = 2; e < 4; ++e)
      for (const char* w : {"w1", "w2", "w3"})
        for (float& v : ws.tensors.at(L + "block_sparse_moe.experts." + std::to_string(e) + "." + w + ".weight")) v *= 40.0f;
    stack_experts(ws, wd, {0, 1}, renormalize ? 0.5 : 0.25);
    Reference a(sparse, ws), b(dense, wd);
    const std::vector<int32_t> tokens = {3, 7, 1, 12, 0};
    const std::vector<float> la = a.forward(tokens), lb = b.forward(tokens);
    double worst = 0;
    for (size_t i = 0; i < la.size(); ++i) worst = std::max(worst, std::abs(double(la[i]) - lb[i]));
    CHECK(worst < 1e-5);  // f32 logits of the same sums in another order (the 0.25/0.5 scalings are exact)
  }
}

namespace {

// A Mamba spec (every layer a Mamba block); `extra` lines go into [ssm].
std::string mamba(int hidden, int layers, int vocab, const std::string& extra, const std::string& tables = "") {
  return "[model]\nname = \"m\"\n[dims]\nhidden = " + std::to_string(hidden) + "\nlayers = " + std::to_string(layers) +
         "\nvocab = " + std::to_string(vocab) + "\nmax_context = 64\n[ssm]\nkind = \"mamba\"\n" + extra + "\n" + tables +
         "[weights]\npreset = \"hf-mamba\"\n";
}

double silu(double v) { return v / (1.0 + std::exp(-v)); }
double softplus(double v) { return std::log1p(std::exp(v)); }

}  // namespace

TEST_CASE("reference: a hand-computed Mamba layer over two tokens (conv taps, state, A, dt, D, gate)") {
  // hidden 1, d_inner 1, d_state 1, 2 conv taps, dt_rank 1; no final norm, so
  // the logits are [x, 2x] of the residual stream x by hand.
  const spec::Spec s = parse(mamba(1, 1, 2, "expand = 1\nd_state = 1\nd_conv = 2\ndt_rank = 1\n",
                                   "[norm]\neps = 1e-12\nfinal = false\n"));
  Weights w;
  auto& t = w.tensors;
  const std::string L = "backbone.layers.0.";
  t["backbone.embeddings.weight"] = {1, -1};  // token 0: [1], token 1: [−1]
  t[L + "norm.weight"] = {1};                 // RMS of one value: h = sign(x)
  t[L + "mixer.in_proj.weight"] = {1, 2};     // x = h, z = 2h
  t[L + "mixer.conv1d.weight"] = {0.5f, 2};   // tap 0 the previous input, tap 1 this token's
  t[L + "mixer.conv1d.bias"] = {0.25f};
  t[L + "mixer.x_proj.weight"] = {1, 2, -1};  // dt = u, B = 2u, C = −u
  t[L + "mixer.dt_proj.weight"] = {0.5f};
  t[L + "mixer.dt_proj.bias"] = {-0.1f};
  t[L + "mixer.A_log"] = {static_cast<float>(std::log(2.0))};  // A = −2
  t[L + "mixer.D"] = {0.3f};
  t[L + "mixer.out_proj.weight"] = {1};
  t["lm_head.weight"] = {1, 2};
  Reference ref(s, w);
  const std::vector<float> logits = ref.forward({0, 1});
  REQUIRE(logits.size() == 4);
  // Token 0: x = 1, z = 2; conv = 2·1 + 0.5·0 + 0.25; the state starts at 0.
  const double u0 = silu(2.25), dt0 = softplus(0.5 * u0 - 0.1);
  const double h0 = dt0 * (2 * u0) * u0;
  const double y0 = ((-u0) * h0 + 0.3 * u0) * silu(2.0);
  CHECK(logits[0] == doctest::Approx(1 + y0).epsilon(1e-6));
  CHECK(logits[1] == doctest::Approx(2 * (1 + y0)).epsilon(1e-6));
  // Token 1: x = −1, z = −2; conv = 2·(−1) + 0.5·1 (token 0's x) + 0.25.
  const double u1 = silu(-1.25), dt1 = softplus(0.5 * u1 - 0.1);
  const double h1 = std::exp(-2 * dt1) * h0 + dt1 * (2 * u1) * u1;
  const double y1 = ((-u1) * h1 + 0.3 * u1) * silu(-2.0);
  CHECK(logits[2] == doctest::Approx(-1 + y1).epsilon(1e-6));
  CHECK(logits[3] == doctest::Approx(2 * (-1 + y1)).epsilon(1e-6));
}

TEST_CASE("reference: Mamba token by token equals the whole-sequence form, and reset() zeroes the state") {
  // transformers' slow_forward over a whole sequence, written here apart
  // from the reference's step: Conv1d with d_conv − 1 zeros of left padding,
  // then the scan, layer by layer over all tokens.
  const int hidden = 8, layers = 2, vocab = 11;
  const spec::Spec s =
      parse(mamba(hidden, layers, vocab, "d_state = 4\nd_conv = 4\ndt_rank = 3\nbias = true\n", "[embedding]\ntied = true\n"));
  const Weights w = random_weights(s, 5, 0.4f);
  const std::vector<int32_t> tokens = {3, 1, 4, 1, 5, 9, 2, 6};
  const size_t T = tokens.size(), di = 16, ds = 4, dc = 4, r = 3;

  auto get = [&](const std::string& name) { return w.tensors.at(name); };
  auto linear = [](const std::vector<float>& W, const std::vector<float>* b, const std::vector<double>& x, size_t out) {
    std::vector<double> y(out, 0.0);
    for (size_t o = 0; o < out; ++o) {
      for (size_t i = 0; i < x.size(); ++i) y[o] += W[o * x.size() + i] * x[i];
      if (b) y[o] += (*b)[o];
    }
    return y;
  };
  auto rms = [](const std::vector<double>& x, const std::vector<float>& g) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + 1e-5);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * g[i];
    return y;
  };
  const std::vector<float> embed = get("backbone.embeddings.weight");
  std::vector<std::vector<double>> X(T, std::vector<double>(hidden));
  for (size_t t = 0; t < T; ++t)
    for (int i = 0; i < hidden; ++i) X[t][i] = embed[static_cast<size_t>(tokens[t] * hidden + i)];
  for (int l = 0; l < layers; ++l) {
    const std::string L = "backbone.layers." + std::to_string(l) + ".mixer.";
    const auto norm = get("backbone.layers." + std::to_string(l) + ".norm.weight");
    const auto in_w = get(L + "in_proj.weight"), in_b = get(L + "in_proj.bias");
    const auto conv_w = get(L + "conv1d.weight"), conv_b = get(L + "conv1d.bias");
    const auto x_w = get(L + "x_proj.weight"), dt_w = get(L + "dt_proj.weight"), dt_b = get(L + "dt_proj.bias");
    const auto a_log = get(L + "A_log"), D = get(L + "D");
    const auto out_w = get(L + "out_proj.weight"), out_b = get(L + "out_proj.bias");
    std::vector<std::vector<double>> xs(T), zs(T), us(T, std::vector<double>(di));
    for (size_t t = 0; t < T; ++t) {
      const auto xz = linear(in_w, &in_b, rms(X[t], norm), 2 * di);
      xs[t].assign(xz.begin(), xz.begin() + static_cast<std::ptrdiff_t>(di));
      zs[t].assign(xz.begin() + static_cast<std::ptrdiff_t>(di), xz.end());
    }
    for (size_t t = 0; t < T; ++t)  // padded input p[j] = x[j − (dc − 1)]; out[t] = Σ_k w[k]·p[t + k]
      for (size_t c = 0; c < di; ++c) {
        double sum = conv_b[c];
        for (size_t k = 0; k < dc; ++k)
          if (t + k >= dc - 1) sum += conv_w[c * dc + k] * xs[t + k - (dc - 1)][c];
        us[t][c] = silu(sum);
      }
    std::vector<double> state(di * ds, 0.0);
    for (size_t t = 0; t < T; ++t) {
      const auto p = linear(x_w, nullptr, us[t], r + 2 * ds);
      const auto dt_raw = linear(dt_w, &dt_b, std::vector<double>(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(r)), di);
      std::vector<double> y(di);
      for (size_t c = 0; c < di; ++c) {
        const double dt = softplus(dt_raw[c]);
        double sum = 0;
        for (size_t n = 0; n < ds; ++n) {
          double& h = state[c * ds + n];
          h = std::exp(-std::exp(a_log[c * ds + n]) * dt) * h + dt * p[r + n] * us[t][c];
          sum += h * p[r + ds + n];
        }
        y[c] = (sum + us[t][c] * D[c]) * silu(zs[t][c]);
      }
      const auto o = linear(out_w, &out_b, y, hidden);
      for (int i = 0; i < hidden; ++i) X[t][i] += o[i];
    }
  }
  const auto norm_f = get("backbone.norm_f.weight");
  std::vector<float> expected;
  for (size_t t = 0; t < T; ++t) {
    const auto h = rms(X[t], norm_f);
    for (int v = 0; v < vocab; ++v) {
      double sum = 0;
      for (int i = 0; i < hidden; ++i) sum += embed[static_cast<size_t>(v * hidden + i)] * h[i];  // tied
      expected.push_back(static_cast<float>(sum));
    }
  }

  Reference ref(s, w);
  std::vector<float> stepped;
  for (int32_t tok : tokens) {
    const std::vector<float> one = ref.forward({tok});
    stepped.insert(stepped.end(), one.begin(), one.end());
  }
  CHECK(max_diff(stepped, expected) <= 1e-5);
  CHECK(ref.cache_len() == static_cast<int64_t>(T));
  // A prefill from a reset starts from the zero state: the same logits.
  ref.reset();
  CHECK(max_diff(ref.forward(tokens), expected) <= 1e-5);
}

// DeepSeek's routing with zero router logits: every sigmoid score is 1/2,
// so the correction bias alone decides, and the weights (the scores without
// it) are 1/2 each, 1/2 renormalized, times routed_scaling_factor 2.5: 1.25.
// The bias [0.25, 0.25, 0, 0, 0.3, -0.2, 0, 0] over 4 groups of 2 picks
// experts {0, 1} when the best group is the one of the best two (V3's
// top2_sum: 1.5), {4, 5} when it is the one of the best expert (V2's max:
// 0.8), and {4, 0} without groups. The others are far larger: picking
// one would show, as would a weight with the bias in it.
TEST_CASE("reference: DeepSeek routing chooses by score + bias among the best groups, weighs by score") {
  struct Case {
    std::string keys;
    int first, second;
  };
  for (const Case& c : {Case{"groups = 4\ntopk_groups = 1\ngroup_score = \"top2_sum\"\n", 0, 1},
                        Case{"groups = 4\ntopk_groups = 1\ngroup_score = \"max\"\n", 4, 5}, Case{"", 4, 0}}) {
    CAPTURE(c.keys);
    const std::string moe = "[moe]\nexperts = 8\ntop_k = 2\nnorm_topk_prob = true\nscoring = \"sigmoid\"\n"
                            "correction_bias = true\nrouted_scaling_factor = 2.5\n" + c.keys;
    const spec::Spec sparse = parse(llama(16, 4, 2, 24, 13, 1, moe));
    const spec::Spec dense = parse(llama(16, 4, 2, 48, 13, 1));
    Weights ws = random_weights(sparse, 3, 0.5f);
    Weights wd = random_weights(dense, 3, 0.5f);
    const std::string L = "model.layers.0.";
    for (auto& [name, values] : wd.tensors)
      if (ws.tensors.count(name)) values = ws.tensors.at(name);
    for (float& v : ws.tensors.at(L + "block_sparse_moe.gate.weight")) v = 0.0f;
    ws.tensors.at(L + "mlp.gate.e_score_correction_bias") = {0.25f, 0.25f, 0.0f, 0.0f, 0.3f, -0.2f, 0.0f, 0.0f};
    for (int e = 0; e < 8; ++e)
      if (e != c.first && e != c.second)
        for (const char* w : {"w1", "w2", "w3"})
          for (float& v : ws.tensors.at(L + "block_sparse_moe.experts." + std::to_string(e) + "." + w + ".weight")) v *= 40.0f;
    stack_experts(ws, wd, {c.first, c.second}, 1.25);
    Reference a(sparse, ws), b(dense, wd);
    const std::vector<int32_t> tokens = {3, 7, 1, 12, 0};
    const std::vector<float> la = a.forward(tokens), lb = b.forward(tokens);
    double worst = 0;
    for (size_t i = 0; i < la.size(); ++i) worst = std::max(worst, std::abs(double(la[i]) - lb[i]));
    CHECK(worst < 1e-5);
  }
}
