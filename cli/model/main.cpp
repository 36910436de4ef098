// The model-specific executable: the generic front end, linked with one
// generated model library. main() wires each command's options with CLI11
// and runs it (commands.hpp); a rank above 0 of a split over MPI processes
// runs its stage instead (ranks.cpp).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cli/model/commands.hpp"
#include "cli/model/common.hpp"
#include "runtime/error.hpp"
#include "runtime/generate/sampler.hpp"
#include "runtime/model/model_info.hpp"
#include "runtime/model/stage_link.hpp"
#include "runtime/version.hpp"

namespace lathe::cli {
namespace {

// A whole number of at least `low`, said in words: CLI11's
// NonNegativeNumber would print its range up to the largest double.
CLI::Validator at_least(int64_t low) {
  return CLI::Validator(
      [low](std::string& text) -> std::string {
        const std::optional<long long> v = read_number<long long>(text);
        if (!v) return "'" + text + "' is not a whole number";
        if (*v < low) return "must be " + std::to_string(low) + " or more, not " + text;
        return "";
      },
      ">= " + std::to_string(low));
}

// A finite number above zero (NaN and infinities are refused).
CLI::Validator finite_positive() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::optional<double> v = read_number<double>(text);
        if (!v) return "'" + text + "' is not a number";
        if (!std::isfinite(*v) || !(*v > 0)) return "must be a finite number above 0, not " + text;
        return "";
      },
      "> 0");
}

// --no-check, on every command that takes -w.
constexpr const char* kNoCheckHelp =
    "Load the weights without checking that every value is finite (a NaN or inf is refused by default; the logits "
    "are checked all the same)";

}  // namespace
}  // namespace lathe::cli

int main(int argc, char** argv) {
  using namespace lathe::cli;
  using lathe::Error;
  using lathe::ErrorKind;
  const std::unique_ptr<lathe::StageLink> link = open_link(argv[0]);
  if (link && link->rank() > 0) return run_stage_rank(argc, argv, *link);
  g_link = link.get();
  const lathe::ModelInfo& m = lathe::model_info();
  CLI::App app{std::string("lathe build of ") + std::string(m.name)};
  app.require_subcommand(1);
  app.fallthrough();  // --split after the command's name too
  app.add_option("--split", g_split,
                 "With several --device entries (\"0,1\"): the layers of each, \"layers:16,16\", or \"memory\" "
                 "(by each device's memory); default: as even as they divide");
  app.add_option("--mmproj", g_mmproj,
                 "A GGUF text model's vision tower (llama.cpp's mmproj file): the tower's weights and the image "
                 "processor's settings come from it")
      ->check(CLI::ExistingFile);
  app.set_version_flag("--version", [&] { return lathe::version_text(std::string(m.name) + " (lathe)"); });
  auto* info = app.add_subcommand("info", "The model's configuration, manifest and dispatch plan");

  auto* random = app.add_subcommand("random-weights", "Write a safetensors file of random weights for this model");
  std::string random_out;
  uint64_t seed = 1;
  float scale = 0.05f;
  random->add_option("-o,--output", random_out, "The safetensors file to write")->required();
  random->add_option("--seed", seed, "Random seed")->capture_default_str();
  random->add_option("--scale", scale, "Values are uniform in [-scale, scale) (norm scales around 1); a finite number above 0")
      ->capture_default_str()
      ->check(finite_positive());

  auto* logits = app.add_subcommand("logits", "Write the logits of every position as raw little-endian f32 rows");
  std::string weights, tokens, out_path, device;
  int64_t steps = 0, context = 0;
  logits->add_option("-w,--weights", weights,
                     "Checkpoint: a .safetensors file, a sharded one's .index.json, a .gguf file, or a directory holding one")
      ->required()
      ->check(CLI::ExistingPath);
  logits->add_option("-t,--tokens", tokens, "Prompt token ids, comma-separated (an encoder-decoder: the decoder's)")
      ->required();
  std::string source_tokens;
  logits->add_option("--source-tokens", source_tokens, "An encoder-decoder's source token ids, comma-separated");
  logits->add_option("-n,--steps", steps, "Greedy decode steps after the prompt (their logits follow)")
      ->capture_default_str()
      ->check(at_least(0));
  logits->add_option("-c,--context", context, "KV-cache positions (default: the spec's max_context)")
      ->check(at_least(1));
  logits->add_option("-d,--device", device, "Vulkan device: index or name part (default: LATHE_DEVICE, else the best)");
  logits->add_option("-o,--output", out_path, "Output file: (prompt + steps) rows × vocab f32")->required();
  bool logits_no_check = false;
  logits->add_flag("--no-check", logits_no_check, kNoCheckHelp);
  std::vector<std::string> logits_images;
  logits->add_option("--image", logits_images,
                     "An image (PNG or JPEG) in place of the next image marker among the ids, expanded as the "
                     "checkpoint's processor does; the rows of the other ids are written (repeatable; a [vision] model)");

  auto* profile = app.add_subcommand("profile", "Device time per kernel of one pass, on random weights");
  uint32_t profile_rows = 1;
  int64_t profile_position = 128;
  profile->add_option("-r,--rows", profile_rows, "Token rows of the pass (1: a decode step)")
      ->capture_default_str()
      ->check(at_least(1));
  profile->add_option("-p,--position", profile_position, "Cached positions before the pass")
      ->capture_default_str()
      ->check(at_least(0));
  profile->add_option("-d,--device", device, "Vulkan device: index or name part");

  // generate: token ids in → ids out (greedy on the device), or text in →
  // text out (sampled); chat: text lines in, continuations out.
  TextOptions text;
  lathe::text::SamplingOptions& sampling = text.generate.sampling;
  sampling.temperature = 0.8f;
  sampling.top_k = 40;
  sampling.top_p = 0.95f;
  sampling.min_p = 0.05f;
  // The repetition penalty stays 1 (off), as in llama.cpp and the OpenAI
  // API: --temp 0 is then greedy, the text demo.golden checks.
  std::vector<CLI::Option*> seed_options;
  auto add_text_options = [&](CLI::App* c) {
    c->add_option("-w,--weights", text.weights,
                  "Checkpoint: .safetensors, .index.json, .gguf or a directory (default: random weights)")
        ->check(CLI::ExistingPath);
    c->add_option("--tokenizer", text.tokenizer,
                  "tokenizer.json, a SentencePiece .model or a .gguf (default: the one beside the weights)")
        ->check(CLI::ExistingPath);
    c->add_option("-n,--max-tokens", text.generate.max_new_tokens,
                  "New tokens at most; 0: none (the prompt is only read), -1: no limit (until EOS, --stop or a full "
                  "context)")
        ->capture_default_str()
        ->check(at_least(-1));
    c->add_option("--temp", sampling.temperature, "Temperature; 0: greedy")->capture_default_str();
    c->add_option("--top-k", sampling.top_k, "Keep the k most likely tokens; 0: all")->capture_default_str();
    c->add_option("--top-p", sampling.top_p, "Keep the smallest set with this much probability; 1: all")
        ->capture_default_str();
    c->add_option("--min-p", sampling.min_p, "Drop tokens below min-p times the top probability; 0: none")
        ->capture_default_str();
    c->add_option("--repeat-penalty", sampling.repetition_penalty, "Penalty on the last 64 tokens' logits; 1: none")
        ->capture_default_str();
    seed_options.push_back(c->add_option("--seed", sampling.seed,
                                         "Sampling seed: the same seed, the same text (default: a random one, "
                                         "which -v prints)"));
    c->add_flag("-v,--verbose", text.verbose, "Say more on stderr: the sampling seed");
    c->add_option("--stop", text.generate.stop, "Stop before this text (repeatable)");
    c->add_option("-c,--context", text.context, "KV-cache positions (default: the spec's max_context)")
        ->check(at_least(1));
    c->add_option("-d,--device", text.device, "Vulkan device: index or name part (default: LATHE_DEVICE, else the best)");
    c->add_flag("--no-check", text.no_check, kNoCheckHelp);
    // Constrained output (docs/grammar.md), as llama.cpp's options spell it.
    auto* grammar = c->add_option("--grammar", text.grammar, "Only text this GBNF grammar accepts (its rule root)");
    auto* grammar_file = c->add_option("--grammar-file", text.grammar_file, "--grammar from a file")
                             ->check(CLI::ExistingFile);
    auto* schema = c->add_option("-j,--json-schema", text.json_schema,
                                 "Only JSON this schema validates (OpenAI's strict subset; {} for any JSON value)");
    auto* schema_file = c->add_option("--json-schema-file", text.json_schema_file, "--json-schema from a file")
                            ->check(CLI::ExistingFile);
    for (CLI::Option* a : {grammar, grammar_file, schema, schema_file})
      for (CLI::Option* b : {grammar, grammar_file, schema, schema_file})
        if (a != b) a->excludes(b);
    // Speculative decoding (docs/speculative.md).
    c->add_option("--lookup", text.generate.lookup,
                  "Prompt lookup: propose the tokens that followed the longest n-gram (up to N) ending the text, "
                  "verified in one pass; 0: off")
        ->capture_default_str()
        ->check(CLI::Range(0, 64));
    c->add_option("--draft-max", text.generate.draft_max, "Tokens proposed a step at most")
        ->capture_default_str()
        ->check(CLI::Range(1, 64));
    c->add_option("--draft-weights", text.draft_weights,
                  "The draft's checkpoint (a build with a draft: lathe build --draft; default: random weights)")
        ->check(CLI::ExistingPath);
    c->add_option("--draft-min-p", text.draft_min_p,
                  "The draft stops proposing where its likeliest token is less likely than this; 0: never")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0));
  };

  auto* generate = app.add_subcommand(
      "generate", "Generate text from --prompt (streamed, sampled), or greedy token ids from --tokens; then the speed");
  add_text_options(generate);
  std::string prompt, gen_tokens;
  auto* prompt_option = generate->add_option("-p,--prompt", prompt, "Prompt text");
  auto* tokens_option = generate->add_option("-t,--tokens", gen_tokens, "Prompt token ids, comma-separated (greedy ids out)");
  prompt_option->excludes(tokens_option);
  auto* image_option = generate->add_option(
      "--image", text.images,
      "An image (PNG or JPEG) whose features go where the prompt's next image marker is (repeatable; a [vision] "
      "model, its preprocessor_config.json beside -w)");
  image_option->excludes(tokens_option);
  generate->callback([&] {
    if (prompt_option->count() == 0 && tokens_option->count() == 0)
      throw CLI::RequiredError("--prompt or --tokens");
  });

  auto* chat = app.add_subcommand(
      "chat", "Interactive: each line you type is appended and the model answers with a line (--stop overrides)");
  add_text_options(chat);

  auto* bench = app.add_subcommand("bench", "Prefill and decode speed (best of several rounds)");
  int64_t bench_prompt = 128, bench_steps = 64;
  int bench_repeat = 3;
  bench->add_option("-w,--weights", text.weights, "Checkpoint (default: random weights)")->check(CLI::ExistingPath);
  bench->add_option("-p,--prompt-tokens", bench_prompt, "Prompt length")->capture_default_str()->check(at_least(1));
  bench->add_option("-n,--steps", bench_steps, "Decode steps")->capture_default_str()->check(at_least(1));
  bench->add_option("-r,--repeat", bench_repeat, "Rounds (after one warm-up)")->capture_default_str()
      ->check(at_least(1));
  bench->add_option("-d,--device", text.device, "Vulkan device: index or name part");
  // Speculation: plain decoding and speculative decoding side by side (a
  // tokenizer needed: generate()'s loop).
  bench->add_option("--lookup", text.generate.lookup, "Also decode with prompt lookup (n-grams up to N) and compare")
      ->check(CLI::Range(0, 64));
  bench->add_option("--draft-max", text.generate.draft_max, "Tokens proposed a step at most")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  bench->add_option("--draft-weights", text.draft_weights, "A build with a draft: the draft's checkpoint")
      ->check(CLI::ExistingPath);
  bench->add_option("--draft-min-p", text.draft_min_p, "The draft stops below this probability")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  bench->add_option("--tokenizer", text.tokenizer, "With speculation: the tokenizer (default: the one beside -w)")
      ->check(CLI::ExistingPath);
  bench->add_flag("--no-check", text.no_check, kNoCheckHelp);

  auto* serve = app.add_subcommand(
      "serve", "An OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions, /v1/models, /health, "
               "/metrics) with continuous batching");
  ServeOptions srv;
  serve->add_option("-w,--weights", srv.weights, "Checkpoint: .safetensors, .index.json, .gguf or a directory")
      ->required()
      ->check(CLI::ExistingPath);
  serve->add_option("--tokenizer", srv.tokenizer, "tokenizer.json, a SentencePiece .model or a .gguf (default: the "
                                                  "one beside the weights)")
      ->check(CLI::ExistingPath);
  serve->add_option("--host", srv.host, "Address to listen on")->capture_default_str();
  serve->add_option("--port", srv.port, "Port to listen on; 0: any free one (the line on stdout names it)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  serve->add_option("-P,--parallel", srv.parallel,
                    "Sequences decoded together (each with its own KV cache; at most 64, the prompt chunk)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  serve->add_option("-c,--context", srv.context, "KV-cache positions of each sequence (default: the spec's max_context)")
      ->check(at_least(1));
  serve->add_option("--queue", srv.queue, "Requests waiting for a sequence at most; more are refused with 503")
      ->capture_default_str()
      ->check(at_least(0));
  serve->add_option("--lookup", srv.lookup,
                    "Prompt lookup: each request proposes the tokens that followed the longest n-gram (up to N) "
                    "ending its text, verified with the other requests' rows in one pass; 0: off")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  serve->add_option("--draft-max", srv.draft_max, "Tokens a request proposes a step at most")
      ->capture_default_str()
      ->check(CLI::Range(1, 63));
  serve->add_option("--draft-weights", srv.draft_weights,
                    "The draft's checkpoint (a build with a draft: lathe build --draft; default: random weights)")
      ->check(CLI::ExistingPath);
  serve->add_option("--draft-min-p", srv.draft_min_p,
                    "The draft stops proposing where its likeliest token is less likely than this; 0: never")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  serve->add_flag("--no-prompt-reuse", srv.no_prompt_reuse,
                  "Prefill every prompt whole: no cached prefix (a previous turn's, or another request's) is reused");
  serve->add_option("--max-body", srv.max_body,
                    "Largest request body in bytes; larger ones are refused with 413 (default: 1 MiB, or 32 MiB for a "
                    "model that takes images)")
      ->check(at_least(1));
  serve->add_option("--max-bodies", srv.max_bodies,
                    "Bytes of the request bodies read at once, all connections together; one more is refused with "
                    "503 (default: the larger of 64 MiB and 4 × --max-body)")
      ->check(at_least(1));
  serve->add_option("--read-timeout", srv.read_timeout,
                    "Seconds a whole request (headers and body) may take to arrive; slower clients get 408")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  serve->add_option("--write-timeout", srv.write_timeout, "Seconds one write may wait for the client to read")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  serve->add_option("--keep-alive", srv.keep_alive, "Seconds a connection may stay idle between requests")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  serve->add_option("--keep-alive-max", srv.keep_alive_max, "Requests on one connection at most")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  serve->add_option("--http-threads", srv.http_threads,
                    "HTTP worker threads at most (0: every sequence and queue place, and 64 more)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  serve->add_option("--grace", srv.grace,
                    "Seconds the requests in flight may take to finish after SIGINT or SIGTERM (a second signal "
                    "cuts them off at once)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  serve->add_option("--cors", srv.cors,
                    "Origin whose browsers may call the API (repeatable; * for any); default: no CORS headers");
  serve->add_option("-d,--device", srv.device, "Vulkan device: index or name part");
  serve->add_flag("--no-check", srv.no_check, kNoCheckHelp);

  // tokenize / detokenize: llama.cpp's llama-tokenize, both ways.
  auto* tokenize = app.add_subcommand("tokenize", "Print the token ids of a text (--prompt or --file), one a line or as a list");
  TokenizeOptions tok;
  auto add_tokenizer_options = [](CLI::App* c, std::string& w, std::string& t) {
    c->add_option("-w,--weights", w, "Checkpoint whose tokenizer to use: a .gguf file's own, or the tokenizer.json / "
                                     "tokenizer.model beside it")
        ->check(CLI::ExistingPath);
    c->add_option("--tokenizer", t, "tokenizer.json, a SentencePiece .model or a .gguf")->check(CLI::ExistingPath);
  };
  add_tokenizer_options(tokenize, tok.weights, tok.tokenizer);
  auto* tok_prompt = tokenize->add_option("-p,--prompt", tok.prompt, "The text");
  auto* tok_file = tokenize->add_option("-f,--file", tok.file, "A file whose text to tokenize")->check(CLI::ExistingFile);
  tok_prompt->excludes(tok_file);
  tokenize->add_flag("--no-special", tok.no_special, "Add no BOS/EOS (by default those the tokenizer adds)");
  tokenize->add_flag("--no-parse-special", tok.no_parse_special,
                     "Special tokens written in the text (\"<s>\") stay text rather than becoming their ids");
  tokenize->add_flag("--ids", tok.ids_only, "Print only the ids, as [1, 2, 3] (what detokenize -t takes)");
  tokenize->add_flag("--show-count", tok.show_count, "Also print the number of tokens");
  tokenize->callback([&] {
    if (tok_prompt->count() == 0 && tok_file->count() == 0) throw CLI::RequiredError("--prompt or --file");
  });

  auto* detokenize = app.add_subcommand("detokenize", "Print the text of token ids");
  std::string detok_weights, detok_tokenizer, detok_tokens;
  bool detok_skip = false;
  add_tokenizer_options(detokenize, detok_weights, detok_tokenizer);
  detokenize->add_option("-t,--tokens", detok_tokens, "Token ids, comma- or space-separated, or tokenize --ids's list")
      ->required();
  detokenize->add_flag("--skip-special", detok_skip, "Leave out special tokens (BOS, EOS, <|im_start|>, …)");

  auto* perplexity = app.add_subcommand(
      "perplexity", "Perplexity of a text file, as llama-perplexity computes it: chunks of the context length, the "
                    "mean negative log-likelihood of each chunk's second half");
  PerplexityOptions ppl;
  perplexity->add_option("-w,--weights", ppl.weights,
                         "Checkpoint: .safetensors, .index.json, .gguf or a directory")
      ->required()
      ->check(CLI::ExistingPath);
  perplexity->add_option("--tokenizer", ppl.tokenizer, "tokenizer.json, a SentencePiece .model or a .gguf (default: "
                                                       "the one beside the weights)")
      ->check(CLI::ExistingPath);
  perplexity->add_option("-f,--file", ppl.file, "The text file")->required()->check(CLI::ExistingFile);
  perplexity->add_option("-c,--context", ppl.context, "Chunk length in tokens (default: the spec's max_context)")
      ->check(at_least(4));
  perplexity->add_option("--chunks", ppl.chunks, "Chunks at most; 0: every whole chunk of the file")
      ->capture_default_str()
      ->check(at_least(0));
  perplexity->add_option("-d,--device", ppl.device, "Vulkan device: index or name part");
  perplexity->add_flag("--no-check", ppl.no_check, kNoCheckHelp);
  perplexity->add_flag("--decode", ppl.decode,
                       "Feed each chunk a token at a time (decode steps, as generation does) instead of one prompt "
                       "pass: the logits of the decode path");

  auto* embed = app.add_subcommand(
      "embed", "Sentence embeddings of an encoder: one vector per input, pooled as the spec says, one JSON array a "
               "line (or raw f32 rows with -o)");
  EmbedOptions emb;
  embed->add_option("-w,--weights", emb.weights,
                    "Checkpoint: .safetensors, .index.json, .gguf or a directory (default: random weights)")
      ->check(CLI::ExistingPath);
  embed->add_option("--tokenizer", emb.tokenizer, "tokenizer.json, a SentencePiece .model or a .gguf (default: the one "
                                                  "beside the weights)")
      ->check(CLI::ExistingPath);
  embed->add_option("-t,--tokens", emb.tokens, "One input's token ids, comma-separated (repeatable)");
  embed->add_option("-p,--prompt", emb.prompts, "One input's text (repeatable)");
  embed->add_option("-f,--file", emb.file, "A text file: one input a line (empty lines skipped)")
      ->check(CLI::ExistingFile);
  embed->add_option("-b,--batch", emb.batch, "Inputs a pass")->capture_default_str()->check(at_least(1));
  embed->add_option("-c,--context", emb.context, "Positions an input may hold (default: the spec's max_context)")
      ->check(at_least(1));
  embed->add_option("-o,--output", emb.out_path, "Write raw little-endian f32 rows (inputs × width) here");
  embed->add_option("-d,--device", emb.device, "Vulkan device: index or name part");
  embed->add_flag("--no-check", emb.no_check, kNoCheckHelp);

  CLI11_PARSE(app, argc, argv);
  // Without --seed every run samples anew (it was seed 0 every time).
  if (std::none_of(seed_options.begin(), seed_options.end(), [](CLI::Option* o) { return o->count() > 0; })) {
    std::random_device entropy;
    sampling.seed = (static_cast<uint64_t>(entropy()) << 32) | entropy();
  }
  try {
    if (*info) return cmd_info();
    // An encoder embeds: commands that decode or sample would read hidden
    // states as logits.
    const bool decodes = *generate || *chat || *bench || *perplexity;
    if (lathe::model_info().encoder && decodes)
      throw Error(ErrorKind::InvalidArgument, std::string(lathe::model_info().name) +
                                                  " is an encoder: it embeds (embed, serve's /v1/embeddings) and writes "
                                                  "hidden states (logits); it does not generate");
    if (!lathe::model_info().encoder && *embed)
      throw Error(ErrorKind::InvalidArgument,
                  std::string(lathe::model_info().name) + (lathe::model_info().encoder_decoder ? " is an encoder-decoder" : " is a decoder") +
                      ": embed runs encoders (model.stack = \"encoder\")");
    // An encoder-decoder generates from a source; chat and perplexity read
    // one stream of tokens through the cache.
    if (lathe::model_info().encoder_decoder && (*chat || *perplexity))
      throw Error(ErrorKind::InvalidArgument, std::string(lathe::model_info().name) +
                                                  " is an encoder-decoder: it generates from a source (generate, serve); "
                                                  "chat and perplexity continue one stream");
    if (*embed) return cmd_embed(emb);
    if (*random) return cmd_random_weights(random_out, seed, scale);
    if (*generate && prompt_option->count() > 0) return cmd_generate_text(text, prompt);
    if (*generate)
      return cmd_generate(text.weights, gen_tokens, text.generate.max_new_tokens, text.context, text.device,
                          !text.no_check);
    if (*chat) return cmd_chat(text);
    if (*bench) {
      // (A build with a draft drafts where a tokenizer is at hand.)
      const bool tokenizer = !text.tokenizer.empty() || (!text.weights.empty() && has_tokenizer(text.weights));
      if (text.generate.lookup > 0 || (lathe::draft_info() != nullptr && tokenizer))
        return cmd_bench_speculative(text, bench_prompt, bench_steps, bench_repeat);
      return cmd_bench(text.weights, bench_prompt, bench_steps, bench_repeat, text.device, !text.no_check);
    }
    if (*profile) return cmd_profile(profile_rows, profile_position, device);
    if (*logits)
      return cmd_logits(weights, tokens, source_tokens, steps, context, device, out_path, !logits_no_check, logits_images);
    if (*tokenize) return cmd_tokenize(tok);
    if (*detokenize) return cmd_detokenize(detok_weights, detok_tokenizer, detok_tokens, detok_skip);
    if (*perplexity) return cmd_perplexity(ppl);
    if (*serve) return cmd_serve(srv);
  } catch (const Error& e) {
    const std::string line = std::string(argv[0]) + ": " + e.what() + "\n";  // one write (mpirun interleaves by write)
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
    if (link) abort_ranks(*link, 1);  // the other ranks may wait on this one
    return 1;
  }
  return 0;
}
