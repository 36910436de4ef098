// Generation: generate (greedy token ids, or sampled text streamed as it
// comes) and chat (a conversation a line at a time), with their speed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <unistd.h>

#include "cli/model/commands.hpp"
#include "cli/model/common.hpp"
#include "runtime/error.hpp"
#include "runtime/generate/generate.hpp"
#include "runtime/generate/images.hpp"
#include "runtime/generate/sampler.hpp"
#include "runtime/model/model_info.hpp"
#include "runtime/model/session.hpp"
#include "runtime/text/tokenize/tokenizer.hpp"
#include "runtime/vk/device.hpp"
#include "runtime/weights/checkpoint.hpp"

namespace lathe::cli {

namespace {

// A generation's speed, the session's memory and why it stopped, on stderr.
void print_stats(const lathe::text::GenerateStats& s, const std::string& device, const lathe::Session& session) {
  std::fprintf(stderr, "\n[%s on %s: %s %zu tokens %.1f tok/s, decode %zu tokens %.1f tok/s; %s; stop: %s]\n",
               std::string(lathe::model_info().name).c_str(), device.c_str(),
               lathe::model_info().encoder_decoder ? "encode" : "prefill", s.prompt_tokens,
               static_cast<double>(s.prompt_tokens) / std::max(s.prefill_seconds, 1e-9), s.new_tokens,
               s.new_tokens > 1 ? static_cast<double>(s.new_tokens - 1) / std::max(s.decode_seconds, 1e-9) : 0.0,
               memory_text(session).c_str(), s.stop_reason.c_str());
  if (s.target_passes > 0 && s.draft_tokens > 0)
    std::fprintf(stderr, "[speculation: %zu of %zu proposed tokens accepted (%.0f %%), %.2f tokens a target pass]\n",
                 s.draft_accepted, s.draft_tokens, 100.0 * static_cast<double>(s.draft_accepted) / static_cast<double>(s.draft_tokens),
                 static_cast<double>(s.new_tokens - 1) / static_cast<double>(s.target_passes));
}

// What generate --prompt and chat share, in the order that lets bad input
// fail before the device work: the tokenizer, the sampler (whose options it
// checks), then the device, the session and its weights.
struct TextRun {
  static lathe::SessionOptions session_options(const TextOptions& o) {
    lathe::SessionOptions options;
    options.context = o.context;
    // a cross-attention decoder's caches hold them
    options.images = std::max<int64_t>(1, static_cast<int64_t>(o.images.size()));
    // A verification pass holds the token and its proposals.
    if (o.generate.lookup > 0 || lathe::draft_info() != nullptr) options.verify_rows = o.generate.draft_max + 1;
    return options;
  }
  explicit TextRun(const TextOptions& o)
      : tokenizer(load_tokenizer(o.tokenizer, o.weights)),
        sampler(o.generate.sampling),
        generate(with_grammar(o, tokenizer)),
        checkpoint(checked(o.weights)),
        vk(device_options(o.device)),
        session(vk.devices(), lathe::model_info(),
                split_over(session_options(o), vk)) {
    if (o.verbose)
      std::cerr << "seed " << o.generate.sampling.seed << " (--seed " << o.generate.sampling.seed
                << " samples this text again)\n";
    load_weights(session, checkpoint.get(), !o.no_check);
    if (const lathe::ModelInfo* d = lathe::draft_info()) {
      draft.emplace(*d, o.draft_weights, o.draft_min_p, !o.no_check, tokenizer, vk.device(), session.context(), 1);
      generate.draft = &draft->draft;
    } else if (!o.draft_weights.empty()) {
      throw Error(ErrorKind::InvalidArgument, "--draft-weights " + o.draft_weights + ": " +
                                                  std::string(lathe::model_info().name) +
                                                  "'s build has no draft (lathe build MODEL --draft DRAFT)");
    }
  }
  // The options with --grammar, --json-schema or their files compiled
  // (before the device starts: a bad grammar is refused first).
  static lathe::text::GenerateOptions with_grammar(const TextOptions& o, const lathe::text::Tokenizer& tokenizer) {
    using lathe::text::GrammarSource;
    struct Choice {
      const std::string& value;
      GrammarSource source;
      const char* option;
      bool file;
    };
    lathe::text::GenerateOptions options = o.generate;
    for (const Choice& c : {Choice{o.grammar, GrammarSource::Gbnf, "--grammar", false},
                            Choice{o.grammar_file, GrammarSource::Gbnf, "--grammar-file", true},
                            Choice{o.json_schema, GrammarSource::JsonSchema, "--json-schema", false},
                            Choice{o.json_schema_file, GrammarSource::JsonSchema, "--json-schema-file", true}}) {
      if (c.value.empty()) continue;  // (the options exclude each other)
      options.grammar = lathe::text::compile_grammar(c.source, c.file ? read_text_file(c.value, c.option) : c.value,
                                                     c.file ? c.value : c.option);
      options.vocabulary = lathe::text::grammar_vocabulary(tokenizer, static_cast<int32_t>(lathe::model_info().vocab));
    }
    return options;
  }
  lathe::text::Tokenizer tokenizer;
  lathe::text::Sampler sampler;
  lathe::text::GenerateOptions generate;  // o.generate with the grammar
  std::unique_ptr<lathe::weights::Checkpoint> checkpoint;  // opened and audited before the device starts
  lathe::vk::Context vk;
  lathe::Session session;
  std::optional<DraftSession> draft;
};

}  // namespace

int cmd_generate(const std::string& weights, const std::string& tokens_text, int64_t steps, int64_t context,
                 const std::string& device, bool check) {
  using Clock = std::chrono::steady_clock;
  const lathe::ModelInfo& m = lathe::model_info();
  const std::vector<int32_t> prompt = parse_tokens(tokens_text);
  const auto checkpoint = checked(weights);
  lathe::vk::Context vk(device_options(device));
  lathe::SessionOptions options;
  options.context = context;
  options.max_chunk = std::max<int64_t>(1, std::min<int64_t>(static_cast<int64_t>(prompt.size()), 512));
  lathe::Session session(vk.devices(), m, split_over(options, vk));
  load_weights(session, checkpoint.get(), check);
  if (weights.empty()) std::cerr << "(random weights: the tokens mean nothing; the speed does)\n";
  warm_up(session, static_cast<int64_t>(prompt.size()));
  const int64_t free = session.context() - static_cast<int64_t>(prompt.size());
  if (free < 0)
    throw Error(ErrorKind::InvalidArgument, "--tokens: " + std::to_string(prompt.size()) + " tokens do not fit the context of " +
                                                std::to_string(session.context()) + " positions (--context)");
  // -n: new tokens; -1: until the context is full. The first comes from the
  // prompt's pass, each later one from a decode step.
  const int64_t wanted = steps < 0 ? free + 1 : steps;
  const Clock::time_point start = Clock::now();
  session.prompt(0, prompt);  // an encoder-decoder's source, then its decoder's start token
  const Clock::time_point prefilled = Clock::now();
  std::vector<int32_t> picks;
  if (wanted > 0) {
    picks.push_back(session.argmax());  // the prompt's greedy continuation
    const int64_t room = m.encoder_decoder ? session.context() - session.position() : free;
    const std::vector<int32_t> more = session.generate_greedy(picks[0], std::min(wanted - 1, room));
    picks.insert(picks.end(), more.begin(), more.end());
  }
  const Clock::time_point done = Clock::now();
  for (size_t i = 0; i < picks.size(); ++i) std::cout << (i ? " " : "") << picks[i];
  std::cout << "\n";
  steps = static_cast<int64_t>(picks.size());
  const double prefill_s = std::chrono::duration<double>(prefilled - start).count();
  const double decode_s = std::chrono::duration<double>(done - prefilled).count();
  std::fprintf(stderr, "%s on %s: %s %zu tokens %.1f tok/s, decode %lld tokens %.1f tok/s, %zu dispatches/token; %s\n",
               std::string(m.name).c_str(), vk.device().info().name.c_str(), m.encoder_decoder ? "encode" : "prefill",
               prompt.size(),
               static_cast<double>(prompt.size()) / prefill_s, static_cast<long long>(steps),
               steps > 1 ? static_cast<double>(steps - 1) / std::max(decode_s, 1e-9) : 0.0,
               session.dispatches_per_token(), memory_text(session).c_str());
  return 0;
}

int cmd_generate_text(const TextOptions& o, const std::string& prompt) {
  TextRun run(o);
  const std::vector<int32_t> ids = lathe::text::encode_prompt(run.session, run.tokenizer, prompt);
  // --image: each image's features in place of the prompt's next marker.
  // (A cross-attention decoder's: into its caches after the warm-up, the
  // markers staying.)
  std::optional<lathe::text::SplicedPrompt> spliced;
  const lathe::plan::VisionLink* link = lathe::model_info().vision;
  std::vector<lathe::text::ImageFeatures> images;
  if (!o.images.empty()) images = image_features(o.weights, o.images, !o.no_check, run.vk.device());
  const bool cross = link != nullptr && link->cross;
  if (!images.empty() && !cross) spliced = lathe::text::splice_images(*link, ids, images, lathe::model_info().hidden);
  warm_up(run.session, static_cast<int64_t>(spliced ? spliced->ids.size() : ids.size()));
  if (!images.empty() && cross) lathe::text::cross_images(run.session, *link, 0, ids, images);
  std::cout << prompt << std::flush;
  const auto print = [](std::string_view text) { std::cout << text << std::flush; };
  const lathe::text::GenerateStats stats =
      spliced ? lathe::text::generate(run.session, run.tokenizer, run.sampler, *spliced, run.generate, print)
              : lathe::text::generate(run.session, run.tokenizer, run.sampler, ids, run.generate, print);
  std::cout << "\n" << std::flush;  // before the stats on stderr, where both go to one pipe
  print_stats(stats, run.vk.device().info().name, run.session);
  return 0;
}

namespace {

// A chat line's ids with the rows of the `images` /image gave for it: the
// line's image markers take them in order; a line that writes none has them
// before its text (after a BOS). Throws Error when the markers are not as
// many.
lathe::text::ExpandedPrompt chat_ids(std::vector<int32_t> ids, std::span<const lathe::text::ImageFeatures> images,
                                     const lathe::text::Tokenizer& tokenizer) {
  const lathe::plan::VisionLink* link = lathe::model_info().vision;
  if (images.empty() || link == nullptr) return {std::move(ids), {}, {}};
  if (lathe::text::count_markers(*link, ids) == 0) {
    const size_t at = !ids.empty() && tokenizer.bos() && ids[0] == *tokenizer.bos() ? 1 : 0;
    ids.insert(ids.begin() + static_cast<std::ptrdiff_t>(at), images.size(), static_cast<int32_t>(link->marker));
  }
  // (A cross-attention decoder's markers stay: its layers read the images.)
  if (link->cross) return {std::move(ids), {}, {}, {}};
  std::vector<lathe::plan::ImageGrid> grids;
  for (const lathe::text::ImageFeatures& image : images) grids.push_back(image.grid);
  return lathe::text::expand_markers(*link, ids, grids);
}

}  // namespace

int cmd_chat(const TextOptions& o) {
  TextRun run(o);
  lathe::Session& session = run.session;
  warm_up(session, session.context());  // lines of any length: both layouts
  lathe::text::GenerateOptions options = run.generate;
  if (options.stop.empty()) options.stop = {"\n"};  // a turn is one line, unless --stop says otherwise
  const bool terminal = isatty(STDIN_FILENO) != 0;
  if (terminal)
    std::cerr << lathe::model_info().name << ": type a line, the model continues it (" << session.context()
              << " positions of context; " << (lathe::model_info().vision ? "/image FILE adds an image to the next line; " : "")
              << "Ctrl-D ends)\n";
  std::optional<ImageEncoder> encoder;      // the tower, started at the first /image
  std::vector<lathe::text::ImageFeatures> pending;  // /image's features, for the next line
  std::string line;
  while (true) {
    if (terminal) std::cout << "> " << std::flush;
    if (!std::getline(std::cin, line)) break;
    // /image FILE: the image's features wait for the next line.
    if (line.rfind("/image", 0) == 0 && (line.size() == 6 || line[6] == ' ')) {
      const size_t first = line.find_first_not_of(' ', 6), last = line.find_last_not_of(" \r");
      const std::string file = first == std::string::npos ? "" : line.substr(first, last + 1 - first);
      try {
        if (file.empty()) throw Error(ErrorKind::InvalidArgument, "/image needs a file: /image FILE");
        if (!encoder) encoder.emplace(o.weights, !o.no_check, run.vk.device());
        pending.push_back(encoder->encode(file));
        std::cerr << "[" << file << ": with the next line]\n";
      } catch (const Error& e) {
        std::cerr << "[" << e.what() << "]\n";
      }
      continue;
    }
    const std::string text = line + "\n";
    lathe::text::ExpandedPrompt expanded;
    try {
      expanded = chat_ids(lathe::text::encode_prompt(session, run.tokenizer, text), pending, run.tokenizer);
      if (session.position() + static_cast<int64_t>(expanded.ids.size()) + 1 > session.context()) {
        // A line that would not fit even a fresh context is refused alone;
        // the conversation goes on without it.
        lathe::text::ExpandedPrompt fresh =
            chat_ids(run.tokenizer.encode(text, /*add_special=*/true), pending, run.tokenizer);
        if (static_cast<int64_t>(fresh.ids.size()) + 1 > session.context()) {
          std::cerr << "[that line is " << fresh.ids.size() << " tokens"
                    << (pending.empty() ? "" : " with its images")
                    << "; with one for the answer it does not fit the context of " << session.context()
                    << " positions (--context): not sent]\n";
          continue;
        }
        std::cerr << "[the context is full: starting over]\n";
        session.reset();
        run.sampler.reset();
        expanded = std::move(fresh);  // now with BOS
      }
    } catch (const Error& e) {  // the line's markers and the images waiting are not as many
      std::cerr << "[" << e.what() << ": not sent]\n";
      continue;
    }
    // A cross-attention decoder's images: into its caches, before the
    // conversation's first line (which its markers' rows read from then on).
    const lathe::plan::VisionLink* link = lathe::model_info().vision;
    if (link != nullptr && link->cross && !pending.empty()) {
      try {
        if (session.position() != 0)
          throw Error(ErrorKind::InvalidArgument, std::string(lathe::model_info().name) +
                                                      " reads images from a conversation's first line on: /image "
                                                      "before the first line (or after the context starts over)");
        lathe::text::cross_images(session, *link, 0, expanded.ids, pending);
      } catch (const Error& e) {
        std::cerr << "[" << e.what() << ": not sent]\n";
        pending.clear();
        continue;
      }
      pending.clear();
    }
    // The rows' features, once the line's ids are settled: the images in order.
    lathe::text::SplicedPrompt prompt{std::move(expanded.ids), std::move(expanded.at), {}, std::move(expanded.own)};
    for (const lathe::text::ImageFeatures& image : pending)
      prompt.features.insert(prompt.features.end(), image.values.begin(), image.values.end());
    pending.clear();
    const auto print = [](std::string_view t) { std::cout << t << std::flush; };
    const lathe::text::GenerateStats stats =
        prompt.at.empty() ? lathe::text::generate(session, run.tokenizer, run.sampler, prompt.ids, options, print)
                          : lathe::text::generate(session, run.tokenizer, run.sampler, prompt, options, print);
    std::cout << "\n";
    if (terminal) print_stats(stats, run.vk.device().info().name, run.session);
  }
  return 0;
}

}  // namespace lathe::cli
