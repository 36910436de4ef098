// A Hugging Face checkpoint's tokenizer as the GGUF metadata llama.cpp's
// converter (convert_hf_to_gguf.py, _set_vocab_sentencepiece and
// gguf-py's SpecialVocab) writes, so that a GGUF file made from the
// checkpoint (`lathe quantize DIR …`) carries its vocabulary and chat
// template, and both lathe and llama.cpp tokenize with it.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "runtime/weights/gguf.hpp"

namespace lathe::text {

struct GgufVocabulary {
  std::map<std::string, weights::GgufValue> metadata;  // tokenizer.* keys; empty when none is written
  std::string summary;  // what was written ("sentencepiece, 3072 tokens, chat template"), or why nothing was
};

// The tokenizer of the checkpoint directory `dir`, for a model of `vocab`
// embedding rows. A SentencePiece tokenizer.model becomes
// tokenizer.ggml.model "llama" (pre "default"): every piece with its score
// and type (NORMAL 1, UNKNOWN 2, CONTROL 3, USER_DEFINED 4, UNUSED 5, BYTE 6,
// the numbering of both SentencePiece and llama.cpp; read from the model
// proto, so user-defined pieces keep their type, which the converter's
// processor API loses); rows beyond the
// tokenizer's pieces are "[PAD<id>]" UNUSED tokens of score -10000, pieces
// beyond `vocab` rows are dropped; tokenizer_config.json's
// added_tokens_decoder overrides its ids (CONTROL when "special" or looking
// special as llama.cpp judges it, USER_DEFINED otherwise, score -1000).
// Special ids: config.json's bos/eos/unk/pad_token_id, else the
// SentencePiece model's; add_bos_token / add_eos_token where
// tokenizer_config.json says; add_space_prefix and
// remove_extra_whitespaces from the model's normalizer; the chat template
// of find_chat_template(dir).
// Else a byte-level BPE tokenizer.json becomes tokenizer.ggml.model "gpt2"
// (_set_vocab_gpt2): the vocabulary by id, added tokens CONTROL (special or
// looking special) or USER_DEFINED, "[PAD<id>]" UNUSED rows where no token
// has the id, the merges ("left right"; a pair's spaces as U+0120), special
// ids from tokenizer_config.json's token texts (else config.json's ids);
// tokenizer.ggml.pre is the first of llama-bpe, qwen2, smollm and gpt-2
// whose GGUF tokenizer encodes a probe text as the tokenizer.json does
// (llama.cpp's converter names it by a hash of such an encoding).
// A WordPiece tokenizer.json (BERT) becomes tokenizer.ggml.model "bert"
// (BertModel.set_vocab): the vocabulary by id in the phantom-space spelling
// ("▁hello" for a word start, "ing" for "##ing", control tokens as they
// are), [CLS] as BOS, [SEP] as EOS and separator, the BertNormalizer's
// lowercase and strip_accents.
// Another tokenizer.json (SentencePiece-style), a BPE none of
// those names fits, or no tokenizer gets no metadata and a summary that
// says so. Throws Error(BadFile) for a tokenizer.model that does not load,
// or a JSON file of the wrong shape.
GgufVocabulary gguf_vocabulary(const std::string& dir, int64_t vocab);

}  // namespace lathe::text
