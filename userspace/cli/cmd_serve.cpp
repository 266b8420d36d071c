// gsymprof serve: a symbolization service. Names the native frames of
// profiles other agents send (OTLP Profiles over gRPC and HTTP, pprof over
// HTTP) from GSYMs by GNU build ID, converted off the request path from
// debug files uploaded to it or fetched from debuginfod, and passes OTLP on
// to --forward; serves the stored files as a debuginfod server does.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "userspace/base/parse_number.h"
#include "userspace/base/text_escape.h"
#include "userspace/cli/commands.h"
#include "userspace/serve/symbolize_service.h"

namespace gsymprof {
namespace {

constexpr const char* kAbout =
    "Names the native frames of profiles sent to it, until SIGTERM or SIGINT:\n"
    "POST /symbolize/pprof takes a pprof (gzipped or not) and answers it with\n"
    "Function and Line entries (inline chains) for every location whose mapping\n"
    "has a GNU build ID it knows; OTLP Profiles (POST /v1development/profiles,\n"
    "or gRPC on --otlp-listen) are named the same way and passed on to --forward,\n"
    "as a Collector processor would. Symbols come from GSYMs by build ID in\n"
    "--gsym-dir: GSYM files put there, and GSYMs converted (by one background\n"
    "thread, never while a request waits) from ELF files uploaded with\n"
    "PUT /buildid/ID/debuginfo or fetched from --debuginfod-urls. A frame whose\n"
    "GSYM is still being converted is left as it came (counted as\n"
    "pending_conversion): the next profile names it. GET /buildid/ID/debuginfo\n"
    "and /executable serve the stored files to debuginfod clients; GET /metrics\n"
    "counts requests, frames named and why others were not, conversions.\n";

constexpr const char* kEpilogue =
    "An upload whose GNU build ID is not the ID in its URL is refused (422) and\n"
    "not stored. A build ID in a URL is hex of 4 to 64 bytes; nothing else of a\n"
    "request names a file. Bind a public --listen only on a trusted network:\n"
    "anyone who reaches it may upload files (up to --max-upload-bytes each).\n";

// The flags of section "limits": sizes, threads, time, open files.
void add_limit_flags(CommandLine& cli, ServeOptions& options) {
  cli.section("limits");
  cli.value("--max-request-bytes", "N",
            "the largest pprof or OTLP body taken (default 33554432; a gzipped pprof may inflate to 8 times that)",
            [&options](const std::string& v) {
              options.max_request_bytes = parse_flag_number<uint64_t>("--max-request-bytes", v, "bytes", 1024);
            });
  cli.value("--max-upload-bytes", "N", "the largest file uploaded or fetched (default 2147483648)",
            [&options](const std::string& v) {
              options.max_upload_bytes = parse_flag_number<uint64_t>("--max-upload-bytes", v, "bytes", 1024);
              options.store.max_file_bytes = options.max_upload_bytes;
            });
  cli.value("--threads", "N", "requests served at once (HTTP workers, gRPC threads; default 8)", [&options](const std::string& v) {
    options.threads = parse_flag_number<uint32_t>("--threads", v, "a number", 1, 256);
  });
  cli.value("--deadline-ms", "MS", "name frames for at most MS per request, leave the rest as they came (default 10000)",
            [&options](const std::string& v) {
              options.deadline = std::chrono::milliseconds(parse_flag_number<uint32_t>("--deadline-ms", v, "milliseconds", 1));
            });
  cli.value("--open-gsyms", "N", "GSYM files kept open (default 64; the least recently used is closed)",
            [&options](const std::string& v) {
              options.store.open_gsyms = parse_flag_number<uint32_t>("--open-gsyms", v, "a number", 1);
            });
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  ServeOptions options;
  std::string debuginfod_urls;
  CommandLine cli("serve", kAbout, kEpilogue);
  cli.section("service");
  cli.value("--listen", "HOST:PORT",
            "HTTP: /symbolize/pprof, /v1development/profiles, /buildid/ID/..., /metrics (default 127.0.0.1:8788; "
            "PORT 0 picks a free one; an empty HOST is 127.0.0.1)",
            [&options](const std::string& v) { options.listen = v; });
  cli.value("--otlp-listen", "HOST:PORT", "also take OTLP Profiles over gRPC here (ProfilesService/Export; 4317 by convention)",
            [&options](const std::string& v) { options.otlp_listen = v; });
  cli.path("--gsym-dir", "DIR",
           "the store: GSYM files by build ID (*.gsym, any name), uploads in DIR/debug, conversions in DIR/cache "
           "(made private, 0700)",
           options.store.dir)
      .required();
  cli.value("--debuginfod-urls", "URLS",
            "ask these debuginfod servers (space-separated, as DEBUGINFOD_URLS) for what the store lacks "
            "(default: $DEBUGINFOD_URLS)",
            [&debuginfod_urls](const std::string& v) { debuginfod_urls = v; });
  cli.section("forwarding");
  cli.value("--forward", "HOST:PORT", "pass named OTLP requests on to this OpenTelemetry Collector or backend",
            [&options](const std::string& v) { options.forward.endpoint = v; });
  cli.value("--forward-protocol", "grpc|http", "OTLP over gRPC (the default) or HTTP/protobuf to --forward",
            [&options](const std::string& v) {
              if (v != "grpc" && v != "http") throw UsageError("--forward-protocol: grpc or http, not '" + v + "'");
              options.forward.protocol = v == "grpc" ? OtlpProtocol::Grpc : OtlpProtocol::Http;
            });
  cli.flag("--forward-insecure", "to --forward in plaintext, without TLS", [&options] { options.forward.insecure = true; });
  cli.path("--forward-ca", "FILE", "TLS to --forward: trust the CA certificates in this PEM file", options.forward.ca_file);
  add_limit_flags(cli, options);
  cli.example("a local service over a GSYM store",
              "gsymprof serve --listen 127.0.0.1:8788 --gsym-dir /srv/gsym")
      .example("name a pprof",
               "curl --data-binary @cpu.pb.gz -o named.pb.gz localhost:8788/symbolize/pprof")
      .example("upload a debug file under its build ID (readelf -n shows it)",
               "curl -T app.debug localhost:8788/buildid/BUILDID/debuginfo")
      .example("between the OTel eBPF profiler (or agent --symbolize none) and a Collector (TLS)",
               "gsymprof serve --gsym-dir /gsym --otlp-listen :4317 --forward otelcol:4317");
  if (auto exit_status = cli.parse(argc, argv)) return *exit_status;
  if (!debuginfod_urls.empty()) ::setenv("DEBUGINFOD_URLS", debuginfod_urls.c_str(), 1);
  const char* urls = std::getenv("DEBUGINFOD_URLS");
  options.store.debuginfod = urls && *urls;

  // SIGINT and SIGTERM are taken by this thread alone (sigwait below):
  // every thread the service starts inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  auto service = SymbolizeService::start(options);
  if (!service) return cli.failure(service.error().to_string());
  std::fprintf(stderr, "gsymprof serve: http://%s", escape_control((*service)->http_address()).c_str());
  if (!(*service)->grpc_address().empty())
    std::fprintf(stderr, ", OTLP/gRPC on %s", escape_control((*service)->grpc_address()).c_str());
  if (!options.forward.endpoint.empty())
    std::fprintf(stderr, ", forwarding to %s", escape_control(options.forward.endpoint).c_str());
  std::fprintf(stderr, "; store %s%s (SIGTERM stops)\n", escape_control(options.store.dir).c_str(),
               options.store.debuginfod ? ", debuginfod" : "");
  int signal = 0;
  sigwait(&stop_signals, &signal);
  service->reset();
  std::fprintf(stderr, "gsymprof serve: stopped\n");
  return 0;
}

}  // namespace gsymprof
