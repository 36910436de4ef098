// What a model computes over given inputs: logits (raw f32 rows, for
// comparing lathe with other implementations), perplexity (of a text file,
// as llama-perplexity computes it) and embed (an encoder's sentence
// embeddings).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <span>
#include <sstream>
#include <string>
#include <vector>
#include <unistd.h>

#include "cli/model/commands.hpp"
#include "cli/model/common.hpp"
#include "runtime/error.hpp"
#include "runtime/generate/images.hpp"
#include "runtime/model/model_info.hpp"
#include "runtime/model/session.hpp"
#include "runtime/serve/embedder.hpp"
#include "runtime/text/tokenize/tokenizer.hpp"
#include "runtime/vk/device.hpp"

namespace lathe::cli {

int cmd_logits(const std::string& weights, const std::string& tokens_text, const std::string& source_text,
               int64_t steps, int64_t context, const std::string& device, const std::string& out_path, bool check,
               const std::vector<std::string>& images) {
  const lathe::ModelInfo& m = lathe::model_info();
  const std::vector<int32_t> tokens = parse_tokens(tokens_text);
  if (!images.empty() && m.vision == nullptr)
    throw Error(ErrorKind::InvalidArgument,
                "--image: " + std::string(m.name) + " takes no images (its spec has no [vision] splice)");
  if (m.encoder && steps > 0)
    throw Error(ErrorKind::InvalidArgument, std::string(m.name) + " is an encoder: it has no decode steps (drop -n)");
  if (m.encoder_decoder && source_text.empty())
    throw Error(ErrorKind::InvalidArgument, std::string(m.name) + " is an encoder-decoder: give the source's ids "
                                                                   "(--source-tokens) and the decoder's (-t)");
  if (!m.encoder_decoder && !source_text.empty())
    throw Error(ErrorKind::InvalidArgument,
                "--source-tokens: " + std::string(m.name) + " is not an encoder-decoder: it has no source");
  const std::vector<int32_t> source = m.encoder_decoder ? parse_tokens(source_text, "--source-tokens") : std::vector<int32_t>{};
  const auto checkpoint = checked(weights);
  lathe::vk::Context vk(device_options(device));
  lathe::SessionOptions options;
  options.all_logits = true;
  options.context = context;
  options.images = std::max<int64_t>(1, static_cast<int64_t>(images.size()));
  lathe::Session session(vk.devices(), m, split_over(options, vk));
  session.load(*checkpoint, {.check_finite = check});
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(ErrorKind::Io, out_path + ": cannot write");
  // Every row checked before it is written: NaN rows are an error naming
  // the row, not a file a comparison reads as a mismatch (or a match).
  const size_t vocab = static_cast<size_t>(m.output_width);  // an encoder's rows: its final hidden states
  auto write = [&](const std::vector<float>& rows, const std::function<std::string(size_t)>& where) {
    for (size_t r = 0; r * vocab < rows.size(); ++r)
      lathe::check_logits(std::span(rows).subspan(r * vocab, vocab), where(r));
    out.write(reinterpret_cast<const char*>(rows.data()), static_cast<std::streamsize>(rows.size() * sizeof(float)));
  };
  if (!source.empty()) session.source(0, source);
  const bool cross = m.vision != nullptr && m.vision->cross;
  if (images.empty()) {
    write(session.prefill(tokens), [](size_t r) { return "prompt row " + std::to_string(r); });
  } else if (cross) {
    // The images into the decoder's cross-attention caches; each marker
    // stays a row of the prompt.
    lathe::text::cross_images(session, *m.vision, 0, tokens, image_features(weights, images, check, vk.device()));
    write(session.prefill(tokens), [](size_t r) { return "prompt row " + std::to_string(r); });
  } else {
    // Each image's rows in place of its marker, as the checkpoint's processor
    // expands it; the rows of the ids given are written, not those the
    // expansion adds (the image's, and the tokens around it and its rows).
    const lathe::text::SplicedPrompt p =
        lathe::text::splice_images(*m.vision, tokens, image_features(weights, images, check, vk.device()), m.hidden);
    const std::vector<float> rows = session.prefill(0, p.ids, p.at, p.features);
    std::vector<float> text;
    for (const int64_t r : p.own)
      text.insert(text.end(), rows.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(r) * vocab),
                  rows.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(r + 1) * vocab));
    write(text, [](size_t r) { return "text row " + std::to_string(r); });
  }
  for (int64_t i = 0; i < steps; ++i)
    write(session.decode(session.argmax()), [i](size_t) { return "decode step " + std::to_string(i + 1); });
  if (!out.flush()) throw Error(ErrorKind::Io, out_path + ": write failed");
  // A marker's row is an image's rows, not written (a cross-attention
  // decoder's stays a prompt row).
  const size_t markers = images.empty() || cross ? 0 : images.size();
  std::cerr << "wrote " << tokens.size() - markers + static_cast<size_t>(steps) << " rows × " << vocab
            << (m.encoder ? " f32 hidden states to " : " f32 logits to ")
            << out_path << " (" << vk.device().info().name << ")\n";
  return 0;
}

int cmd_perplexity(const PerplexityOptions& o) {
  using Clock = std::chrono::steady_clock;
  const lathe::ModelInfo& m = lathe::model_info();
  const lathe::text::Tokenizer tokenizer = load_tokenizer(o.tokenizer, o.weights, "perplexity");
  const std::vector<int32_t> tokens = tokenizer.encode(read_text_file(o.file, "--file"), /*add_special=*/true);
  const int64_t n_ctx = o.context > 0 ? o.context : m.max_context;
  if (n_ctx < 4 || n_ctx > m.max_context)
    throw Error(ErrorKind::InvalidArgument, "--context " + std::to_string(n_ctx) + ": must be in [4, " +
                                                std::to_string(m.max_context) + "] (the spec's max_context)");
  int64_t chunks = static_cast<int64_t>(tokens.size()) / n_ctx;
  if (chunks < 1)
    throw Error(ErrorKind::InvalidArgument, "--file " + o.file + ": " + std::to_string(tokens.size()) +
                                                " tokens, fewer than one chunk of " + std::to_string(n_ctx) +
                                                " (give a longer text or a smaller --context)");
  if (o.chunks > 0) chunks = std::min(chunks, o.chunks);
  const auto checkpoint = checked(o.weights);
  lathe::vk::Context vk(device_options(o.device));
  lathe::SessionOptions options;
  options.context = n_ctx;
  options.max_chunk = n_ctx;
  options.all_logits = true;
  lathe::Session session(vk.devices(), m, split_over(options, vk));
  session.load(*checkpoint, {.check_finite = !o.no_check});
  warm_up(session, n_ctx);
  const bool terminal = isatty(STDERR_FILENO) != 0;
  const int64_t first = n_ctx / 2;
  const size_t vocab = static_cast<size_t>(m.vocab);
  double nll = 0, nll2 = 0;
  int64_t count = 0;
  const Clock::time_point start = Clock::now();
  for (int64_t c = 0; c < chunks; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx);
    if (tokenizer.bos()) chunk[0] = *tokenizer.bos();
    session.reset();
    // n_ctx rows × vocab: one prompt pass, or (--decode) its first token
    // and then a decode step a token, as generation reads them.
    std::vector<float> logits;
    if (o.decode) {
      logits = session.prefill(std::span(chunk).first(1));
      logits.resize(static_cast<size_t>(n_ctx) * vocab);
      for (int64_t j = 1; j < n_ctx - 1; ++j) {
        const std::vector<float> step = session.decode(chunk[static_cast<size_t>(j)]);
        std::copy(step.begin(), step.end(), logits.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(j) * vocab));
      }
    } else {
      logits = session.prefill(chunk);
    }
    for (int64_t j = first; j < n_ctx - 1; ++j) {
      const float* row = logits.data() + static_cast<size_t>(j) * vocab;
      lathe::check_logits(std::span(row, vocab), "chunk " + std::to_string(c + 1) + ", row " + std::to_string(j));
      const double top = *std::max_element(row, row + vocab);
      double sum = 0;
      for (size_t k = 0; k < vocab; ++k) sum += std::exp(static_cast<double>(row[k]) - top);
      const double v = top + std::log(sum) - row[chunk[static_cast<size_t>(j) + 1]];
      nll += v;
      nll2 += v * v;
      ++count;
    }
    if (terminal) std::fprintf(stderr, "[%lld]%.4f,", static_cast<long long>(c + 1), std::exp(nll / count));
  }
  if (terminal) std::fprintf(stderr, "\n");
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double mean = nll / count;
  const double ppl = std::exp(mean);
  const double error = count > 1 ? std::sqrt(std::max(nll2 / count - mean * mean, 0.0) / (count - 1)) * ppl : 0.0;
  std::printf("%zu tokens, %lld chunks of %lld, %lld scored\nFinal estimate: PPL = %.4f +/- %.5f\n", tokens.size(),
              static_cast<long long>(chunks), static_cast<long long>(n_ctx), static_cast<long long>(count), ppl, error);
  std::fflush(stdout);
  std::fprintf(stderr, "[%s on %s: %.1f s, %.1f tok/s]\n", std::string(m.name).c_str(), vk.device().info().name.c_str(),
               seconds, static_cast<double>(chunks * n_ctx) / std::max(seconds, 1e-9));
  return 0;
}

int cmd_embed(const EmbedOptions& o) {
  const lathe::ModelInfo& m = lathe::model_info();
  std::vector<std::vector<int32_t>> inputs;
  for (const std::string& t : o.tokens) inputs.push_back(parse_tokens(t, "--tokens"));
  if (!o.prompts.empty() || !o.file.empty()) {
    const lathe::text::Tokenizer tokenizer = load_tokenizer(o.tokenizer, o.weights, "embed of text");
    std::vector<std::string> lines = o.prompts;
    if (!o.file.empty()) {
      std::istringstream text(read_text_file(o.file, "--file"));
      for (std::string line; std::getline(text, line);)
        if (!line.empty()) lines.push_back(line);
    }
    for (const std::string& line : lines) inputs.push_back(tokenizer.encode(line, /*add_special=*/true));
  }
  if (inputs.empty()) throw Error(ErrorKind::InvalidArgument, "embed: no inputs (give --tokens, --prompt or --file)");
  const auto checkpoint = checked(o.weights);
  lathe::vk::Context vk(device_options(o.device));
  lathe::SessionOptions options;
  options.context = o.context;
  options.sequences = std::min<int64_t>(o.batch, static_cast<int64_t>(inputs.size()));
  lathe::Session session(vk.devices(), m, split_over(options, vk));
  load_weights(session, checkpoint.get(), !o.no_check);
  std::ofstream out;
  if (!o.out_path.empty()) {
    out.open(o.out_path, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(ErrorKind::Io, o.out_path + ": cannot write");
  }
  const auto start = std::chrono::steady_clock::now();
  // The server's embedder: `batch` inputs a pass, each pooled as the spec says.
  const std::vector<std::vector<float>> vectors = lathe::serve::Embedder(session).embed(inputs);
  size_t tokens = 0;
  for (size_t i = 0; i < vectors.size(); ++i) {
    const std::vector<float>& v = vectors[i];
    tokens += inputs[i].size();
    lathe::check_logits(v, "input " + std::to_string(i));
    if (out.is_open()) {
      out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
      continue;
    }
    std::string line = "[";
    char number[32];
    for (size_t j = 0; j < v.size(); ++j) {
      std::snprintf(number, sizeof number, "%s%.9g", j ? ", " : "", static_cast<double>(v[j]));
      line += number;
    }
    std::cout << line << "]\n";
  }
  if (out.is_open() && !out.flush()) throw Error(ErrorKind::Io, o.out_path + ": write failed");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << "embedded " << inputs.size() << " inputs (" << tokens << " tokens) in " << seconds << " s: "
            << static_cast<double>(inputs.size()) / seconds << " inputs/s, " << m.output_width << " values each ("
            << vk.device().info().name << ")\n";
  return 0;
}

}  // namespace lathe::cli
