// The commands of a model executable, one a subcommand (main.cpp wires
// their options with CLI11, the files beside it run them), and the options
// that main() fills for them. Each returns the process's exit status; main()
// reports the lathe::Error one throws.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/generate/generate.hpp"

namespace lathe::cli {

// info.cpp: the model and its build.

// The model's configuration, manifest and dispatch plan, on stdout.
int cmd_info();

// A checkpoint of random weights in the manifest's dtypes: for trying a
// build without one (tests, benchmarks).
int cmd_random_weights(const std::string& out, uint64_t seed, float scale);

// generate.cpp: generation and chat.

// generate's and chat's options (bench takes its -w, -d and --no-check from
// them too).
struct TextOptions {
  std::string weights, tokenizer, device;
  int64_t context = 0;
  bool no_check = false, verbose = false;
  lathe::text::GenerateOptions generate;
  std::vector<std::string> images;  // --image: files whose features go where the prompt's image markers are
  // At most one: the text a grammar accepts (GBNF, inline or a file) or a
  // JSON schema's documents (inline or a file).
  std::string grammar, grammar_file, json_schema, json_schema_file;
  // A build with a draft (draft_info()): its checkpoint (empty: random
  // weights), and the draft's likeliest token's probability below which it
  // stops proposing.
  std::string draft_weights;
  float draft_min_p = 0.75f;
};

// Greedy generation from token ids (text in and out comes with the
// tokenizers): the picks, then prefill and decode speed.
int cmd_generate(const std::string& weights, const std::string& tokens_text, int64_t steps, int64_t context,
                 const std::string& device, bool check);

// Text generation: the prompt, then its continuation streamed as it is
// sampled; prefill and decode speed at the end (stderr).
int cmd_generate_text(const TextOptions& o, const std::string& prompt);

// An interactive session: each line read is appended to the conversation
// and the model continues it; the KV cache keeps everything said.
int cmd_chat(const TextOptions& o);

// score.cpp: what a model computes over given inputs, for comparing and
// measuring it.

// The logits of every prompt position, then of `steps` greedy decode steps,
// as raw little-endian f32 rows of vocab values: for comparing lathe with any
// other implementation.
// An encoder-decoder's rows are its decoder's, after the source
// (--source-tokens) is encoded.
int cmd_logits(const std::string& weights, const std::string& tokens_text, const std::string& source_text,
               int64_t steps, int64_t context, const std::string& device, const std::string& out_path, bool check,
               const std::vector<std::string>& images = {});

// Perplexity as llama.cpp's llama-perplexity computes it: the file's ids
// (with BOS) cut into whole chunks of the context length, each chunk's first
// token replaced by BOS (when the vocabulary has one), and the negative
// log-likelihood of each token of a chunk's second half, predicted from
// everything before it in the chunk. PPL = exp(mean NLL), with the standard
// error of that mean carried through exp.
struct PerplexityOptions {
  std::string weights, tokenizer, file, device;
  int64_t context = 0, chunks = 0;
  bool no_check = false;
  bool decode = false;  // each chunk a token at a time: the decode path (the dot layout on a class that has it)
};

int cmd_perplexity(const PerplexityOptions& o);

// Sentence embeddings of an encoder: each input (token ids, or text lines
// through the tokenizer) to one vector, pooled and normalized as the spec
// says (runtime/model/pooling.hpp); `batch` inputs a pass. Written as raw
// f32 rows to `out_path`, else as one JSON array a line on stdout.
struct EmbedOptions {
  std::string weights, tokenizer, file, device, out_path;
  std::vector<std::string> tokens, prompts;
  int64_t batch = 16, context = 0;
  bool no_check = false;
};

int cmd_embed(const EmbedOptions& o);

// tokens.cpp: the tokenizer alone.

// Text → ids, as llama.cpp's llama-tokenize prints them: one token a line
// ("  1043 -> ' In'"), or with ids_only the list "[1, 1043, 261]".
struct TokenizeOptions {
  std::string weights, tokenizer, prompt, file;
  bool no_special = false, no_parse_special = false, ids_only = false, show_count = false;
};

int cmd_tokenize(const TokenizeOptions& o);

// Ids → text: what the tokens decode to, special tokens shown unless skipped.
int cmd_detokenize(const std::string& weights, const std::string& tokenizer_path, const std::string& tokens,
                   bool skip_special);

// serve.cpp: the HTTP server.

// The OpenAI-compatible server: the checkpoint's tokenizer and chat
// template, a session of `parallel` sequences, the scheduler and the HTTP
// server (runtime/serve/), until SIGINT or SIGTERM.
struct ServeOptions {
  std::string weights, tokenizer, device, host = "127.0.0.1";
  int port = 8080;
  int64_t parallel = 1, context = 0, queue = 64, max_body = 0;  // max_body 0: 1 MiB, 32 MiB with images
  bool no_prompt_reuse = false;  // every prompt prefilled whole (--no-prompt-reuse)
  int32_t lookup = 0, draft_max = 8;  // speculative decoding by prompt lookup (--lookup, --draft-max)
  std::string draft_weights;          // a build with a draft: its checkpoint (random weights without)
  float draft_min_p = 0.75f;
  int64_t max_bodies = 0;                                        // 0: ServerOptions' default
  double read_timeout = 30, write_timeout = 30, keep_alive = 5, grace = 15;
  int keep_alive_max = 100, http_threads = 0;
  std::vector<std::string> cors;
  bool no_check = false;
};

int cmd_serve(const ServeOptions& o);

// measure.cpp: speed.

// Device time per kernel of one pass over `rows` tokens after `position`
// cached ones, on random weights: where a step's time goes.
int cmd_profile(uint32_t rows, int64_t position, const std::string& device);

// Speed on the build's own terms: a prefill of `prompt` tokens and `steps`
// greedy decode steps on the device, `repeat` times; the best of each.
int cmd_bench(const std::string& weights, int64_t prompt, int64_t steps, int repeat, const std::string& device,
              bool check);
// With speculation (bench --lookup, or a build with a draft and a
// tokenizer): greedy decoding through generate() with and without it, in
// one run, the tokens checked alike; the decode speed of each, and the
// proposals kept.
int cmd_bench_speculative(const TextOptions& o, int64_t prompt, int64_t steps, int repeat);

}  // namespace lathe::cli
