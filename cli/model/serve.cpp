// serve: the OpenAI-compatible HTTP server over a session of several
// sequences (runtime/serve/), until SIGINT or SIGTERM.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <pthread.h>

#include "cli/model/commands.hpp"
#include "cli/model/common.hpp"
#include "runtime/error.hpp"
#include "runtime/image/preprocess.hpp"
#include "runtime/model/model_info.hpp"
#include "runtime/model/session.hpp"
#include "runtime/serve/embedder.hpp"
#include "runtime/serve/engine.hpp"
#include "runtime/serve/openai.hpp"
#include "runtime/serve/scheduler.hpp"
#include "runtime/serve/server.hpp"
#include "runtime/text/jinja/chat_template.hpp"
#include "runtime/text/tokenize/tokenizer.hpp"
#include "runtime/vk/device.hpp"
#include "runtime/weights/gguf.hpp"

namespace lathe::cli {

namespace {

// The chat template of the checkpoint at `weights`: a GGUF file's own, or
// the one beside it.
std::optional<lathe::text::ChatTemplateSource> find_chat_template(const std::string& weights) {
  namespace fs = std::filesystem;
  if (fs::path(weights).extension() == ".gguf")
    return lathe::text::find_chat_template(lathe::weights::GgufFile(weights));
  return lathe::text::find_chat_template(weights);
}

}  // namespace

int cmd_serve(const ServeOptions& o) {
  const lathe::ModelInfo& m = lathe::model_info();
  const lathe::text::Tokenizer tokenizer = load_tokenizer(o.tokenizer, o.weights, "serve");
  const std::optional<lathe::text::ChatTemplateSource> source = find_chat_template(o.weights);
  std::optional<lathe::text::ChatTemplate> chat_template;
  if (source) chat_template = lathe::text::ChatTemplate::parse(source->text, source->origin);
  // The handlers and the engine thread inherit this mask: the signals reach
  // only the thread that waits for them below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const auto checkpoint = checked(o.weights);
  lathe::vk::Context vk(device_options(o.device));
  lathe::SessionOptions options;
  options.context = o.context;
  options.max_chunk = 64;  // the scheduler's prompt chunk (an encoder-decoder's source runs whole)
  options.sequences = o.parallel;
  // Speculation: a pass holds every sequence's token and proposals, as many
  // as a prompt chunk's rows.
  const lathe::ModelInfo* draft_model = lathe::draft_info();
  if (o.lookup > 0 || draft_model)
    options.verify_rows = std::min<int64_t>(options.max_chunk, o.parallel * (o.draft_max + 1));
  if (!draft_model && !o.draft_weights.empty())
    throw lathe::Error(lathe::ErrorKind::InvalidArgument, "--draft-weights " + o.draft_weights + ": " +
                                                              std::string(m.name) +
                                                              "'s build has no draft (lathe build MODEL --draft DRAFT)");
  // A decoder that cross-attends to images: the images a request may hold
  // (its sequence's cross-attention caches).
  constexpr int64_t kCrossImages = 4;
  if (m.vision != nullptr && m.vision->cross) options.images = kCrossImages;
  lathe::Session session(vk.devices(), m, split_over(options, vk));
  if ((o.lookup > 0 || draft_model) && !session.verifies())
    throw lathe::Error(lathe::ErrorKind::Unsupported, std::string(m.name) +
                                            ": speculation (--lookup, a draft) needs a verification pass, which a "
                                            "model with state-space layers or an encoder has not (its state cannot "
                                            "be cut back)");
  load_weights(session, checkpoint.get(), !o.no_check);
  warm_up(session, options.max_chunk);
  // A vision model's tower: a session of its own on the first device, its
  // weights from the same checkpoint; chat messages' image parts go through
  // it on the engine thread.
  std::optional<ImageEncoder> tower;
  std::optional<lathe::serve::ImageSupport> images;
  if (m.vision != nullptr && lathe::vision_info() != nullptr) {
    tower.emplace(o.weights, !o.no_check, vk.device(), "serve");
    images.emplace();
    images->link = *m.vision;
    images->preprocess = tower->preprocess();
    images->row_floats = tower->session().model().plan.input_row_floats;
    images->max_images = m.vision->cross ? options.images : 0;
  }
  lathe::serve::SessionEngine engine(session, tower ? &tower->session() : nullptr, m.vision);
  lathe::serve::SchedulerOptions scheduling;
  scheduling.chunk = m.encoder_decoder ? session.context() : options.max_chunk;
  scheduling.queue_limit = o.queue;
  scheduling.reuse_prompts = !o.no_prompt_reuse;
  scheduling.lookup = o.lookup;
  // The build's draft: a sequence for each of the session's.
  std::optional<DraftSession> draft;
  if (draft_model) {
    draft.emplace(*draft_model, o.draft_weights, o.draft_min_p, !o.no_check, tokenizer, vk.device(), session.context(),
                  o.parallel);
    scheduling.draft = &draft->draft;
  }
  scheduling.draft_max = o.draft_max;
  scheduling.pass_rows = session.decode_rows();
  lathe::serve::Scheduler scheduler(engine, tokenizer, scheduling);
  lathe::serve::Model model{std::string(m.name), &tokenizer, chat_template ? &*chat_template : nullptr,
                            source ? source->bos_token : "", source ? source->eos_token : "", session.context(),
                            m.vocab, m.encoder, images ? &*images : nullptr,
                            source ? lathe::serve::detect_tool_format(source->text) : lathe::serve::ToolFormat::None};
  // An encoder answers /v1/embeddings: --parallel inputs a pass.
  std::optional<lathe::serve::Embedder> embedder;
  if (m.encoder) embedder.emplace(session);
  lathe::serve::ServerOptions server_options;
  server_options.host = o.host;
  server_options.port = o.port;
  // 0: 1 MiB, or 32 MiB where messages may carry images (base64 takes 4/3 of a file).
  server_options.max_body_bytes = static_cast<size_t>(o.max_body > 0 ? o.max_body : images ? 32 << 20 : 1 << 20);
  server_options.max_bodies_bytes = static_cast<size_t>(o.max_bodies);
  const auto ms = [](double seconds) { return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)); };
  server_options.read_timeout = ms(o.read_timeout);
  server_options.write_timeout = ms(o.write_timeout);
  server_options.keep_alive_timeout = ms(o.keep_alive);
  server_options.keep_alive_max = o.keep_alive_max;
  server_options.threads = o.http_threads;
  server_options.cors_origins = o.cors;
  lathe::serve::Server server(scheduler, model, server_options, embedder ? &*embedder : nullptr);
  const int port = server.bind();
  // The first SIGINT or SIGTERM stops accepting and lets the requests in
  // flight finish; a second one, or the end of --grace, cuts them off.
  std::atomic<bool> listening_done = false;
  std::thread stopper([&] {
    int signal = 0;
    if (sigwait(&signals, &signal) != 0 || listening_done) return;
    std::cerr << "lathe serve: stopping: no new requests; those in flight may take " << o.grace << " s (--grace)\n";
    server.stop();
    const auto until = std::chrono::steady_clock::now() + ms(o.grace);
    const timespec slice{0, 100'000'000};
    while (!server.wait_stopped(std::chrono::milliseconds(0))) {
      const bool signalled = sigtimedwait(&signals, nullptr, &slice) > 0;
      if (listening_done) return;  // the wake-up from the main thread
      if (signalled || std::chrono::steady_clock::now() >= until) {
        std::cerr << "lathe serve: cutting off the requests still in flight\n";
        server.cut();
        return;
      }
    }
  });
  std::printf("%s on %s: listening on http://%s:%d (%lld sequences of %lld positions; %s; chat template: %s%s%s%s)\n",
              std::string(m.name).c_str(), vk.device().info().name.c_str(), o.host.c_str(), port,
              static_cast<long long>(engine.sequences()), static_cast<long long>(session.context()),
              memory_text(session).c_str(), source ? source->origin.c_str() : "none",
              model.tool_format != lathe::serve::ToolFormat::None ? "; tool calls: " : "",
              model.tool_format != lathe::serve::ToolFormat::None ? lathe::serve::tool_format_name(model.tool_format) : "",
              images ? "; images: data: URLs in chat messages" : "");
  std::fflush(stdout);
  server.listen();
  listening_done = true;
  pthread_kill(stopper.native_handle(), SIGTERM);  // wakes the waiter if listen() ended otherwise
  stopper.join();
  std::cerr << "lathe serve: stopped\n";
  return 0;
}

}  // namespace lathe::cli
