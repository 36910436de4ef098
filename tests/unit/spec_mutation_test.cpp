// Robustness: corrupted variants of the shipped specs (lines deleted,
// duplicated, swapped; bytes flipped, inserted, deleted, NUL and invalid UTF-8
// among them; numbers replaced by huge, negative, zero and float values;
// spec lines of other architectures inserted; truncation). Each variant must
// parse or be rejected with at least one diagnostic, never throw or crash,
// and an accepted one must go through build_manifest and make_report.
// Large accepted values (1024 layers, 16 Mi vocab, thousands of experts) must
// not make the manifest or the report slow or memory-hungry.
#include <doctest/doctest.h>

#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/manifest.hpp"
#include "generator/spec/parse.hpp"
#include "generator/spec/report.hpp"

using namespace lathe::spec;

namespace {

std::string read_model(const char* name) {
  std::ifstream in(std::string(LATHE_SOURCE_DIR) + "/models/" + name, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::string line;
  for (char c : text) {
    if (c == '\n') {
      lines.push_back(line);
      line.clear();
    } else {
      line += c;
    }
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

// Values a number may be replaced with: limits of the parser's ranges and of
// int64 and double, and wrong kinds of number.
const char* const kNumbers[] = {
    "0", "-1", "1", "2", "3", "7", "1024", "1025", "4096", "4097", "65536", "16777216", "16777217",
    "9223372036854775807", "-9223372036854775808", "99999999999999999999", "0x7fffffffffffffff",
    "0.0", "-0.0", "0.5", "1.5", "1e-300", "1e308", "-1e308", "1e999", "inf", "-inf", "nan", "3.0",
};

// Lines of other architectures, so that variants reach MoE, windows, learned
// positions, rope scaling and explicit names, and their largest values.
const char* const kSpecLines[] = {
    "[moe]", "experts = 4096", "experts = 8", "top_k = 2", "top_k = 4096", "shared_experts = 4096",
    "shared_experts = 1", "shared_intermediate = 16777216", "expert_intermediate = 16777216",
    "shared_expert_gate = true", "norm_topk_prob = true", "scoring = \"sigmoid\"", "correction_bias = true",
    "groups = 32", "groups = 8", "topk_groups = 4", "group_score = \"top2_sum\"", "routed_scaling_factor = 2.5",
    "[attention]", "sliding_window = 4096", "sliding_window = 16777216", "window_pattern = [true, false]",
    "window_pattern = []", "qk_norm = \"whole\"", "qk_norm = \"per_head\"", "softcap = 50.0", "scale = 0.125",
    "query_pre_attn_scalar = 256", "bias = true", "q_bias = true",
    "[position]", "kind = \"learned\"", "kind = \"alibi\"", "offset = 2", "table_size = 16777216",
    "rotary_dim = 4096", "local_theta = 10000.0", "[position.scaling]", "kind = \"llama3\"", "kind = \"yarn\"",
    "original_max_context = 8192", "factor = 1e6",
    "[dims]", "layers = 1024", "heads = 4096", "kv_heads = 1", "head_dim = 4096", "hidden = 16777216",
    "intermediate = 16777216", "vocab = 16777216", "max_context = 16777216",
    "[norm]", "placement = \"sandwich\"", "placement = \"parallel\"", "placement = \"branch_output\"",
    "parallel_shared = false", "kind = \"layernorm\"", "unit_offset = true",
    "[mlp]", "fused_gate_up = \"gate_up\"", "gated = false", "gated = true", "bias = true",
    "[embedding]", "tied = false", "scale = \"sqrt_hidden\"", "[output]", "softcap = 30.0",
    "[weights]", "fused_qkv = true", "layout = \"in_out\"", "dtype = \"q8_0\"", "preset = \"gguf\"",
    "preset = \"hf-gpt2\"", "preset = \"hf-llama\"", "[weights.names]", "q = \"{layer}.{layer}.q\"",
    "expert_up = \"{layer}.{expert}.{expert}\"", "embed = \"\"", "[cache]", "dtype = \"f32\"",
    "[[dims]]", "x = { a = { b = [[[[1]]]] } }", "\"\" = 1", "dims.hidden = 1", "[model]", "name = \"\\u0000\"",
};

// Bytes a random insertion may add: NUL, invalid UTF-8, TOML punctuation.
const unsigned char kBytes[] = {0x00, 0xff, 0xfe, 0x80, 0xc0, 0xed, 0xf4, '\n', '\r', '\t', '[', ']', '{', '}',
                                '"',  '\'', '=',  '#',  '.',  ',',  '\\', '-',  '+',  '0',  '9',  'e', ' '};

// Whole tables appended at the end, so that MoE and windows appear with all
// their keys (a table defined twice is a TOML error, also fine).
const char* const kBlocks[] = {
    "[moe]\nexperts = 4096\ntop_k = 2\n",
    "[moe]\nexperts = 64\ntop_k = 8\nshared_experts = 4096\nshared_intermediate = 16777216\n"
    "shared_expert_gate = true\n",
    "[moe]\nexperts = 8\ntop_k = 2\nexpert_intermediate = 16777216\n",
    "[moe]\nexperts = 4096\ntop_k = 8\nscoring = \"sigmoid\"\ncorrection_bias = true\ngroups = 32\ntopk_groups = 4\n"
    "group_score = \"top2_sum\"\nrouted_scaling_factor = 2.5\nshared_experts = 1\n",
    "[attention]\nsliding_window = 4096\nwindow_pattern = [true, false, false]\n",
    "[position.scaling]\nkind = \"llama3\"\nfactor = 8.0\noriginal_max_context = 8192\n",
    "[weights.names]\nexpert_gate = \"l{layer}.e{expert}.w1\"\nexpert_up = \"l{layer}.e{expert}.w3\"\n"
    "expert_down = \"l{layer}.e{expert}.w2\"\nrouter = \"l{layer}.gate\"\n",
};

class Mutator {
 public:
  explicit Mutator(uint32_t seed) : rng_(seed) {}

  // Not std::uniform_int_distribution: its output differs between standard
  // libraries, and the variants should be the same everywhere.
  size_t pick(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng_() % n); }

  std::string mutate(const std::string& original) {
    std::string text = original;
    const size_t count = 1 + pick(4);
    for (size_t i = 0; i < count; ++i) text = mutate_once(text);
    return text;
  }

 private:
  std::string mutate_once(const std::string& text) {
    std::vector<std::string> lines = split_lines(text);
    switch (pick(11)) {
      case 0:  // delete a line
        if (!lines.empty()) lines.erase(lines.begin() + static_cast<ptrdiff_t>(pick(lines.size())));
        return join_lines(lines);
      case 1:  // duplicate a line
        if (!lines.empty()) {
          const std::string line = lines[pick(lines.size())];
          lines.insert(lines.begin() + static_cast<ptrdiff_t>(pick(lines.size() + 1)), line);
        }
        return join_lines(lines);
      case 2:  // swap two lines
        if (!lines.empty()) {
          // One pick per statement: the order of evaluation of arguments is unspecified,
          // and the variants must be the same with every compiler.
          const size_t a = pick(lines.size());
          const size_t b = pick(lines.size());
          std::swap(lines[a], lines[b]);
        }
        return join_lines(lines);
      case 3: {  // insert a line of another architecture
        const char* line = kSpecLines[pick(std::size(kSpecLines))];
        lines.insert(lines.begin() + static_cast<ptrdiff_t>(pick(lines.size() + 1)), line);
        return join_lines(lines);
      }
      case 4: {  // flip a bit
        std::string out = text;
        if (!out.empty()) {
          const size_t at = pick(out.size());
          out[at] = static_cast<char>(out[at] ^ (1u << pick(8)));
        }
        return out;
      }
      case 5: {  // insert a byte
        std::string out = text;
        const char byte = static_cast<char>(pick(4) == 0 ? pick(256) : kBytes[pick(std::size(kBytes))]);
        out.insert(out.begin() + static_cast<ptrdiff_t>(pick(out.size() + 1)), byte);
        return out;
      }
      case 6: {  // delete a byte
        std::string out = text;
        if (!out.empty()) out.erase(pick(out.size()), 1);
        return out;
      }
      case 7:  // truncate
        return text.substr(0, pick(text.size() + 1));
      case 8:  // append a table
        return text + kBlocks[pick(std::size(kBlocks))];
      default:  // replace a number (more often: it is what reaches the manifest)
        return replace_number(text);
    }
  }

  std::string replace_number(const std::string& text) {
    // The digit runs of the text, each a candidate (inside comments too).
    std::vector<std::pair<size_t, size_t>> numbers;
    for (size_t i = 0; i < text.size();) {
      if (text[i] >= '0' && text[i] <= '9') {
        size_t end = i;
        while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '.' ||
                                     text[end] == '_' || text[end] == '-' || text[end] == '+'))
          ++end;
        numbers.emplace_back(i, end - i);
        i = end;
      } else {
        ++i;
      }
    }
    if (numbers.empty()) return text;
    const auto [at, size] = numbers[pick(numbers.size())];
    std::string out = text;
    out.replace(at, size, kNumbers[pick(std::size(kNumbers))]);
    return out;
  }

  std::mt19937 rng_;
};

std::string printable(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '\n' || (c >= 0x20 && c < 0x7f)) {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

struct Outcome {
  bool accepted = false;
  std::string problem;  // empty: as required
  std::string diagnostics;
};

Outcome check_variant(const std::string& text) {
  const std::string file = "mutant.toml";
  Outcome o;
  try {
    Diagnostics diag(file);
    const auto spec = parse_spec_string(text, file, diag);
    if (!spec) {
      if (diag.empty()) return {false, "rejected without a diagnostic"};
      const std::string formatted = diag.format();
      if (formatted.rfind(file + ":", 0) != 0) return {false, "diagnostics do not name the file: " + formatted};
      o.diagnostics = formatted;
      return o;
    }
    o.accepted = true;
    if (!diag.empty()) return {true, "accepted with diagnostics: " + diag.format()};
    const Manifest manifest = build_manifest(*spec);
    // Reported up to the full context: the lengths must not cost time in proportion.
    const int64_t n = spec->dims.max_context;
    const Report report = make_report(*spec, {1, 128, n}, {1, n});
    if (manifest.tensors.empty()) return {true, "an accepted spec has no tensors"};
    if (manifest.tensors.size() > (size_t{1} << 18)) return {true, "an accepted spec has more than 2^18 tensors"};
    if (report.total_params != manifest.total_elements() || report.total_params <= 0)
      return {true, "the report's parameter count differs from the manifest's"};
    if (format_report(report).empty() || report_json(report).empty()) return {true, "an empty report"};
  } catch (const std::exception& e) {
    o.problem = std::string("threw: ") + e.what();
  } catch (...) {
    o.problem = "threw a non-exception";
  }
  return o;
}

}  // namespace

TEST_CASE("corrupted variants of the shipped specs are parsed or rejected, never crash") {
  const std::vector<std::string> bases = {read_model("smollm2-135m.toml"), read_model("gpt2.toml")};
  for (const std::string& base : bases) {
    REQUIRE(!base.empty());
    REQUIRE(check_variant(base).accepted);  // the unmutated spec is good
  }

  constexpr int kVariants = 6000;
  Mutator mutator(20240611u);
  int accepted = 0, failures = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kVariants; ++i) {
    const std::string text = mutator.mutate(bases[static_cast<size_t>(i) % bases.size()]);
    const Outcome o = check_variant(text);
    accepted += o.accepted ? 1 : 0;
    if (!o.problem.empty() && ++failures <= 5)
      FAIL_CHECK("variant " << i << ": " << o.problem << "\n--- variant ---\n" << printable(text));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE(kVariants << " variants, " << accepted << " accepted, " << kVariants - accepted << " rejected, in "
                    << seconds << " s");
  CHECK(failures == 0);
  // Both paths must be exercised: the mutations neither break everything nor nothing.
  CHECK(accepted > kVariants / 20);
  CHECK(kVariants - accepted > kVariants / 2);
}

TEST_CASE("the largest values of every range neither overflow nor exhaust the manifest and the report") {
  // Every combination of extremes, accepted or rejected; under UBSan an int64
  // overflow anywhere fails the test, and a manifest of millions of tensors
  // or a report looping over the context would make it slow.
  const std::string max = std::to_string(int64_t{1} << 24);
  const char* const widths[] = {"hidden = 64\nintermediate = 128\nvocab = 100\nmax_context = 256\n",
                                "hidden = 65536\nintermediate = M\nvocab = M\nmax_context = M\n",
                                "hidden = M\nintermediate = M\nvocab = M\nmax_context = M\n"};
  const char* const layers[] = {"layers = 1\n", "layers = 1024\n"};
  const char* const heads[] = {"heads = 4\nkv_heads = 2\n", "heads = 4096\nkv_heads = 4096\nhead_dim = 4096\n"};
  const char* const moes[] = {"", "[moe]\nexperts = 4096\ntop_k = 4096\n", "[moe]\nexperts = 128\ntop_k = 8\n",
                              "[moe]\nexperts = 1\ntop_k = 1\nexpert_intermediate = M\nshared_experts = 4096\n"
                              "shared_intermediate = M\nshared_expert_gate = true\n"};
  const char* const positions[] = {"", "[position]\nkind = \"learned\"\ntable_size = M\n"};
  const char* const windows[] = {"", "[attention]\nsliding_window = 256\nwindow_pattern = [true, false]\n"};

  int variants = 0, accepted = 0, too_many_tensors = 0, too_many_params = 0;
  const auto start = std::chrono::steady_clock::now();
  for (const char* w : widths)
    for (const char* l : layers)
      for (const char* h : heads)
        for (const char* m : moes)
          for (const char* p : positions)
            for (const char* a : windows) {
              std::string text = std::string("[model]\nname = \"extreme\"\n[dims]\n") + w + l + h + m + p + a +
                                 "[weights]\npreset = \"hf-llama\"\n[weights.names]\npos_embed = \"wpe\"\n";
              for (size_t at = text.find('M'); at != std::string::npos; at = text.find('M', at))
                text.replace(at, 1, max);
              const Outcome o = check_variant(text);
              ++variants;
              accepted += o.accepted ? 1 : 0;
              too_many_tensors += o.diagnostics.find(" tensors; lathe handles at most") != std::string::npos;
              too_many_params += o.diagnostics.find(" parameters; lathe handles at most") != std::string::npos;
              if (!o.problem.empty()) FAIL_CHECK(o.problem << "\n--- variant ---\n" << text);
            }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE(variants << " extreme variants, " << accepted << " accepted, in " << seconds << " s");
  CHECK(accepted > 0);
  CHECK(too_many_tensors > 0);
  CHECK(too_many_params > 0);
}
