// Matcher: a text fed a token at a time, through the engine (engine.hpp).
#include <utility>

#include "runtime/error.hpp"
#include "runtime/grammar/engine.hpp"
#include "runtime/grammar/grammar.hpp"

namespace lathe::grammar {

namespace {

std::shared_ptr<const Grammar> checked(std::shared_ptr<const Grammar> grammar) {
  if (!grammar) throw Error(ErrorKind::InvalidArgument, "a grammar matcher needs a grammar");
  return grammar;
}

}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> grammar)
    : grammar_(checked(std::move(grammar))), state_(grammar_->impl().start) {}

bool Matcher::accept(std::string_view bytes) {
  if (bytes.empty()) return true;
  Engine engine(grammar_->impl());
  Engine::Cursor cursor = engine.load(*state_);
  for (char c : bytes) {
    cursor = engine.step(cursor, static_cast<uint8_t>(c));
    if (!cursor.alive()) return false;
  }
  state_ = engine.save(cursor);
  return true;
}

bool Matcher::can_end() const {
  // Tops are sorted: an empty stack (kBottom) comes last.
  return state_->partial == 0 && state_->tops.back() == kBottom;
}

bool Matcher::can_continue() const {
  if (state_->partial != 0) return true;  // the engine kept it only if some code point can finish it
  const Grammar::Impl& g = grammar_->impl();
  for (uint32_t t : state_->tops)
    if (t != kBottom && !g.classes[g.elements[state_->nodes[t].position].value].empty) return true;
  return false;
}

size_t Matcher::stacks() const { return state_->tops.size(); }

}  // namespace lathe::grammar
