// The OpenAI-compatible HTTP server (cpp-httplib): POST /v1/completions and
// /v1/chat/completions (whole, or `stream: true` as server-sent events
// ending in `data: [DONE]`) for a decoder, POST /v1/embeddings for an
// encoder, GET /v1/models, /health and /metrics (Prometheus text), and a
// decoder's chat page at GET / (chat.html, compiled in). Requests go to a Scheduler; every error is an OpenAI
// error object with its HTTP status. httplib is an implementation detail:
// no header of lathe_serve includes it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/serve/embedder.hpp"
#include "runtime/serve/openai.hpp"
#include "runtime/serve/scheduler.hpp"

namespace lathe::serve {

// Every limit holds for every framing of a request (Content-Length,
// chunked, pipelined on one connection) and for every route.
struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                  // 0: any free port (bind() says which)
  size_t max_body_bytes = 1 << 20;  // larger bodies: 413, whatever their framing
  // The bodies being read and parsed at once, every connection's together;
  // a body that would pass it: 503 with Retry-After, the connection closed
  // (its body unread). 0: the larger of 64 MiB and 4 × max_body_bytes.
  size_t max_bodies_bytes = 0;
  int threads = 0;                  // most HTTP worker threads; 0: every sequence and queue place, and 64 more
  // A whole request (line, headers and body) must arrive within this, from
  // its first byte: a client that sends a byte a second is cut off (408).
  std::chrono::milliseconds read_timeout{30000};
  std::chrono::milliseconds write_timeout{30000};  // one write may wait this long for the client to read
  // A connection waits this long for its next request (and a new one for its
  // first), then it is closed.
  std::chrono::milliseconds keep_alive_timeout{5000};
  int keep_alive_max = 100;  // requests on one connection; the last is answered with Connection: close
  // Origins whose browsers may call the API (Access-Control-Allow-Origin);
  // "*" allows any. Empty: no CORS headers, as by default.
  std::vector<std::string> cors_origins;
};

class Server {
 public:
  // `scheduler`, `embedder` and what `model` points to must outlive the
  // server. An encoder's server (model.encoder) answers /v1/embeddings
  // through `embedder` and refuses completions.
  Server(Scheduler& scheduler, Model model, ServerOptions options, Embedder* embedder = nullptr);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket; returns the port. Throws Error(Io) when the
  // address cannot be bound.
  int bind();
  // Serves until stop(); call bind() first.
  void listen();
  // From any thread: stops accepting connections and reading new requests;
  // the requests in flight go on to their end (a stream to its last chunk
  // and [DONE]), then listen() returns.
  void stop();
  // From any thread, after stop(): ends every connection now (the grace
  // period is over); listen() returns once their handlers have noticed.
  void cut();
  // Waits up to `timeout` for listen() to return; true once it has.
  bool wait_stopped(std::chrono::milliseconds timeout);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lathe::serve
