// The HTTP module (gsymprof-http.so): http.h's interface over cpp-httplib.
// Built on its own with -fPIC, linked against cpp-httplib only (-z defs):
// it calls nothing of gsymprof's, so nothing of gsymprof's is exported.
#include <httplib.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "userspace/http/http.h"

namespace gsymprof::http {
namespace {

Request to_request(const httplib::Request& in) {
  Request out;
  out.method = in.method;
  out.path = in.path;
  for (const auto& match : in.matches) out.matches.push_back(match.str());
  out.headers.assign(in.headers.begin(), in.headers.end());
  out.params.assign(in.params.begin(), in.params.end());
  return out;
}

void apply(Response& in, httplib::Response& out) {
  out.status = in.status;
  for (const auto& [key, value] : in.headers) out.set_header(key, value);
  if (in.stream) {
    auto stream = std::move(in.stream);
    out.set_content_provider(in.stream_size, in.content_type,
                             [stream](size_t offset, size_t length, httplib::DataSink& sink) {
                               return stream(offset, length,
                                             [&sink](const char* data, size_t n) { return sink.write(data, n); });
                             });
  } else {
    out.set_content(std::move(in.body), in.content_type);
  }
}

class HttplibServer final : public Server {
 public:
  explicit HttplibServer(const ServerLimits& limits) {
    if (limits.threads > 0) {
      const unsigned threads = limits.threads;
      server_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    }
    server_.set_read_timeout(limits.read_timeout_seconds, 0);
    server_.set_write_timeout(limits.write_timeout_seconds, 0);
    server_.set_keep_alive_max_count(limits.keep_alive_max_count);
    server_.set_payload_max_length(limits.max_body_bytes);
  }
  ~HttplibServer() override { stop(); }

  void get(const std::string& pattern, Handler handler) override {
    server_.Get(pattern, [handler = std::move(handler)](const httplib::Request& request, httplib::Response& response) {
      Response answer;
      handler(to_request(request), answer);
      apply(answer, response);
    });
  }
  void post(const std::string& pattern, BodyHandler handler) override {
    server_.Post(pattern, with_body(std::move(handler)));
  }
  void put(const std::string& pattern, BodyHandler handler) override {
    server_.Put(pattern, with_body(std::move(handler)));
  }

  int bind(const std::string& host, uint16_t port) override {
    if (port == 0) return server_.bind_to_any_port(host);
    return server_.bind_to_port(host, port) ? port : -1;
  }
  void start() override {
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  void stop() override {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

 private:
  static httplib::Server::HandlerWithContentReader with_body(BodyHandler handler) {
    return [handler = std::move(handler)](const httplib::Request& request, httplib::Response& response,
                                          const httplib::ContentReader& content) {
      const BodyReader reader = [&content](const ChunkSink& sink) {
        return content([&sink](const char* data, size_t length) { return sink(data, length); });
      };
      Response answer;
      handler(to_request(request), answer, reader);
      apply(answer, response);
    };
  }

  httplib::Server server_;
  std::thread thread_;
};

// httplib's error names ("Read", "Connection") said for people.
std::string describe(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection: return "cannot connect";
    case httplib::Error::Read: return "no HTTP response (the connection closed, timed out or spoke no HTTP)";
    case httplib::Error::Write: return "cannot send the request";
    case httplib::Error::Canceled: return "stopped: no complete answer in time";
    case httplib::Error::SSLConnection: return "TLS handshake failed";
    case httplib::Error::SSLServerVerification: return "the server's certificate is not trusted (--otlp-ca)";
    default: return httplib::to_string(error);
  }
}

PostResult post(const ClientOptions& options, const PostRequest& post) {
  PostResult result;
  httplib::Client client((options.tls ? "https://" : "http://") + options.endpoint);
  client.set_connection_timeout(options.timeout);
  client.set_read_timeout(options.timeout);
  client.set_write_timeout(options.timeout);
  client.set_keep_alive(false);
  if (options.tls) {
    client.enable_server_certificate_verification(true);
    if (!options.ca_file.empty()) client.set_ca_cert_path(options.ca_file);
  }
  httplib::Request request;
  request.method = "POST";
  request.path = post.path;
  request.headers.insert(post.headers.begin(), post.headers.end());
  request.headers.emplace("Content-Type", post.content_type);
  // Streamed from the caller's bytes: request.body would be a copy.
  request.content_length_ = post.body.size();
  request.content_provider_ = [body = post.body](size_t offset, size_t length, httplib::DataSink& sink) {
    return offset <= body.size() && sink.write(body.data() + offset, std::min(length, body.size() - offset));
  };
  // The body read bounded: a longer answer is cut off.
  const size_t limit = post.max_response_bytes;
  request.content_receiver = [&result, limit](const char* data, size_t length, uint64_t, uint64_t) {
    if (result.body.size() + length > limit) {
      result.body_too_long = true;
      return false;
    }
    result.body.append(data, length);
    return true;
  };
  // The timeouts above hold per read; a server that trickles bytes could
  // stretch one call forever: past the deadline the socket is shut.
  std::mutex mutex;
  std::condition_variable done_or_timeout;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock lock(mutex);
    if (!done_or_timeout.wait_for(lock, options.timeout + std::chrono::seconds(1), [&] { return done; }))
      client.stop();
  });
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  const bool sent = client.send(request, response, error);
  {
    std::lock_guard lock(mutex);
    done = true;
  }
  done_or_timeout.notify_one();
  watchdog.join();
  if (result.body_too_long) return result;
  if (!sent) {
    result.error = describe(error);
    return result;
  }
  result.answered = true;
  result.status = response.status;
  return result;
}

std::unique_ptr<Server> make_server(const ServerLimits& limits) { return std::make_unique<HttplibServer>(limits); }

constexpr Module kModule{kInterface, &make_server, &post};

}  // namespace
}  // namespace gsymprof::http

extern "C" __attribute__((visibility("default"))) const gsymprof::http::Module* gsymprof_http_module() {
  return &gsymprof::http::kModule;
}
