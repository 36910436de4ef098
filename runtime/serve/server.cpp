#include "runtime/serve/server.hpp"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <mutex>

#include "runtime/error.hpp"

namespace lathe::serve {

using nlohmann::json;

namespace {

void send_error(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_error(res, e.status, e.body()); }

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

// How long a handler waits for tokens before it looks at its client again.
constexpr std::chrono::milliseconds kPoll{50};

// The state of one response being written, shared with httplib's content provider.
struct Reply {
  CompletionParams params;
  ResponseHeader header;
  std::shared_ptr<Generation> generation;
  const text::Tokenizer* tokenizer;
  std::string text;               // non-streaming: everything so far
  std::vector<TokenEvent> tokens;  // non-streaming: every event, for logprobs
  bool role_sent = false;
  bool done = false;
};

// One call of the content provider: waits a little for tokens, writes what
// came. False when the client is gone (the request is cancelled).
bool write_some(Reply& r, httplib::DataSink& sink) {
  if (r.done) return false;
  if (!sink.is_writable()) {
    r.generation->cancel();
    return false;
  }
  auto write = [&](const std::string& s) {
    if (sink.write(s.data(), s.size())) return true;
    r.generation->cancel();
    return false;
  };
  std::vector<TokenEvent> events;
  const std::optional<Finish> finish = r.generation->wait(events, kPoll);
  const CompletionParams& p = r.params;
  if (p.stream) {
    if (p.chat && !r.role_sent) {
      r.role_sent = true;
      if (!write(sse(stream_chunk(p, r.header, *r.tokenizer, {}, nullptr, /*role=*/true)))) return false;
    }
    if (!events.empty() && !write(sse(stream_chunk(p, r.header, *r.tokenizer, events, nullptr)))) return false;
    if (!finish) return true;
    if (finish->reason == "error") {
      if (!write(sse(error_body(500, "generation failed: " + finish->error)))) return false;
    } else {
      if (!write(sse(stream_chunk(p, r.header, *r.tokenizer, {}, &*finish)))) return false;
      if (r.params.include_usage) {
        json usage = stream_chunk(p, r.header, *r.tokenizer, {}, &*finish);
        usage["choices"] = json::array();
        usage["usage"] = usage_json(*finish);
        if (!write(sse(usage))) return false;
      }
    }
    if (!write("data: [DONE]\n\n")) return false;
  } else {
    for (TokenEvent& e : events) {
      r.text += e.text;
      r.tokens.push_back(std::move(e));
    }
    if (!finish) return true;
    const json body = finish->reason == "error"
                          ? error_body(500, "generation failed: " + finish->error)
                          : completion_response(p, r.header, *r.tokenizer, r.text, r.tokens, *finish);
    if (!write(dump(body))) return false;
  }
  r.done = true;
  sink.done();
  return true;
}

}  // namespace

struct Server::Impl {
  Scheduler& scheduler;
  Model model;
  ServerOptions options;
  httplib::Server http;
  std::atomic<uint64_t> next_id{1};
  std::mutex counts_mutex;
  std::map<int, int64_t> responses;  // HTTP status → count

  Impl(Scheduler& s, Model m, ServerOptions o) : scheduler(s), model(std::move(m)), options(std::move(o)) {}

  void completions(const httplib::Request& req, httplib::Response& res, bool chat) {
    json body;
    try {
      body = json::parse(req.body);
    } catch (const json::parse_error& e) {
      return send_error(res, 400, error_body(400, std::string("We could not parse the JSON body of your request: ") + e.what()));
    }
    auto reply = std::make_shared<Reply>();
    reply->tokenizer = model.tokenizer;
    try {
      reply->params = parse_completion(body, chat, model);
      reply->generation = scheduler.submit(reply->params.request);
    } catch (const ApiError& e) {
      return send_error(res, e);
    } catch (const Error& e) {
      return send_error(res, e.kind() == ErrorKind::InvalidArgument ? 400 : 500,
                        error_body(e.kind() == ErrorKind::InvalidArgument ? 400 : 500, e.what()));
    }
    if (!reply->generation) {
      res.set_header("Retry-After", "1");
      return send_error(res, 503, error_body(503, "The server is busy: every sequence is in use and the queue is full. "
                                                  "Retry later."));
    }
    char id[32];
    std::snprintf(id, sizeof id, "%s-%llx", chat ? "chatcmpl" : "cmpl", static_cast<unsigned long long>(next_id++));
    reply->header = {id, model.name, static_cast<int64_t>(std::time(nullptr))};
    if (reply->params.stream) res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        reply->params.stream ? "text/event-stream" : "application/json",
        [reply](size_t, httplib::DataSink& sink) { return write_some(*reply, sink); },
        [reply](bool success) {
          if (!success || !reply->done) reply->generation->cancel();
        });
  }

  std::string metrics() {
    const SchedulerStats s = scheduler.stats();
    std::string out;
    auto metric = [&](const char* name, const char* type, const char* help, const std::string& samples) {
      out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + samples;
    };
    auto sample = [](const char* name, double v) {
      char line[128];
      std::snprintf(line, sizeof line, "%s %.17g\n", name, v);
      return std::string(line);
    };
    std::string by_status;
    {
      std::lock_guard lock(counts_mutex);
      for (const auto& [status, n] : responses)
        by_status += "lathe_http_requests_total{status=\"" + std::to_string(status) + "\"} " + std::to_string(n) + "\n";
    }
    metric("lathe_http_requests_total", "counter", "HTTP requests answered, by status.", by_status);
    metric("lathe_requests_total", "counter", "Completion requests finished (any reason).",
           sample("lathe_requests_total", static_cast<double>(s.requests)));
    metric("lathe_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
           sample("lathe_prompt_tokens_total", static_cast<double>(s.prompt_tokens)));
    metric("lathe_completion_tokens_total", "counter", "Tokens generated.",
           sample("lathe_completion_tokens_total", static_cast<double>(s.completion_tokens)));
    metric("lathe_queue_length", "gauge", "Requests waiting for a sequence.",
           sample("lathe_queue_length", static_cast<double>(s.queued)));
    metric("lathe_active_sequences", "gauge", "Requests holding a sequence.",
           sample("lathe_active_sequences", static_cast<double>(s.active)));
    metric("lathe_sequences", "gauge", "Sequences (KV-cache regions) of the device.",
           sample("lathe_sequences", static_cast<double>(scheduler.sequences())));
    metric("lathe_decode_steps_total", "counter", "Batched decode passes.",
           sample("lathe_decode_steps_total", static_cast<double>(s.decode_steps)));
    metric("lathe_busy_seconds_total", "counter", "Engine time spent on prefill and decode.",
           sample("lathe_busy_seconds_total", s.busy_seconds));
    metric("lathe_tokens_per_second", "gauge", "Tokens generated per second of engine time.",
           sample("lathe_tokens_per_second", s.busy_seconds > 0 ? static_cast<double>(s.completion_tokens) / s.busy_seconds : 0));
    return out;
  }

  void routes() {
    http.Post("/v1/completions", [this](const httplib::Request& q, httplib::Response& r) { completions(q, r, false); });
    http.Post("/v1/chat/completions", [this](const httplib::Request& q, httplib::Response& r) { completions(q, r, true); });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      const json model_json = {{"id", model.name}, {"object", "model"}, {"created", 0}, {"owned_by", "lathe"},
                               {"meta", {{"context", model.context}, {"sequences", scheduler.sequences()}}}};
      res.set_content(dump({{"object", "list"}, {"data", json::array({model_json})}}), "application/json");
    });
    http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"status":"ok"})", "application/json");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics(), "text/plain; version=0.0.4");
    });
    // Statuses httplib sets itself (404 no such route, 413 body too large,
    // 400 a malformed request line) get an OpenAI error object too.
    http.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      std::string message = "HTTP " + std::to_string(res.status);
      if (res.status == 404) message = "no route " + req.method + " " + req.path;
      if (res.status == 413)
        message = "the request body is over the limit of " + std::to_string(options.max_body_bytes) + " bytes";
      res.set_content(dump(error_body(res.status, message)), "application/json");
      return httplib::Server::HandlerResponse::Handled;
    }));
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string message = "internal error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        message = e.what();
      } catch (...) {
      }
      send_error(res, 500, error_body(500, message));
    });
    http.set_logger([this](const httplib::Request&, const httplib::Response& res) {
      std::lock_guard lock(counts_mutex);
      ++responses[res.status];
    });
  }
};

Server::Server(Scheduler& scheduler, Model model, ServerOptions options)
    : impl_(std::make_unique<Impl>(scheduler, std::move(model), std::move(options))) {
  const int threads = impl_->options.threads > 0
                          ? impl_->options.threads
                          : static_cast<int>(scheduler.sequences() + scheduler.queue_limit() + 8);
  impl_->http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  impl_->http.set_payload_max_length(impl_->options.max_body_bytes);
  impl_->routes();
}

Server::~Server() = default;

int Server::bind() {
  const Impl& i = *impl_;
  const int port = i.options.port == 0 ? impl_->http.bind_to_any_port(i.options.host)
                                       : (impl_->http.bind_to_port(i.options.host, i.options.port) ? i.options.port : -1);
  if (port <= 0)
    throw Error(ErrorKind::Io, "cannot listen on " + i.options.host + ":" + std::to_string(i.options.port) +
                                   " (--host, --port): in use or not an address of this machine");
  return port;
}

void Server::listen() { impl_->http.listen_after_bind(); }

void Server::stop() { impl_->http.stop(); }

}  // namespace lathe::serve
