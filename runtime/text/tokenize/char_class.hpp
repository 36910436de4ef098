// Character classes as Hugging Face's tokenizers (Rust) define them, for the
// BERT normalizer and pre-tokenizer, Strip and WhitespaceSplit. The general
// categories come from utf8proc (Unicode 15); tokenizers reads them from the
// unicode_categories crate's older tables, so a character assigned since
// Unicode 9 may fall in another class there.
#pragma once

namespace lathe::text {

// Rust's char::is_whitespace: the White_Space property.
bool is_white_space(char32_t c);
// BertNormalizer's control characters, dropped by clean_text: categories Cc,
// Cf and Co (unicode_categories' is_other: no Cn, no Cs), except \t \n \r.
bool is_bert_control(char32_t c);
// BertPreTokenizer's punctuation: ASCII punctuation (symbols such as $ + <
// = > ^ ` | ~ included) and every character of a P* category.
bool is_bert_punctuation(char32_t c);
// The CJK ideograph blocks BertNormalizer puts spaces around (not Hangul,
// Hiragana or Katakana).
bool is_cjk_ideograph(char32_t c);
// Category Mn: what BertNormalizer's strip_accents drops after NFD.
bool is_nonspacing_mark(char32_t c);

}  // namespace lathe::text
