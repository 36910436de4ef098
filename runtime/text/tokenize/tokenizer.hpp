// Tokenizers: text → token ids → text, for the three places a model's
// vocabulary comes from:
//   Tokenizer::from_hf            Hugging Face tokenizer.json (BPE: GPT-2, Llama 3, Qwen2,
//                                 SmolLM byte-level; Llama 2 / TinyLlama SentencePiece-style;
//                                 WordPiece: BERT, MiniLM, bge; Unigram: T5, XLM-RoBERTa)
//   Tokenizer::from_sentencepiece a SentencePiece .model file (encoded by libsentencepiece)
//   Tokenizer::from_gguf          the vocabulary in a GGUF file's metadata
//                                 (tokenizer.ggml.model "gpt2" or "llama")
// Loaders throw lathe::Error naming the file and the field at fault, e.g.
//   tokenizer.json: pre_tokenizer.type "Whitespace" is not supported
// Encoding never throws on its input: any bytes, valid UTF-8 or not, encode,
// and a byte-level vocabulary decodes them back exactly.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::weights {
class GgufFile;
}

namespace lathe::text {

namespace detail {
struct TokenizerData;
}

class Tokenizer {
 public:
  // `path`: a tokenizer.json, or a directory that holds one. A
  // tokenizer_config.json beside it may set add_bos_token / add_eos_token
  // and name bos_token / eos_token / pad_token.
  static Tokenizer from_hf(const std::string& path);
  // BOS (not EOS) is added by encode(…, add_special = true), as llama.cpp does
  // for SentencePiece vocabularies.
  static Tokenizer from_sentencepiece(const std::string& path);
  static Tokenizer from_gguf(const weights::GgufFile& file);

  // add_special: the BOS/EOS the vocabulary's post-processor (or
  // tokenizer.ggml.add_bos_token, …) asks for. parse_special: special tokens
  // written in the text ("<|endoftext|>") become their ids; otherwise they
  // are encoded as plain text. Non-special added tokens always match.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special = true) const;
  // The bytes the tokens stand for (not necessarily valid UTF-8 when a
  // character is cut). Special tokens show as their text unless skipped.
  // An id past vocab_size() (a model's padded rows, which it may sample)
  // decodes to nothing, as Hugging Face's tokenizers decode it; a negative
  // id throws Error(InvalidArgument).
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  std::optional<int32_t> bos() const;
  std::optional<int32_t> eos() const;
  // The padding token: tokenizer_config.json's pad_token, else
  // tokenizer.json's padding.pad_id, else tokenizer.ggml.padding_token_id.
  std::optional<int32_t> pad() const;
  int32_t vocab_size() const;                       // one more than the largest id
  // (These three give "", "" and false for an id past vocab_size().)
  const std::string& token_text(int32_t id) const;  // as the vocabulary spells it ("Ġworld", "▁world")
  std::string_view token_bytes(int32_t id) const;   // what the token decodes to
  bool is_special(int32_t id) const;                // control tokens: BOS, EOS, <|im_start|>, …
  // Where it came from and how it encodes, for logs:
  // "hf-bpe byte-level", "sentencepiece", "gguf gpt2 llama-bpe", …
  const std::string& description() const;

 private:
  friend class StreamDecoder;
  explicit Tokenizer(std::shared_ptr<const detail::TokenizerData> data);
  std::shared_ptr<const detail::TokenizerData> data_;
};

// Decodes one token at a time (generation) and emits text as soon as it
// forms whole UTF-8 characters: byte-level BPE and SentencePiece byte tokens
// may split a character across tokens. The concatenation of every push() and
// the final flush() is exactly decode() of the same ids.
class StreamDecoder {
 public:
  // start_of_text: the first token begins the text, so the space that
  // SentencePiece's dummy prefix put there is dropped (false when decoding a
  // continuation of a prompt).
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false, bool start_of_text = true);

  std::string push(int32_t id);
  // Whatever is held back (an unfinished character), as it is.
  std::string flush();

 private:
  std::shared_ptr<const detail::TokenizerData> data_;
  std::string pending_;
  bool skip_special_;
  bool at_start_;
};

}  // namespace lathe::text
