// Chat template source → Template (jinja_ast.hpp). The lexer reproduces
// jinja2's handling of whitespace as transformers configures it
// (trim_blocks, lstrip_blocks, `-` and `+` markers, one trailing newline of
// the source dropped); the parser follows jinja2's grammar and operator
// precedence, for the statements chat templates use.
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/text/jinja/jinja_ast.hpp"
#include "runtime/text/tokenize/utf8.hpp"

namespace lathe::text::jinja {
namespace {

// Deeper nesting than this is refused rather than risking the stack.
constexpr int kMaxDepth = 200;

struct Token {
  enum class Type { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, End };
  Type type;
  std::string text;  // Data: the text; Name/Op: the spelling; String: the decoded value
  int line = 1, column = 1;
  int64_t int_value = 0;
  double float_value = 0;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

[[noreturn]] void fail(const std::string& name, int line, int column, const std::string& what) {
  throw Error(ErrorKind::BadFile, name + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + what);
}

// jinja2 reads every newline form as \n and drops one trailing newline
// (keep_trailing_newline is off).
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  Lexer(std::string source, const std::string& name) : src_(std::move(source)), name_(name) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t open = find_tag(pos_);
      std::string text = src_.substr(pos_, open - pos_);
      if (open == src_.size()) {
        push_data(std::move(text), pos_);
        break;
      }
      const char kind = src_[open + 1];  // '{', '%' or '#'
      const char marker = open + 2 < src_.size() ? src_[open + 2] : '\0';
      strip_before_tag(text, kind, marker);
      push_data(std::move(text), pos_);
      advance_to(open);
      const size_t body = open + 2 + (marker == '-' || marker == '+' ? 1 : 0);
      if (kind == '#') {
        comment(open, body);
      } else {
        tag(kind, open, body);
      }
    }
    tokens_.push_back(Token{Token::Type::End, "", line_, column_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  // `{%-` strips all whitespace before the tag. lstrip_blocks strips the
  // spaces and tabs between the start of a line and a block or comment tag
  // (not `{{`, and not after `{%+`); "start of a line" includes just after
  // a tag whose end consumed a newline.
  void strip_before_tag(std::string& text, char kind, char marker) const {
    if (marker == '-') {
      size_t end = text.size();
      while (end > 0 && is_space(text[end - 1])) --end;
      text.resize(end);
      return;
    }
    if (marker == '+' || kind == '{') return;
    const size_t newline = text.rfind('\n');
    const size_t line_start = newline == std::string::npos ? 0 : newline + 1;
    if (line_start == 0 && !line_starting_) return;
    for (size_t i = line_start; i < text.size(); ++i) {
      if (!is_space(text[i])) return;
    }
    text.resize(line_start);
  }

  void push_data(std::string text, size_t at) {
    if (text.empty()) return;
    Token t{Token::Type::Data, std::move(text), line_, column_};
    tokens_.push_back(std::move(t));
    advance_to(at + tokens_.back().text.size());
  }

  // Moves the position to `to`, counting lines and columns over the
  // skipped source (which may hold stripped whitespace).
  void advance_to(size_t to) {
    for (; pos_ < to; ++pos_) {
      if (src_[pos_] == '\n') {
        ++line_;
        column_ = 1;
      } else {
        ++column_;
      }
    }
  }

  // After a tag: `-%}` swallows all whitespace after it, a plain `%}` (or
  // `#}`) one newline (trim_blocks); `+%}` keeps it.
  void after_tag_end(size_t end, char marker, bool block) {
    size_t next = end;
    if (marker == '-') {
      while (next < src_.size() && is_space(src_[next])) ++next;
    } else if (marker != '+' && block && next < src_.size() && src_[next] == '\n') {
      ++next;
    }
    line_starting_ = next > 0 && src_[next - 1] == '\n';
    advance_to(next);
  }

  void comment(size_t open, size_t body) {
    const size_t close = src_.find("#}", body);
    if (close == std::string::npos) fail(name_, line_, column_, "comment {# … is not closed by #}");
    const char marker = close > body && src_[close - 1] == '-' ? '-' : '\0';
    (void)open;
    after_tag_end(close + 2, marker, true);
  }

  void tag(char kind, size_t open, size_t body) {
    const bool block = kind == '%';
    tokens_.push_back(Token{block ? Token::Type::BlockBegin : Token::Type::VarBegin, "", line_, column_});
    advance_to(body);
    int depth = 0;  // open brackets: `}}` inside a dict literal does not end the tag
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) advance_to(pos_ + 1);
      if (pos_ >= src_.size())
        fail(name_, tokens_.back().line, tokens_.back().column,
             std::string("tag is not closed by ") + (block ? "%}" : "}}"));
      if (depth == 0) {
        if (const auto end = tag_end(block)) {
          tokens_.push_back(Token{block ? Token::Type::BlockEnd : Token::Type::VarEnd, "", line_, column_});
          after_tag_end(pos_ + end->first, end->second, block);
          return;
        }
      }
      expression_token(depth);
    }
    (void)open;
  }

  // The length and marker of the tag end at the position, if one is there.
  std::optional<std::pair<size_t, char>> tag_end(bool block) const {
    const std::string_view rest = std::string_view(src_).substr(pos_);
    const std::string_view close = block ? "%}" : "}}";
    if (rest.starts_with(close)) return std::pair<size_t, char>{2, '\0'};
    if ((rest.starts_with("-") || (block && rest.starts_with("+"))) && rest.substr(1).starts_with(close))
      return std::pair<size_t, char>{3, rest[0]};
    return std::nullopt;
  }

  void expression_token(int& depth) {
    const char c = src_[pos_];
    Token t{Token::Type::Op, "", line_, column_};
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = pos_;
      while (end < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[end])) || src_[end] == '_')) ++end;
      t.type = Token::Type::Name;
      t.text = src_.substr(pos_, end - pos_);
      tokens_.push_back(std::move(t));
      advance_to(end);
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      number(std::move(t));
    } else if (c == '\'' || c == '"') {
      string_literal(std::move(t));
    } else {
      static constexpr std::string_view kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%",
                                                  "~",  "<",  ">",  "(",  ")",  "[", "]", "{", "}", ",", ".",
                                                  ":",  "|",  "="};
      for (std::string_view op : kOps) {
        if (std::string_view(src_).substr(pos_).starts_with(op)) {
          if (op == "(" || op == "[" || op == "{") ++depth;
          if ((op == ")" || op == "]" || op == "}") && depth > 0) --depth;
          t.text = std::string(op);
          tokens_.push_back(std::move(t));
          advance_to(pos_ + op.size());
          return;
        }
      }
      fail(name_, line_, column_, "unexpected character '" + std::string(1, c) + "'");
    }
  }

  // Integers and floats as jinja2 reads them: 42, 1_000, 3.14, 1e-3, 2.5E+4.
  void number(Token t) {
    size_t end = pos_;
    auto digits = [&] {
      while (end < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[end])) || src_[end] == '_')) ++end;
    };
    digits();
    bool is_float = false;
    if (end + 1 < src_.size() && src_[end] == '.' && std::isdigit(static_cast<unsigned char>(src_[end + 1]))) {
      is_float = true;
      ++end;
      digits();
    }
    if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t e = end + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) {
        is_float = true;
        end = e;
        digits();
      }
    }
    std::string text;
    for (size_t i = pos_; i < end; ++i) {
      if (src_[i] != '_') text += src_[i];
    }
    try {
      if (is_float) {
        t.type = Token::Type::Float;
        t.float_value = std::stod(text);
      } else {
        t.type = Token::Type::Int;
        t.int_value = std::stoll(text);
      }
    } catch (const std::exception&) {
      fail(name_, line_, column_, "number " + text + " is out of range");
    }
    t.text = std::move(text);
    tokens_.push_back(std::move(t));
    advance_to(end);
  }

  // A quoted string with Python's escapes (jinja2 decodes them with
  // "unicode-escape"): \n \t \r \\ \' \" \a \b \f \v \0–\777 \xhh \uhhhh
  // \Uhhhhhhhh, a backslash before a newline joins the lines; any other
  // backslash stays as it is.
  void string_literal(Token t) {
    const char quote = src_[pos_];
    size_t i = pos_ + 1;
    std::string value;
    while (true) {
      if (i >= src_.size()) fail(name_, t.line, t.column, "string is not closed");
      const char c = src_[i];
      if (c == quote) break;
      if (c != '\\' || i + 1 >= src_.size()) {
        value += c;
        ++i;
        continue;
      }
      i = escape(i, value, t);
    }
    t.type = Token::Type::String;
    t.text = std::move(value);
    tokens_.push_back(std::move(t));
    advance_to(i + 1);
  }

  // Decodes the escape at src_[i] ('\\') into `value`; returns the index after it.
  size_t escape(size_t i, std::string& value, const Token& t) const {
    const char e = src_[i + 1];
    switch (e) {
      case 'n': value += '\n'; return i + 2;
      case 't': value += '\t'; return i + 2;
      case 'r': value += '\r'; return i + 2;
      case 'a': value += '\a'; return i + 2;
      case 'b': value += '\b'; return i + 2;
      case 'f': value += '\f'; return i + 2;
      case 'v': value += '\v'; return i + 2;
      case '\\': value += '\\'; return i + 2;
      case '\'': value += '\''; return i + 2;
      case '"': value += '"'; return i + 2;
      case '\n': return i + 2;
      default: break;
    }
    if (e >= '0' && e <= '7') {
      size_t end = i + 1;
      unsigned code = 0;
      while (end < src_.size() && end < i + 4 && src_[end] >= '0' && src_[end] <= '7') code = code * 8 + (src_[end++] - '0');
      utf8_append(value, static_cast<char32_t>(code));
      return end;
    }
    if (static_cast<unsigned char>(e) >= 0x80) {
      // jinja2 escapes non-ASCII text as \xhh / \uhhhh / \Uhhhhhhhh before
      // decoding, so a backslash and such a character come out as the text
      // of that escape ("\é" reads "\xe9").
      const size_t len = utf8_unit_length(src_, i + 1);
      const size_t n = utf8_sequence_length(src_, i + 1);
      const char32_t cp = n ? utf8_decode(src_, i + 1, n) : 0xFFFD;
      char spelled[16];
      std::snprintf(spelled, sizeof spelled, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", static_cast<unsigned>(cp));
      value += spelled;
      return i + 1 + len;
    }
    if (e == 'N') fail(name_, t.line, t.column, "\\N{…} escapes are not supported");
    const size_t width = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (width == 0) {
      value += '\\';
      return i + 1;
    }
    uint32_t code = 0;
    for (size_t k = 0; k < width; ++k) {
      const size_t at = i + 2 + k;
      if (at >= src_.size() || !std::isxdigit(static_cast<unsigned char>(src_[at])))
        fail(name_, t.line, t.column, "truncated \\" + std::string(1, e) + " escape in string");
      const char h = src_[at];
      code = code * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
    }
    if (code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) fail(name_, t.line, t.column, "invalid character escape in string");
    utf8_append(value, static_cast<char32_t>(code));
    return i + 2 + width;
  }

  std::string src_;
  const std::string& name_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int line_ = 1, column_ = 1;
  bool line_starting_ = true;
};

// ---------------------------------------------------------------------------

class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& name) : toks_(std::move(tokens)), name_(name) {}

  Body parse_all() {
    std::string end_tag;
    Body body = parse_body({}, end_tag);
    return body;
  }

 private:
  const Token& peek(size_t ahead = 0) const { return toks_[std::min(pos_ + ahead, toks_.size() - 1)]; }
  const Token& next() { return toks_[pos_ < toks_.size() - 1 ? pos_++ : pos_]; }
  bool at_op(std::string_view op) const { return peek().type == Token::Type::Op && peek().text == op; }
  bool at_name(std::string_view n) const { return peek().type == Token::Type::Name && peek().text == n; }

  [[noreturn]] void error_at(const Token& t, const std::string& what) const { fail(name_, t.line, t.column, what); }

  std::string describe(const Token& t) const {
    switch (t.type) {
      case Token::Type::End: return "the end of the template";
      case Token::Type::BlockEnd: return "the end of the tag";
      case Token::Type::VarEnd: return "'}}'";
      case Token::Type::String: return "a string";
      case Token::Type::Data: return "text";
      default: return "'" + t.text + "'";
    }
  }

  void expect_op(std::string_view op) {
    if (!at_op(op)) error_at(peek(), "expected '" + std::string(op) + "', found " + describe(peek()));
    next();
  }
  std::string expect_name() {
    if (peek().type != Token::Type::Name) error_at(peek(), "expected a name, found " + describe(peek()));
    return next().text;
  }
  void expect_block_end() {
    if (peek().type != Token::Type::BlockEnd) error_at(peek(), "expected the end of the tag, found " + describe(peek()));
    next();
  }

  struct DepthGuard {
    DepthGuard(Parser& p, const Token& t) : parser(p) {
      if (++parser.depth_ > kMaxDepth) parser.error_at(t, "template nests deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    ~DepthGuard() { --parser.depth_; }
    Parser& parser;
  };

  // Statements until one of `ends` (a block tag such as "endif"); its name
  // is left in end_tag and the parser stands after that tag's name.
  Body parse_body(const std::vector<std::string_view>& ends, std::string& end_tag) {
    const Token& start = peek();
    DepthGuard guard(*this, start);
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.type == Token::Type::End) {
        if (!ends.empty()) error_at(t, "unexpected end of the template: expected '" + std::string(ends.front()) + "'");
        return body;
      }
      if (t.type == Token::Type::Data) {
        body.push_back(text_stmt(next()));
      } else if (t.type == Token::Type::VarBegin) {
        body.push_back(output_stmt());
      } else if (t.type == Token::Type::BlockBegin) {
        const Token& tag = peek(1);
        if (tag.type == Token::Type::Name) {
          for (std::string_view e : ends) {
            if (tag.text == e) {
              next();
              next();
              end_tag = tag.text;
              return body;
            }
          }
        }
        body.push_back(block_stmt());
      } else {
        error_at(t, "unexpected " + describe(t));
      }
    }
  }

  StmtPtr make(Stmt::Kind kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  StmtPtr text_stmt(const Token& t) {
    auto s = make(Stmt::Kind::Text, t.line);
    s->text = t.text;
    return s;
  }

  StmtPtr output_stmt() {
    const Token& begin = next();
    auto s = make(Stmt::Kind::Output, begin.line);
    s->exprs.push_back(expression());
    if (peek().type != Token::Type::VarEnd) error_at(peek(), "expected '}}', found " + describe(peek()));
    next();
    return s;
  }

  StmtPtr block_stmt() {
    next();  // {%
    const Token& tag = peek();
    if (tag.type != Token::Type::Name) error_at(tag, "expected a tag name, found " + describe(tag));
    const std::string name = next().text;
    if (name == "if") return if_stmt(tag);
    if (name == "for") return for_stmt(tag);
    if (name == "set") return set_stmt(tag);
    if (name == "macro") return macro_stmt(tag);
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) error_at(tag, "'" + name + "' outside a for loop");
      expect_block_end();
      return make(name == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, tag.line);
    }
    if (name == "generation") {
      expect_block_end();
      auto s = make(Stmt::Kind::Scope, tag.line);
      std::string end;
      s->bodies.push_back(parse_body({"endgeneration"}, end));
      expect_block_end();
      return s;
    }
    static constexpr std::string_view kEnds[] = {"endif", "endfor", "endmacro", "endset", "else", "elif", "endgeneration"};
    for (std::string_view e : kEnds) {
      if (name == e) error_at(tag, "unexpected '" + name + "' with no open block it could close");
    }
    error_at(tag, "unknown tag '" + name + "'");
  }

  StmtPtr if_stmt(const Token& tag) {
    auto s = make(Stmt::Kind::If, tag.line);
    s->exprs.push_back(expression());
    expect_block_end();
    while (true) {
      std::string end;
      s->bodies.push_back(parse_body({"elif", "else", "endif"}, end));
      if (end == "elif") {
        s->exprs.push_back(expression());
        expect_block_end();
      } else if (end == "else") {
        expect_block_end();
        s->bodies.push_back(parse_body({"endif"}, end));
        expect_block_end();
        return s;
      } else {
        expect_block_end();
        return s;
      }
    }
  }

  // `a` or `a, b` (for and set targets).
  std::vector<std::string> targets() {
    std::vector<std::string> names;
    const bool parens = at_op("(");
    if (parens) next();
    names.push_back(expect_name());
    while (at_op(",")) {
      next();
      names.push_back(expect_name());
    }
    if (parens) expect_op(")");
    return names;
  }

  StmtPtr for_stmt(const Token& tag) {
    auto s = make(Stmt::Kind::For, tag.line);
    s->targets = targets();
    if (!at_name("in")) error_at(peek(), "expected 'in', found " + describe(peek()));
    next();
    // The iterable is an expression without a ternary: `if` starts the filter.
    s->exprs.push_back(or_expr());
    if (at_name("if")) {
      next();
      s->exprs.push_back(expression());
    }
    if (at_name("recursive")) error_at(peek(), "recursive for loops are not supported");
    expect_block_end();
    ++loop_depth_;
    std::string end;
    s->bodies.push_back(parse_body({"else", "endfor"}, end));
    --loop_depth_;
    if (end == "else") {
      expect_block_end();
      s->bodies.push_back(parse_body({"endfor"}, end));
    } else {
      s->bodies.emplace_back();
    }
    expect_block_end();
    return s;
  }

  StmtPtr set_stmt(const Token& tag) {
    std::vector<std::string> names = targets();
    std::string attr;
    if (names.size() == 1 && at_op(".")) {
      next();
      attr = expect_name();
    }
    if (at_op("=")) {
      next();
      auto s = make(Stmt::Kind::Set, tag.line);
      s->targets = std::move(names);
      s->attr = std::move(attr);
      s->exprs.push_back(tuple_or_expression());
      expect_block_end();
      return s;
    }
    if (names.size() != 1 || !attr.empty()) error_at(peek(), "expected '=', found " + describe(peek()));
    if (peek().type == Token::Type::Op && peek().text == "|") error_at(peek(), "filtered set blocks are not supported");
    expect_block_end();
    auto s = make(Stmt::Kind::SetBlock, tag.line);
    s->targets = std::move(names);
    std::string end;
    s->bodies.push_back(parse_body({"endset"}, end));
    expect_block_end();
    return s;
  }

  StmtPtr macro_stmt(const Token& tag) {
    auto s = make(Stmt::Kind::Macro, tag.line);
    s->text = expect_name();
    expect_op("(");
    while (!at_op(")")) {
      s->targets.push_back(expect_name());
      if (at_op("=")) {
        next();
        s->exprs.push_back(expression());
      } else {
        s->exprs.push_back(nullptr);
      }
      if (!at_op(",")) break;
      next();
    }
    expect_op(")");
    expect_block_end();
    const int loops = loop_depth_;
    loop_depth_ = 0;  // break inside a macro does not reach a loop around the macro
    std::string end;
    s->bodies.push_back(parse_body({"endmacro"}, end));
    loop_depth_ = loops;
    if (peek().type == Token::Type::Name && peek().text == s->text) next();
    expect_block_end();
    return s;
  }

  // --- expressions, in jinja2's precedence order ----------------------------

  ExprPtr node(Expr::Kind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    return e;
  }

  // `a, b` without brackets is a tuple (the right side of set).
  ExprPtr tuple_or_expression() {
    const Token& start = peek();
    ExprPtr first = expression();
    if (!at_op(",")) return first;
    auto list = node(Expr::Kind::List, start);
    list->tuple = true;
    list->args.push_back(std::move(first));
    while (at_op(",")) {
      next();
      if (peek().type == Token::Type::BlockEnd) break;
      list->args.push_back(expression());
    }
    return list;
  }

  ExprPtr expression() {
    const Token& start = peek();
    DepthGuard guard(*this, start);
    ExprPtr value = or_expr();
    if (!at_name("if")) return value;
    next();
    auto cond = node(Expr::Kind::Cond, start);
    cond->args.push_back(std::move(value));
    cond->args.push_back(or_expr());
    if (at_name("else")) {
      next();
      cond->args.push_back(expression());
    } else {
      cond->args.push_back(nullptr);
    }
    return cond;
  }

  ExprPtr binary(const Token& at, std::string op, ExprPtr left, ExprPtr right) {
    auto e = node(Expr::Kind::Binary, at);
    e->name = std::move(op);
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return e;
  }

  ExprPtr or_expr() {
    ExprPtr left = and_expr();
    while (at_name("or")) {
      const Token& op = next();
      left = binary(op, "or", std::move(left), and_expr());
    }
    return left;
  }

  ExprPtr and_expr() {
    ExprPtr left = not_expr();
    while (at_name("and")) {
      const Token& op = next();
      left = binary(op, "and", std::move(left), not_expr());
    }
    return left;
  }

  ExprPtr not_expr() {
    if (!at_name("not")) return compare();
    const Token& op = next();
    DepthGuard guard(*this, op);
    auto e = node(Expr::Kind::Unary, op);
    e->name = "not";
    e->args.push_back(not_expr());
    return e;
  }

  ExprPtr compare() {
    const Token& start = peek();
    ExprPtr first = math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (peek().type == Token::Type::Op &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" || peek().text == "<=" ||
           peek().text == ">" || peek().text == ">=")) {
        op = next().text;
      } else if (at_name("in")) {
        next();
        op = "in";
      } else if (at_name("not") && peek(1).type == Token::Type::Name && peek(1).text == "in") {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      if (!cmp) {
        cmp = node(Expr::Kind::Compare, start);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr math1() {
    ExprPtr left = concat();
    while (at_op("+") || at_op("-")) {
      const Token& op = next();
      left = binary(op, op.text, std::move(left), concat());
    }
    return left;
  }

  ExprPtr concat() {
    ExprPtr left = math2();
    while (at_op("~")) {
      const Token& op = next();
      left = binary(op, "~", std::move(left), math2());
    }
    return left;
  }

  ExprPtr math2() {
    ExprPtr left = power();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      const Token& op = next();
      left = binary(op, op.text, std::move(left), power());
    }
    return left;
  }

  ExprPtr power() {
    ExprPtr left = unary(true);
    while (at_op("**")) {
      const Token& op = next();
      left = binary(op, "**", std::move(left), unary(true));
    }
    return left;
  }

  // As in jinja2, `-x | f` is (-x) | f, while `a + b | f` is a + (b | f).
  ExprPtr unary(bool with_filter) {
    if (at_op("-") || at_op("+")) {
      const Token& op = next();
      DepthGuard guard(*this, op);
      auto e = node(Expr::Kind::Unary, op);
      e->name = op.text;
      e->args.push_back(unary(false));
      return with_filter ? filters(std::move(e)) : std::move(e);
    }
    ExprPtr e = postfix(primary());
    return with_filter ? filters(std::move(e)) : std::move(e);
  }

  ExprPtr primary() {
    const Token& t = peek();
    DepthGuard guard(*this, t);
    switch (t.type) {
      case Token::Type::Name: return name_or_constant(next());
      case Token::Type::String: {
        auto e = node(Expr::Kind::Literal, t);
        std::string s = next().text;
        while (peek().type == Token::Type::String) s += next().text;  // adjacent strings join, as in Python
        e->value = Value::string(std::move(s));
        return e;
      }
      case Token::Type::Int: {
        auto e = node(Expr::Kind::Literal, t);
        e->value = Value::integer(next().int_value);
        return e;
      }
      case Token::Type::Float: {
        auto e = node(Expr::Kind::Literal, t);
        e->value = Value::number(next().float_value);
        return e;
      }
      case Token::Type::Op:
        if (t.text == "(") return parenthesized();
        if (t.text == "[") return list_literal();
        if (t.text == "{") return dict_literal();
        break;
      default: break;
    }
    error_at(t, "expected an expression, found " + describe(t));
  }

  ExprPtr name_or_constant(const Token& t) {
    auto e = node(Expr::Kind::Literal, t);
    if (t.text == "true" || t.text == "True") {
      e->value = Value::boolean(true);
    } else if (t.text == "false" || t.text == "False") {
      e->value = Value::boolean(false);
    } else if (t.text == "none" || t.text == "None") {
      e->value = Value::none();
    } else {
      e->kind = Expr::Kind::Name;
      e->name = t.text;
    }
    return e;
  }

  ExprPtr parenthesized() {
    const Token& open = next();
    if (at_op(")")) {
      next();
      auto e = node(Expr::Kind::List, open);
      e->tuple = true;
      return e;
    }
    ExprPtr first = expression();
    if (at_op(")")) {
      next();
      return first;
    }
    auto e = node(Expr::Kind::List, open);
    e->tuple = true;
    e->args.push_back(std::move(first));
    while (at_op(",")) {
      next();
      if (at_op(")")) break;
      e->args.push_back(expression());
    }
    expect_op(")");
    return e;
  }

  ExprPtr list_literal() {
    auto e = node(Expr::Kind::List, next());
    while (!at_op("]")) {
      e->args.push_back(expression());
      if (!at_op(",")) break;
      next();
    }
    expect_op("]");
    return e;
  }

  ExprPtr dict_literal() {
    auto e = node(Expr::Kind::Dict, next());
    while (!at_op("}")) {
      e->args.push_back(expression());
      expect_op(":");
      e->args.push_back(expression());
      if (!at_op(",")) break;
      next();
    }
    expect_op("}");
    return e;
  }

  // .name, .0, [index], [a:b:c], (call)
  ExprPtr postfix(ExprPtr e) {
    while (true) {
      if (at_op(".")) {
        const Token& dot = next();
        auto a = node(Expr::Kind::Attr, dot);
        if (peek().type == Token::Type::Int) {
          // x.0 is x[0] in jinja2.
          a->kind = Expr::Kind::Item;
          a->args.push_back(std::move(e));
          auto index = node(Expr::Kind::Literal, peek());
          index->value = Value::integer(next().int_value);
          a->args.push_back(std::move(index));
        } else {
          a->name = expect_name();
          a->args.push_back(std::move(e));
        }
        e = std::move(a);
      } else if (at_op("[")) {
        e = subscript(std::move(e));
      } else if (at_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr target) {
    const Token& open = next();
    ExprPtr parts[3];
    int colons = 0;
    while (true) {
      if (at_op(":")) {
        if (++colons > 2) error_at(peek(), "a slice has at most two ':'");
        next();
        continue;
      }
      if (at_op("]")) break;
      if (parts[colons]) error_at(peek(), "expected ']' or ':', found " + describe(peek()));
      parts[colons] = expression();
    }
    next();
    if (colons == 0 && !parts[0]) error_at(open, "expected an index inside []");
    auto e = node(colons ? Expr::Kind::Slice : Expr::Kind::Item, open);
    e->args.push_back(std::move(target));
    e->args.push_back(std::move(parts[0]));
    if (colons) {
      e->args.push_back(std::move(parts[1]));
      e->args.push_back(std::move(parts[2]));
    }
    return e;
  }

  // Arguments of a call, filter or test: positional then name=value.
  void arguments(Expr& e) {
    expect_op("(");
    while (!at_op(")")) {
      if (peek().type == Token::Type::Name && peek(1).type == Token::Type::Op && peek(1).text == "=") {
        std::string key = next().text;
        next();
        e.kwargs.emplace_back(std::move(key), expression());
      } else {
        if (!e.kwargs.empty()) error_at(peek(), "a positional argument follows a keyword argument");
        e.args.push_back(expression());
      }
      if (!at_op(",")) break;
      next();
    }
    expect_op(")");
  }

  ExprPtr call(ExprPtr callee) {
    auto e = node(Expr::Kind::Call, peek());
    e->args.push_back(std::move(callee));
    arguments(*e);
    return e;
  }

  // | filter, is test, and calls after them.
  ExprPtr filters(ExprPtr e) {
    while (true) {
      if (at_op("|")) {
        const Token& bar = next();
        auto f = node(Expr::Kind::Filter, bar);
        f->name = expect_name();
        while (at_op(".")) {  // dotted filter names are looked up whole
          next();
          f->name += "." + expect_name();
        }
        f->args.push_back(std::move(e));
        if (at_op("(")) arguments(*f);
        e = std::move(f);
      } else if (at_name("is")) {
        e = test(next(), std::move(e));
      } else if (at_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr test(const Token& is, ExprPtr subject) {
    auto t = node(Expr::Kind::Test, is);
    if (at_name("not")) {
      next();
      t->negated = true;
    }
    t->name = expect_name();
    while (at_op(".")) {
      next();
      t->name += "." + expect_name();
    }
    t->args.push_back(std::move(subject));
    if (at_op("(")) {
      arguments(*t);
    } else if (takes_bare_argument()) {
      // `is divisibleby 3`, `is sameas false`: one argument without parentheses.
      t->args.push_back(postfix(primary()));
    }
    return t;
  }

  bool takes_bare_argument() const {
    const Token& t = peek();
    if (t.type == Token::Type::String || t.type == Token::Type::Int || t.type == Token::Type::Float) return true;
    if (t.type == Token::Type::Op) return t.text == "[" || t.text == "{";
    if (t.type != Token::Type::Name) return false;
    static constexpr std::string_view kStop[] = {"else", "or", "and", "if", "in", "not", "is"};
    for (std::string_view s : kStop) {
      if (t.text == s) return false;
    }
    return true;
  }

  std::vector<Token> toks_;
  const std::string& name_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Template parse_template(std::string_view source, const std::string& name) {
  Template t;
  t.name = name;
  std::vector<Token> tokens = Lexer(normalize_newlines(source), t.name).run();
  t.body = Parser(std::move(tokens), t.name).parse_all();
  return t;
}

}  // namespace lathe::text::jinja
