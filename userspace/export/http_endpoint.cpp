#include "userspace/export/http_endpoint.h"

#include <chrono>
#include <optional>

#include "userspace/base/parse_number.h"
#include "userspace/http/http.h"

namespace gsymprof {

struct HttpEndpoint::State {
  std::unique_ptr<http::Server> server;
  std::string host;
  int port = 0;
};

namespace {

void serve_profile(const http::Request& request, http::Response& response, AgentExporter& exporter) {
  double seconds = 30;  // net/http/pprof's default
  if (const std::string* text = request.param("seconds")) {
    auto value = parse_unsigned<uint32_t>(*text);
    if (!value) {
      response.status = 400;
      response.set_content("seconds: a whole number of seconds\n", "text/plain");
      return;
    }
    seconds = *value;
  }
  auto future = exporter.pull(seconds);
  if (!future) {
    response.status = future.error().message.starts_with("already") ? 429 : 400;
    response.set_content(future.error().message + "\n", "text/plain");
    return;
  }
  // Sampling for `seconds`, then symbolizing: a minute more at most.
  if (future->wait_for(std::chrono::duration<double>(seconds + 60)) != std::future_status::ready) {
    response.status = 504;
    response.set_content("the profile took too long\n", "text/plain");
    return;
  }
  gsym::Expected<std::string> profile = future->get();
  if (!profile) {
    response.status = 500;
    response.set_content(profile.error().message + "\n", "text/plain");
    return;
  }
  response.headers.emplace_back("Content-Disposition", "attachment; filename=\"profile\"");
  response.set_content(std::move(*profile), "application/octet-stream");
}

}  // namespace

gsym::Expected<std::pair<std::string, uint16_t>> parse_listen_address(const std::string& flag, const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return gsym::Error(flag + ": HOST:PORT, e.g. 127.0.0.1:8787, not '" + listen + "'");
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  auto port = parse_unsigned<uint16_t>(listen.substr(colon + 1));
  if (!port) return gsym::Error(flag + ": port must be a number from 0 to 65535, not '" + listen.substr(colon + 1) + "'");
  return std::pair{host, *port};
}

gsym::Expected<std::unique_ptr<HttpEndpoint>> HttpEndpoint::start(const std::string& listen, AgentExporter& exporter,
                                                                  AgentMetrics& metrics) {
  auto address = parse_listen_address("--listen", listen);
  if (!address) return address.error();
  const std::string host = address->first;
  const std::optional<uint16_t> port = address->second;

  auto module = http::module();
  if (!module) return module.error().prefixed("--listen: ");
  http::ServerLimits limits;
  limits.read_timeout_seconds = 5;
  limits.write_timeout_seconds = 30;
  limits.max_body_bytes = 4096;
  limits.keep_alive_max_count = 10;
  auto state = std::make_unique<State>();
  state->server = (*module)->make_server(limits);
  http::Server& server = *state->server;
  server.get("/debug/pprof/profile", [&exporter](const http::Request& request, http::Response& response) {
    serve_profile(request, response, exporter);
  });
  server.get("/metrics", [&metrics](const http::Request&, http::Response& response) {
    response.set_content(metrics.prometheus_text(), "text/plain; version=0.0.4; charset=utf-8");
  });
  const int bound = server.bind(host, *port);
  if (bound < 0) return gsym::Error("--listen " + listen + ": cannot listen there (in use, or not this host's address)");
  state->host = host;
  state->port = bound;
  server.start();
  return std::unique_ptr<HttpEndpoint>(new HttpEndpoint(std::move(state)));
}

HttpEndpoint::HttpEndpoint(std::unique_ptr<State> state) : state_(std::move(state)) {}

HttpEndpoint::~HttpEndpoint() { state_->server->stop(); }

int HttpEndpoint::port() const { return state_->port; }
const std::string& HttpEndpoint::host() const { return state_->host; }

}  // namespace gsymprof
