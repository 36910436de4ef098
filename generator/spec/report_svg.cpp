// `lathe report --svg`: the report as two pictures, written as plain SVG
// text. Each number shown is one of report_json's, and the element showing
// it says which by data-key, a JSON pointer into report_json
// (tests/unit/report_svg_test.cpp reads them back). Coordinates are printed
// with one decimal, so the same report gives the same bytes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "generator/spec/placement.hpp"
#include "generator/spec/report.hpp"

namespace lathe::spec {
namespace {

constexpr double kWidth = 1100;
constexpr double kRow = 20;  // one bar's row
constexpr double kBarHeight = 13;
constexpr double kBarLength = 300;  // the longest bar of a column
constexpr double kParamsX = 270, kFlopsX = 690;  // where each column's bars start
constexpr const char* kFont = "DejaVu Sans, Helvetica, Arial, sans-serif";
// One colour a curve: f16, f32, the state.
constexpr const char* kCurveColours[] = {"#1f77b4", "#d62728", "#2ca02c"};

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string coord(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", v);
  return buffer;
}

// human() without its trailing space when there is no prefix ("4096 " → "4096").
std::string count_text(double v) {
  std::string text = human(v, "");
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

// A run of text: plain, or one number named by its pointer into report_json.
struct Span {
  std::string text;
  std::string key;  // data-key; empty: words only
};

// The SVG body, element by element; attributes are given escaped.
class Svg {
 public:
  void text(double x, double y, const std::vector<Span>& spans, const std::string& attributes = "") {
    out_ += "<text x=\"" + coord(x) + "\" y=\"" + coord(y) + "\"" + (attributes.empty() ? "" : " " + attributes) + ">";
    for (const Span& s : spans)
      out_ += s.key.empty() ? escape(s.text)
                            : "<tspan data-key=\"" + escape(s.key) + "\">" + escape(s.text) + "</tspan>";
    out_ += "</text>\n";
  }
  void rect(double x, double y, double w, double h, const std::string& attributes) {
    out_ += "<rect x=\"" + coord(x) + "\" y=\"" + coord(y) + "\" width=\"" + coord(w) + "\" height=\"" + coord(h) +
            "\" " + attributes + "/>\n";
  }
  void line(double x1, double y1, double x2, double y2, const std::string& attributes) {
    out_ += "<line x1=\"" + coord(x1) + "\" y1=\"" + coord(y1) + "\" x2=\"" + coord(x2) + "\" y2=\"" + coord(y2) +
            "\" " + attributes + "/>\n";
  }
  void raw(const std::string& element) { out_ += element; }
  const std::string& body() const { return out_; }

 private:
  std::string out_;
};

// "layer 4", "layers 0–31, each", "layers 0–8, 10–17, 19–26, each"; an
// encoder–decoder's "encoder: layers 0–5, each".
std::string layers_label(const Report& r, const std::vector<size_t>& layers) {
  std::string runs;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    if (!runs.empty()) runs += ", ";
    runs += std::to_string(layers[i]) + (j > i ? "\u2013" + std::to_string(layers[j]) : "");
    i = j + 1;
  }
  const std::string stack = !r.encoder_decoder                                           ? ""
                            : static_cast<int64_t>(layers.front()) < r.encoder_layers ? "encoder: "
                                                                                      : "decoder: ";
  return stack + (layers.size() == 1 ? "layer " + runs : "layers " + runs + ", each");
}

std::string layers_attribute(const std::vector<size_t>& layers) {
  std::string out;
  for (size_t l : layers) {
    if (!out.empty()) out += ' ';
    out += std::to_string(l);
  }
  return out;
}

bool same_costs(const std::vector<ComponentCost>& a, const std::vector<ComponentCost>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const ComponentCost& x, const ComponentCost& y) {
    return x.component == y.component && x.params == y.params && x.active_params == y.active_params &&
           x.flops == y.flops;
  });
}

// One row of the bar chart: a component of a group of alike layers (or of
// the global tensors), its parameters (total or active) and FLOPs.
struct BarRow {
  std::string label;
  std::string key;     // the component's pointer: /breakdown/layers/<first>/<component> or /breakdown/globals/<component>
  std::string layers;  // data-layers: every layer the row stands for; empty for the globals
  double params = 0;
  const char* params_field = "params";  // or "active_params"
  bool flops = true;                    // a FLOPs bar too (not on an MoE's all-experts row)
  double flop_count = 0;
};

// A component's row label; `decoder`: an encoder–decoder's decoder layer.
std::string component_label(const Report& r, const std::string& component, bool decoder) {
  if (component == "attention") return r.mla ? "latent attention" : decoder ? "attention (self, cross)" : "attention";
  if (component == "ssm") return "state-space mixer";
  if (component == "mlp") return "MLP";
  if (component == "lm_head") return "LM head";
  if (component == "vision") return "vision tower and projector";
  return component;
}

// A component's rows: an MoE's experts give two, all of them and the routed
// ones a token multiplies.
void add_rows(const ComponentCost& c, const std::string& key, const std::string& layers,
              const std::string& label, std::vector<BarRow>& rows) {
  const double params = static_cast<double>(c.params);
  if (c.active_params != c.params) {
    rows.push_back({label + ", all", key, layers, params, "params", false, 0});
    rows.push_back({label + ", active", key, layers, static_cast<double>(c.active_params), "active_params", true, c.flops});
    return;
  }
  rows.push_back({label, key, layers, params, "params", true, c.flops});
}

// Picture 1: bars of parameters and FLOPs, per component of each group of
// alike layers, between the embedding and the LM head. Returns its height.
double bar_chart(const Report& r, Svg& svg) {
  struct Group {
    std::vector<size_t> layers;
    const std::vector<ComponentCost>* costs;
  };
  std::vector<Group> groups;
  for (size_t l = 0; l < r.layer_costs.size(); ++l) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const Group& g) { return same_costs(*g.costs, r.layer_costs[l]); });
    if (it == groups.end()) groups.push_back({{l}, &r.layer_costs[l]});
    else it->layers.push_back(l);
  }

  // Sections in order: the embedding (and T5's relative position bias
  // tables), each group of layers under its heading, the final norm (and
  // any other outside the layers: BERT's embedding norm) and the LM head.
  struct Section {
    std::vector<size_t> layers;  // empty: the global tensors, no heading
    std::vector<BarRow> rows;
  };
  std::vector<Section> sections;
  const auto global_rows = [&](bool first) {
    std::vector<BarRow> rows;
    for (const ComponentCost& c : r.global_costs) {
      if ((c.component != "norms" && c.component != "lm_head") != first) continue;
      const std::string label = c.component == "norms"                       ? "norms outside the layers"
                                : c.component == "attention"                 ? "relative position bias"
                                : c.component == "lm_head" && c.params == 0 ? "LM head (the embedding, tied)"
                                                                            : component_label(r, c.component, false);
      add_rows(c, "/breakdown/globals/" + c.component, "", label, rows);
    }
    return rows;
  };
  sections.push_back({{}, global_rows(true)});
  for (const Group& g : groups) {
    std::vector<BarRow> rows;
    for (const ComponentCost& c : *g.costs)
      add_rows(c, "/breakdown/layers/" + std::to_string(g.layers.front()) + "/" + c.component,
               layers_attribute(g.layers),
               component_label(r, c.component,
                               r.encoder_decoder && static_cast<int64_t>(g.layers.front()) >= r.encoder_layers),
               rows);
    sections.push_back({g.layers, rows});
  }
  sections.push_back({{}, global_rows(false)});

  double params_max = 0, flops_max = 0;
  for (const Section& section : sections)
    for (const BarRow& row : section.rows) {
      params_max = std::max(params_max, row.params);
      if (row.flops) flops_max = std::max(flops_max, row.flop_count);
    }

  const std::string context = grouped(r.breakdown_context);
  const std::string flops_key =
      std::string("/flops_per_token/") + (r.encoder ? "prefill/" : "decode/") + std::to_string(r.breakdown_context);
  svg.text(20, 30, {{r.name, "/name"}, {": parameters and FLOPs by layer and component", ""}},
           "font-size=\"18\" font-weight=\"bold\"");
  svg.text(20, 50,
           {{r.encoder ? "FLOPs a token of an input of " : "FLOPs of a decode token at context ", ""},
            {context, "/breakdown/context"},
            {r.encoder ? " tokens" : "", ""},
            {": matmuls and attention, elementwise work left out", ""},
            {r.encoder_decoder ? "; the encoder's layers first" : "", ""}},
           "font-size=\"12\" fill=\"#444444\"");
  svg.text(kParamsX, 76, {{"parameters", ""}}, "font-size=\"13\" font-weight=\"bold\"");
  svg.text(kFlopsX, 76, {{"FLOPs per token", ""}}, "font-size=\"13\" font-weight=\"bold\"");

  double y = 84;
  int stripe = 0;
  const auto bar = [&](double x, double value, double max, const std::string& key, const std::string& layers,
                       const std::string& column, const std::string& label) {
    const double length = max > 0 ? value / max * kBarLength : 0;
    const std::string data =
        "data-key=\"" + escape(key) + "\"" + (layers.empty() ? "" : " data-layers=\"" + layers + "\"");
    svg.rect(x, y + (kRow - kBarHeight) / 2, length, kBarHeight,
             "class=\"bar\" data-column=\"" + column + "\" " + data + " fill=\"" +
                 (column == "params" ? "#4c78a8" : "#f58518") + "\"");
    svg.text(x + length + 5, y + kRow / 2 + 4, {{label, ""}}, data + " font-size=\"11\"");
  };
  for (const Section& section : sections) {
    if (section.rows.empty()) continue;
    if (!section.layers.empty()) {
      y += 6;
      svg.text(20, y + kRow / 2 + 4, {{layers_label(r, section.layers), ""}},
               "data-layers=\"" + layers_attribute(section.layers) + "\" font-size=\"12\" font-weight=\"bold\"");
      y += kRow;
    }
    for (const BarRow& row : section.rows) {
      if (stripe++ % 2 == 0) svg.rect(10, y, kWidth - 20, kRow, "fill=\"#f2f2f2\"");
      svg.text(section.layers.empty() ? 20 : 36, y + kRow / 2 + 4, {{row.label, ""}}, "font-size=\"12\"");
      bar(kParamsX, row.params, params_max, row.key + "/" + row.params_field, row.layers, "params",
          count_text(row.params));
      if (row.flops)
        bar(kFlopsX, row.flop_count, flops_max, row.key + "/flops", row.layers, "flops", human(row.flop_count, "FLOP"));
      y += kRow;
    }
  }
  y += 24;
  std::vector<Span> total = {{"the whole model: ", ""}, {count_text(static_cast<double>(r.total_params)), "/params/total"},
                             {" parameters", ""}};
  if (r.active_params != r.total_params)
    total.insert(total.end(), {{", ", ""},
                               {count_text(static_cast<double>(r.active_params)), "/params/active_per_token"},
                               {" active", ""}});
  const double flops = r.encoder ? r.prefill_flops_per_token.empty() ? 0 : r.prefill_flops_per_token.back().second
                       : r.decode_flops_per_token.empty() ? 0
                                                          : r.decode_flops_per_token.back().second;
  total.insert(total.end(), {{"; ", ""}, {human(flops, "FLOP"), flops_key}, {" a token", ""}});
  svg.text(20, y, total, "font-size=\"13\"");
  return y + 16;
}

// Ticks at powers of two: every 1, 2, 5 or 10 octaves, the fewest that
// leave at most `most` ticks between 2^lo and 2^hi.
std::vector<int> octave_ticks(double lo, double hi, int most) {
  int step = 1;
  for (int s : {1, 2, 5, 10}) {
    step = s;
    if ((hi - lo) / s <= most) break;
  }
  std::vector<int> ticks;
  for (int k = static_cast<int>(std::ceil(lo)); k <= static_cast<int>(std::floor(hi)); ++k)
    if (k % step == 0) ticks.push_back(k);
  return ticks;
}

// Picture 2: each cache curve against context on log-log axes, the weights'
// device bytes a dashed line across, max_context a dotted one. Starts at
// `top`; returns where it ends.
double cache_chart(const Report& r, Svg& svg, double top) {
  if (r.cache_curves.empty() || r.cache_curves.front().bytes_at_context.empty()) return top;
  const double plot_x = 100, plot_w = 620, plot_y = top + 76, plot_h = 300;
  const double legend_x = 760;
  const auto& first = r.cache_curves.front().bytes_at_context;
  const double x_lo = std::log2(static_cast<double>(first.front().first));
  const double x_hi = std::max(x_lo + 1, std::log2(static_cast<double>(first.back().first)));
  double least = static_cast<double>(r.device_weight_bytes), most = least;
  for (const CacheCurve& c : r.cache_curves)
    for (const auto& [L, b] : c.bytes_at_context) {
      least = std::min(least, static_cast<double>(std::max<int64_t>(b, 1)));
      most = std::max(most, static_cast<double>(b));
    }
  const double y_lo = std::floor(std::log2(least * 0.9)), y_hi = std::ceil(std::log2(most * 1.1));
  const auto x_of = [&](double L) { return plot_x + (std::log2(L) - x_lo) / (x_hi - x_lo) * plot_w; };
  const auto y_of = [&](double b) {
    return plot_y + plot_h - (std::log2(std::max(b, 1.0)) - y_lo) / (y_hi - y_lo) * plot_h;
  };

  svg.text(20, top + 30,
           {{r.name, "/name"}, {r.encoder ? ": an input's K and V against its length" : ": a sequence's cache against its context", ""}},
           "font-size=\"18\" font-weight=\"bold\"");
  svg.text(20, top + 50,
           {{"both axes logarithmic; every dtype [cache] dtype may take, and the weights on the device", ""}},
           "font-size=\"12\" fill=\"#444444\"");

  const double max_context = static_cast<double>(r.max_context);
  const double edge = x_of(max_context);
  const bool past = edge < plot_x + plot_w - 1;
  if (past) svg.rect(edge, plot_y, plot_x + plot_w - edge, plot_h, "fill=\"#eeeeee\"");
  for (int k : octave_ticks(x_lo, x_hi, 6)) {
    const double x = x_of(std::ldexp(1.0, k));
    svg.line(x, plot_y, x, plot_y + plot_h, "stroke=\"#dddddd\"");
    svg.text(x, plot_y + plot_h + 16, {{grouped(int64_t{1} << k), ""}},
             "data-tick=\"" + std::to_string(int64_t{1} << k) + "\" font-size=\"11\" text-anchor=\"middle\"");
  }
  for (int k : octave_ticks(y_lo, y_hi, 7)) {
    const double y = y_of(std::ldexp(1.0, k));
    svg.line(plot_x, y, plot_x + plot_w, y, "stroke=\"#dddddd\"");
    svg.text(plot_x - 6, y + 4, {{human_bytes(std::ldexp(1.0, k)), ""}},
             "data-tick=\"" + std::to_string(int64_t{1} << k) + "\" font-size=\"11\" text-anchor=\"end\"");
  }
  svg.rect(plot_x, plot_y, plot_w, plot_h, "fill=\"none\" stroke=\"#888888\"");
  svg.text(plot_x + plot_w / 2, plot_y + plot_h + 36,
           {{r.encoder ? "input length (tokens)" : "context (tokens)", ""}},
           "font-size=\"12\" text-anchor=\"middle\"");
  const std::string y_title_at = coord(34) + "," + coord(plot_y + plot_h / 2);
  svg.raw("<text x=\"" + coord(34) + "\" y=\"" + coord(plot_y + plot_h / 2) + "\" transform=\"rotate(-90 " +
          y_title_at + ")\" font-size=\"12\" text-anchor=\"middle\">bytes</text>\n");

  if (edge <= plot_x + plot_w + 0.05) {
    svg.line(edge, plot_y, edge, plot_y + plot_h, "stroke=\"#555555\" stroke-dasharray=\"2,3\"");
    const bool right = edge > plot_x + plot_w - 80;
    svg.text(edge, plot_y - 6,
             {{"max_context ", ""}, {grouped(r.max_context), "/max_context"}},
             std::string("font-size=\"11\" text-anchor=\"") + (right ? "end" : "middle") + "\"");
  }
  const double weights = static_cast<double>(r.device_weight_bytes);
  const double weights_y = y_of(weights);
  svg.line(plot_x, weights_y, plot_x + plot_w, weights_y, "stroke=\"#000000\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"");
  svg.text(plot_x + 6, weights_y - 6, {{"weights", ""}}, "font-size=\"11\"");

  // The curves, their crossings of the weights, the legend. A rising curve
  // leaves two corners of its crossing empty: above the line to its left,
  // below it to its right. The leftmost crossing's label takes the first
  // (the other curves are still below the line there), the others the
  // second (every curve left of them has risen above it).
  int64_t leftmost = 0;
  for (const CacheCurve& c : r.cache_curves)
    if (c.passes_weights_at > 0 && (leftmost == 0 || c.passes_weights_at < leftmost)) leftmost = c.passes_weights_at;
  double legend_y = plot_y + 4;
  for (size_t i = 0; i < r.cache_curves.size(); ++i) {
    const CacheCurve& c = r.cache_curves[i];
    const std::string key = "/cache_curves/" + std::to_string(i);
    const bool state = r.ssm && i == 0;
    const char* colour = kCurveColours[state ? 2 : c.dtype == DType::F16 ? 0 : 1];
    std::string points;
    for (const auto& [L, b] : c.bytes_at_context) {
      if (!points.empty()) points += ' ';
      points += coord(x_of(static_cast<double>(L))) + "," + coord(y_of(static_cast<double>(b)));
    }
    const std::string stroke = std::string("fill=\"none\" stroke=\"") + colour + "\" stroke-width=\"" +
                               (c.spec_dtype ? "3" : "1.75") + "\"" + (state ? " stroke-dasharray=\"8,3\"" : "");
    svg.raw("<polyline data-key=\"" + key + "/bytes_at_context\" points=\"" + points + "\" " + stroke + "/>\n");
    const double at = static_cast<double>(c.passes_weights_at);
    if (c.passes_weights_at > 0 && std::log2(at) <= x_hi + 1e-9 && std::log2(at) >= x_lo - 1e-9) {
      const double x = x_of(at);
      svg.raw("<circle cx=\"" + coord(x) + "\" cy=\"" + coord(weights_y) + "\" r=\"4.5\" fill=\"" + colour +
              "\" stroke=\"#ffffff\"/>\n");
      const bool left = c.passes_weights_at == leftmost;
      svg.text(left ? x - 5 : x + 5, left ? weights_y - 8 : weights_y + 17,
               {{grouped(c.passes_weights_at), key + "/passes_weights_at"}},
               std::string("font-size=\"11\" font-weight=\"bold\" text-anchor=\"") + (left ? "end" : "start") +
                   "\" fill=\"" + colour + "\"");
    }

    svg.line(legend_x, legend_y, legend_x + 26, legend_y, stroke);
    svg.text(legend_x + 34, legend_y + 4, {{c.label, key + "/label"}, {c.spec_dtype ? ", the spec's" : "", ""}},
             "font-size=\"12\" font-weight=\"bold\"");
    const std::string at_max = std::to_string(r.max_context);
    const auto max_entry = std::find_if(c.bytes_at_context.begin(), c.bytes_at_context.end(),
                                        [&](const auto& e) { return e.first == r.max_context; });
    if (max_entry != c.bytes_at_context.end())
      svg.text(legend_x + 34, legend_y + 20,
               {{state ? "at every context: " : "at max_context: ", ""}, {human_bytes(static_cast<double>(max_entry->second)), key + "/bytes_at_context/" + at_max}},
               "font-size=\"11\"");
    if (c.passes_weights_at > 0)
      svg.text(legend_x + 34, legend_y + 35,
               {{"reaches the weights at ", ""}, {grouped(c.passes_weights_at), key + "/passes_weights_at"}},
               "font-size=\"11\"");
    else
      svg.text(legend_x + 34, legend_y + 35, {{"never reaches the weights", ""}}, "font-size=\"11\"");
    legend_y += 56;
  }
  svg.line(legend_x, legend_y, legend_x + 26, legend_y, "stroke=\"#000000\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"");
  svg.text(legend_x + 34, legend_y + 4, {{"weights on the device", ""}}, "font-size=\"12\" font-weight=\"bold\"");
  svg.text(legend_x + 34, legend_y + 20, {{human_bytes(weights), "/device/weight_bytes"}}, "font-size=\"11\"");
  // Past max_context, the tokens are several sequences' (or inputs') together.
  if (past) {
    legend_y += 40;
    svg.rect(legend_x, legend_y - 7, 26, 14, "fill=\"#eeeeee\" stroke=\"#888888\"");
    svg.text(legend_x + 34, legend_y + 4, {{"past max_context", ""}}, "font-size=\"12\" font-weight=\"bold\"");
    svg.text(legend_x + 34, legend_y + 20,
             {{r.encoder ? "several inputs' tokens together" : "several sequences' tokens together", ""}},
             "font-size=\"11\"");
  }
  return plot_y + plot_h + 56;
}

// A split over devices (--devices): per device, its layers, a bar of its
// weights and one of its cache end to end, and its memory as an outline on
// the same scale.
double placement_chart(const Placement& p, Svg& svg, double top) {
  double most = 0;
  for (const DeviceShare& d : p.devices) most = std::max({most, static_cast<double>(d.capacity), static_cast<double>(d.need())});
  const double scale = most > 0 ? 600 / most : 0, x0 = 270;
  svg.text(20, top + 20, {{"Placement: each device's weights and cache beside its memory, ", ""},
                          {grouped(p.context), "/placement/context"}, {" positions for ", ""},
                          {grouped(p.sequences), "/placement/sequences"}, {p.sequences == 1 ? " sequence" : " sequences", ""}},
           "font-size=\"16\" font-weight=\"bold\"");
  double y = top + 40;
  for (size_t i = 0; i < p.devices.size(); ++i) {
    const DeviceShare& d = p.devices[i];
    const std::string at = "/placement/devices/" + std::to_string(i) + "/";
    if (i % 2 == 0) svg.rect(10, y, kWidth - 20, 2 * kRow, "fill=\"#f2f2f2\"");
    svg.text(20, y + kRow / 2 + 4,
             {{"layers ", ""}, {grouped(d.first_layer), at + "first_layer"}, {"\u2013", ""},
              {grouped(d.end_layer - 1), at + "last_layer"},
              {std::string(d.embedding ? " + embedding" : "") + (d.head ? " + head" : ""), ""}},
             "font-size=\"12\"");
    const double bar_y = y + (kRow - kBarHeight) / 2;
    const auto bar = [&](double x, double bytes, const std::string& field, const char* colour) {
      svg.rect(x, bar_y, bytes * scale, kBarHeight,
               "class=\"bar\" data-column=\"devices\" data-key=\"" + at + field + "\" fill=\"" + colour + "\"");
      return x + bytes * scale;
    };
    const double weights = bar(x0, static_cast<double>(d.weights), "weight_bytes", "#4c78a8");
    bar(weights, static_cast<double>(d.cache), "cache_bytes", "#f58518");
    svg.rect(x0, bar_y - 2, static_cast<double>(d.capacity) * scale, kBarHeight + 4,
             "class=\"bar\" data-column=\"devices\" data-key=\"" + at + "capacity_bytes\" fill=\"none\" stroke=\"" +
                 (d.fits() ? "#222222" : "#d62728") + "\" stroke-width=\"1.5\"");
    svg.text(x0, y + kRow + 14,
             {{"weights ", ""}, {human_bytes(static_cast<double>(d.weights)), at + "weight_bytes"}, {" + cache ", ""},
              {human_bytes(static_cast<double>(d.cache)), at + "cache_bytes"}, {" = ", ""},
              {human_bytes(static_cast<double>(d.need())), at + "need_bytes"}, {" of ", ""},
              {human_bytes(static_cast<double>(d.capacity)), at + "capacity_bytes"},
              {d.fits() ? ": fits" : ": does not fit", ""}},
             std::string("font-size=\"11\"") + (d.fits() ? "" : " fill=\"#d62728\""));
    y += 2 * kRow + 6;
  }
  return y + 10;
}

}  // namespace

std::string report_svg(const Report& r, const Placement* placement) {
  Svg svg;
  double height = cache_chart(r, svg, bar_chart(r, svg) + 20);
  if (placement) height = placement_chart(*placement, svg, height);
  nlohmann::json metadata = report_json(r);
  if (placement) metadata["placement"] = placement_json(*placement);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + coord(kWidth) + "\" height=\"" + coord(height) +
         "\" viewBox=\"0 0 " + coord(kWidth) + " " + coord(height) + "\" font-family=\"" + kFont + "\">\n";
  out += "<metadata id=\"lathe-report\">" + escape(metadata.dump()) + "</metadata>\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  out += svg.body();
  out += "</svg>\n";
  return out;
}

}  // namespace lathe::spec
