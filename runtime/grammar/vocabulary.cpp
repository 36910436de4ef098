// Vocabulary: the tokens' bytes in a trie, walked once per allowed() with
// the engine's cursor per depth; a branch no stack survives is skipped
// whole, and so is one whose bytes all lead the stacks the same way at
// each depth (text inside a JSON string: back to the same set; inside a
// bounded string, one set a depth): its tokens are decided by their depth
// alone, without a step.
//
// The trie is stored in depth-first order, so that the walk is a loop over
// one array: node i is one byte at depth `depth` under the node before it
// of depth - 1; its subtree ends before node `end`; the tokens that are
// exactly its path are ids[nodes[i - 1].ids_end .. ids_end). A node with
// many below it has a summary of the bytes there.
#include <algorithm>
#include <numeric>

#include "runtime/error.hpp"
#include "runtime/grammar/engine.hpp"
#include "runtime/grammar/grammar.hpp"

namespace lathe::grammar {

struct Vocabulary::Trie {
  static constexpr uint32_t kNone = UINT32_MAX;
  // Nodes with at least this many below them are summarized.
  static constexpr uint32_t kSummarized = 8;
  struct Node {
    uint32_t end;
    uint32_t ids_end;
    uint32_t depth;    // 1 for a token's first byte
    uint32_t summary;  // an index into summaries, or kNone
    uint8_t byte;
  };
  // The bytes below a node: ASCII ones (bit b), whether any other, and
  // whether what is below, read from this node, is all well-formed UTF-8
  // (some of it cut short), the node's own path ending a code point; how
  // deep it goes.
  struct Summary {
    uint64_t ascii[2] = {0, 0};
    bool other = false;
    bool utf8 = true;
    uint32_t height = 0;
  };
  int32_t size = 0;
  std::vector<Node> nodes;
  std::vector<int32_t> ids;
  std::vector<Summary> summaries;
  uint32_t max_depth = 0;

  void summarize(const std::vector<uint8_t>& utf8_at);
};

// utf8_at[i]: 1 where node i's path is well-formed UTF-8 ending a code
// point, 2 where it is not well-formed. A pass from the last node back:
// a node's children come before it, their contributions gathered by depth.
void Vocabulary::Trie::summarize(const std::vector<uint8_t>& utf8_at) {
  struct Below {
    uint64_t ascii[2] = {0, 0};
    bool other = false, invalid = false;
    uint32_t height = 0;
  };
  std::vector<Below> gathered(max_depth + 1);  // [d]: from the children of the next node of depth d
  for (size_t i = nodes.size(); i-- > 0;) {
    Node& n = nodes[i];
    const Below below = gathered[n.depth];
    gathered[n.depth] = {};
    if (n.end - i - 1 >= kSummarized) {
      n.summary = static_cast<uint32_t>(summaries.size());
      summaries.push_back(
          {{below.ascii[0], below.ascii[1]}, below.other, utf8_at[i] == 1 && !below.invalid, below.height});
    }
    Below& up = gathered[n.depth - 1];
    up.ascii[0] |= below.ascii[0];
    up.ascii[1] |= below.ascii[1];
    if (n.byte < 0x80) up.ascii[n.byte >> 6] |= uint64_t{1} << (n.byte & 63);
    up.other = up.other || below.other || n.byte >= 0x80;
    up.invalid = up.invalid || below.invalid || utf8_at[i] == 2;
    up.height = std::max(up.height, below.height + 1);
  }
}

Vocabulary::Vocabulary(std::span<const std::string> tokens) : trie_(std::make_unique<Trie>()) {
  size_t bytes = 0;
  for (const std::string& token : tokens) bytes += token.size();
  if (tokens.size() > static_cast<size_t>(INT32_MAX) || bytes >= UINT32_MAX)
    throw Error(ErrorKind::InvalidArgument, "a vocabulary of more than 2^31 tokens or 4 GiB of token bytes");
  Trie& t = *trie_;
  t.size = static_cast<int32_t>(tokens.size());
  std::vector<int32_t> order;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (!tokens[i].empty()) order.push_back(static_cast<int32_t>(i));
  // Sorted by bytes (unsigned), a token's nodes come after its prefix's:
  // the trie is built in depth-first order.
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return std::string_view(tokens[static_cast<size_t>(a)]) < std::string_view(tokens[static_cast<size_t>(b)]);
  });
  std::vector<uint32_t> path;  // the nodes of the previous token
  std::vector<int64_t> path_utf8{0};  // [d]: after d bytes of it, a utf8::Partial, or -1 where not well-formed
  std::vector<uint8_t> utf8_at;
  std::string_view previous;
  std::vector<Trie::Node>& nodes = t.nodes;
  for (const int32_t id : order) {
    const std::string_view s = tokens[static_cast<size_t>(id)];
    size_t common = 0;
    while (common < std::min(s.size(), previous.size()) && s[common] == previous[common]) ++common;
    for (; path.size() > common; path.pop_back()) nodes[path.back()].end = static_cast<uint32_t>(nodes.size());
    path_utf8.resize(common + 1);
    for (size_t d = common; d < s.size(); ++d) {
      const uint8_t b = static_cast<uint8_t>(s[d]);
      path.push_back(static_cast<uint32_t>(nodes.size()));
      nodes.push_back({0, 0, static_cast<uint32_t>(d + 1), Trie::kNone, b});
      const int64_t before = path_utf8.back();
      const int64_t after = before < 0 ? -1 : utf8::next(static_cast<utf8::Partial>(before), b);
      path_utf8.push_back(after);
      utf8_at.push_back(after == 0 ? 1 : after < 0 ? 2 : 0);
    }
    ++nodes[path.back()].ids_end;  // a count until the sum below
    t.max_depth = std::max(t.max_depth, static_cast<uint32_t>(s.size()));
    previous = s;
  }
  for (; !path.empty(); path.pop_back()) nodes[path.back()].end = static_cast<uint32_t>(nodes.size());
  // The ids in the order of their nodes, as `order` already is.
  uint32_t sum = 0;
  for (Trie::Node& n : nodes) n.ids_end = sum += n.ids_end;
  t.ids = std::move(order);
  t.summarize(utf8_at);
}

namespace {

// Below a node whose cursor is `set` (between code points): when every
// byte there leads the stacks the same way at each depth, how deep the
// nodes live (the summary's height: all of them); kNone when the bytes
// part ways and the walk must step.
uint32_t uniform_depth(Engine& engine, int32_t set, const Vocabulary::Trie::Summary& below) {
  constexpr uint32_t kNone = Vocabulary::Trie::kNone;
  const bool ascii = below.ascii[0] != 0 || below.ascii[1] != 0;
  for (uint32_t depth = 0; depth < below.height; ++depth) {
    const int32_t to = ascii ? engine.common_step(set, below.ascii) : engine.non_ascii_step(set);
    if (to == Engine::kApart) return kNone;
    if (to == set) {  // back to itself: every depth, and code points of any length if all of them come back
      if (!below.other) return below.height;
      return below.utf8 && engine.non_ascii_step(set) == set ? below.height : kNone;
    }
    // Else a code point of several bytes would count as several depths.
    if (below.other) return kNone;
    if (to < 0) return depth;
    set = to;
  }
  return below.height;
}

}  // namespace

Vocabulary::~Vocabulary() = default;
Vocabulary::Vocabulary(Vocabulary&&) noexcept = default;
Vocabulary& Vocabulary::operator=(Vocabulary&&) noexcept = default;

int32_t Vocabulary::size() const { return trie_->size; }

void Vocabulary::allowed(const Matcher& matcher, std::vector<uint8_t>& allowed) const {
  const Trie& t = *trie_;
  allowed.assign(static_cast<size_t>(t.size), 0);
  Engine engine(matcher.grammar().impl());
  std::vector<Engine::Cursor> cursors(t.max_depth + 1);  // cursors[d]: after the path's first d bytes
  cursors[0] = engine.load(*matcher.state_);
  const Trie::Node* nodes = t.nodes.data();
  const uint32_t n = static_cast<uint32_t>(t.nodes.size());
  uint8_t* out = allowed.data();
  // Node i - 1's cursor, which a node one deeper starts from (kept out of
  // memory: the walk is a chain of these lookups); no depth after a dead one.
  Engine::Cursor last = cursors[0];
  uint32_t last_depth = 0;
  for (uint32_t i = 0; i < n;) {
    const Trie::Node& node = nodes[i];
    const Engine::Cursor c =
        engine.step(node.depth == last_depth + 1 ? last : cursors[node.depth - 1], node.byte);
    if (!c.alive()) {
      i = node.end;
      last_depth = UINT32_MAX;
      continue;
    }
    cursors[node.depth] = last = c;
    last_depth = node.depth;
    for (uint32_t k = i == 0 ? 0 : nodes[i - 1].ids_end; k < node.ids_end; ++k) out[t.ids[k]] = 1;
    if (node.summary != Trie::kNone && c.partial == 0) {
      const uint32_t alive = uniform_depth(engine, c.set, t.summaries[node.summary]);
      if (alive != Trie::kNone) {
        // The nodes below to that depth live, none deeper: no steps.
        if (alive >= t.summaries[node.summary].height) {
          for (uint32_t k = node.ids_end; k < nodes[node.end - 1].ids_end; ++k) out[t.ids[k]] = 1;
        } else {
          for (uint32_t j = i + 1; j < node.end; ++j)
            if (nodes[j].depth - node.depth <= alive)
              for (uint32_t k = nodes[j - 1].ids_end; k < nodes[j].ids_end; ++k) out[t.ids[k]] = 1;
        }
        i = node.end;
        last_depth = UINT32_MAX;
        continue;
      }
    }
    ++i;
  }
}

}  // namespace lathe::grammar
