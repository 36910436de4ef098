#include "runtime/serve/server.hpp"

#include <httplib.h>

#include <arpa/inet.h>
#include <malloc.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <strings.h>
#include <ctime>
#include <deque>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <thread>

#include "runtime/error.hpp"

namespace lathe::embedded {
// runtime/serve/chat.html and the like, by base name (cmake/Embed.cmake).
std::string_view serve_pages(std::string_view name);
}  // namespace lathe::embedded

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
  const text::Tokenizer* tokenizer;
  struct Choice {
    std::shared_ptr<Generation> generation;
    std::string text;               // non-streaming: everything so far
    std::vector<TokenEvent> tokens;  // non-streaming: every event, for logprobs
    std::optional<Finish> finish;
    std::optional<ToolCallStream> tool_calls;  // streaming an answer read for tool calls
    bool role_sent = false, finish_sent = false;
  };
  std::vector<Choice> choices;  // params.n of them
  bool done = false;
  void cancel() {
    for (Choice& c : choices) c.generation->cancel();
  }
};

// One call of the content provider: waits a little for tokens, writes what
// came. False when the client is gone (the request is cancelled).
bool write_some(Reply& r, httplib::DataSink& sink) {
  if (r.done) return false;
  if (!sink.is_writable()) {
    r.cancel();
    return false;
  }
  auto write = [&](const std::string& s) {
    if (sink.write(s.data(), s.size())) return true;
    r.cancel();
    return false;
  };
  const CompletionParams& p = r.params;
  // What each choice has, without waiting; where none has anything, a
  // little wait on the first still running.
  std::vector<std::vector<TokenEvent>> events(r.choices.size());
  bool any = false;
  for (size_t i = 0; i < r.choices.size(); ++i) {
    Reply::Choice& c = r.choices[i];
    if (c.finish) continue;
    c.finish = c.generation->wait(events[i], std::chrono::milliseconds(0));
    any = any || !events[i].empty() || c.finish;
  }
  if (!any)
    for (size_t i = 0; i < r.choices.size(); ++i)
      if (!r.choices[i].finish) {
        r.choices[i].finish = r.choices[i].generation->wait(events[i], kPoll);
        break;
      }
  // The choice chunk of choice i (stream_chunk writes choice 0's).
  const auto indexed = [](json chunk, size_t i) {
    chunk["choices"][0]["index"] = i;
    return chunk;
  };
  bool all = true;
  for (const Reply::Choice& c : r.choices) all = all && c.finish;
  for (size_t i = 0; i < r.choices.size(); ++i)
    if (r.choices[i].finish && r.choices[i].finish->reason == "error") {
      std::cerr << "lathe serve: " << r.header.id << ": generation failed: " << r.choices[i].finish->error << "\n";
      r.cancel();
      const json error = error_body(500, "generation failed (the server's log says why)");
      if (!write(p.stream ? sse(error) + "data: [DONE]\n\n" : dump(error))) return false;
      r.done = true;
      sink.done();
      return true;
    }
  if (p.stream) {
    for (size_t i = 0; i < r.choices.size(); ++i) {
      Reply::Choice& c = r.choices[i];
      if (p.chat && !c.role_sent) {
        c.role_sent = true;
        if (!write(sse(indexed(stream_chunk(p, r.header, *r.tokenizer, {}, nullptr, /*role=*/true), i)))) return false;
      }
      if (c.tool_calls) {
        for (const json& chunk : c.tool_calls->chunks(p, r.header, *r.tokenizer, events[i]))
          if (!write(sse(indexed(chunk, i)))) return false;
      } else if (!events[i].empty() &&
                 !write(sse(indexed(stream_chunk(p, r.header, *r.tokenizer, events[i], nullptr), i)))) {
        return false;
      }
      if (c.finish && !c.finish_sent) {
        c.finish_sent = true;
        if (c.tool_calls) {
          for (const json& chunk : c.tool_calls->finish(p, r.header, *r.tokenizer, *c.finish))
            if (!write(sse(indexed(chunk, i)))) return false;
        } else if (!write(sse(indexed(stream_chunk(p, r.header, *r.tokenizer, {}, &*c.finish), i)))) {
          return false;
        }
      }
    }
    if (!all) return true;
    if (r.params.include_usage) {
      json usage = stream_chunk(p, r.header, *r.tokenizer, {}, &*r.choices[0].finish);
      usage["choices"] = json::array();
      std::vector<Finish> finishes;
      for (const Reply::Choice& c : r.choices) finishes.push_back(*c.finish);
      usage["usage"] = usage_json(finishes);
      if (!write(sse(usage))) return false;
    }
    if (!write("data: [DONE]\n\n")) return false;
  } else {
    for (size_t i = 0; i < r.choices.size(); ++i)
      for (TokenEvent& e : events[i]) {
        r.choices[i].text += e.text;
        r.choices[i].tokens.push_back(std::move(e));
      }
    if (!all) return true;
    json body;
    std::vector<Finish> finishes;
    for (size_t i = 0; i < r.choices.size(); ++i) {
      const Reply::Choice& c = r.choices[i];
      finishes.push_back(*c.finish);
      const json one = completion_response(p, r.header, *r.tokenizer, c.text, c.tokens, *c.finish);
      if (i == 0) body = one;
      else body["choices"].push_back(one["choices"][0]);
      body["choices"][i]["index"] = i;
    }
    body["usage"] = usage_json(finishes);
    if (!write(dump(body))) return false;
  }
  r.done = true;
  sink.done();
  return true;
}

using Clock = std::chrono::steady_clock;

// Flags every connection's stream reads; set by Server::stop() and cut().
struct Shutdown {
  std::atomic<bool> draining{false};  // no new requests: idle connections close
  std::atomic<bool> cut{false};       // every connection ends now
};

// One client connection, as httplib's request parser reads it and its
// responses are written. Unlike httplib's own stream it holds the limits of
// ServerOptions: a deadline for the whole request (not a timeout per read,
// which a client sending a byte a second never trips), a cap on the bytes one
// request may take whatever its framing, and the shutdown flags. Bytes read
// past one request (pipelining) wait in the buffer for the next.
class Connection final : public httplib::Stream {
 public:
  Connection(int fd, const ServerOptions& options, const Shutdown& shutdown)
      : fd_(fd), options_(options), shutdown_(shutdown) {}

  // Waits for the first byte of the next request; false when the connection
  // stays idle past the keep-alive timeout, is closed, or the server stops.
  bool next_request() {
    if (begin_ < end_) return !shutdown_.draining;
    const Clock::time_point until = Clock::now() + options_.keep_alive_timeout;
    if (!wait(POLLIN, until, /*stop_on_drain=*/true)) return false;
    return fill() > 0;
  }
  // Starts the clocks and counts of one request.
  void begin_request() {
    deadline_ = Clock::now() + options_.read_timeout;
    consumed_ = 0;
    timed_out_ = over_limit_ = false;
  }
  // The request's line and headers may take this much more than its body.
  static constexpr size_t kHeaderAllowance = 64 << 10;

  bool timed_out() const { return timed_out_; }
  bool over_limit() const { return over_limit_; }
  // A handler that left the body unread (or half read) closes the connection.
  void close_after_response(httplib::Response& res) {
    close_ = true;
    res.set_header("Connection", "close");
  }
  bool must_close() const { return close_; }

  bool is_readable() const override {
    return begin_ < end_ || wait(POLLIN, deadline_, false);
  }
  bool is_writable() const override {
    if (shutdown_.cut) return false;
    return wait(POLLOUT, Clock::now() + options_.write_timeout, false) && alive();
  }
  ssize_t read(char* ptr, size_t size) override {
    if (begin_ == end_) {
      if (!wait(POLLIN, deadline_, false)) {
        timed_out_ = !shutdown_.cut;
        return -1;
      }
      const ssize_t n = fill();
      if (n <= 0) return n;
    }
    const size_t n = std::min(size, end_ - begin_);
    if (consumed_ + n > options_.max_body_bytes + kHeaderAllowance) {
      over_limit_ = true;
      return -1;
    }
    std::memcpy(ptr, buffer_ + begin_, n);
    begin_ += n;
    consumed_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    size_t sent = 0;
    while (sent < size) {
      if (!wait(POLLOUT, Clock::now() + options_.write_timeout, false)) return -1;
      const ssize_t n = ::send(fd_, ptr + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (n <= 0) return -1;
      sent += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { address(::getpeername, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address(::getsockname, ip, port); }
  socket_t socket() const override { return fd_; }

 private:
  // Polls in slices, so that a stop or a cut is noticed within one.
  bool wait(short events, Clock::time_point until, bool stop_on_drain) const {
    for (;;) {
      if (shutdown_.cut || (stop_on_drain && shutdown_.draining)) return false;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd_, events, 0};
      const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 100)));
      if (r > 0) return true;  // ready, or an error the next recv or send reports
      if (r < 0 && errno != EINTR) return false;
    }
  }
  bool alive() const {
    if (begin_ < end_) return true;
    char byte;
    const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
  }
  ssize_t fill() {
    ssize_t n;
    do n = ::recv(fd_, buffer_, sizeof buffer_, 0);
    while (n < 0 && errno == EINTR);
    begin_ = 0;
    end_ = n > 0 ? static_cast<size_t>(n) : 0;
    return n;
  }
  void address(int (*get)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    ip.clear();
    port = -1;
    if (get(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
      ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
      port = ntohs(v4->sin_port);
    } else if (a.ss_family == AF_INET6) {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
      ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
      port = ntohs(v6->sin6_port);
    }
    ip = text;
  }

  int fd_;
  const ServerOptions& options_;
  const Shutdown& shutdown_;
  char buffer_[16384];
  size_t begin_ = 0, end_ = 0;
  size_t consumed_ = 0;  // bytes of the current request taken
  Clock::time_point deadline_ = Clock::now();
  bool timed_out_ = false, over_limit_ = false, close_ = false;
};

// The connection the calling worker thread serves (handlers run on it).
thread_local Connection* current_connection = nullptr;

// HTTP worker threads, started as connections need them up to a limit; a
// connection beyond it waits for a thread. httplib's own pool is of a fixed
// size: slow clients holding every thread left /health unanswered.
class WorkerPool final : public httplib::TaskQueue {
 public:
  explicit WorkerPool(size_t max_threads) : max_(std::max<size_t>(max_threads, 1)) {}
  ~WorkerPool() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(fn));
    if (jobs_.size() > idle_ && threads_.size() < max_) threads_.emplace_back([this] { work(); });
    else ready_.notify_one();
  }
  void shutdown() override {
    {
      std::lock_guard lock(mutex_);
      if (stopping_ && threads_.empty()) return;
      stopping_ = true;
    }
    ready_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mutex_);
        ++idle_;
        ready_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
        --idle_;
        if (jobs_.empty()) return;  // stopping, and every connection taken
        fn = std::move(jobs_.front());
        jobs_.pop_front();
      }
      fn();
    }
  }

  const size_t max_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

// httplib's server with the connections served by Connection: its request
// parser and response writer (process_request), lathe's reading, limits,
// keep-alive loop and shutdown.
class HttpServer final : public httplib::Server {
 public:
  HttpServer(const ServerOptions& options) : options_(options) {}

  // Stops accepting: accept() fails on the shut listening socket, httplib
  // closes it and leaves its loop, then joins the workers. svr_sock_ keeps
  // its value, so the responses in flight are not cut short (httplib ends a
  // chunked response early once it reads INVALID_SOCKET there).
  void drain() {
    if (shutdown_.draining.exchange(true)) return;
    const socket_t listening = svr_sock_;
    if (listening != INVALID_SOCKET) ::shutdown(listening, SHUT_RDWR);
  }
  void cut() {
    shutdown_.cut = true;
    std::lock_guard lock(connections_mutex_);
    for (const int fd : connections_) ::shutdown(fd, SHUT_RDWR);
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    {
      std::lock_guard lock(connections_mutex_);
      connections_.insert(sock);
    }
    {
      Connection connection(sock, options_, shutdown_);
      current_connection = &connection;
      for (int n = 0; n < options_.keep_alive_max; ++n) {
        if (shutdown_.draining || !connection.next_request()) break;
        connection.begin_request();
        const bool last = n + 1 == options_.keep_alive_max;
        bool closed = false;
        const bool ok = process_request(connection, last, closed, nullptr);
        if (!ok || closed || connection.must_close()) break;
      }
      current_connection = nullptr;
      // A response sent before the body was read (413, say): the client
      // may still be sending. Closing now would answer it with a reset that
      // can discard the response before the client reads it; so stop
      // writing, and drop what arrives for a moment first (a lingering close).
      if (connection.must_close() && !shutdown_.cut) linger(sock);
    }
    {
      std::lock_guard lock(connections_mutex_);
      connections_.erase(sock);
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return true;
  }

  static void linger(int fd) {
    ::shutdown(fd, SHUT_WR);
    const Clock::time_point until = Clock::now() + std::chrono::seconds(2);
    char sink[16384];
    while (Clock::now() < until) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) < 0 && errno != EINTR) return;
      if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::recv(fd, sink, sizeof sink, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return;
    }
  }

  const ServerOptions& options_;
  Shutdown shutdown_;
  std::mutex connections_mutex_;
  std::set<int> connections_;
};

}  // namespace

struct Server::Impl {
  Scheduler& scheduler;
  Embedder* embedder;
  Model model;
  ServerOptions options;
  HttpServer http{options};
  std::atomic<uint64_t> next_id{1};
  std::mutex counts_mutex;
  std::map<int, int64_t> responses;  // HTTP status → count
  std::mutex stopped_mutex;
  std::condition_variable stopped_changed;
  bool stopped = false;  // listen() has returned

  Impl(Scheduler& s, Model m, ServerOptions o, Embedder* e)
      : scheduler(s), embedder(e), model(std::move(m)), options(std::move(o)) {}

  // The bytes of the bodies being read and parsed (ServerOptions::
  // max_bodies_bytes), and one handler's share of them, given back when it
  // is done with its body.
  std::atomic<size_t> body_bytes{0};
  size_t body_budget() const {
    return options.max_bodies_bytes > 0 ? options.max_bodies_bytes
                                        : std::max<size_t>(size_t{64} << 20, 4 * options.max_body_bytes);
  }
  struct BodyHold {
    Impl& s;
    size_t held = 0;
    // False, taking nothing, when `more` bytes would pass the budget.
    bool take(size_t more) {
      if (s.body_bytes.fetch_add(more) + more > s.body_budget()) {
        s.body_bytes -= more;
        return false;
      }
      held += more;
      return true;
    }
    void give_back() {
      s.body_bytes -= held;
      held = 0;
    }
    ~BodyHold() { give_back(); }
  };

  // Reads the body through `reader`, never more than --max-body bytes in
  // any framing. False (with the response set, and the connection to be
  // closed: the rest of the body is unread) when it is over the limit, late
  // or cut off.
  bool read_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
                 std::string& body, BodyHold& hold) {
    const size_t limit = options.max_body_bytes;
    const auto too_large = [&] {
      current_connection->close_after_response(res);
      send_error(res, 413, error_body(413, "the request body is over the limit of " + std::to_string(limit) + " bytes"));
      return false;
    };
    const auto too_many = [&] {
      current_connection->close_after_response(res);
      res.set_header("Retry-After", "1");
      send_error(res, 503, error_body(503, "The server is busy: it is reading too many large request bodies at once "
                                           "(--max-bodies " + std::to_string(body_budget()) + " bytes). Retry later."));
      return false;
    };
    const std::string coding = req.get_header_value("Transfer-Encoding");
    const bool chunked = strcasecmp(coding.c_str(), "chunked") == 0;
    if (!coding.empty() && !chunked) {
      current_connection->close_after_response(res);
      send_error(res, 400, error_body(400, "Transfer-Encoding '" + printable(coding, 40) + "' is not supported (chunked is)"));
      return false;
    }
    if (!chunked && !req.has_header("Content-Length")) return true;  // no body (RFC 9112 6.3)
    if (!chunked) {
      const std::string length = req.get_header_value("Content-Length");
      char* end = nullptr;
      errno = 0;
      const unsigned long long n = std::strtoull(length.c_str(), &end, 10);
      if (length.empty() || *end != '\0' || errno == ERANGE || length[0] == '-') {
        current_connection->close_after_response(res);
        send_error(res, 400, error_body(400, "Content-Length '" + printable(length, 40) + "' is not a byte count"));
        return false;
      }
      if (n > limit) return too_large();
      if (!hold.take(static_cast<size_t>(n))) return too_many();
      body.reserve(static_cast<size_t>(n));
    }
    bool over = false, busy = false;
    const bool ok = reader([&](const char* data, size_t size) {
      if (body.size() + size > limit) {
        over = true;
        return false;
      }
      // (A chunked body takes its share as it comes.)
      if (chunked && !hold.take(size)) {
        busy = true;
        return false;
      }
      body.append(data, size);
      return true;
    });
    if (over || current_connection->over_limit()) return too_large();
    if (busy) return too_many();
    if (!ok) {
      current_connection->close_after_response(res);
      if (current_connection->timed_out()) {
        send_error(res, 408, error_body(408, "the request did not arrive within " +
                                                 std::to_string(options.read_timeout.count() / 1000.0).substr(0, 5) +
                                                 " s (--read-timeout)"));
      } else {
        send_error(res, 400, error_body(400, "the request body could not be read (a malformed chunk, or the client "
                                             "stopped sending)"));
      }
      return false;
    }
    return true;
  }

  // Runs `read` (parsing and checking a request); an error it throws becomes
  // the response: an ApiError as it says, Error(InvalidArgument) a 400,
  // anything else a 500 whose reason goes to the log. False when it threw.
  template <class Read>
  bool answered(httplib::Response& res, Read&& read) {
    try {
      read();
      return true;
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const Error& e) {
      const int status = e.kind() == ErrorKind::InvalidArgument ? 400 : 500;
      if (status == 500) std::cerr << "lathe serve: " << e.what() << "\n";
      send_error(res, status, error_body(status, status == 400 ? e.what() : "internal server error (the server's log says why)"));
    }
    return false;
  }

  // A large body's parse and tokenization took memory the allocator keeps
  // unless asked: give it back, so that big prompts do not grow the process
  // for good.
  static void release(std::string& body) {
    if (body.size() > (64u << 10)) {
      std::string().swap(body);
      ::malloc_trim(0);
    }
  }

  void completions(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
                   bool chat) {
    std::string text;
    BodyHold hold{*this};
    if (!read_body(req, res, reader, text, hold)) return;
    if (model.encoder)
      return send_error(res, 400, error_body(400, model.name + " is an encoder: it serves /v1/embeddings, not completions",
                                             "model"));
    auto reply = std::make_shared<Reply>();
    reply->tokenizer = model.tokenizer;
    const bool read = answered(res, [&] {
      const json body = parse_json_body(text);
      reply->params = parse_completion(body, chat, model, text);
      for (std::shared_ptr<Generation>& g : scheduler.submit(reply->params.request, reply->params.n))
        reply->choices.push_back({std::move(g)});
    });
    if (!read) return;
    release(text);
    hold.give_back();
    if (reply->choices.empty()) {
      res.set_header("Retry-After", "1");
      return send_error(res, 503, error_body(503, "The server is busy: every sequence is in use and the queue is full. "
                                                  "Retry later."));
    }
    char id[32];
    std::snprintf(id, sizeof id, "%s-%llx", chat ? "chatcmpl" : "cmpl", static_cast<unsigned long long>(next_id++));
    reply->header = {id, model.name, static_cast<int64_t>(std::time(nullptr))};
    if (reply->params.stream && reply->params.tool_format != ToolFormat::None)
      for (Reply::Choice& c : reply->choices) c.tool_calls.emplace(reply->params);
    if (reply->params.stream) res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        reply->params.stream ? "text/event-stream" : "application/json",
        [reply](size_t, httplib::DataSink& sink) { return write_some(*reply, sink); },
        [reply](bool success) {
          if (!success || !reply->done) reply->cancel();
        });
  }

  // POST /v1/embeddings: the inputs' vectors, in passes of the session's
  // sequences; requests take turns on the device.
  void embeddings(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
    std::string text;
    BodyHold hold{*this};
    if (!read_body(req, res, reader, text, hold)) return;
    if (!embedder)
      return send_error(res, 400, error_body(400, model.name + " is a decoder: it serves completions, not /v1/embeddings",
                                             "model"));
    // Requests take turns on the device: at most as many as completions may
    // hold (sequences and queue places) wait for it, each on an HTTP worker;
    // past that, 503, so that waiting requests cannot take every worker.
    struct Admission {
      std::atomic<int64_t>& n;
      ~Admission() { --n; }
    } admission{embedding_requests};
    if (++embedding_requests > scheduler.sequences() + scheduler.queue_limit()) {
      res.set_header("Retry-After", "1");
      return send_error(res, 503, error_body(503, "The server is busy: too many embedding requests are waiting for "
                                                  "the device. Retry later."));
    }
    answered(res, [&] {
      const EmbeddingParams params = parse_embeddings(parse_json_body(text), model, embedder->width());
      release(text);
      hold.give_back();
      const std::vector<std::vector<float>> vectors = embedder->embed(params.inputs);
      embedded_inputs += static_cast<int64_t>(vectors.size());
      embedded_tokens += params.tokens;
      res.set_content(dump(embeddings_response(params, model.name, vectors)), "application/json");
    });
  }
  std::atomic<int64_t> embedded_inputs{0}, embedded_tokens{0};
  std::atomic<int64_t> embedding_requests{0};  // admitted and not yet answered

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
    metric("lathe_prompt_tokens_cached_total", "counter",
           "Prompt tokens whose prefill a cached prefix spared (prompt reuse).",
           sample("lathe_prompt_tokens_cached_total", static_cast<double>(s.cached_tokens)));
    metric("lathe_draft_tokens_total", "counter", "Tokens proposed by speculation (--lookup), verified by the model.",
           sample("lathe_draft_tokens_total", static_cast<double>(s.draft_tokens)));
    metric("lathe_draft_accepted_total", "counter", "Proposed tokens the model kept.",
           sample("lathe_draft_accepted_total", static_cast<double>(s.draft_accepted)));
    metric("lathe_images_total", "counter", "Images encoded by the vision tower (once per distinct image of a request).",
           sample("lathe_images_total", static_cast<double>(s.images)));
    metric("lathe_busy_seconds_total", "counter", "Engine time spent on prefill and decode.",
           sample("lathe_busy_seconds_total", s.busy_seconds));
    metric("lathe_embedding_inputs_total", "counter", "Inputs embedded (/v1/embeddings).",
           sample("lathe_embedding_inputs_total", static_cast<double>(embedded_inputs)));
    metric("lathe_embedding_tokens_total", "counter", "Tokens of the inputs embedded.",
           sample("lathe_embedding_tokens_total", static_cast<double>(embedded_tokens)));
    metric("lathe_tokens_per_second", "gauge", "Tokens generated per second of engine time.",
           sample("lathe_tokens_per_second", s.busy_seconds > 0 ? static_cast<double>(s.completion_tokens) / s.busy_seconds : 0));
    return out;
  }

  json model_object() const {
    return {{"id", model.name}, {"object", "model"}, {"created", 0}, {"owned_by", "lathe"},
            {"meta", {{"context", model.context}, {"sequences", scheduler.sequences()}}}};
  }

  void routes() {
    using httplib::ContentReader;
    using httplib::Request;
    using httplib::Response;
    http.Post("/v1/completions",
              [this](const Request& q, Response& r, const ContentReader& c) { completions(q, r, c, false); });
    http.Post("/v1/chat/completions",
              [this](const Request& q, Response& r, const ContentReader& c) { completions(q, r, c, true); });
    http.Post("/v1/embeddings", [this](const Request& q, Response& r, const ContentReader& c) { embeddings(q, r, c); });
    // Any other POST: refused before its body is read (and the connection
    // closed, the body unread), so that no route reads a body unbounded.
    http.Post(".*", [](const Request& req, Response& res, const ContentReader&) {
      current_connection->close_after_response(res);
      send_error(res, 404, error_body(404, "no route POST " + printable(req.path)));
    });
    http.Get("/v1/models", [this](const Request&, Response& res) {
      res.set_content(dump({{"object", "list"}, {"data", json::array({model_object()})}}), "application/json");
    });
    http.Get("/v1/models/(.+)", [this](const Request& req, Response& res) {
      const std::string id = httplib::detail::decode_url(req.matches[1].str(), false);
      if (id != model.name)
        return send_error(res, 404, error_body(404, "The model '" + printable(id) + "' does not exist; this server serves '" +
                                                        model.name + "'", "model", "model_not_found"));
      res.set_content(dump(model_object()), "application/json");
    });
    // The chat page (runtime/serve/chat.html, compiled in). Its script and
    // style are inline and it talks to this origin alone: the policy lets it
    // load, frame and send nothing else. An encoder has nothing to chat with.
    auto chat_page = [this](const Request&, Response& res) {
      if (model.encoder)
        return send_error(res, 404, error_body(404, model.name + " is an encoder: it serves /v1/embeddings, and no chat page"));
      res.set_header("Content-Security-Policy",
                     "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
                     "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_header("Referrer-Policy", "no-referrer");
      res.set_header("Cache-Control", "no-cache");
      const std::string_view page = embedded::serve_pages("chat.html");
      res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
    };
    http.Get("/", chat_page);
    http.Get("/index.html", chat_page);
    http.Get("/health", [](const Request&, Response& res) {
      res.set_content(R"({"status":"ok"})", "application/json");
    });
    http.Get("/metrics", [this](const Request&, Response& res) {
      res.set_content(metrics(), "text/plain; version=0.0.4");
    });
    if (!options.cors_origins.empty()) {
      // Browsers ask first (a preflight OPTIONS) for a JSON POST.
      http.Options(".*", [](const Request&, Response& res) { res.status = 204; });
      http.set_post_routing_handler([this](const Request& req, Response& res) {
        const std::string origin = req.get_header_value("Origin");
        if (origin.empty()) return;
        const auto& allowed = options.cors_origins;
        const bool any = std::find(allowed.begin(), allowed.end(), "*") != allowed.end();
        if (!any && std::find(allowed.begin(), allowed.end(), origin) == allowed.end()) return;
        res.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
        if (!any) res.set_header("Vary", "Origin");
        if (req.method == "OPTIONS") {
          res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
          res.set_header("Access-Control-Allow-Headers", "Content-Type, Authorization");
          res.set_header("Access-Control-Max-Age", "600");
        }
      });
    }
    // Statuses httplib sets itself (404 no such route, 400 a malformed
    // request line or header, 414 a line too long) get an OpenAI error
    // object too.
    http.set_error_handler(httplib::Server::HandlerWithResponse([](const Request& req, Response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      std::string message = "HTTP " + std::to_string(res.status);
      if (res.status == 404) message = "no route " + printable(req.method, 16) + " " + printable(req.path);
      if (res.status == 400) message = "a malformed HTTP request (its request line or headers)";
      if (res.status == 414) message = "the request line is too long";
      // Where a request was malformed, where the next one starts is unknown.
      if ((res.status == 400 || res.status == 414) && current_connection) current_connection->close_after_response(res);
      res.set_content(dump(error_body(res.status, message)), "application/json");
      return httplib::Server::HandlerResponse::Handled;
    }));
    // What throws here is a defect of the server: the client gets no detail
    // (a message could name the server's files), the log gets it.
    http.set_exception_handler([](const Request& req, Response& res, std::exception_ptr ep) {
      std::string message = "unknown exception";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        message = e.what();
      } catch (...) {
      }
      std::cerr << "lathe serve: " << printable(req.method, 16) << " " << printable(req.path) << ": " << message << "\n";
      send_error(res, 500, error_body(500, "internal server error (the server's log says why)"));
    });
    http.set_logger([this](const Request&, const Response& res) {
      std::lock_guard lock(counts_mutex);
      ++responses[res.status];
    });
  }
};

Server::Server(Scheduler& scheduler, Model model, ServerOptions options, Embedder* embedder)
    : impl_(std::make_unique<Impl>(scheduler, std::move(model), std::move(options), embedder)) {
  const int threads = impl_->options.threads > 0
                          ? impl_->options.threads
                          : static_cast<int>(scheduler.sequences() + scheduler.queue_limit() + 64);
  impl_->http.new_task_queue = [threads] { return new WorkerPool(static_cast<size_t>(threads)); };
  impl_->http.set_payload_max_length(impl_->options.max_body_bytes);
  // What httplib writes in the Keep-Alive header of each response.
  impl_->http.set_keep_alive_max_count(static_cast<size_t>(impl_->options.keep_alive_max));
  impl_->http.set_keep_alive_timeout(
      std::max<time_t>(1, static_cast<time_t>(impl_->options.keep_alive_timeout.count() / 1000)));
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

void Server::listen() {
  impl_->http.listen_after_bind();
  std::lock_guard lock(impl_->stopped_mutex);
  impl_->stopped = true;
  impl_->stopped_changed.notify_all();
}

void Server::stop() { impl_->http.drain(); }

void Server::cut() { impl_->http.cut(); }

bool Server::wait_stopped(std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->stopped_mutex);
  return impl_->stopped_changed.wait_for(lock, timeout, [&] { return impl_->stopped; });
}

}  // namespace lathe::serve
