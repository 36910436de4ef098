// Speculative decoding's prompt lookup (runtime/generate/speculate.hpp):
// the longest n-gram ending the history, at its latest earlier place, and
// what followed it there.
#include "runtime/generate/speculate.hpp"

#include <doctest/doctest.h>

#include <vector>

using lathe::text::lookup_proposals;

TEST_CASE("lookup: the tokens after the latest earlier copy of the longest n-gram that ends the history") {
  using V = std::vector<int32_t>;
  // "… 1 2 3 4 5 … 1 2 3": the 3-gram 1 2 3 was followed by 4 5 9.
  const V history = {7, 1, 2, 3, 4, 5, 9, 8, 1, 2, 3};
  CHECK(lookup_proposals(history, 3, 8) == V{4, 5, 9, 8, 1, 2, 3});
  CHECK(lookup_proposals(history, 3, 2) == V{4, 5});
  CHECK(lookup_proposals(history, 1, 2) == V{4, 5});  // 3 alone, the same place
  // The latest earlier place wins: 2 3 is at 2–3 and 6–7; 6–7 was followed by 0.
  const V twice = {2, 3, 1, 5, 6, 2, 3, 0, 9, 2, 3};
  CHECK(lookup_proposals(twice, 2, 3) == V{0, 9, 2});
  // A longer n-gram beats a later shorter one: 4 2 3 is at 0–2, 2 3 alone later.
  const V longer = {4, 2, 3, 8, 6, 2, 3, 7, 4, 2, 3};
  CHECK(lookup_proposals(longer, 3, 2) == V{8, 6});
  CHECK(lookup_proposals(longer, 2, 2) == V{7, 4});
  // Nothing repeats, nothing asked, nothing to look in.
  CHECK(lookup_proposals(V{1, 2, 3, 4}, 3, 8).empty());
  CHECK(lookup_proposals(history, 3, 0).empty());
  CHECK(lookup_proposals(history, 0, 8).empty());
  CHECK(lookup_proposals(V{}, 3, 8).empty());
  CHECK(lookup_proposals(V{5}, 3, 8).empty());
  // A run of one token proposes more of it.
  CHECK(lookup_proposals(V{5, 5, 5}, 2, 4) == V{5});
  CHECK(lookup_proposals(V{5, 5, 5, 5}, 1, 4) == V{5});
}
