#include "userspace/serve/symbolize_service.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.grpc.pb.h"
#include "userspace/base/text_escape.h"
#include "userspace/export/http_endpoint.h"
#include "userspace/http/http.h"
#include "userspace/serve/frame_namer.h"
#include "userspace/serve/otlp_request.h"
#include "userspace/serve/pprof_request.h"

namespace gsymprof {
namespace {

using Clock = std::chrono::steady_clock;

// A one-line answer for people (and debuginfod clients).
void answer_text(http::Response& response, int status, const std::string& line) {
  response.status = status;
  response.set_content(escape_control(line) + "\n", "text/plain; charset=utf-8");
}

// Reads the body through `reader` up to `limit` bytes; false when longer.
bool read_body(const http::BodyReader& reader, uint64_t limit, std::string& body) {
  bool too_long = false;
  reader([&](const char* data, size_t length) {
    if (body.size() + length > limit) {
      too_long = true;
      return false;
    }
    body.append(data, length);
    return true;
  });
  return !too_long;
}

}  // namespace

struct SymbolizeService::State {
  ServeOptions options;
  ServeMetrics metrics;
  std::unique_ptr<SymbolStore> store;
  std::unique_ptr<OtlpTransport> forward;
  std::unique_ptr<http::Server> server;
  std::string http_address, grpc_address;
  std::unique_ptr<grpc::Service> grpc_service;
  std::unique_ptr<grpc::Server> grpc_server;

  FrameNamer namer() { return FrameNamer(*store, Clock::now() + options.deadline); }

  // Runs `handle`, then counts the request on `route` with its status and time.
  void count(const char* route, const http::Response& response, Clock::time_point start) {
    metrics.add_request(route, response.status, std::chrono::duration<double>(Clock::now() - start).count());
  }
  http::Handler timed(const char* route, void (State::*handle)(const http::Request&, http::Response&)) {
    return [this, route, handle](const http::Request& request, http::Response& response) {
      const Clock::time_point start = Clock::now();
      (this->*handle)(request, response);
      count(route, response, start);
    };
  }
  http::BodyHandler timed(const char* route,
                          void (State::*handle)(const http::Request&, http::Response&, const http::BodyReader&)) {
    return [this, route, handle](const http::Request& request, http::Response& response,
                                 const http::BodyReader& reader) {
      const Clock::time_point start = Clock::now();
      (this->*handle)(request, response, reader);
      count(route, response, start);
    };
  }

  // An OTLP request named, then forwarded; the outcome as an HTTP status
  // and a one-line reason (the gRPC receiver maps them to its codes).
  struct Outcome {
    int status = 200;
    std::string error;
    otlp_collector::ExportProfilesServiceResponse response;
  };
  Outcome export_named(const std::string& named_bytes) {
    Outcome outcome;
    if (!forward) {
      metrics.add_forward("not_configured");
      return outcome;
    }
    OtlpSendResult sent = forward->send(named_bytes);
    if (!sent.accepted) {
      metrics.add_forward("failed");
      outcome.status = sent.retryable ? 503 : 400;
      outcome.error = "--forward " + options.forward.endpoint + ": " + sent.error;
      return outcome;
    }
    metrics.add_forward("sent");
    if (sent.rejected_profiles != 0 || !sent.rejected_message.empty()) {
      outcome.response.mutable_partial_success()->set_rejected_profiles(sent.rejected_profiles);
      outcome.response.mutable_partial_success()->set_error_message(sent.rejected_message);
    }
    return outcome;
  }

  void symbolize_pprof_route(const http::Request&, http::Response& response, const http::BodyReader& reader) {
    std::string body;
    if (!read_body(reader, options.max_request_bytes, body))
      return answer_text(response, 413, "the body is longer than --max-request-bytes (" +
                                            std::to_string(options.max_request_bytes) + ")");
    FrameNamer frames = namer();
    auto named = symbolize_pprof(body, std::min<uint64_t>(8 * options.max_request_bytes, uint64_t{1} << 30), frames);
    metrics.add_frames(frames.counts());
    if (!named) return answer_text(response, 400, named.error().message);
    response.headers.emplace_back("Content-Encoding", "identity");
    response.set_content(std::move(*named), "application/octet-stream");
  }

  void otlp_http_route(const http::Request& request, http::Response& response, const http::BodyReader& reader) {
    if (request.header("Content-Type") != "application/x-protobuf")
      return answer_text(response, 415, "OTLP/HTTP here is application/x-protobuf only");
    std::string body;
    if (!read_body(reader, options.max_request_bytes, body))
      return answer_text(response, 413, "the body is longer than --max-request-bytes (" +
                                            std::to_string(options.max_request_bytes) + ")");
    FrameNamer frames = namer();
    auto named = symbolize_otlp_bytes(body, frames);
    metrics.add_frames(frames.counts());
    if (!named) return answer_text(response, 400, named.error().message);
    Outcome outcome = export_named(*named);
    if (outcome.status != 200) return answer_text(response, outcome.status, outcome.error);
    response.set_content(outcome.response.SerializeAsString(), "application/x-protobuf");
  }

  void get_file_route(const http::Request& request, http::Response& response) {
    auto id = parse_request_build_id(request.matches.at(1));
    if (!id) return answer_text(response, 400, "a build ID is hex of 4 to 64 bytes");
    const DebugFileKind kind = request.matches.at(2) == "debuginfo" ? DebugFileKind::Debuginfo : DebugFileKind::Executable;
    auto file = store->open_file(*id, kind);
    if (!file) {
      // A debuginfod client asks debuginfo of an unstripped executable too.
      if (kind == DebugFileKind::Debuginfo) file = store->open_file(*id, DebugFileKind::Executable);
      if (!file) return answer_text(response, 404, std::string("no ") + to_string(kind) + " for " + id->hex());
    }
    auto fd = std::make_shared<gsym::FileDescriptor>(std::move(file->fd));
    const size_t size = static_cast<size_t>(file->status.st_size);
    response.content_type = "application/octet-stream";
    response.stream_size = size;
    response.stream = [fd, size](size_t offset, size_t length, const http::ChunkSink& write) {
      char buffer[1 << 16];
      const size_t want = std::min({length, sizeof buffer, size - offset});
      const ssize_t n = ::pread(fd->get(), buffer, want, static_cast<off_t>(offset));
      if (n <= 0) return false;
      return write(buffer, static_cast<size_t>(n));
    };
  }

  void put_file_route(const http::Request& request, http::Response& response, const http::BodyReader& reader) {
    auto id = parse_request_build_id(request.matches.at(1));
    if (!id) {
      metrics.add_upload("bad_build_id");
      return answer_text(response, 400, "a build ID is hex of 4 to 64 bytes");
    }
    const DebugFileKind kind = request.matches.at(2) == "debuginfo" ? DebugFileKind::Debuginfo : DebugFileKind::Executable;
    auto upload = store->begin_upload();
    if (!upload) {
      metrics.add_upload("failed");
      return answer_text(response, 500, "cannot store the upload: " + upload.error().message);
    }
    bool too_long = false, written = true;
    reader([&](const char* data, size_t length) {
      if (upload->size() + length > options.max_upload_bytes) {
        too_long = true;
        return false;
      }
      written = upload->write(data, length);
      return written;
    });
    if (too_long) {
      metrics.add_upload("too_large");
      return answer_text(response, 413, "the file is larger than --max-upload-bytes (" +
                                            std::to_string(options.max_upload_bytes) + ")");
    }
    if (!written) {
      metrics.add_upload("failed");
      return answer_text(response, 500, "cannot write the upload");
    }
    gsym::Status stored = store->commit_upload(std::move(*upload), *id, kind);
    if (!stored) {
      const bool refused = stored.error().code == gsym::ErrorCode::Refused;
      metrics.add_upload(refused ? "refused" : "failed");
      return answer_text(response, refused ? 422 : 500, stored.error().message);
    }
    metrics.add_upload("stored");
    answer_text(response, 201, std::string("stored ") + to_string(kind) + " " + id->hex() + "; converting");
  }

  void add_routes() {
    server->post("/symbolize/pprof", timed("/symbolize/pprof", &State::symbolize_pprof_route));
    server->post("/v1development/profiles", timed("/v1development/profiles", &State::otlp_http_route));
    server->get(R"(/buildid/([^/]+)/(debuginfo|executable))", timed("/buildid/get", &State::get_file_route));
    server->put(R"(/buildid/([^/]+)/(debuginfo|executable))", timed("/buildid/put", &State::put_file_route));
    server->get("/metrics", [this](const http::Request&, http::Response& response) {
      response.set_content(metrics.prometheus_text(), "text/plain; version=0.0.4; charset=utf-8");
    });
  }
};

namespace {

class OtlpGrpcReceiver final : public otlp_collector::ProfilesService::Service {
 public:
  explicit OtlpGrpcReceiver(SymbolizeService::State& state) : state_(state) {}

  grpc::Status Export(grpc::ServerContext*, const otlp_collector::ExportProfilesServiceRequest* request,
                      otlp_collector::ExportProfilesServiceResponse* response) override {
    const Clock::time_point start = Clock::now();
    grpc::Status status = handle(*request, *response);
    state_.metrics.add_request("grpc:Export", status.ok() ? 200 : 500 + status.error_code(),
                               std::chrono::duration<double>(Clock::now() - start).count());
    return status;
  }

 private:
  grpc::Status handle(const otlp_collector::ExportProfilesServiceRequest& received,
                      otlp_collector::ExportProfilesServiceResponse& response) {
    otlp_collector::ExportProfilesServiceRequest request = received;
    FrameNamer frames = state_.namer();
    gsym::Status named = symbolize_otlp(request, frames);
    state_.metrics.add_frames(frames.counts());
    if (!named) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, named.error().message);
    auto outcome = state_.export_named(request.SerializeAsString());
    if (outcome.status == 503) return grpc::Status(grpc::StatusCode::UNAVAILABLE, outcome.error);
    if (outcome.status != 200) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, outcome.error);
    response = std::move(outcome.response);
    return grpc::Status::OK;
  }

  SymbolizeService::State& state_;
};

}  // namespace

gsym::Expected<std::unique_ptr<SymbolizeService>> SymbolizeService::start(ServeOptions options) {
  auto state = std::make_unique<State>();
  state->options = std::move(options);
  const ServeOptions& o = state->options;
  auto listen = parse_listen_address("--listen", o.listen);
  if (!listen) return listen.error();
  if (!o.forward.endpoint.empty()) {
    auto transport = make_otlp_transport(o.forward);
    if (!transport) return transport.error().prefixed("--forward: ");
    state->forward = std::move(*transport);
  }
  auto store = SymbolStore::open(o.store, state->metrics);
  if (!store) return store.error();
  state->store = std::move(*store);

  auto module = http::module();
  if (!module) return module.error();
  http::ServerLimits limits;
  limits.threads = std::max(1u, o.threads);
  limits.read_timeout_seconds = 30;
  limits.write_timeout_seconds = 30;
  limits.keep_alive_max_count = 100;
  limits.max_body_bytes = static_cast<size_t>(std::max(o.max_request_bytes, o.max_upload_bytes));
  const unsigned threads = limits.threads;
  state->server = (*module)->make_server(limits);
  http::Server& server = *state->server;
  state->add_routes();
  const std::string host = listen->first.empty() ? "127.0.0.1" : listen->first;
  const int bound = server.bind(host, listen->second);
  if (bound < 0) return gsym::Error("--listen " + o.listen + ": cannot listen there (in use, or not this host's address)");
  state->http_address = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(bound);

  if (!o.otlp_listen.empty()) {
    auto grpc_listen = parse_listen_address("--otlp-listen", o.otlp_listen);
    if (!grpc_listen) return grpc_listen.error();
    const std::string grpc_host = grpc_listen->first.empty() ? "127.0.0.1" : grpc_listen->first;
    const std::string address = (grpc_host.find(':') != std::string::npos ? "[" + grpc_host + "]" : grpc_host) + ":" +
                                std::to_string(grpc_listen->second);
    state->grpc_service = std::make_unique<OtlpGrpcReceiver>(*state);
    grpc::ServerBuilder builder;
    int selected = 0;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &selected);
    builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<uint64_t>(o.max_request_bytes, INT32_MAX)));
    grpc::ResourceQuota quota("gsymprof-serve");
    quota.SetMaxThreads(static_cast<int>(threads) + 2);
    builder.SetResourceQuota(quota);
    builder.RegisterService(state->grpc_service.get());
    state->grpc_server = builder.BuildAndStart();
    if (!state->grpc_server || selected == 0)
      return gsym::Error("--otlp-listen " + o.otlp_listen + ": cannot listen there (in use, or not this host's address)");
    state->grpc_address = (grpc_host.find(':') != std::string::npos ? "[" + grpc_host + "]" : grpc_host) + ":" +
                          std::to_string(selected);
  }
  server.start();
  return std::unique_ptr<SymbolizeService>(new SymbolizeService(std::move(state)));
}

SymbolizeService::SymbolizeService(std::unique_ptr<State> state) : state_(std::move(state)) {}

SymbolizeService::~SymbolizeService() {
  if (state_->grpc_server) state_->grpc_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  state_->server->stop();
}

std::string SymbolizeService::http_address() const { return state_->http_address; }
std::string SymbolizeService::grpc_address() const { return state_->grpc_address; }

}  // namespace gsymprof
