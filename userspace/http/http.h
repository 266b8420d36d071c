// userspace/http/http.h - HTTP/1.1 for the agent's --listen, serve's routes
// and OTLP/HTTP export, through a module loaded on first use.
//
// Why a module: cpp-httplib's library initialises OpenSSL when it is loaded
// (error strings, the system configuration), and with its brotli libraries
// that cost every gsymprof process 4 million instructions, about 2 ms, at
// start-up, though only these three features speak HTTP: 5% of converting
// a small program. The module (gsymprof-http.so, built beside gsymprof)
// holds the cpp-httplib code; this interface passes only standard types,
// so the module calls nothing of gsymprof's and gsymprof nothing of
// cpp-httplib's.
//
// gsymprof runs as root: module() loads the module only from beside the
// executable (or ../lib/gsymprof/ from it), only a regular file owned by
// root or by the user running gsymprof, in directories no other user can
// change (module_loader.cpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gsym/base/expected.h"

namespace gsymprof::http {

using Headers = std::vector<std::pair<std::string, std::string>>;
// Takes a body's bytes piece by piece; false stops the transfer.
using ChunkSink = std::function<bool(const char* data, size_t length)>;

struct Request {
  std::string method, path;
  std::vector<std::string> matches;  // the route pattern's groups; [0] is the whole path
  Headers headers;
  std::vector<std::pair<std::string, std::string>> params;  // the query's, decoded

  // A header's value ("" when absent); names compare case-insensitively.
  std::string header(std::string_view name) const;
  // A query parameter's value, or null.
  const std::string* param(std::string_view name) const;
};

struct Response {
  int status = 200;
  Headers headers;
  std::string content_type = "text/plain";
  std::string body;
  // Instead of `body`: `stream_size` bytes that `stream(offset, length,
  // write)` hands to `write` piece by piece, as the connection takes them
  // (false: the transfer is cut).
  size_t stream_size = 0;
  std::function<bool(size_t offset, size_t length, const ChunkSink& write)> stream;

  void set_content(std::string content, std::string type) {
    body = std::move(content);
    content_type = std::move(type);
  }
};

// Reads a request's body: each piece goes to `sink`; false when the sink
// stopped the read or the connection failed.
using BodyReader = std::function<bool(const ChunkSink& sink)>;
using Handler = std::function<void(const Request&, Response&)>;
using BodyHandler = std::function<void(const Request&, Response&, const BodyReader&)>;

struct ServerLimits {
  unsigned threads = 0;  // 0: the library's default pool
  int read_timeout_seconds = 5;
  int write_timeout_seconds = 30;
  size_t keep_alive_max_count = 10;
  size_t max_body_bytes = 4096;  // longer bodies are answered 413 before a handler runs
};

// Routes are regular expressions over the path (ECMAScript grammar); a
// request no route takes is answered 404.
class Server {
 public:
  virtual ~Server() = default;  // stops serving
  virtual void get(const std::string& pattern, Handler handler) = 0;
  virtual void post(const std::string& pattern, BodyHandler handler) = 0;
  virtual void put(const std::string& pattern, BodyHandler handler) = 0;
  // Binds `host`:`port` (0: a free port); the port, or -1.
  virtual int bind(const std::string& host, uint16_t port) = 0;
  // Serves on a thread of its own until stop() (after bind()).
  virtual void start() = 0;
  virtual void stop() = 0;
};

struct ClientOptions {
  std::string endpoint;  // HOST:PORT
  bool tls = true;       // https, the server's certificate verified
  std::string ca_file;   // the certificates trusted, else the system's
  std::chrono::seconds timeout{10};  // to connect, per read, per write; the whole call within one more second
};

struct PostRequest {
  std::string path;
  Headers headers;
  std::string content_type;
  std::string_view body;  // the caller's bytes, sent from where they are (an OTLP window: up to 64 MiB)
  size_t max_response_bytes = 64u << 10;
};

struct PostResult {
  bool answered = false;  // an HTTP status came back
  std::string error;      // why not, said for people (not answered)
  int status = 0;
  std::string body;
  bool body_too_long = false;  // over max_response_bytes: cut off, not answered
};

// What the module gives: its interface's fingerprint, a server factory,
// and one POST. Never unloaded.
struct Module {
  const char* fingerprint;  // kInterface of the module's build
  std::unique_ptr<Server> (*make_server)(const ServerLimits& limits);
  PostResult (*post)(const ClientOptions& options, const PostRequest& request);
};

// This header's fingerprint (the Makefile's hash of it): a module built
// from another version of it is refused.
#ifndef GSYMPROF_HTTP_INTERFACE
#define GSYMPROF_HTTP_INTERFACE "not built by the Makefile"
#endif
inline constexpr const char* kInterface = GSYMPROF_HTTP_INTERFACE;

// The module's exported entry point.
inline constexpr const char* kEntryPoint = "gsymprof_http_module";
inline constexpr const char* kModuleFile = "gsymprof-http.so";

// The module, loaded on the first call (thread-safe); the error names where
// it was looked for and why it was not taken.
gsym::Expected<const Module*> module();
// The module in the directory `dir`, checked and loaded as module() does;
// NotFound when it is not there, Refused when another user could have
// written it.
gsym::Expected<const Module*> load_module_from(const std::string& dir);

}  // namespace gsymprof::http
