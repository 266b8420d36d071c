// userspace/export/http_endpoint.h - the agent's --listen: what Go's
// net/http/pprof and Prometheus scrapers expect.
//   GET /debug/pprof/profile?seconds=N  a gzipped pprof of the next N s
//                                       (default 30, 1..600; 400 otherwise)
//   GET /metrics                        Prometheus text (agent_metrics.h)
// Anything else is 404. Served by the HTTP module's thread pool
// (userspace/http/http.h); requests are bounded (no body accepted, 5 s to
// send the request line and headers).
#pragma once

#include <memory>
#include <cstdint>
#include <string>
#include <utility>

#include "gsym/base/expected.h"
#include "userspace/export/agent_exporter.h"
#include "userspace/export/agent_metrics.h"

namespace gsymprof {

// HOST:PORT ("[V6]:PORT" too) split; the error names `flag`.
gsym::Expected<std::pair<std::string, uint16_t>> parse_listen_address(const std::string& flag, const std::string& listen);

class HttpEndpoint {
 public:
  // `listen` is HOST:PORT (PORT 0: any free port; [V6]:PORT for IPv6).
  static gsym::Expected<std::unique_ptr<HttpEndpoint>> start(const std::string& listen, AgentExporter& exporter,
                                                             AgentMetrics& metrics);
  ~HttpEndpoint();
  int port() const;
  const std::string& host() const;

  struct State;

 private:
  explicit HttpEndpoint(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace gsymprof
