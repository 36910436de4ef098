// Speculative decoding's proposers (issue 48): tokens guessed ahead of the
// target model, which verifies them in one pass (Session::verify) and keeps
// the longest agreeing prefix plus one token of its own
// (Sampler::sample_proposal decides each).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace lathe::text {

// Prompt lookup: the longest n-gram (n from `ngram` down to 1) that ends
// the history and also occurs earlier in it, at its latest earlier place;
// the tokens that followed it there, at most `most` (none: no match).
// Text that repeats itself (code being edited, a document quoted, a
// summary of the prompt) is proposed from its earlier copy.
std::vector<int32_t> lookup_proposals(std::span<const int32_t> history, int32_t ngram, size_t most);

}  // namespace lathe::text
