#include "runtime/grammar/engine.hpp"

#include <algorithm>
#include <bit>

namespace lathe::grammar {

bool Grammar::Impl::contains(const CharClass& c, uint32_t cp) const {
  const Range* first = ranges.data() + c.first;
  const Range* last = first + c.count;
  const Range* r = std::upper_bound(first, last, cp, [](uint32_t v, const Range& x) { return v < x.lo; });
  return r != first && r[-1].hi >= cp;
}

bool Grammar::Impl::intersects(uint32_t cls, uint32_t lo, uint32_t hi) const {
  const CharClass& c = classes[cls];
  const Range* first = ranges.data() + c.first;
  const Range* last = first + c.count;
  // The first range that ends at or after lo.
  const Range* r = std::lower_bound(first, last, lo, [](const Range& x, uint32_t v) { return x.hi < v; });
  if (!c.negated) return r != last && r->lo <= hi;
  // The complement meets [lo, hi] unless one range covers it (ranges are
  // merged: two never touch).
  return r == last || r->lo > lo || r->hi < hi;
}

bool Grammar::Impl::covers(uint32_t cls, uint32_t lo, uint32_t hi) const {
  const CharClass& c = classes[cls];
  const Range* first = ranges.data() + c.first;
  const Range* last = first + c.count;
  const Range* r = std::lower_bound(first, last, lo, [](const Range& x, uint32_t v) { return x.hi < v; });
  if (c.negated) return r == last || r->lo > hi;  // no range meets [lo, hi]
  return r != last && r->lo <= lo && r->hi >= hi;
}

namespace {

uint64_t hash_of(std::span<const uint32_t> key) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ key.size();
  for (uint32_t w : key) h = (h ^ w) * 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 33);
}

}  // namespace

uint32_t Interner::intern(std::span<const uint32_t> key) {
  const uint64_t h = hash_of(key);
  if ((size() + 1) * 2 > slots_.size()) {
    slots_.assign(std::max<size_t>(64, slots_.size() * 2), kBottom);
    const size_t mask = slots_.size() - 1;
    for (uint32_t id = 0; id < size(); ++id) {
      size_t i = hashes_[id] & mask;
      while (slots_[i] != kBottom) i = (i + 1) & mask;
      slots_[i] = id;
    }
  }
  const size_t mask = slots_.size() - 1;
  size_t i = h & mask;
  for (; slots_[i] != kBottom; i = (i + 1) & mask) {
    const uint32_t id = slots_[i];
    if (hashes_[id] == h && std::ranges::equal((*this)[id], key)) return id;
  }
  const uint32_t id = size();
  slots_[i] = id;
  data_.insert(data_.end(), key.begin(), key.end());
  offsets_.push_back(static_cast<uint32_t>(data_.size()));
  hashes_.push_back(h);
  return id;
}

Engine::Engine(const Grammar::Impl& grammar) : grammar_(grammar) {}

void Engine::begin() {
  if (++stamp_ == 0) {
    std::fill(seen_.begin(), seen_.end(), 0);
    stamp_ = 1;
  }
  bottom_seen_ = over_ = false;
  work_ = 0;
  out_.clear();
  todo_.clear();
}

void Engine::close(uint32_t stack) {
  const std::vector<Element>& elements = grammar_.elements;
  const size_t max_stacks = grammar_.limits.max_stacks;
  // Without left recursion (refused by parse()) every path of pushes ends
  // at a class or an empty stack, but a grammar can still make one step
  // push a great many stacks that lead to few: bounded, as ambiguity.
  const size_t max_work = 64 * max_stacks + 4096;
  todo_.push_back(stack);
  while (!todo_.empty() && !over_) {
    const uint32_t n = todo_.back();
    todo_.pop_back();
    if (n == kBottom) {
      if (!bottom_seen_) out_.push_back(kBottom);
      bottom_seen_ = true;
      continue;
    }
    if (n >= seen_.size()) seen_.resize(std::max<size_t>(nodes_.size(), 2 * seen_.size()), 0);
    if (seen_[n] == stamp_) continue;
    seen_[n] = stamp_;
    if (++work_ > max_work) over_ = true;
    const uint32_t pos = position(n);
    const Element& e = elements[pos];
    if (e.kind == Kind::Class) {
      out_.push_back(n);
      continue;
    }
    // A rule: where this alternative goes on once it is done (nothing to
    // keep at its end), under each of the rule's alternatives.
    const uint32_t next = elements[pos + 1].kind == Kind::End ? parent(n) : node(pos + 1, parent(n));
    for (uint32_t k = grammar_.first_alternative[e.value]; k < grammar_.first_alternative[e.value + 1]; ++k) {
      const uint32_t a = grammar_.alternatives[k];
      todo_.push_back(elements[a].kind == Kind::End ? next : node(a, next));
    }
  }
  if (out_.size() > max_stacks) over_ = true;
}

void Engine::after_match(uint32_t top) {
  const uint32_t pos = position(top);
  close(grammar_.elements[pos + 1].kind == Kind::End ? parent(top) : node(pos + 1, parent(top)));
}

int32_t Engine::finish() {
  if (over_ || out_.empty()) return -1;
  std::sort(out_.begin(), out_.end());
  const uint32_t id = sets_.intern(out_);
  if (non_ascii_.size() <= id) {  // a new set
    table_.resize((size_t{id} + 1) * 256, kUnknown);
    non_ascii_.resize(size_t{id} + 1, kUnknown);
  }
  return static_cast<int32_t>(id);
}

Engine::Cursor Engine::start() {
  // The root, called from an empty stack: a rule element of its own.
  begin();
  const std::vector<Element>& elements = grammar_.elements;
  const uint32_t root = grammar_.root;
  for (uint32_t k = grammar_.first_alternative[root]; k < grammar_.first_alternative[root + 1]; ++k) {
    const uint32_t a = grammar_.alternatives[k];
    close(elements[a].kind == Kind::End ? kBottom : node(a, kBottom));
  }
  return {finish(), 0};
}

Engine::Cursor Engine::load(const Matcher::State& state) {
  std::vector<uint32_t> ids(state.nodes.size());
  for (size_t i = 0; i < state.nodes.size(); ++i) {
    const Matcher::State::Node& n = state.nodes[i];
    ids[i] = node(n.position, n.parent == kBottom ? kBottom : ids[n.parent]);
  }
  begin();
  for (uint32_t t : state.tops) out_.push_back(t == kBottom ? kBottom : ids[t]);
  return {finish(), state.partial};
}

std::shared_ptr<const Matcher::State> Engine::save(Cursor cursor) {
  // The nodes the stacks reach, in the order of their ids: a parent's id
  // is lower than its child's (it was interned first).
  begin();
  std::vector<uint32_t> reached;
  seen_.resize(std::max<size_t>(seen_.size(), nodes_.size()), 0);
  for (uint32_t t : stacks(cursor.set))
    for (uint32_t n = t; n != kBottom && seen_[n] != stamp_; n = parent(n)) {
      seen_[n] = stamp_;
      reached.push_back(n);
    }
  std::sort(reached.begin(), reached.end());
  auto state = std::make_shared<Matcher::State>();
  std::vector<uint32_t> index(nodes_.size());
  state->nodes.reserve(reached.size());
  for (uint32_t n : reached) {
    index[n] = static_cast<uint32_t>(state->nodes.size());
    const uint32_t p = parent(n);
    state->nodes.push_back({position(n), p == kBottom ? kBottom : index[p]});
  }
  for (uint32_t t : stacks(cursor.set)) state->tops.push_back(t == kBottom ? kBottom : index[t]);
  state->partial = cursor.partial;
  return state;
}

int32_t Engine::advance(int32_t set, uint32_t cp) {
  const std::vector<Element>& elements = grammar_.elements;
  const std::span<const uint32_t> tops = stacks(set);
  tops_.assign(tops.begin(), tops.end());
  const auto takes = [&](uint32_t top) {
    return top != kBottom && grammar_.matches(elements[position(top)].value, cp);
  };
  if (tops_.size() > 64) {  // rare: not cached
    begin();
    bool any = false;
    for (uint32_t t : tops_)
      if (takes(t)) {
        after_match(t);
        any = true;
      }
    return any ? finish() : -1;
  }
  uint64_t mask = 0;
  for (size_t i = 0; i < tops_.size(); ++i)
    if (takes(tops_[i])) mask |= uint64_t{1} << i;
  if (mask == 0) return -1;
  const auto [it, inserted] = by_mask_.try_emplace({set, mask}, -1);
  if (!inserted) return it->second;
  begin();
  for (size_t i = 0; i < tops_.size(); ++i)
    if ((mask >> i) & 1) after_match(tops_[i]);
  return it->second = finish();
}

bool Engine::viable(int32_t set, utf8::Interval interval) const {
  for (uint32_t t : stacks(set))
    if (t != kBottom && grammar_.intersects(grammar_.elements[position(t)].value, interval.lo, interval.hi))
      return true;
  return false;
}

int32_t Engine::common_step(int32_t set, const uint64_t ascii[2]) {
  int32_t to = kUnknown;
  for (uint32_t w = 0; w < 2; ++w)
    for (uint64_t bits = ascii[w]; bits != 0; bits &= bits - 1) {
      const auto b = static_cast<uint8_t>(64 * w + static_cast<uint32_t>(std::countr_zero(bits)));
      const int32_t next = step({set, 0}, b).set;
      if (to != kUnknown && next != to) return kApart;
      to = next;
    }
  return to;
}

int32_t Engine::non_ascii_step(int32_t set) {
  const size_t s = static_cast<size_t>(set);
  if (non_ascii_[s] != kUnknown) return non_ascii_[s];
  // Every top takes all non-ASCII code points or none: then one of them
  // (U+0080) says where all lead.
  bool uniform = true;
  for (uint32_t t : stacks(set)) {
    if (t == kBottom) continue;
    const uint32_t cls = grammar_.elements[position(t)].value;
    const bool all = grammar_.covers(cls, 0x80, 0xD7FF) && grammar_.covers(cls, 0xE000, 0x10FFFF);
    const bool none = !grammar_.intersects(cls, 0x80, 0xD7FF) && !grammar_.intersects(cls, 0xE000, 0x10FFFF);
    uniform = uniform && (all || none);
  }
  const int32_t to = uniform ? advance(set, 0x80) : kApart;
  non_ascii_[s] = to;  // (advance may have grown non_ascii_: indexed again)
  return to;
}

int32_t Engine::first_byte(int32_t set, uint8_t byte) {
  if (byte < 0x80) return advance(set, byte);
  if (utf8::length(byte) < 2) return -1;
  return viable(set, utf8::interval(utf8::begin(byte))) ? set : -1;
}

Engine::Cursor Engine::continuation(Cursor cursor, uint8_t byte) {
  if (!utf8::follows(cursor.partial, byte)) return {};
  if (utf8::last(cursor.partial)) return {advance(cursor.set, utf8::finish(cursor.partial, byte)), 0};
  const utf8::Partial p = utf8::add(cursor.partial, byte);
  if (!viable(cursor.set, utf8::interval(p))) return {};
  return {cursor.set, p};
}

}  // namespace lathe::grammar
