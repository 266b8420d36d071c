#include "userspace/export/otlp_sink.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "gsym/base/file_io.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.grpc.pb.h"
#include "userspace/base/text_escape.h"
#include "userspace/export/otlp_profiles.h"
#include "userspace/http/http.h"

namespace gsymprof {
namespace {

namespace collector = opentelemetry::proto::collector::profiles::v1development;

constexpr auto kExportTimeout = std::chrono::seconds(10);
// The largest request we send (gRPC's and the Collector's default limit is
// 4 MiB, its HTTP limit 20 MiB): a bigger window is refused before sending.
constexpr size_t kMaxRequestBytes = 64u << 20;
// Responses are a few bytes; anything longer is not an OTLP backend's.
constexpr size_t kMaxResponseBytes = 64u << 10;
constexpr auto kFirstBackoff = std::chrono::seconds(1), kLastBackoff = std::chrono::seconds(60);
constexpr auto kRejectedReportEvery = std::chrono::seconds(60);
constexpr auto kStillFailingEvery = std::chrono::minutes(10);
constexpr size_t kMaxCaBytes = 4u << 20;

void say(const std::string& line) { std::fprintf(stderr, "gsymprof agent: otlp: %s\n", escape_control(line).c_str()); }

// At most 200 bytes of an untrusted body, escaped, for an error line.
std::string body_excerpt(const std::string& body) {
  std::string excerpt = escape_control(std::string_view(body).substr(0, 200));
  if (body.size() > 200) excerpt += "...";
  return excerpt;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return std::string(text);
}

gsym::Expected<std::string> read_ca_file(const std::string& path) {
  auto file = gsym::open_regular_file(path);
  if (!file) return file.error();
  auto bytes = gsym::read_descriptor(file->fd.get(), kMaxCaBytes, path);
  if (!bytes) return bytes.error();
  return std::string(bytes->begin(), bytes->end());
}

// Reads a partial-success response into `result`; false when the bytes are not one.
bool read_response(const std::string& bytes, OtlpSendResult& result) {
  collector::ExportProfilesServiceResponse response;
  if (!response.ParseFromString(bytes)) return false;
  if (response.has_partial_success()) {
    result.rejected_profiles = response.partial_success().rejected_profiles();
    result.rejected_message = response.partial_success().error_message();
  }
  return true;
}

class GrpcTransport final : public OtlpTransport {
 public:
  GrpcTransport(const OtlpSinkOptions& options, std::string ca_pem,
                std::vector<std::pair<std::string, std::string>> headers)
      : headers_(std::move(headers)) {
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    if (options.insecure) {
      credentials = grpc::InsecureChannelCredentials();
    } else {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = std::move(ca_pem);  // empty: gRPC's default roots
      credentials = grpc::SslCredentials(ssl);
    }
    grpc::ChannelArguments arguments;
    arguments.SetMaxSendMessageSize(static_cast<int>(kMaxRequestBytes));
    arguments.SetMaxReceiveMessageSize(static_cast<int>(kMaxResponseBytes));
    // gRPC's own reconnect backoff grows to 120 s: a backend back up would
    // wait that long for us; keep it within ours.
    arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 1000);
    arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
    arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 60000);
    stub_ = collector::ProfilesService::NewStub(grpc::CreateCustomChannel(options.endpoint, credentials, arguments));
  }

  OtlpSendResult send(const std::string& bytes) override {
    OtlpSendResult result;
    collector::ExportProfilesServiceRequest request;
    if (!request.ParseFromString(bytes)) {
      result.retryable = false;
      result.error = "a spooled window is not an ExportProfilesServiceRequest";
      return result;
    }
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kExportTimeout);
    for (const auto& [key, value] : headers_) context.AddMetadata(key, value);
    collector::ExportProfilesServiceResponse response;
    const grpc::Status status = stub_->Export(&context, request, &response);
    if (!status.ok()) {
      result.error = "gRPC export: " + status.error_message() + " (status " + std::to_string(status.error_code()) + ")";
      // The OTLP specification's retryable codes; others are final.
      switch (status.error_code()) {
        case grpc::StatusCode::CANCELLED:
        case grpc::StatusCode::DEADLINE_EXCEEDED:
        case grpc::StatusCode::RESOURCE_EXHAUSTED:
        case grpc::StatusCode::ABORTED:
        case grpc::StatusCode::OUT_OF_RANGE:
        case grpc::StatusCode::UNAVAILABLE:
        case grpc::StatusCode::DATA_LOSS:
          result.retryable = true;
          break;
        default:
          result.retryable = false;
      }
      return result;
    }
    result.accepted = true;
    if (response.has_partial_success()) {
      result.rejected_profiles = response.partial_success().rejected_profiles();
      result.rejected_message = response.partial_success().error_message();
    }
    return result;
  }

 private:
  std::vector<std::pair<std::string, std::string>> headers_;
  std::unique_ptr<collector::ProfilesService::Stub> stub_;
};

class HttpTransport final : public OtlpTransport {
 public:
  HttpTransport(const OtlpSinkOptions& options, const http::Module& module,
                std::vector<std::pair<std::string, std::string>> headers)
      : module_(module) {
    client_.endpoint = options.endpoint;
    client_.tls = !options.insecure;
    client_.ca_file = options.ca_file;
    client_.timeout = kExportTimeout;
    request_.path = "/v1development/profiles";
    request_.headers = std::move(headers);
    request_.content_type = "application/x-protobuf";
    request_.max_response_bytes = kMaxResponseBytes;
  }

  OtlpSendResult send(const std::string& bytes) override {
    OtlpSendResult result;
    http::PostRequest request = request_;
    request.body = bytes;
    const http::PostResult answer = module_.post(client_, request);
    if (answer.body_too_long) {
      result.error = "HTTP export: the response is longer than " + std::to_string(kMaxResponseBytes) + " bytes";
      return result;
    }
    if (!answer.answered) {
      result.error = "HTTP export to " + client_.endpoint + ": " + answer.error;
      return result;
    }
    const std::string& body = answer.body;
    if (answer.status < 200 || answer.status > 299) {
      result.error = "HTTP export: status " + std::to_string(answer.status) + ": " + body_excerpt(body);
      // The OTLP specification's retryable statuses; others are final.
      result.retryable = answer.status == 429 || answer.status == 502 || answer.status == 503 ||
                         answer.status == 504;
      return result;
    }
    if (!read_response(body, result)) {
      // Not an OTLP backend's answer: whether it kept the window is unknown.
      result.error = "HTTP export: status " + std::to_string(answer.status) +
                     " with a body that is not an ExportProfilesServiceResponse: " + body_excerpt(body);
      return result;
    }
    result.accepted = true;
    return result;
  }

 private:
  const http::Module& module_;
  http::ClientOptions client_;
  http::PostRequest request_;
};

}  // namespace

gsym::Expected<std::vector<std::pair<std::string, std::string>>> parse_otlp_headers(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> headers;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = trim(std::string_view(text).substr(start, comma - start));
    start = comma + 1;
    if (item.empty()) continue;
    const size_t equals = item.find('=');
    if (equals == std::string::npos || equals == 0) return gsym::Error("headers: key=value pairs separated by commas");
    std::string key = trim(std::string_view(item).substr(0, equals));
    for (char& c : key) {
      const unsigned char u = static_cast<unsigned char>(c);
      if (!std::isalnum(u) && c != '-' && c != '_' && c != '.') return gsym::Error("headers: a key may hold only letters, digits, '-', '_' and '.'");
      c = static_cast<char>(std::tolower(u));
    }
    const std::string raw = trim(std::string_view(item).substr(equals + 1));
    std::string value;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '%' && i + 2 < raw.size() && hex_digit(raw[i + 1]) >= 0 && hex_digit(raw[i + 2]) >= 0) {
        value += static_cast<char>(hex_digit(raw[i + 1]) * 16 + hex_digit(raw[i + 2]));
        i += 2;
      } else {
        value += raw[i];
      }
    }
    for (char c : value)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return gsym::Error("headers: a value holds a control character");
    headers.emplace_back(std::move(key), std::move(value));
  }
  return headers;
}

gsym::Expected<std::unique_ptr<OtlpTransport>> make_otlp_transport(const OtlpSinkOptions& options) {
  const size_t colon = options.endpoint.rfind(':');
  if (options.endpoint.find("://") != std::string::npos || colon == std::string::npos || colon == 0 ||
      colon + 1 == options.endpoint.size())
    return gsym::Error("--otlp-endpoint: HOST:PORT, e.g. collector.example:4317, not '" + options.endpoint + "'");
  std::vector<std::pair<std::string, std::string>> headers;
  if (!options.headers_env.empty()) {
    const char* text = std::getenv(options.headers_env.c_str());
    if (!text) return gsym::Error("--otlp-headers-env: the variable " + options.headers_env + " is not set");
    auto parsed = parse_otlp_headers(text);
    // The value may be a secret: never echoed.
    if (!parsed) return gsym::Error("--otlp-headers-env " + options.headers_env + ": " + parsed.error().message);
    headers = std::move(*parsed);
  }
  std::string ca_pem;
  if (!options.ca_file.empty()) {
    auto read = read_ca_file(options.ca_file);
    if (!read) return gsym::Error("--otlp-ca: " + read.error().to_string());
    ca_pem = std::move(*read);
  }
  if (options.protocol == OtlpProtocol::Grpc)
    return std::unique_ptr<OtlpTransport>(new GrpcTransport(options, std::move(ca_pem), std::move(headers)));
  // Loaded now, not at the first window: a gsymprof without its HTTP module
  // says so before it starts.
  auto module = http::module();
  if (!module) return module.error();
  return std::unique_ptr<OtlpTransport>(new HttpTransport(options, **module, std::move(headers)));
}

gsym::Expected<std::unique_ptr<OtlpSink>> OtlpSink::open(const OtlpSinkOptions& options) {
  auto transport = make_otlp_transport(options);
  if (!transport) return transport.error();
  // Bounded by bytes only: the file count never binds.
  auto spool = WindowStore::open(options.spool_dir, "otlp", ".pb", SIZE_MAX, options.spool_max_bytes);
  if (!spool) return gsym::Error("--spool-dir " + spool.error().to_string());
  return std::make_unique<OtlpSink>(std::move(*spool), std::move(*transport));
}

OtlpSink::OtlpSink(WindowStore spool, std::unique_ptr<OtlpTransport> transport)
    : spool_(std::move(spool)), transport_(std::move(transport)) {}

void OtlpSink::deliver(const Capture& window, GsymLocator& locator, const SymbolizeOptions& options,
                       AgentMetrics& metrics) {
  auto request = otlp_profiles_request(window, locator, options);
  if (!request) {
    say("a window: " + request.error().to_string());
    metrics.add_window(name(), WindowOutcome::Failed);
    return;
  }
  // A window without samples: a backend drops it unread (the Collector does).
  if (request->samples == 0) return;
  if (request->bytes.size() > kMaxRequestBytes) {
    say("a window of " + std::to_string(request->bytes.size()) + " bytes is over the " +
        std::to_string(kMaxRequestBytes) + "-byte limit: not sent (shorter --window)");
    metrics.add_window(name(), WindowOutcome::Failed);
    return;
  }
  auto dropped = spool_.add(window.start_time_unix_ns, request->bytes);
  if (!dropped) {
    say("spool: " + dropped.error().to_string());
    metrics.add_window(name(), WindowOutcome::Failed);
    return;
  }
  // Over --spool-max-bytes: the oldest windows went.
  if (*dropped) metrics.add_window(name(), WindowOutcome::Dropped, *dropped);
  send_spooled(metrics);
}

void OtlpSink::idle(AgentMetrics& metrics) { send_spooled(metrics); }

void OtlpSink::send_spooled(AgentMetrics& metrics) {
  if (Clock::now() >= next_attempt_) {
    for (const std::string& file : spool_.names()) {
      auto bytes = spool_.read(file);
      if (!bytes) {  // unreadable: never sendable either
        say("spool: " + bytes.error().to_string() + ": removed");
        spool_.remove(file);
        metrics.add_window(name(), WindowOutcome::Failed);
        continue;
      }
      const OtlpSendResult result = transport_->send(*bytes);
      report_rejected(result);
      if (result.accepted) {
        spool_.remove(file);
        metrics.add_window(name(), WindowOutcome::Exported);
        if (!failing_with_.empty())
          say("exporting again, after " + std::to_string(failed_attempts_) + " failed attempts");
        failing_with_.clear();
        failed_attempts_ = 0;
        backoff_ = std::chrono::milliseconds(0);
        continue;
      }
      metrics.add_window(name(), WindowOutcome::Failed);
      failed_attempt(result.error + (result.retryable ? "" : " (not retried: the window is removed)"));
      if (!result.retryable) {
        spool_.remove(file);
        continue;
      }
      // Back off: 1 s doubling to 60 s, each wait drawn from its upper
      // half so that agents failing together do not retry together.
      backoff_ = std::clamp(backoff_ * 2, std::chrono::milliseconds(kFirstBackoff), std::chrono::milliseconds(kLastBackoff));
      static thread_local std::minstd_rand random(std::random_device{}());
      const auto wait = backoff_ / 2 + std::chrono::milliseconds(random() % (backoff_.count() / 2 + 1));
      next_attempt_ = Clock::now() + wait;
      break;
    }
  }
  metrics.set_spool_bytes(spool_.bytes());
}

void OtlpSink::failed_attempt(const std::string& error) {
  ++failed_attempts_;
  const auto now = Clock::now();
  // The first failure is said; while it lasts, a count now and then (the
  // errors of one outage vary in their wording: each is not news).
  if (failing_with_.empty()) {
    say(error + "; retrying with backoff");
    failing_said_ = now;
  } else if (now - failing_said_ >= kStillFailingEvery) {
    say("still failing after " + std::to_string(failed_attempts_) + " attempts: " + error);
    failing_said_ = now;
  }
  failing_with_ = error;
}

void OtlpSink::report_rejected(const OtlpSendResult& result) {
  if (result.rejected_profiles <= 0 && result.rejected_message.empty()) return;
  rejected_unsaid_ += std::max<int64_t>(result.rejected_profiles, 0);
  const auto now = Clock::now();
  if (rejected_said_ != Clock::time_point{} && now - rejected_said_ < kRejectedReportEvery) return;
  say("the backend rejected " + std::to_string(rejected_unsaid_) + " profiles" +
      (result.rejected_message.empty() ? "" : ": " + result.rejected_message.substr(0, 200)));
  rejected_unsaid_ = 0;
  rejected_said_ = now;
}

}  // namespace gsymprof
