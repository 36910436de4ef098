// The OpenAI-compatible HTTP server (cpp-httplib): POST /v1/completions and
// /v1/chat/completions (whole, or `stream: true` as server-sent events
// ending in `data: [DONE]`), GET /v1/models, /health and /metrics
// (Prometheus text). Requests go to a Scheduler; every error is an OpenAI
// error object with its HTTP status. httplib is an implementation detail:
// no header of lathe_serve includes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/serve/openai.hpp"
#include "runtime/serve/scheduler.hpp"

namespace lathe::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                       // 0: any free port (bind() says which)
  size_t max_body_bytes = 1 << 20;       // larger bodies: 413
  int threads = 0;                       // HTTP worker threads; 0: enough for every slot and queue place
};

class Server {
 public:
  // `scheduler` and what `model` points to must outlive the server.
  Server(Scheduler& scheduler, Model model, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket; returns the port. Throws Error(Io) when the
  // address cannot be bound.
  int bind();
  // Serves until stop(); call bind() first.
  void listen();
  // From any thread: listen() returns once the requests in flight are answered.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lathe::serve
