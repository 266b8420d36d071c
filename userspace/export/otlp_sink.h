// userspace/export/otlp_sink.h - the agent's OTLP Profiles export
// ("otlp" in /metrics): each window is encoded (otlp_profiles.h) into an
// on-disk spool first, then the spool is sent oldest first, over gRPC or
// HTTP/protobuf, each file deleted once the backend took it. A backend
// that is down keeps windows in the spool (bounded in bytes, the oldest
// dropped and counted) and is retried with exponential backoff and jitter
// (1 s doubling to 60 s), also while no window comes; an agent restarted
// on the same spool sends what it holds. Errors are one line on stderr
// when the state changes (the first failure; the recovery, with the count
// of failed attempts) and a count every 10 minutes while failing, never
// one per attempt.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gsym/base/expected.h"
#include "userspace/export/window_sink.h"
#include "userspace/export/window_store.h"

namespace gsymprof {

enum class OtlpProtocol : uint8_t { Grpc, Http };

struct OtlpSinkOptions {
  std::string endpoint;  // HOST:PORT
  OtlpProtocol protocol = OtlpProtocol::Grpc;
  bool insecure = false;   // plaintext (no TLS)
  std::string ca_file;     // TLS: trust this PEM bundle, else the system's roots
  std::string headers_env; // a variable holding "key1=value1,key2=value2" (as OTEL_EXPORTER_OTLP_HEADERS)
  std::string spool_dir = "/var/lib/gsymprof/spool";
  uint64_t spool_max_bytes = 64ull << 20;
};

// The outcome of one export call.
struct OtlpSendResult {
  bool accepted = false;
  bool retryable = true;        // when not accepted: worth sending again later
  std::string error;            // when not accepted: one line, what went wrong
  int64_t rejected_profiles = 0;  // partial success: profiles the backend refused
  std::string rejected_message;   // and why, as it says
};

// How a request travels (gRPC or HTTP); tests may stand in their own.
class OtlpTransport {
 public:
  virtual ~OtlpTransport() = default;
  // `request`: a serialized ExportProfilesServiceRequest.
  virtual OtlpSendResult send(const std::string& request) = 0;
};

// "key1=value1,key2=value2" -> pairs, values percent-decoded (the OTLP
// exporter's rule for OTEL_EXPORTER_OTLP_HEADERS); keys lower-cased.
gsym::Expected<std::vector<std::pair<std::string, std::string>>> parse_otlp_headers(const std::string& text);

// The transport `options` ask for (the CA file and headers read now).
gsym::Expected<std::unique_ptr<OtlpTransport>> make_otlp_transport(const OtlpSinkOptions& options);

class OtlpSink final : public WindowSink {
 public:
  // Opens the spool and the transport.
  static gsym::Expected<std::unique_ptr<OtlpSink>> open(const OtlpSinkOptions& options);
  OtlpSink(WindowStore spool, std::unique_ptr<OtlpTransport> transport);

  const char* name() const override { return "otlp"; }
  void deliver(const Capture& window, GsymLocator& locator, const SymbolizeOptions& options,
               AgentMetrics& metrics) override;
  void idle(AgentMetrics& metrics) override;

 private:
  using Clock = std::chrono::steady_clock;
  // Sends the spool oldest first until it is empty or a send fails.
  void send_spooled(AgentMetrics& metrics);
  void failed_attempt(const std::string& error);
  void report_rejected(const OtlpSendResult& result);

  WindowStore spool_;
  std::unique_ptr<OtlpTransport> transport_;
  Clock::time_point next_attempt_{};
  std::chrono::milliseconds backoff_{0};
  std::string failing_with_;  // the last error ("" = exporting fine)
  uint64_t failed_attempts_ = 0;
  Clock::time_point failing_said_{};
  int64_t rejected_unsaid_ = 0;  // rejected profiles not yet said
  Clock::time_point rejected_said_{};
};

}  // namespace gsymprof
