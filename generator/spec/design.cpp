#include "generator/spec/design.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <utility>

#include "core/manifest.hpp"
#include "generator/spec/parse.hpp"
#include "generator/spec/report.hpp"
#include "generator/spec/toml_text.hpp"

namespace lathe::spec {
namespace {

struct UseName {
  DesignUse use;
  const char* name;
};
constexpr UseName kUseNames[] = {{DesignUse::General, "general"},
                                 {DesignUse::LongContext, "long-context"},
                                 {DesignUse::Code, "code"},
                                 {DesignUse::LowLatency, "low-latency"},
                                 {DesignUse::MemoryBound, "memory-bound"}};

// The weight dtypes a design may take: the 16- and 32-bit ones, and the
// block types of 32 values, which every width it picks (multiples of 64)
// divides. (The K-quants' 256-value blocks do not divide a 896 or 1408.)
constexpr DType kDesignDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0};

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// 8.03e9 → "8.03B", 494e6 → "494M": a budget as people write it.
std::string short_count(double v) {
  const char* suffixes[] = {"", "K", "M", "B", "T"};
  int i = 0;
  while (v >= 1000 && i < 4) {
    v /= 1000;
    ++i;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g%s", v, suffixes[i]);
  return buf;
}

std::string percent(double gap) {
  std::string out = gap >= 0 ? "+" : "";  // (appended to, not prepended: GCC 12 warns of a false overlap)
  return out + fixed(100 * gap, 2) + " %";
}

// 7.68e21 → "7.68e21".
std::string scientific(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  std::string s = buf;
  if (const size_t e = s.find("e+"); e != std::string::npos) s.erase(e + 1, 1);
  return s;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "1.5e24" → 1.5e24, "8B" → (8, "b"): a finite number and the letters after it.
bool split_number(const std::string& text, double& value, std::string& suffix) {
  size_t end = text.size();
  while (end > 0 && std::isalpha(static_cast<unsigned char>(text[end - 1]))) --end;
  const std::string digits = text.substr(0, end);
  suffix = lower(text.substr(end));
  if (digits.empty() || std::isspace(static_cast<unsigned char>(digits.front()))) return false;
  char* stop = nullptr;
  value = std::strtod(digits.c_str(), &stop);
  return stop == digits.c_str() + digits.size() && std::isfinite(value);
}

[[noreturn]] void fail(const std::string& message) { throw DesignError(message); }

// A count with a decimal multiplier: 8B, 350M, 1.5T, 125k, 8e9.
double parse_count(const char* option, const std::string& text, const char* examples) {
  double v = 0;
  std::string suffix;
  const std::map<std::string, double> multipliers = {{"", 1}, {"k", 1e3}, {"m", 1e6}, {"b", 1e9}, {"g", 1e9}, {"t", 1e12}};
  if (!split_number(text, v, suffix) || !multipliers.count(suffix) || v <= 0)
    fail(std::string(option) + ": \"" + text + "\" is not a count (use " + examples + ")");
  return v * multipliers.at(suffix);
}

// A length in tokens: 8192, 128k (131072), 1M (1048576).
int64_t parse_tokens(const char* option, const std::string& text) {
  double v = 0;
  std::string suffix;
  const std::map<std::string, double> multipliers = {{"", 1}, {"k", 1024}, {"m", 1048576}};
  if (!split_number(text, v, suffix) || !multipliers.count(suffix) || v <= 0 || v * multipliers.at(suffix) != std::floor(v * multipliers.at(suffix)))
    fail(std::string(option) + ": \"" + text + "\" is not a length in tokens (use 8192, 32k, 128k)");
  const double tokens = v * multipliers.at(suffix);
  if (tokens < 128 || tokens > double(1 << 24))
    fail(std::string(option) + ": " + fixed(tokens, 0) + " tokens is outside 128 … 16777216 (2^24, a spec's longest)");
  return static_cast<int64_t>(tokens);
}

// An amount of memory: 24GiB, 80GB, 512MiB; K, M, G and T alone are binary.
int64_t parse_bytes(const char* option, const std::string& text) {
  double v = 0;
  std::string suffix;
  const double k = 1024;
  const std::map<std::string, double> multipliers = {
      {"", 1},           {"b", 1},           {"kb", 1e3},        {"mb", 1e6},       {"gb", 1e9},
      {"tb", 1e12},      {"kib", k},         {"mib", k * k},     {"gib", k * k * k}, {"tib", k * k * k * k},
      {"k", k},          {"m", k * k},       {"g", k * k * k},   {"t", k * k * k * k}};
  if (!split_number(text, v, suffix) || !multipliers.count(suffix) || v <= 0)
    fail(std::string(option) + ": \"" + text + "\" is not an amount of memory (use 24GiB, 80GB, 512MiB)");
  const double bytes = v * multipliers.at(suffix);
  if (bytes < 1048576 || bytes > 1e15)
    fail(std::string(option) + ": " + text + " is outside 1 MiB … 1 PB");
  return static_cast<int64_t>(bytes);
}

// ── The design ──────────────────────────────────────────────────────────

enum class AttentionKind { Mha, Gqa, Mqa };

// Every choice of a design; hidden = heads · head_dim.
struct Shape {
  std::string name;
  int64_t heads = 0, kv_heads = 0, head_dim = 0, layers = 0, intermediate = 0, vocab = 0;
  int64_t context = 0, train_context = 0;
  bool tied = false, moe = false, hybrid = false;
  int64_t window = 0;
  double theta = 10000, local_theta = 0;
  RopeScaling scaling = RopeScaling::None;
  DType dtype = DType::BF16;

  int64_t hidden() const { return heads * head_dim; }
  // A hybrid's attention layers: one in 8, at offset 4 of each group of 8
  // (Jamba's attn_layer_period 8, attn_layer_offset 4); the middle layer
  // when the model has fewer than 5.
  std::vector<int64_t> attention_layers() const {
    std::vector<int64_t> out;
    for (int64_t l = 4; l < layers; l += 8) out.push_back(l);
    if (out.empty()) out.push_back(layers / 2);
    return out;
  }
};

// A key's line: "key = value", its comment (if any) from column 23 on.
struct Lines {
  std::string text;
  const std::map<std::string, std::string>* comments = nullptr;
  std::string table;

  void open(const std::string& name) {
    table = name;
    text += "\n[" + name + "]\n";
  }
  void add(const std::string& key, const std::string& value) {
    std::string line = key + " = " + value;
    if (comments && comments->count(table + "." + key)) {
      if (line.size() < 22) line.resize(22, ' ');
      else line += ' ';
      line += "# " + comments->at(table + "." + key);
    }
    text += line + "\n";
  }
};

std::string spec_text(const Shape& s, const std::map<std::string, std::string>& comments,
                      const std::vector<std::string>& header, const std::string& source) {
  Lines out;
  for (std::string h : header) {
    // (A comment ends at a newline: the command line's control characters become spaces.)
    std::replace_if(h.begin(), h.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }, ' ');
    out.text += "# " + h + "\n";
  }
  out.comments = &comments;
  out.open("model");
  out.add("name", "\"" + s.name + "\"");
  if (!source.empty()) out.add("source", toml_string(source));
  out.open("dims");
  out.add("hidden", std::to_string(s.hidden()));
  out.add("layers", std::to_string(s.layers));
  out.add("heads", std::to_string(s.heads));
  out.add("kv_heads", std::to_string(s.kv_heads));
  out.add("head_dim", std::to_string(s.head_dim));
  out.add("intermediate", std::to_string(s.intermediate));
  out.add("vocab", std::to_string(s.vocab));
  out.add("max_context", std::to_string(s.context));
  out.open("norm");
  out.add("kind", "\"rmsnorm\"");
  out.add("eps", "1e-5");
  out.add("placement", "\"pre\"");
  if (s.window > 0) {
    out.open("attention");
    out.add("sliding_window", std::to_string(s.window));
    out.add("window_pattern", "[true, true, true, true, true, false]");
  }
  out.open("position");
  out.add("kind", "\"rope\"");
  out.add("pairing", "\"neox\"");
  out.add("theta", toml_float(s.theta));
  if (s.window > 0) out.add("local_theta", toml_float(s.local_theta));
  if (s.scaling != RopeScaling::None) {
    out.open("position.scaling");
    out.add("kind", std::string("\"") + name(s.scaling) + "\"");
    out.add("factor", toml_float(static_cast<double>(s.context) / static_cast<double>(s.train_context)));
    out.add("original_max_context", std::to_string(s.train_context));
  }
  out.open("mlp");
  out.add("activation", "\"silu\"");
  out.add("gated", "true");
  if (s.moe) {
    out.open("moe");
    out.add("experts", "8");
    out.add("top_k", "2");
    out.add("norm_topk_prob", "true");
  }
  if (s.hybrid) {
    out.open("ssm");
    out.add("kind", "\"mamba2\"");
    out.add("d_state", "128");
    out.add("d_conv", "4");
    out.add("expand", "2");
    out.add("head_dim", "64");
    out.add("groups", "1");
    std::string layers;
    for (int64_t l : s.attention_layers()) layers += (layers.empty() ? "" : ", ") + std::to_string(l);
    out.add("attention_layers", "[" + layers + "]");
  }
  out.open("embedding");
  out.add("tied", s.tied ? "true" : "false");
  out.open("weights");
  out.add("dtype", std::string("\"") + name(s.dtype) + "\"");
  out.add("preset", s.hybrid ? "\"hf-bamba\"" : "\"hf-llama\"");
  out.open("cache");
  out.add("dtype", "\"f16\"");
  return out.text.substr(out.text.front() == '\n' ? 1 : 0);
}

// A shape's spec as lathe's parser reads it.
Spec parsed(const Shape& s) {
  const std::string text = spec_text(s, {}, {}, "");
  Diagnostics diagnostics("design.toml");
  auto spec = parse_spec_string(text, "design.toml", diagnostics);
  if (!spec) throw std::logic_error("lathe design wrote a spec its parser refuses:\n" + diagnostics.format() + text);
  return std::move(*spec);
}

// make_report of a shape: lathe's exact count, its bytes and its cache.
Report report_of(const Shape& s) { return make_report(parsed(s), {}, {}); }

// The device bytes of a sequence at the full context: weights, KV cache, state.
int64_t device_bytes(const Report& r) {
  return r.device_weight_bytes + r.kv_bytes_max_context + r.conv_state_bytes + r.scan_state_bytes;
}

int64_t round_up(int64_t v, int64_t multiple) { return (v + multiple - 1) / multiple * multiple; }

// SwiGLU's width: 8h/3 keeps the parameters of a 4h plain MLP (Shazeer
// 2020), rounded up to a multiple of 256 as Llama's code does.
int64_t swiglu_width(int64_t hidden) { return round_up((8 * hidden + 2) / 3, 256); }

// The band of hidden / layers and the point in it aimed at. Dense models
// keep 100–130, mixtures of experts 70–120; larger models sit relatively
// deeper (Levine et al. 2020: the depth a width can use grows with it), so
// the aim falls with the logarithm of the budget from 128 (Llama 3 8B,
// Mistral 7B) at 10B and below to 100 at 100B, and for experts from 120 at
// 10B to 70 at 1T.
struct Band {
  double low, high, aim;
};
Band band_for(bool moe, double params) {
  const double decades = std::log10(std::max(params, 1e10) / 1e10);
  if (moe) return {70, 120, 120 - 50 * std::min(1.0, decades / 2)};
  return {100, 130, 128 - 28 * std::min(1.0, decades)};
}

struct Candidate {
  Shape shape;
  int64_t params = 0;
  double ratio = 0, gap = 0;
};

// Sets kv_heads for `heads` query heads; false when the kind's rule has no
// such count. GQA: the largest divisor of heads up to 8 (Llama 2 70B and
// Llama 3's 8 KV heads), and no fewer than 8 or heads / 16 (no groups of
// 17 for 34 heads); `cap` (a memory limit) lowers any kind's count.
// `aligned` (from 1B): a power of two, so that the KV heads divide over
// the tensor-parallel degrees people run (2, 4, 8), as Llama's, Qwen's and
// Mistral's do.
bool set_kv_heads(Shape& s, AttentionKind kind, int64_t cap, bool aligned) {
  const int64_t most = std::min(cap, kind == AttentionKind::Mha ? s.heads : kind == AttentionKind::Mqa ? 1 : int64_t{8});
  int64_t kv = std::max<int64_t>(1, std::min(most, s.heads));
  while (s.heads % kv != 0 || (aligned && !std::has_single_bit(static_cast<uint64_t>(kv)))) --kv;
  if (kind == AttentionKind::Gqa && cap >= 8 && kv < std::min<int64_t>(8, (s.heads + 15) / 16)) return false;
  s.kv_heads = kv;
  return true;
}

struct Solver {
  AttentionKind attention = AttentionKind::Gqa;
  double budget = 0;
  int64_t kv_cap = 1 << 20;
  std::vector<std::string>* explain = nullptr;
  int64_t counted = 0;

  // From 1B, head counts a multiple of 8 and KV heads a power of two: a
  // model that size is served over 2, 4 or 8 devices by tensor
  // parallelism, which splits the heads (Llama 3 8B and Mistral 7B: 32
  // over 8 KV heads; Llama 3 70B: 64 over 8).
  bool aligned() const { return budget >= 1e9; }

  // The exact count of `s` at `layers`: its manifest's tensors, as
  // make_report sums them (the search counts many shapes; make_report
  // checks the one chosen).
  int64_t count(Shape s, int64_t layers) {
    s.layers = layers;
    ++counted;
    return build_manifest(parsed(s)).total_elements();
  }

  // The layers that bring `s` nearest the budget at its widths: from the
  // exact counts of 1 and 2 layers, refined once at the estimate (a
  // hybrid's attention layers make the count not quite linear in depth).
  void fit_layers(Shape& s) {
    const int64_t least = s.hybrid ? 2 : 1;
    const int64_t p1 = count(s, least), p2 = count(s, least + 1);
    const double per_layer = static_cast<double>(p2 - p1);
    // (At most 1024 layers, a spec's most.)
    auto estimate = [&](double slope, int64_t from, int64_t p_from) {
      const double layers = static_cast<double>(from) + (budget - static_cast<double>(p_from)) / slope;
      return std::clamp<int64_t>(std::llround(std::min(layers, 1024.0)), least, 1024);
    };
    s.layers = estimate(per_layer, least, p1);
    if (s.layers > least + 1) {
      const int64_t p = count(s, s.layers);
      s.layers = estimate(static_cast<double>(p - p1) / static_cast<double>(s.layers - least), least, p1);
    }
  }

  Candidate evaluate(const Shape& s) {
    Candidate c{s, count(s, s.layers), 0, 0};
    c.ratio = static_cast<double>(s.hidden()) / static_cast<double>(s.layers);
    c.gap = static_cast<double>(c.params) / budget - 1;
    return c;
  }

  void say(const std::string& line) {
    if (explain) explain->push_back(line);
  }

  // The widths and depth of `base` (every other choice made) for the budget.
  Candidate solve(const Shape& base, const Band& band) {
    // The per-layer parameters as c·h² (Kaplan et al. 2020: c = 12 for
    // multi-head attention with a 4h MLP), c measured on a probe of 8 heads.
    Shape probe = base;
    probe.heads = 8;
    set_kv_heads(probe, attention, kv_cap, aligned());
    probe.intermediate = swiglu_width(probe.hidden());
    const int64_t least = base.hybrid ? 2 : 1;
    const double h_probe = static_cast<double>(probe.hidden());
    const double c = static_cast<double>(count(probe, least + 1) - count(probe, least)) / (h_probe * h_probe);
    const double e = base.tied ? 1 : 2, V = static_cast<double>(base.vocab);
    // c·L·h² + e·V·h = N with L = h / aim: increasing in h, solved by bisection.
    double lo = 1, hi = 1e7;
    for (int i = 0; i < 200; ++i) {
      const double h = (lo + hi) / 2;
      (c * h * h * h / band.aim + e * V * h < budget ? lo : hi) = h;
    }
    const double h0 = lo;
    say("   per layer ≈ " + fixed(c, 2) + "·h² (12·h² for Kaplan et al. 2020's multi-head attention and 4h MLP), " +
        "embedding" + (base.tied ? " V·h" : "s 2·V·h") + ", V = " + std::to_string(base.vocab));
    say("   " + fixed(c, 2) + "·L·h² + " + (base.tied ? "" : "2·") + "V·h = " + short_count(budget) + " with L = h / " +
        fixed(band.aim, 1) + ": h ≈ " + fixed(h0, 0));

    // Every head count near h0 / head_dim, each at its nearest depth.
    const double hd = static_cast<double>(base.head_dim);
    const int64_t first = std::max<int64_t>(1, static_cast<int64_t>(std::floor(0.7 * h0 / hd)));
    const int64_t last = std::max<int64_t>(first + 1, static_cast<int64_t>(std::ceil(1.4 * h0 / hd)));
    std::vector<Candidate> candidates;
    for (int64_t heads = first; heads <= last; ++heads) {
      if (aligned() && heads % 8 != 0) continue;
      Shape s = base;
      s.heads = heads;
      if (!set_kv_heads(s, attention, kv_cap, aligned())) continue;
      s.intermediate = swiglu_width(s.hidden());
      fit_layers(s);
      candidates.push_back(evaluate(s));
    }
    if (candidates.empty()) throw std::logic_error("lathe design found no head count for the budget");
    const auto in_band = [&](const Candidate& x) { return x.ratio >= band.low && x.ratio <= band.high; };
    const auto distance = [&](const Candidate& x) { return std::fabs(std::log(x.ratio / band.aim)); };
    // In the band first, then within 1 %, then with the rule's own KV heads
    // (8 under GQA, not a divisor forced by an odd head count); then
    // nearest the aim.
    const auto usual_kv = [&](const Candidate& x) {
      return attention != AttentionKind::Gqa || kv_cap < 8 || x.shape.kv_heads == std::min<int64_t>(8, x.shape.heads);
    };
    const auto rank = [&](const Candidate& x) {
      return (in_band(x) ? 0 : 4) + (std::fabs(x.gap) <= 0.01 ? 0 : 2) + (usual_kv(x) ? 0 : 1);
    };
    const Candidate* best = &candidates.front();
    for (const Candidate& x : candidates)
      if (rank(x) < rank(*best) || (rank(x) == rank(*best) && distance(x) < distance(*best))) best = &x;
    say("   head counts " + std::to_string(first) + "–" + std::to_string(last) + " of " + std::to_string(base.head_dim) +
        (aligned() ? ", multiples of 8 (tensor parallelism from 1B)" : "") +
        " (each at the depth nearest the budget; * in the " + fixed(band.low, 0) + "–" + fixed(band.high, 0) +
        " band, ! outside 1 %):");
    for (const Candidate& x : candidates)
      say(std::string("     ") + (&x == best ? "→ " : "  ") + "heads " + std::to_string(x.shape.heads) + " (kv " +
          std::to_string(x.shape.kv_heads) + "): h " + std::to_string(x.shape.hidden()) + ", L " +
          std::to_string(x.shape.layers) + ", h/L " + fixed(x.ratio, 1) + (in_band(x) ? " *" : "  ") + ", " +
          grouped(x.params) + " (" + percent(x.gap) + ")" + (std::fabs(x.gap) <= 0.01 ? "" : " !"));
    Candidate chosen = *best;
    if (!in_band(chosen)) {
      if (const std::optional<Candidate> banded = into_band(candidates, band)) {
        say("   no head count lands inside the band at 8h/3: heads " + std::to_string(banded->shape.heads) + " at " +
            std::to_string(banded->shape.layers) + " layers (h/L " + fixed(banded->ratio, 1) + ") with the MLP width moved from " +
            std::to_string(swiglu_width(banded->shape.hidden())) + " to " + std::to_string(banded->shape.intermediate) +
            ": " + grouped(banded->params) + " (" + percent(banded->gap) + ")");
        return *banded;
      }
      say("   no head count lands inside the band at this budget: the nearest to h/L = " + fixed(band.aim, 1) + " is kept");
    }
    if (std::fabs(chosen.gap) > 0.01) chosen = adjust(chosen, band);
    return chosen;
  }

  // No head count lands in the band at 8h/3 (from 1B the head counts step
  // by 8, the width by 1024): each takes the depths inside the band, the
  // nearest the aim first, and at each the MLP width (within ±25 % of 8h/3,
  // lint's range, in multiples of 256, else 128, 64 or 32) nearest the
  // budget; the first within 1 % is its shape, and the shape nearest the aim
  // of all is kept; none where no depth and width reach the budget.
  std::optional<Candidate> into_band(const std::vector<Candidate>& candidates, const Band& band) {
    const auto distance = [&](const Candidate& x) { return std::fabs(std::log(x.ratio / band.aim)); };
    std::optional<Candidate> best;
    for (const Candidate& c : candidates) {
      const double h = static_cast<double>(c.shape.hidden());
      const int64_t least = c.shape.hybrid ? 2 : 1;
      std::vector<int64_t> depths;
      for (int64_t l = std::max<int64_t>(least, static_cast<int64_t>(std::ceil(h / band.high)));
           static_cast<double>(l) <= h / band.low; ++l)
        depths.push_back(l);
      std::sort(depths.begin(), depths.end(), [&](int64_t a, int64_t b) {
        return std::fabs(std::log(h / static_cast<double>(a) / band.aim)) < std::fabs(std::log(h / static_cast<double>(b) / band.aim));
      });
      const int64_t rule = swiglu_width(c.shape.hidden()), low = rule * 3 / 4, high = rule * 5 / 4;
      for (int64_t layers : depths) {
        // The count is linear in the MLP width at a depth: the width that
        // meets the budget, then its multiples on either side, counted.
        Shape s = c.shape;
        s.layers = layers;
        s.intermediate = low;
        const Candidate at_low = evaluate(s);
        s.intermediate = high;
        const Candidate at_high = evaluate(s);
        const double per_width = static_cast<double>(at_high.params - at_low.params) / static_cast<double>(high - low);
        const double exact = static_cast<double>(low) + (budget - static_cast<double>(at_low.params)) / per_width;
        if (per_width <= 0 || exact < static_cast<double>(low) - 256 || exact > static_cast<double>(high) + 256) continue;
        std::optional<Candidate> near;
        for (int64_t multiple : {256, 128, 64, 32}) {
          const int64_t below = static_cast<int64_t>(std::floor(exact / static_cast<double>(multiple))) * multiple;
          for (int64_t width : {below, below + multiple}) {
            if (width < round_up(low, multiple) || width > high) continue;
            s.intermediate = width;
            const Candidate x = evaluate(s);
            if (!near || std::fabs(x.gap) < std::fabs(near->gap)) near = x;
          }
          if (near && std::fabs(near->gap) <= 0.01) break;
        }
        if (!near || std::fabs(near->gap) > 0.01) continue;
        if (!best || distance(*near) < distance(*best)) best = near;
        break;
      }
    }
    return best;
  }

  // Rounding h and L left the count over 1 % from the budget: the MLP width
  // moves (within ±25 % of 8h/3, lint's range), then with it the depth by a
  // layer (inside the band), in multiples of 256, else of 128, 64 or 32 (in
  // a small model one step of 256 is several percent; 32 keeps the block
  // dtypes' rows whole); the first of these within 1 % is kept, else the
  // nearest.
  Candidate adjust(const Candidate& from, const Band& band) {
    const int64_t rule = swiglu_width(from.shape.hidden());
    const int64_t least = from.shape.hybrid ? 2 : 1;
    Candidate best = from;
    for (int64_t multiple : {256, 128, 64, 32})
      for (int64_t step : {0, -1, 1}) {
        Shape s = from.shape;
        s.layers += step;
        const double ratio = static_cast<double>(s.hidden()) / static_cast<double>(std::max(least, s.layers));
        if (step != 0 && (s.layers < least || ratio < band.low || ratio > band.high)) continue;
        for (int64_t width = round_up(rule * 3 / 4, multiple); width <= rule * 5 / 4; width += multiple) {
          s.intermediate = width;
          const Candidate x = evaluate(s);
          if (std::fabs(x.gap) < std::fabs(best.gap)) best = x;
        }
        if (std::fabs(best.gap) <= 0.01) {
          say("   the MLP width moves from " + std::to_string(rule) + " (8h/3) to " +
              std::to_string(best.shape.intermediate) + " (a multiple of " + std::to_string(multiple) + ")" +
              (best.shape.layers != from.shape.layers ? " and the layers from " + std::to_string(from.shape.layers) +
                                                            " to " + std::to_string(best.shape.layers)
                                                      : "") +
              ": the count from " + percent(from.gap) + " to " + percent(best.gap) + " of the budget");
          return best;
        }
      }
    say("   no depth or MLP width inside the rules brings the count within 1 %: the nearest is " + percent(best.gap));
    return best;
  }
};

// The comments of the values every design writes alike.
constexpr std::pair<const char*, const char*> kFixedComments[] = {
    {"model.source", "the command that wrote this spec"},
    {"norm.eps", "Llama's epsilon"},
    {"mlp.gated", "gate · up (the GLU of SwiGLU)"},
    {"ssm.d_conv", "Mamba's 4-tap convolution"},
    {"ssm.groups", "one group of B and C (Bamba)"},
    {"norm.kind", "RMSNorm (Zhang and Sennrich 2019; Llama, Mistral, Qwen)"},
    {"norm.placement", "pre-norm: stable at depth (Xiong et al. 2020)"},
    {"position.kind", "RoPE (Su et al. 2021)"},
    {"position.pairing", "rotate-half, as Hugging Face Llama checkpoints"},
    {"mlp.activation", "SwiGLU (Shazeer 2020; Llama, Mistral, Qwen)"},
    {"moe.top_k", "top-2 routing (Mixtral; GShard)"},
    {"moe.norm_topk_prob", "the top-2 weights renormalized (Mixtral)"},
    {"ssm.kind", "low-latency decode: Mamba-2 layers keep a fixed state (Dao and Gu 2024; Bamba)"},
    {"ssm.d_state", "Mamba-2's default state (Bamba, Jamba)"},
    {"ssm.expand", "d_inner = 2h (Mamba)"},
    {"ssm.head_dim", "Mamba-2's 64-channel heads"},
    {"ssm.attention_layers", "attention in one layer of 8, at offset 4 (Jamba)"},
    {"cache.dtype", "an f16 KV cache"},
    {"dims.heads", "hidden / head_dim"},
};

std::string bytes_text(int64_t bytes) { return human_bytes(static_cast<double>(bytes)); }

}  // namespace

const char* name(DesignUse use) {
  for (const UseName& u : kUseNames)
    if (u.use == use) return u.name;
  return "?";
}

DesignOptions design_options(const DesignArgs& a) {
  DesignOptions o;
  o.command = a.command;
  if (a.params && a.flops) fail("--params and --flops both set the budget: keep one");
  if (!a.params && !a.flops) fail("no budget: give --params (e.g. 8B) or --flops (e.g. 1e24)");
  if (a.moe && a.dense) fail("--moe and --dense contradict each other: keep one");
  if (a.params) {
    o.params = parse_count("--params", *a.params, "8B, 350M, 8e9");
    // (Below 10M a layer, an MLP step or a head is too much of the budget
    // to land within 1 % of it.)
    if (*o.params < 1e7 || *o.params > 1e13)
      fail("--params: " + *a.params + " is outside 10M … 10T parameters");
  }
  if (a.overtrain) {
    char* stop = nullptr;
    const double k = std::strtod(a.overtrain->c_str(), &stop);
    if (a.overtrain->empty() || stop != a.overtrain->c_str() + a.overtrain->size() || !std::isfinite(k))
      fail("--overtrain: \"" + *a.overtrain + "\" is not a factor (use 1, 5, 10)");
    if (k < 1 || k > 10000) fail("--overtrain: " + *a.overtrain + " is outside 1 … 10000 (1: Chinchilla's 20 tokens a parameter)");
    o.overtrain = k;
  }
  if (a.flops) {
    o.flops = parse_count("--flops", *a.flops, "1e24, 3.8e25");
    const double n = std::sqrt(*o.flops / (120 * o.overtrain));
    if (n < 1e7 || n > 1e13)
      fail("--flops: " + *a.flops + " FLOPs make a model of " + short_count(n) +
           " parameters at 20·" + fixed(o.overtrain, 0) + " tokens a parameter, outside 10M … 10T");
  }
  if (a.use) {
    const auto it = std::find_if(std::begin(kUseNames), std::end(kUseNames),
                                 [&](const UseName& u) { return *a.use == u.name; });
    if (it == std::end(kUseNames))
      fail("--use: \"" + *a.use + "\" is not a use; expected one of general, long-context, code, low-latency, memory-bound");
    o.use = it->use;
  }
  if (a.context) o.context = parse_tokens("--context", *a.context);
  if (a.train_context) o.train_context = parse_tokens("--train-context", *a.train_context);
  if (o.context && o.train_context && *o.train_context > *o.context)
    fail("--train-context (" + std::to_string(*o.train_context) + ") is longer than --context (" +
         std::to_string(*o.context) + ")");
  if (a.memory) o.memory = parse_bytes("--memory", *a.memory);
  if (a.vocab) {
    char* stop = nullptr;
    const long long v = std::strtoll(a.vocab->c_str(), &stop, 10);
    if (a.vocab->empty() || stop != a.vocab->c_str() + a.vocab->size() || v < 256 || v > (1 << 24))
      fail("--vocab: \"" + *a.vocab + "\" is not a vocabulary size in 256 … 16777216");
    o.vocab = v;
  }
  if (a.dtype) {
    const auto it = std::find_if(std::begin(kDesignDTypes), std::end(kDesignDTypes),
                                 [&](DType d) { return *a.dtype == name(d); });
    if (it == std::end(kDesignDTypes))
      fail("--dtype: \"" + *a.dtype + "\" is not a weight dtype design writes; expected one of f32, f16, bf16, q8_0, q4_0");
    o.dtype = *it;
  }
  if (a.rope_scaling) {
    if (*a.rope_scaling == "yarn") o.rope_scaling = RopeScaling::Yarn;
    else if (*a.rope_scaling == "ntk") o.rope_scaling = RopeScaling::DynamicNtk;
    else fail("--rope-scaling: \"" + *a.rope_scaling + "\" is not a scaling; expected yarn or ntk");
  }
  if (a.moe) o.moe = true;
  if (a.dense) o.moe = false;
  if (a.moe && o.use == DesignUse::LowLatency)
    fail("--moe and --use low-latency: lathe's state-space hybrids take no mixture of experts yet; keep one");
  if (a.name) {
    const bool ok = !a.name->empty() && std::all_of(a.name->begin(), a.name->end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    });
    if (!ok) fail("--name: \"" + *a.name + "\" is not a model name: use letters, digits, '-', '_' and '.'");
    o.name = *a.name;
  }
  return o;
}

Design design(const DesignOptions& o) {
  Design out;
  std::vector<std::string>& why = out.explanation;
  std::map<std::string, std::string> comment;
  std::vector<std::string> header;

  // 1. The budget in parameters.
  double n = 0;
  if (o.params) {
    n = *o.params;
    why.push_back("1. budget: " + grouped(std::llround(n)) + " parameters (--params)");
  } else {
    n = std::sqrt(*o.flops / (120 * o.overtrain));
    why.push_back("1. budget: C = " + scientific(*o.flops) + " FLOPs" + " of training (--flops); C = 6·N·D (Kaplan et al. 2020) and D = 20·" +
                  fixed(o.overtrain, o.overtrain == std::floor(o.overtrain) ? 0 : 2) +
                  "·N tokens (Hoffmann et al. 2022's 20 a parameter" + (o.overtrain > 1 ? ", over-trained by --overtrain" : "") +
                  ") give N = √(C / (120·" + fixed(o.overtrain, o.overtrain == std::floor(o.overtrain) ? 0 : 2) +
                  ")) = " + grouped(std::llround(n)) + " parameters");
  }
  out.budget = n;
  const double tokens = 20 * o.overtrain * n;
  const DesignUse use = o.use;
  why.push_back("   training data: D = 20·" + fixed(o.overtrain, o.overtrain == std::floor(o.overtrain) ? 0 : 2) + "·N = " +
                short_count(tokens) + " tokens, C = 6·N·D = " + scientific(6 * n * tokens) + " FLOPs");

  // 2. The decision table, by scale and use.
  Shape s;
  s.dtype = o.dtype;
  const bool inference_mid = n >= 7e9 && n <= 70e9;
  s.hybrid = use == DesignUse::LowLatency;
  s.moe = o.moe.value_or(n >= 70e9 && use != DesignUse::MemoryBound && use != DesignUse::LowLatency);
  const Band band = band_for(s.moe, n);
  AttentionKind attention = use == DesignUse::MemoryBound ? AttentionKind::Mqa
                            : n < 1e9                     ? AttentionKind::Mha
                                                          : AttentionKind::Gqa;
  why.push_back("2. the decision table at " + short_count(n) + " parameters, use " + name(use) + ":");
  std::string attention_rule;
  switch (attention) {
    case AttentionKind::Mqa:
      attention_rule = "MQA for a memory-bound device: one KV head, the smallest cache (Shazeer 2019; PaLM, Falcon)";
      break;
    case AttentionKind::Mha:
      attention_rule = "MHA below 1B: a KV head a query head (GPT-2, BERT); the cache is small at this scale";
      break;
    case AttentionKind::Gqa:
      attention_rule = std::string("GQA from 1B (Ainslie et al. 2023): up to 8 KV heads (Llama 2 70B, Llama 3") +
                       (inference_mid ? "; inference-bound 7–70B models keep GQA or MQA: --use memory-bound" : "") + ")";
      break;
  }
  why.push_back("   attention: " + attention_rule);
  s.head_dim = n < 1e9 ? 64 : 128;
  const std::string head_rule = n < 1e9 ? "head_dim 64 below 1B (GPT-2, Qwen2.5-0.5B)"
                                        : "head_dim 128 from 1B (Llama, Mistral, Qwen2.5-7B)";
  why.push_back("   " + head_rule);
  if (s.moe)
    why.push_back(std::string("   MoE: 8 experts, top-2 (Mixtral; Fedus et al. 2022), ") +
                  (o.moe ? "asked for by --moe" : "from 70B") + "; hidden / layers in 70–120");
  else if (o.moe && !*o.moe && n >= 70e9)
    why.push_back("   dense: --dense overrides MoE from 70B; hidden / layers in 100–130");
  else
    why.push_back(std::string("   dense MLP") +
                  (n >= 70e9 ? (use == DesignUse::MemoryBound ? " (a memory-bound device cannot hold 8 experts to use 2)"
                                                              : " (lathe's state-space hybrids take no experts yet)")
                             : " below 70B") +
                  "; hidden / layers in 100–130");
  if (s.hybrid)
    why.push_back("   low-latency decode: a Mamba-2 / attention hybrid (Jamba, Bamba): a fixed state a layer, attention "
                  "in one layer of 8 (Jamba's period 8, offset 4)");

  // Context, RoPE and windows.
  const int64_t default_context = use == DesignUse::LongContext ? 131072 : use == DesignUse::Code ? 16384 : 8192;
  s.context = o.context.value_or(default_context);
  s.train_context = o.train_context.value_or(std::min<int64_t>(s.context, 32768));
  if (s.train_context > s.context)
    fail("--train-context (" + std::to_string(s.train_context) + ") is longer than the context (" +
         std::to_string(s.context) + ", --use " + name(use) + "'s default): give --context");
  comment["dims.max_context"] = o.context ? "--context" : std::string("--use ") + name(use) + "'s default context";
  if (use == DesignUse::Code) {
    s.theta = 1e6;
    comment["position.theta"] = "code: base 1,000,000 for long files (Code Llama, Rozière et al. 2023)";
  } else if (s.train_context <= 4096) {
    s.theta = 10000;
    comment["position.theta"] = "base 10,000 up to a trained context of 4096 (RoFormer, Llama 2)";
  } else {
    s.theta = 500000;
    while (s.theta < 4.0 * static_cast<double>(s.train_context)) s.theta *= 10;
    comment["position.theta"] = "base well above the trained context of " + std::to_string(s.train_context) +
                                " (Llama 3: 500,000; Xiong et al. 2023)";
  }
  why.push_back("   RoPE base " + toml_float(s.theta) + ": " + comment["position.theta"]);
  if (s.context > s.train_context) {
    s.scaling = o.rope_scaling;
    const std::string kind = s.scaling == RopeScaling::Yarn ? "YaRN (Peng et al. 2023; Qwen2.5's 4 × 32768)"
                                                            : "dynamic NTK (--rope-scaling ntk; transformers' \"dynamic\")";
    comment["position.scaling.kind"] = kind + ": the context past the trained one";
    comment["position.scaling.factor"] = "context / trained context = " + std::to_string(s.context) + " / " +
                                         std::to_string(s.train_context);
    comment["position.scaling.original_max_context"] =
        o.train_context ? "--train-context" : "trained at up to 32768 positions, then extended (Qwen2.5)";
    why.push_back("   context " + std::to_string(s.context) + " past the trained " + std::to_string(s.train_context) +
                  ": RoPE scaled by " + kind);
  }
  const int64_t window_from = use == DesignUse::LongContext ? 32768 : 131072;
  if (s.context > window_from && !s.hybrid) {
    s.window = 4096;
    s.local_theta = 10000;
    comment["attention.sliding_window"] = "past " + std::string(use == DesignUse::LongContext ? "32k for long context" : "128k") +
                                          ": local layers attend 4096 keys (Mistral 7B), a cache of the window";
    comment["attention.window_pattern"] = "five local layers to one global (Gemma 3)";
    comment["position.local_theta"] = "the local layers' own base (Gemma 3)";
    why.push_back("   context " + std::to_string(s.context) + " past " + std::to_string(window_from) +
                  ": sliding windows of 4096 in five layers of six, the sixth global (Mistral's window, Gemma 3's pattern)");
  } else if (s.context > window_from) {
    why.push_back("   (no sliding windows: lathe's hybrids take none yet; the state-space layers keep no cache anyway)");
  }

  // Vocabulary and tied embeddings.
  s.tied = n < 4e9;
  comment["embedding.tied"] = s.tied ? "tied below 4B, where the V·h saved is a large share (Llama 3.2 1B/3B, Qwen2.5 0.5B–3B)"
                                     : "untied from 4B (Llama 3 8B, Qwen2.5-7B, Mistral)";
  why.push_back("   embeddings " + std::string(s.tied ? "tied" : "untied") + ": " + comment["embedding.tied"]);
  s.vocab = round_up(o.vocab.value_or(32000), 128);
  if (o.vocab && *o.vocab != s.vocab)
    why.push_back("   vocab " + std::to_string(*o.vocab) + " rounded up to " + std::to_string(s.vocab) +
                  ", a multiple of 128 (whole LM-head tiles; rows past the tokenizer stay unused)");
  // (One head of 64 is the narrowest model: a vocabulary whose embedding
  // alone outgrows the budget there leaves nothing to design.)
  if (o.vocab && (s.tied ? 1 : 2) * s.vocab * 64 > static_cast<int64_t>(n))
    fail("--vocab " + std::to_string(*o.vocab) + ": its embedding alone outgrows the budget of " + short_count(n) +
         " parameters (--params or --flops)");
  comment["dims.vocab"] = o.vocab ? "--vocab, a multiple of 128" : "32000 (Llama 2, Mistral), a multiple of 128";
  s.name = o.name.empty() ? "design-" + lower(short_count(n)) : o.name;

  // 3. Width and depth.
  why.push_back("3. width and depth: hidden / layers aimed at " + fixed(band.aim, 1) + " in the " + fixed(band.low, 0) + "–" +
                fixed(band.high, 0) + " band");
  Solver solver{attention, n, 1 << 20, &why, 0};
  Candidate chosen = solver.solve(s, band);
  // A vocabulary over a quarter of a small budget crowds out the layers:
  // the default shrinks to fit (the tokenizer is chosen with the model).
  const double e = s.tied ? 1 : 2;
  if (!o.vocab && e * static_cast<double>(s.vocab * chosen.shape.hidden()) > n / 4) {
    const int64_t fit = std::max<int64_t>(256, static_cast<int64_t>(n / 4 / (e * static_cast<double>(chosen.shape.hidden()))) / 128 * 128);
    why.push_back("   the embedding" + std::string(s.tied ? "" : "s") + " of 32000 rows would hold " +
                  fixed(100 * e * static_cast<double>(s.vocab * chosen.shape.hidden()) / n, 0) +
                  " % of the budget: the vocabulary shrinks to " + std::to_string(fit) + " (at most a quarter), and the shape is solved again");
    s.vocab = fit;
    comment["dims.vocab"] = "a quarter of the budget at most (the default 32000 would crowd out the layers), a multiple of 128";
    chosen = solver.solve(s, band);
  }

  // 4. The device's memory: fewer KV heads until the weights and a
  // sequence's cache at the full context fit.
  Report report = report_of(chosen.shape);
  if (o.memory == 0)
    why.push_back("4. memory: no --memory; the weights (" + std::string(name(s.dtype)) + ") take " +
                  bytes_text(report.device_weight_bytes) + " and a sequence's cache at " + std::to_string(s.context) +
                  " tokens " + bytes_text(device_bytes(report) - report.device_weight_bytes));
  if (o.memory > 0) {
    why.push_back("4. memory: " + bytes_text(o.memory) + " (--memory) must hold the weights (" + name(s.dtype) + ") and a sequence's cache at " +
                  std::to_string(s.context) + " tokens");
    why.push_back("   " + std::to_string(chosen.shape.kv_heads) + " KV heads: weights " + bytes_text(report.device_weight_bytes) +
                  " + cache " + bytes_text(device_bytes(report) - report.device_weight_bytes) + " = " +
                  bytes_text(device_bytes(report)));
    int64_t cap = chosen.shape.kv_heads;
    while (device_bytes(report) > o.memory && cap > 1) {
      cap = std::max<int64_t>(1, cap / 2);
      solver.kv_cap = cap;
      solver.explain = nullptr;
      chosen = solver.solve(s, band);
      report = report_of(chosen.shape);
      why.push_back("   at most " + std::to_string(cap) + (cap == 1 ? " KV head: " : " KV heads: ") + std::to_string(chosen.shape.kv_heads) + " (h " +
                    std::to_string(chosen.shape.hidden()) + ", L " + std::to_string(chosen.shape.layers) + "): weights " +
                    bytes_text(report.device_weight_bytes) + " + cache " +
                    bytes_text(device_bytes(report) - report.device_weight_bytes) + " = " + bytes_text(device_bytes(report)));
    }
    if (device_bytes(report) > o.memory)
      fail("--memory " + bytes_text(o.memory) + ": the weights (" + bytes_text(report.device_weight_bytes) + ", " +
           name(s.dtype) + ") and a sequence's cache at --context " + std::to_string(s.context) + " (" +
           bytes_text(device_bytes(report) - report.device_weight_bytes) + ", " + std::to_string(chosen.shape.kv_heads) +
           " KV head" + (chosen.shape.kv_heads == 1 ? "" : "s") + ") take " + bytes_text(device_bytes(report)) +
           ": lower --params, --context or --dtype");
    if (solver.kv_cap < (1 << 20)) {
      attention_rule = "fewer KV heads to fit --memory " + bytes_text(o.memory) + " (weights and a sequence's cache at the full context)";
      why.push_back("   fits: " + bytes_text(device_bytes(report)) + " of " + bytes_text(o.memory));
    } else {
      why.push_back("   fits as designed");
    }
  }

  // The comments of the shape's values.
  const Shape& f = chosen.shape;
  const int64_t h = f.hidden();
  comment["dims.hidden"] = std::to_string(f.heads) + " heads × " + std::to_string(f.head_dim) +
                           ": solves the budget at hidden / layers near " + fixed(band.aim, 0) + " (Kaplan et al. 2020)";
  comment["dims.layers"] = "hidden / layers = " + fixed(chosen.ratio, 1) + ", in the " + fixed(band.low, 0) + "–" +
                           fixed(band.high, 0) + " band of " + (f.moe ? "MoE" : "dense") + " models";
  if (chosen.ratio < band.low || chosen.ratio > band.high)
    comment["dims.layers"] = "hidden / layers = " + fixed(chosen.ratio, 1) + ", outside the " + fixed(band.low, 0) + "–" +
                             fixed(band.high, 0) + " band: no shape of this budget lies inside it";
  for (const auto& [key, text] : kFixedComments) comment[key] = text;
  comment["dims.kv_heads"] = attention_rule;
  comment["dims.head_dim"] = head_rule;
  comment["dims.intermediate"] = f.intermediate == swiglu_width(h)
                                     ? "SwiGLU 8h/3 = " + std::to_string(std::llround(8.0 * static_cast<double>(h) / 3)) + ", rounded up to a multiple of 256 (Shazeer 2020; Llama)"
                                     : "8h/3 rounded up to 256 is " + std::to_string(swiglu_width(h)) +
                                           "; moved to bring the parameters within 1 % of the budget" +
                                           std::string(chosen.ratio >= band.low && chosen.ratio <= band.high ? " inside the band" : "") +
                                           " (--explain)";
  if (f.moe) comment["dims.intermediate"] += "; each expert's";
  comment["model.name"] = o.name.empty() ? "design-<budget> (--name)" : "--name";
  comment["moe.experts"] = o.moe ? "--moe: a mixture of 8 experts (Mixtral)" : "MoE from 70B: 8 experts (Mixtral)";
  comment["weights.dtype"] = o.dtype == DType::BF16 ? "bf16, the usual training dtype" : "--dtype";
  comment["weights.preset"] = f.hybrid ? "Hugging Face Bamba's tensor names" : "Hugging Face Llama's tensor names";

  // The header: what was asked, what came out, the data it wants.
  const double gap = static_cast<double>(report.total_params) / n - 1;
  const std::string source = o.command.empty() ? "lathe design" : o.command;
  header.push_back("Designed by `" + source + "`.");
  header.push_back("Use " + std::string(name(use)) + ", budget " + grouped(std::llround(n)) + " parameters; lathe report counts " +
                   grouped(report.total_params) + " (" + percent(gap) + ")" +
                   (report.active_params != report.total_params ? ", " + grouped(report.active_params) + " active a token" : "") + ".");
  header.push_back("Train on about " + short_count(tokens) + " tokens (20 a parameter, Hoffmann et al. 2022" +
                   (o.overtrain > 1 ? ", × " + fixed(o.overtrain, 1) + " over-trained" : "") + "): " +
                   scientific(6 * n * tokens) + " FLOPs" + ".");
  header.push_back("Device memory at the full context: weights " + bytes_text(report.device_weight_bytes) + " + cache " +
                   bytes_text(device_bytes(report) - report.device_weight_bytes) + " a sequence.");
  header.push_back("`lathe design --explain` prints the derivation of every value.");
  out.spec = spec_text(f, comment, header, source);

  // The emitted text is what was counted: parse it back with its comments.
  Diagnostics diagnostics("design.toml");
  const auto spec = parse_spec_string(out.spec, "design.toml", diagnostics);
  if (!spec) throw std::logic_error("lathe design wrote a spec its parser refuses:\n" + diagnostics.format() + out.spec);
  out.params = make_report(*spec, {}, {}).total_params;
  why.push_back("5. result: h " + std::to_string(h) + ", L " + std::to_string(f.layers) + ", heads " + std::to_string(f.heads) +
                "/" + std::to_string(f.kv_heads) + ", ffn " + std::to_string(f.intermediate) + ", vocab " +
                std::to_string(f.vocab) + ": " + grouped(out.params) + " parameters, " + percent(gap) +
                " of the budget (lathe report's exact count; " + std::to_string(solver.counted) + " shapes counted)");
  return out;
}

int64_t parse_memory(const char* option, const std::string& text) { return parse_bytes(option, text); }

}  // namespace lathe::spec
