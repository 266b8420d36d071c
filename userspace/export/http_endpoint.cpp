#include "userspace/export/http_endpoint.h"

#include <httplib.h>

#include <chrono>
#include <optional>
#include <thread>

#include "userspace/base/parse_number.h"

namespace gsymprof {

struct HttpEndpoint::State {
  httplib::Server server;
  std::thread thread;
  std::string host;
  int port = 0;
};

namespace {

void serve_profile(const httplib::Request& request, httplib::Response& response, AgentExporter& exporter) {
  double seconds = 30;  // net/http/pprof's default
  if (request.has_param("seconds")) {
    auto value = parse_unsigned<uint32_t>(request.get_param_value("seconds"));
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
  response.set_header("Content-Disposition", "attachment; filename=\"profile\"");
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

  auto state = std::make_unique<State>();
  httplib::Server& server = state->server;
  server.set_read_timeout(5, 0);
  server.set_write_timeout(30, 0);
  server.set_payload_max_length(4096);
  server.set_keep_alive_max_count(10);
  server.Get("/debug/pprof/profile", [&exporter](const httplib::Request& request, httplib::Response& response) {
    serve_profile(request, response, exporter);
  });
  server.Get("/metrics", [&metrics](const httplib::Request&, httplib::Response& response) {
    response.set_content(metrics.prometheus_text(), "text/plain; version=0.0.4; charset=utf-8");
  });
  const int bound = *port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, *port) ? *port : -1);
  if (bound < 0) return gsym::Error("--listen " + listen + ": cannot listen there (in use, or not this host's address)");
  state->host = host;
  state->port = bound;
  State* raw = state.get();
  state->thread = std::thread([raw] { raw->server.listen_after_bind(); });
  return std::unique_ptr<HttpEndpoint>(new HttpEndpoint(std::move(state)));
}

HttpEndpoint::HttpEndpoint(std::unique_ptr<State> state) : state_(std::move(state)) {}

HttpEndpoint::~HttpEndpoint() {
  state_->server.stop();
  if (state_->thread.joinable()) state_->thread.join();
}

int HttpEndpoint::port() const { return state_->port; }
const std::string& HttpEndpoint::host() const { return state_->host; }

}  // namespace gsymprof
