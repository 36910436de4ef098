// libFuzzer target for the grammar engine of constrained decoding
// (runtime/grammar/): the input is a GBNF grammar, then a NUL byte, then a
// text. The grammar must parse or throw lathe::Error(InvalidArgument)
// whose message names the file and holds no control byte. A parsed
// grammar's matcher is fed the text in pieces of sizes drawn from the
// input (so a piece may end inside a code point); at each step
// Vocabulary::allowed() over a small vocabulary (single bytes, code points
// of each length, cut ones, the text's own pieces) must be what accept()
// says token by token, a refused piece must leave the matcher as it was,
// and the stacks stay within max_stacks. A crash, a sanitizer report, a
// hang, any other exception or a broken promise is a finding.
//
// Seeds: tests/data/grammar/*.gbnf. `scripts/fuzz -t 300 grammar` fuzzes it
// alone for five minutes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz.hpp"
#include "runtime/error.hpp"
#include "runtime/grammar/grammar.hpp"

using namespace lathe;
using lathe::fuzz::finding;
using namespace lathe::grammar;

namespace {

// Smaller than the defaults, so that one input stays fast.
constexpr Limits kLimits{.max_bytes = 16 * 1024,
                         .max_depth = 16,
                         .max_rules = 256,
                         .max_elements = 1 << 14,
                         .max_repeat = 64,
                         .max_stacks = 256};

const std::vector<std::string> kTokens = {
    "a", "b", "z", "A", "0", "1", "9", " ", "\n", "\t", "\"", "\\", "{", "}", "[", "]", ",", ":", "-", ".",
    std::string(1, '\0'), "\x7F", "\x80", "\xBF", "\xC3", "\xA9", "\xE4", "\xB8", "\xAD", "\xF0", "\x9F", "\x98",
    "\xED", "\xFF", "é", "中", "😀", "{\"", "\":", "true", "null", "12", "\xB8\xAD", "",
    // A family under one prefix: the walk's skip of a whole branch.
    "aa", "ab", "a1", "a ", "a\"", "a\\", "aé", "a中", "a\xC3", "a\xA9", "a\n", "a}", "abc", "ab\xE4\xB8"};

struct Snapshot {
  bool can_end, can_continue;
  size_t stacks;
  bool operator==(const Snapshot&) const = default;
};

Snapshot snapshot(const Matcher& m) { return {m.can_end(), m.can_continue(), m.stacks()}; }

void check_allowed(const Vocabulary& vocab, const std::vector<std::string>& tokens, const Matcher& m) {
  std::vector<uint8_t> allowed;
  vocab.allowed(m, allowed);
  if (allowed.size() != tokens.size()) finding("allowed() is not the vocabulary's size");
  bool any = false;
  for (size_t id = 0; id < tokens.size(); ++id) {
    Matcher copy = m;
    const bool accepted = !tokens[id].empty() && copy.accept(tokens[id]);
    if ((allowed[id] != 0) != accepted) finding("allowed() is not accept() for a token");
    any = any || accepted;
  }
  if (any && !m.can_continue()) finding("a token accepted where can_continue() is false");
}

}  // namespace

void lathe::fuzz::grammar(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view gbnf = input.substr(0, nul);
  const std::string_view text = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1, 512);
  std::shared_ptr<const Grammar> g;
  try {
    g = Grammar::parse(gbnf, "fuzz.gbnf", kLimits);
  } catch (const Error& e) {
    const std::string_view message = e.what();
    if (e.kind() != ErrorKind::InvalidArgument) finding("an error that is not InvalidArgument");
    if (!message.starts_with("fuzz.gbnf:")) finding("a message that does not name the grammar");
    if (std::any_of(message.begin(), message.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }))
      finding("a message with a control byte (the grammar echoed raw)");
    return;
  }
  if (g->rules() == 0 || g->rules() > kLimits.max_rules) finding("a grammar with no rules or too many");

  // The pieces: sizes 1–8 drawn from the text's bytes.
  std::vector<std::string> pieces;
  uint32_t draw = 2166136261u;
  for (size_t i = 0; i < text.size();) {
    draw = (draw ^ static_cast<uint8_t>(text[i])) * 16777619u;
    const size_t n = std::min<size_t>(1 + (draw >> 24) % 8, text.size() - i);
    pieces.emplace_back(text.substr(i, n));
    i += n;
  }
  std::vector<std::string> tokens = kTokens;
  for (size_t i = 0; i < pieces.size() && i < 8; ++i) tokens.push_back(pieces[i]);
  const Vocabulary vocab(tokens);

  Matcher m(g);
  check_allowed(vocab, tokens, m);
  for (const std::string& piece : pieces) {
    const Snapshot before = snapshot(m);
    Matcher copy = m;
    if (!m.accept(piece)) {
      if (snapshot(m) != before) finding("a refused piece changed the matcher");
      continue;  // the rest of the text, from where it was
    }
    if (m.stacks() == 0 || m.stacks() > kLimits.max_stacks) finding("stacks outside [1, max_stacks]");
    if (snapshot(copy) != before) finding("accept() on a matcher changed its copy");
    check_allowed(vocab, tokens, m);
  }
}

LATHE_FUZZ_TARGET(lathe::fuzz::grammar)
