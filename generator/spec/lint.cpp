#include "generator/spec/lint.hpp"

#include <cstdio>

#include "core/manifest.hpp"
#include "generator/spec/report.hpp"

namespace lathe::spec {
namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string num(int64_t v) { return std::to_string(v); }

}  // namespace

std::vector<Advice> lint(const Spec& s) {
  std::vector<Advice> out;
  const auto add = [&](const std::string& key, const char* rule, std::string text) {
    out.push_back({s.where(key), rule, std::move(text)});
  };
  const Dims& d = s.dims;
  const Report r = make_report(s);

  // Width against depth: dense models keep hidden / layers within about
  // 100–130 (Llama 3 8B: 128, 70B: 102), mixtures of experts about 70–120;
  // far outside it a model of the same size trains worse (too deep and
  // narrow, or too shallow).
  // (A Mamba block is about half a transformer layer: its models keep
  // hidden / layers near 32–40, another band; no advice for them yet.)
  const double ratio = static_cast<double>(d.hidden) / static_cast<double>(d.layers);
  const double low = s.moe.enabled() ? 70 : 100, high = s.moe.enabled() ? 120 : 130;
  if (!s.ssm.enabled() && (ratio < low || ratio > high))
    add("dims.layers", "width-depth",
        "hidden / layers = " + num(d.hidden) + " / " + num(d.layers) + " = " + fixed(ratio, 1) + ", outside the " +
            fixed(low, 0) + "–" + fixed(high, 0) + " band of " + (s.moe.enabled() ? "mixture-of-experts" : "dense") +
            " models: " + (ratio < low ? "deeper and narrower" : "shallower and wider") +
            " than practice for its parameters");

  // The MLP's width for its kind: a gated MLP (SwiGLU, GeGLU) keeps the
  // parameters of a 4h plain one at 8h/3; far off it the MLP's share of the
  // parameters is not what the rest of the shape assumes.
  const double expected = s.mlp.gated ? 8.0 / 3.0 : 4.0;
  const double ffn = static_cast<double>(d.intermediate) / static_cast<double>(d.hidden);
  if (!s.ssm.enabled() && (ffn < 0.75 * expected || ffn > 1.5 * expected))
    add("dims.intermediate", "ffn-ratio",
        "intermediate / hidden = " + fixed(ffn, 2) + "; a " + (s.mlp.gated ? "gated" : "plain") + " MLP takes about " +
            (s.mlp.gated ? std::string("8/3 (2.67)") : std::string("4")) + ", and " + fixed(0.75 * expected, 2) + "–" +
            fixed(1.5 * expected, 2) + " is the usual range");

  // Kernel efficiency: attention's dot products and the caches' rows run in
  // whole 16-byte texels and subgroups; a head width off 32 wastes lanes.
  if (d.head_dim % 32 != 0)
    add("dims.heads", "head-dim",
        "head_dim = " + num(d.head_dim) + " is not a multiple of 32 (64 and 128 are usual): attention kernels "
        "leave lanes idle on every key");

  // The LM head is a matrix of vocab rows: a multiple of 64 keeps its tiles
  // whole. (An encoder has none: its embedding rows are gathered, not tiled.)
  if (d.vocab % 64 != 0 && !s.encoder())
    add("dims.vocab", "vocab-multiple",
        "vocab = " + num(d.vocab) + " is not a multiple of 64 (the next is " + num((d.vocab + 63) / 64 * 64) +
            "): the LM head's last tile is partial; padding the vocabulary is free");

  // A KV cache at the full context larger than the weights: decode then
  // reads more cache than weights per token at long contexts, and memory
  // runs out before the context does.
  const int64_t weight_bytes = r.device_weight_bytes;
  if (r.kv_bytes_max_context > weight_bytes)
    add("dims.max_context", "kv-cache-size",
        "the KV cache at max_context (" + num(d.max_context) + ") is " + fixed(r.kv_bytes_max_context / 1048576.0, 1) +
            " MiB, more than the weights' " + fixed(weight_bytes / 1048576.0, 1) + " MiB: " +
            (d.kv_heads == d.heads ? "fewer KV heads (GQA), " : "") + "a sliding window" +
            (s.cache.dtype == DType::F32 ? " or an f16 cache" : "") + " would shrink it");

  // RoPE's base against the longest span a layer attends: a base well
  // below the span leaves the slowest dims turning several times over it,
  // so distant positions alias (rope scaling, which extends the span, is
  // exempt).
  if (s.position.kind == PositionKind::Rope && s.position.scaling.kind == RopeScaling::None) {
    bool every_layer_windowed = s.attention.sliding_window > 0;
    for (int64_t l = 0; l < d.layers && every_layer_windowed; ++l) every_layer_windowed = s.attention.windowed(l);
    const int64_t span = every_layer_windowed ? s.attention.sliding_window : d.max_context;
    if (s.position.theta < static_cast<double>(span))
      add("position.theta", "rope-base",
          "RoPE base " + fixed(s.position.theta, 0) + " is below the " + num(span) +
              " positions a layer attends: the slowest dims turn more than once over them (bases of 500000 and "
              "more go with long contexts, or scale RoPE)");
  }

  // ALiBi's linear biases pay off past a few thousand positions; under 2k a
  // rotary position does as well and is what kernels and tools expect.
  if (s.position.kind == PositionKind::Alibi && d.max_context < 2048)
    add("position.kind", "alibi-context",
        "ALiBi at a context of " + num(d.max_context) + " positions: its advantage, extrapolating past the trained "
        "length, starts past 2048");

  if (s.moe.enabled()) {
    if (s.moe.shared_experts == 0)
      add("moe.experts", "moe-shared-expert",
          "no shared expert: knowledge every token needs is learned again by each of the " + num(s.moe.experts) +
              " experts (DeepSeek and Qwen MoE keep one or more always on)");
    if (s.moe.top_k == 1)
      add("moe.top_k", "moe-top1",
          "top_k = 1: one expert a token makes routing brittle and its load hard to balance; 2 is the usual least");
  }

  // Tied embeddings save V·h parameters, which matter in a small model; in a
  // large one the saving is small and the untied head is what practice uses.
  if (s.embedding.tied && r.total_params > int64_t{7'000'000'000})
    add("embedding.tied", "tied-large",
        "tied embeddings in a model of " + fixed(static_cast<double>(r.total_params) / 1e9, 1) +
            "B parameters: the saving is under a few percent, and models this large untie the LM head");

  // Embeddings over half the parameters: the transformer itself is a
  // minority of the model, typically a vocabulary too large for its width.
  int64_t embedding = 0;
  for (const auto& [component, n] : r.components)
    if (component == name(Component::Embedding) || component == name(Component::LmHead)) embedding += n;
  const double share = static_cast<double>(embedding) / static_cast<double>(r.total_params);
  if (share > 0.5)
    add("dims.vocab", "embedding-share",
        std::string(s.embedding.tied || s.encoder() ? "the embedding holds " : "the embedding and LM head hold ") + fixed(100 * share, 0) +
            " % of the parameters: the layers are the minority of this model");
  return out;
}

std::string format_advice(const std::string& file, const std::vector<Advice>& advice) {
  std::string out;
  for (const Advice& a : advice) {
    out += file;
    if (a.loc.line > 0) out += ":" + std::to_string(a.loc.line) + ":" + std::to_string(a.loc.column);
    out += ": warning: " + a.text + " [" + a.rule + "]\n";
  }
  return out;
}

}  // namespace lathe::spec
