// Constrained decoding (issue 47): a grammar the output must follow, and at
// each step the tokens that keep the output a prefix of a document it
// accepts.
//
// The grammar is GBNF, llama.cpp's dialect of BNF (its server's `grammar`
// field): rules `name ::= alternatives`, alternatives separated by `|`,
// sequences of literals ("…" with \n \r \t \\ \" \[ \] \xHH \uHHHH
// \UHHHHHHHH escapes), character classes ([a-z0-9_], [^"\\], with the same
// escapes), `.` (any character), rule names, groups `( … )` and the
// repetitions `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`; `#` comments to the end
// of the line; newlines end a rule only where its alternatives are complete.
// The document is the rule `root`. Text is matched by Unicode code point, a
// grammar's literals and classes in UTF-8; a token may end inside a code
// point (byte-level BPE splits them), the rest following in the next token.
//
// A grammar is untrusted input (a request's `grammar` field, or what a
// request's JSON schema compiles to): parse() bounds its size, its nesting
// and its repetitions, refuses undefined rules and left recursion (which
// would make matching loop), and the matcher bounds the stacks it keeps
// (Limits). Everything here is host code; no Vulkan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::grammar {

struct Limits {
  size_t max_bytes = 256 * 1024;  // the grammar's text
  int max_depth = 64;             // nesting of groups
  size_t max_rules = 4096;        // rules, those repetitions and groups add included
  size_t max_elements = 1 << 18;  // elements of every rule's alternatives, repetitions expanded
  int64_t max_repeat = 1024;      // m and n of {m,n}
  size_t max_stacks = 4096;       // the matcher's live parse stacks (ambiguity); past it a step is refused
};

// A parsed grammar: immutable, shared by every matcher of it.
class Grammar {
 public:
  // Parses GBNF text. Throws lathe::Error(InvalidArgument) reading
  // "NAME:LINE:COLUMN: what is wrong" (an unexpected character, an
  // unterminated literal or class, a bad escape, a rule used but never
  // defined (naming it), no `root`, left recursion (naming the rule), a
  // limit passed (naming it and its value)).
  static std::shared_ptr<const Grammar> parse(std::string_view gbnf, const std::string& name,
                                              const Limits& limits = {});

  size_t rules() const;
  const Limits& limits() const;

  struct Impl;
  explicit Grammar(std::unique_ptr<Impl> impl);
  ~Grammar();
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Where a document stands: the parse stacks that remain after the text fed
// so far (and the bytes of a code point a token left unfinished). Copyable:
// a copy is an independent state.
class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const Grammar> grammar);

  // Feeds `bytes` (UTF-8, possibly ending inside a code point). All or
  // nothing: false, leaving the state as it was, when some prefix of them
  // is not a prefix of any document (or the stacks would pass
  // max_stacks).
  bool accept(std::string_view bytes);
  // The text fed so far is a whole document (the end of generation may come).
  bool can_end() const;
  // Some further byte is accepted (false: the document is complete and
  // nothing may follow it).
  bool can_continue() const;
  // The live parse stacks (after deduplication): how ambiguous the grammar
  // is here; at most limits().max_stacks.
  size_t stacks() const;

  const Grammar& grammar() const { return *grammar_; }

  struct State;

 private:
  friend class Vocabulary;  // allowed() starts from state_
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const State> state_;  // shared between copies until one moves on
};

// A tokenizer's vocabulary, prepared once for every matcher: each token's
// bytes in a trie, so that one walk decides every token.
class Vocabulary {
 public:
  // tokens[id]: what the token decodes to. An empty string marks a token
  // that is never allowed by the grammar (special and control tokens: the
  // caller allows the end of generation itself where can_end()).
  explicit Vocabulary(std::span<const std::string> tokens);
  ~Vocabulary();
  Vocabulary(Vocabulary&&) noexcept;
  Vocabulary& operator=(Vocabulary&&) noexcept;

  int32_t size() const;

  // allowed[id] = 1 where matcher.accept(tokens[id]) would succeed, else 0
  // (resized to size()). Walks the trie once, dropping a branch when no
  // parse stack survives its bytes.
  void allowed(const Matcher& matcher, std::vector<uint8_t>& allowed) const;

  struct Trie;

 private:
  std::unique_ptr<Trie> trie_;
};

}  // namespace lathe::grammar
