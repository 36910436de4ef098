// What constrained decoding costs a step (issue 47): a grammar's mask over
// a vocabulary (text::Constraint::mask), timed at every step of documents
// sampled through it from random logits. bench.cpp's --grammar-mask puts it
// beside the bench model's decode step, measured in the same run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lathe::bench {

// A byte-level vocabulary of `size` tokens shaped like a BPE one's: the 256
// bytes, then, from a fixed seed, words of syllables with and without a
// leading space and capitals, runs of digits (1–3), of spaces and newlines,
// JSON's punctuation pairs ("\":", "{\"", "},"), and UTF-8 characters of
// two to four bytes. For a large vocabulary where no real tokenizer of
// that size is at hand.
std::vector<std::string> synthetic_vocabulary(int32_t size);

struct MaskCost {
  int32_t vocab = 0;
  double build_ms = 0;            // the vocabulary's trie
  int64_t steps = 0;              // masks timed
  int64_t documents = 0;          // documents finished among them
  double mean_us = 0, median_us = 0, p90_us = 0, max_us = 0;  // a mask
};

// Samples `documents` documents of the JSON schema `schema` through a
// constraint over `tokens` (id 0 the end token, never a grammar's), from
// random logits at temperature 1, each cut at `max_steps` tokens; times
// every mask.
MaskCost measure_mask(const std::vector<std::string>& tokens, const std::string& schema, int documents,
                      int max_steps);

}  // namespace lathe::bench
