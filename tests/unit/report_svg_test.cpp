// `lathe report --svg`: the pictures show report_json's numbers and no
// others. The SVG is read back as text: every label holding a number names
// its report_json value by data-key (a JSON pointer), and its digits must
// round to that value; bar lengths must be in proportion; each group of
// alike layers must be alike in report_json.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "generator/spec/parse.hpp"
#include "generator/spec/placement.hpp"
#include "generator/spec/report.hpp"

using namespace lathe::spec;
using nlohmann::json;

namespace {

Report report_of(const std::string& file, const std::vector<int64_t>& decode = {128, 2048}) {
  const std::string path = (std::filesystem::path(LATHE_SOURCE_DIR) / "models" / file).string();
  Diagnostics diag(path);
  auto spec = parse_spec_file(path, diag);
  INFO(diag.format());
  REQUIRE(spec);
  return make_report(*spec, {128, 512}, decode);
}

std::string unescape(const std::string& text) {
  static const std::pair<const char*, const char*> kEntities[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&amp;", "&"}};
  std::string out = text;
  for (const auto& [entity, c] : kEntities)
    for (size_t at = out.find(entity); at != std::string::npos; at = out.find(entity, at + 1))
      out.replace(at, std::string(entity).size(), c);
  return out;
}

// One element of the SVG: its name, attributes and the text directly inside it.
struct Element {
  std::string name;
  std::map<std::string, std::string> attributes;
  std::string text;
};

// A reader for the SVG report_svg writes (no comments, no CDATA).
std::vector<Element> elements_of(const std::string& svg) {
  std::vector<Element> all;
  std::vector<size_t> open;  // indexes into `all`
  static const std::regex kAttribute(R"(([A-Za-z_:][-A-Za-z0-9_:.]*)="([^"]*)\")");
  size_t at = 0;
  while (at < svg.size()) {
    const size_t lt = svg.find('<', at);
    const std::string chunk = svg.substr(at, lt == std::string::npos ? std::string::npos : lt - at);
    if (!open.empty()) all[open.back()].text += unescape(chunk);
    if (lt == std::string::npos) break;
    const size_t gt = svg.find('>', lt);
    REQUIRE(gt != std::string::npos);
    const std::string tag = svg.substr(lt + 1, gt - lt - 1);
    at = gt + 1;
    if (tag.empty() || tag[0] == '?' || tag[0] == '!') continue;
    if (tag[0] == '/') {
      REQUIRE(!open.empty());
      CHECK(all[open.back()].name == tag.substr(1));
      open.pop_back();
      continue;
    }
    Element e;
    e.name = tag.substr(0, tag.find_first_of(" /"));
    for (std::sregex_iterator it(tag.begin(), tag.end(), kAttribute), end; it != end; ++it)
      e.attributes[(*it)[1]] = unescape((*it)[2]);
    all.push_back(e);
    if (tag.back() != '/') open.push_back(all.size() - 1);
  }
  CHECK(open.empty());
  return all;
}

// A label's number: "8,192", "176.2 M", "1.051 GFLOP", "14.96 GiB".
std::optional<double> shown_number(const std::string& text) {
  static const std::regex kNumber(R"(^(-?[0-9][0-9,]*(?:\.[0-9]+)?)(?: ([KMGTP]?)(iB|B|FLOP)?)?$)");
  std::smatch m;
  if (!std::regex_match(text, m, kNumber)) return std::nullopt;
  std::string digits = m[1];
  digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());
  const std::string prefix = m[2];
  const double base = m[3] == "iB" ? 1024 : 1000;
  const double scale = prefix.empty() ? 1 : std::pow(base, 1 + std::string("KMGTP").find(prefix[0]));
  return std::stod(digits) * scale;
}

// A digit that starts a number, not one inside a word ("f16", "Q4_K").
bool has_number(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i)
    if (std::isdigit(static_cast<unsigned char>(text[i])) &&
        (i == 0 || !std::isalnum(static_cast<unsigned char>(text[i - 1]))))
      return true;
  return false;
}

std::vector<int64_t> numbers_in(const std::string& list) {
  std::vector<int64_t> out;
  std::istringstream in(list);
  for (int64_t v; in >> v;) out.push_back(v);
  return out;
}

// The layers a heading names: "layers 0–8, 10–17, each", "encoder: layer 3".
std::vector<int64_t> heading_layers(const std::string& heading) {
  std::string list = heading.substr(heading.find("layer"));
  list = list.substr(list.find(' ') + 1);
  if (const size_t each = list.find(", each"); each != std::string::npos) list.resize(each);
  std::vector<int64_t> out;
  std::istringstream in(list);
  for (std::string run; std::getline(in, run, ',');) {
    const size_t dash = run.find("\u2013");
    const int64_t first = std::stoll(run.substr(0, dash));
    const int64_t last = dash == std::string::npos ? first : std::stoll(run.substr(dash + 3));
    for (int64_t l = first; l <= last; ++l) out.push_back(l);
  }
  return out;
}

// The pointer with its layer index replaced: /breakdown/layers/<l>/…
std::string at_layer(const std::string& pointer, int64_t layer) {
  static const std::regex kLayer(R"(^/breakdown/layers/[0-9]+/)");
  return std::regex_replace(pointer, kLayer, "/breakdown/layers/" + std::to_string(layer) + "/");
}

struct Checked {
  std::vector<std::string> problems;
  int numbers = 0;  // labels whose number matched report_json's
  int bars = 0;
};

// Every disagreement between the SVG and report_json.
Checked check_svg(const std::string& svg, const json& report) {
  Checked c;
  const auto problem = [&](const Element& e, const std::string& what) {
    std::string attrs;
    for (const auto& [k, v] : e.attributes) attrs += " " + k + "=\"" + v + "\"";
    c.problems.push_back("<" + e.name + attrs + ">" + e.text + ": " + what);
  };
  const auto value_at = [&](const std::string& pointer) -> const json* {
    const json::json_pointer p(pointer);
    return report.contains(p) ? &report.at(p) : nullptr;
  };
  std::set<int64_t> headed;  // the layers the headings name
  std::map<std::string, std::pair<double, double>> widest;  // column → (width, value) of its longest bar
  std::vector<std::tuple<std::string, double, double, Element>> bars;  // column, width, value
  for (const Element& e : elements_of(svg)) {
    const auto attr = [&](const char* name) {
      auto it = e.attributes.find(name);
      return it == e.attributes.end() ? std::string() : it->second;
    };
    const std::string key = attr("data-key"), layers = attr("data-layers"), tick = attr("data-tick");
    if (e.name == "metadata") {
      if (json::parse(e.text) != report) problem(e, "the metadata is not report_json");
      continue;
    }
    if (!key.empty()) {
      const json* value = value_at(key);
      if (value == nullptr) {
        problem(e, "no such value in report_json");
        continue;
      }
      for (int64_t l : numbers_in(layers)) {
        const json* other = value_at(at_layer(key, l));
        if (other == nullptr || *other != *value) problem(e, "layer " + std::to_string(l) + " differs");
      }
      if (e.name == "rect") {
        bars.emplace_back(attr("data-column"), std::stod(attr("width")), value->get<double>(), e);
        auto& w = widest[attr("data-column")];
        w = std::max(w, {std::stod(attr("width")), value->get<double>()});
        continue;
      }
      if (e.name == "polyline") {
        std::istringstream points(attr("points"));
        size_t n = 0;
        for (std::string p; points >> p;) ++n;
        if (!value->is_object() || n != value->size()) problem(e, "not one point per context");
        continue;
      }
      if (value->is_string()) {
        if (e.text != value->get<std::string>()) problem(e, "shows other text than " + value->dump());
        continue;
      }
      const std::optional<double> shown = shown_number(e.text);
      const double v = value->get<double>();
      // 4 significant digits: within half a unit of the fourth.
      if (!shown || std::fabs(*shown - v) > 5e-4 * std::fabs(v) + 1e-9) problem(e, "is not " + value->dump());
      else ++c.numbers;
      continue;
    }
    if (e.name != "text" && e.name != "tspan") continue;
    if (!tick.empty()) {
      const std::optional<double> shown = shown_number(e.text);
      if (!shown || std::fabs(*shown - std::stod(tick)) > 5e-4 * std::stod(tick)) problem(e, "is not its tick");
      continue;
    }
    if (!layers.empty()) {
      const std::vector<int64_t> named = heading_layers(e.text), listed = numbers_in(layers);
      if (named != listed) problem(e, "names other layers than data-layers");
      for (int64_t l : named)
        if (!headed.insert(l).second) problem(e, "layer " + std::to_string(l) + " under two headings");
      continue;
    }
    if (has_number(e.text)) problem(e, "a number without a data-key");
  }
  for (const auto& [column, width, value, e] : bars) {
    const auto& [max_width, max_value] = widest[column];
    ++c.bars;
    if (std::fabs(width - (max_value > 0 ? value / max_value * max_width : 0)) > 0.1) problem(e, "out of proportion");
  }
  const size_t layers = report.at("breakdown").at("layers").size();
  if (headed.size() != layers || (!headed.empty() && *headed.rbegin() != static_cast<int64_t>(layers) - 1))
    c.problems.push_back("the headings name " + std::to_string(headed.size()) + " of " + std::to_string(layers) +
                         " layers");
  return c;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

}  // namespace

TEST_CASE("report: the per-layer breakdown adds up to the whole model's parameters and FLOPs") {
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(LATHE_SOURCE_DIR) / "models")) {
    if (entry.path().extension() != ".toml") continue;
    CAPTURE(entry.path().filename().string());
    const Report r = report_of(entry.path().filename().string());
    int64_t params = 0, active = 0;
    double flops = 0;
    std::vector<const ComponentCost*> all;
    for (const ComponentCost& c : r.global_costs) all.push_back(&c);
    for (const auto& layer : r.layer_costs)
      for (const ComponentCost& c : layer) all.push_back(&c);
    for (const ComponentCost* c : all) {
      params += c->params;
      active += c->active_params;
      flops += c->flops;
    }
    CHECK(params == r.total_params);
    CHECK(active == r.active_params);
    const auto& entries = r.encoder ? r.prefill_flops_per_token : r.decode_flops_per_token;
    REQUIRE(!entries.empty());
    CHECK(r.breakdown_context == entries.back().first);
    CHECK(flops == doctest::Approx(entries.back().second).epsilon(1e-12));
  }
}

TEST_CASE("report: the cache curves of llama-3-8b, mamba-130m and bamba-9b") {
  // Llama 3 8B: 32 layers × K and V × 8 heads × 128, two bytes (f16) or four
  // a value; the first context past the weights is theirs over a token's.
  const Report llama = report_of("llama-3-8b.toml");
  REQUIRE(llama.cache_curves.size() == 2);
  for (const CacheCurve& c : llama.cache_curves) {
    const int64_t per_token = 32 * 2 * 8 * 128 * (c.dtype == DType::F16 ? 2 : 4);
    CHECK(c.spec_dtype == (c.dtype == DType::F16));
    for (const auto& [L, bytes] : c.bytes_at_context) CHECK(bytes == per_token * L);
    CHECK(c.passes_weights_at == (llama.device_weight_bytes + per_token - 1) / per_token);
    CHECK(c.bytes_at_context.back().first >= 2 * c.passes_weights_at);  // the crossing is on the picture
  }
  // Mamba: the state alone, the same at every context.
  const Report mamba = report_of("mamba-130m.toml");
  REQUIRE(mamba.cache_curves.size() == 1);
  for (const auto& [L, bytes] : mamba.cache_curves[0].bytes_at_context)
    CHECK(bytes == mamba.conv_state_bytes + mamba.scan_state_bytes);
  CHECK(mamba.cache_curves[0].passes_weights_at == 0);
  // Bamba: the state, then three attention layers' KV cache on top of it.
  const Report bamba = report_of("bamba-9b.toml");
  REQUIRE(bamba.cache_curves.size() == 3);
  const int64_t state = bamba.conv_state_bytes + bamba.scan_state_bytes;
  for (const auto& [L, bytes] : bamba.cache_curves[1].bytes_at_context)
    CHECK(bytes == state + 3 * 2 * 8 * 128 * 2 * L);
  CHECK(bamba.cache_curves[1].label == "KV cache (f16) + state");
}

TEST_CASE("report --svg: every number the pictures show is report_json's") {
  struct Case {
    const char* file;
    std::vector<int64_t> decode;
  };
  // Dense, MoE, latent attention with MoE, state-space, a hybrid, windowed
  // layers (alike at 2048, two groups at 8192), an encoder-decoder, an encoder.
  const Case cases[] = {{"llama-3-8b.toml", {128, 2048}},      {"mixtral-8x7b.toml", {128, 2048}},
                        {"deepseek-v2-lite.toml", {128, 2048}}, {"mamba-130m.toml", {128, 2048}},
                        {"bamba-9b.toml", {128, 2048}},         {"gemma-2-2b.toml", {128, 2048}},
                        {"gemma-2-2b.toml", {8192}},            {"t5-small.toml", {128, 2048}},
                        {"bert-base-uncased.toml", {128, 2048}}};
  for (const Case& k : cases) {
    CAPTURE(k.file);
    CAPTURE(k.decode.back());
    const Report r = report_of(k.file, k.decode);
    const std::string svg = report_svg(r);
    CHECK(svg == report_svg(r));  // the same bytes every time
    const Checked checked = check_svg(svg, report_json(r));
    INFO(joined(checked.problems));
    CHECK(checked.problems.empty());
    CHECK(checked.numbers >= 15);
    CHECK(checked.bars >= 8);
  }
}

TEST_CASE("report --svg: the check catches a number, a bar or a heading that is off") {
  const Report r = report_of("mixtral-8x7b.toml");
  const std::string svg = report_svg(r);
  const json j = report_json(r);
  REQUIRE(check_svg(svg, j).problems.empty());

  // The total's label, one digit changed.
  std::string total = svg;
  const size_t at = total.find("data-key=\"/params/total\">");
  REQUIRE(at != std::string::npos);
  const size_t digit = total.find_first_of("0123456789", at + 25);
  total[digit] = total[digit] == '9' ? '8' : static_cast<char>(total[digit] + 1);
  CHECK(!check_svg(total, j).problems.empty());

  // A bar a few pixels long.
  std::string bar = svg;
  const size_t rect = bar.find("class=\"bar\"");
  const size_t width = bar.rfind("width=\"", rect);
  REQUIRE(width != std::string::npos);
  bar.insert(width + 7, "9");
  CHECK(!check_svg(bar, j).problems.empty());

  // A number with no data-key, and a heading naming a layer it does not hold.
  CHECK(!check_svg(svg.substr(0, svg.rfind("</svg>")) + "<text x=\"0\" y=\"0\">12 GiB</text></svg>", j).problems.empty());
  std::string heading = svg;
  const size_t each = heading.find("layers 0\u201331, each");
  REQUIRE(each != std::string::npos);
  heading.replace(each, std::string("layers 0\u201331").size(), "layers 0\u201330");
  CHECK(!check_svg(heading, j).problems.empty());

  // And a report_json value the label no longer matches.
  json other = j;
  other["params"]["total"] = j["params"]["total"].get<int64_t>() * 2;
  CHECK(!check_svg(svg, other).problems.empty());
}

TEST_CASE("report --svg: text is escaped") {
  Report r = report_of("mamba-130m.toml");
  r.name = "a<b & \"c\"";
  const std::string svg = report_svg(r);
  CHECK(svg.find("a&lt;b &amp; &quot;c&quot;") != std::string::npos);
  CHECK(svg.find("a<b") == std::string::npos);
  const Checked checked = check_svg(svg, report_json(r));
  INFO(joined(checked.problems));
  CHECK(checked.problems.empty());
}

// With --devices, a third picture: each device's layers, its weights and
// cache end to end, its memory as an outline on the same scale; every
// number placement_json's (the metadata holds report_json with "placement").
TEST_CASE("report --svg with --devices: each device's weights and cache beside its memory, placement_json's numbers") {
  const std::string path = (std::filesystem::path(LATHE_SOURCE_DIR) / "models" / "llama-3-8b.toml").string();
  Diagnostics diag(path);
  const auto spec = parse_spec_file(path, diag);
  REQUIRE(spec);
  const Report r = make_report(*spec, {128, 512}, {128, 2048});
  const int64_t GiB = int64_t{1} << 30;
  for (const auto& counts : {std::optional<std::vector<int64_t>>{}, std::optional<std::vector<int64_t>>{{16, 16}}}) {
    const Placement p = place(*spec, r, std::vector<int64_t>{24 * GiB, 4 * GiB}, counts, 8192);
    json expected = report_json(r);
    expected["placement"] = placement_json(p);
    const std::string svg = report_svg(r, &p);
    const Checked c = check_svg(svg, expected);
    CHECK_MESSAGE(c.problems.empty(), joined(c.problems));
    int device_bars = 0;
    for (const Element& e : elements_of(svg))
      if (e.attributes.count("data-column") && e.attributes.at("data-column") == "devices") ++device_bars;
    CHECK(device_bars == 6);  // weights, cache and memory of each device
    CHECK((svg.find("does not fit") != std::string::npos) == !p.fits());
  }
}
