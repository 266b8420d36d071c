// gsymprof agent: continuous profiling. Samples the whole host (or -p,
// --comm, --cgroup) until SIGTERM/SIGINT, in windows of --window seconds,
// and exports each window, named on the host: pprof files (--output-dir),
// an HTTP endpoint for pprof pulls and Prometheus (--listen).
#include <malloc.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "userspace/base/parse_number.h"
#include "userspace/base/text_escape.h"
#include "userspace/cli/cli_common.h"
#include "userspace/cli/commands.h"
#include "userspace/export/agent_exporter.h"
#include "userspace/export/agent_metrics.h"
#include "userspace/export/http_endpoint.h"
#include "userspace/export/otlp_sink.h"
#include "userspace/export/pprof_files.h"
#include "userspace/export/window_store.h"
#include "userspace/report/session_summary.h"
#include "userspace/session/agent_session.h"

namespace gsymprof {
namespace {

constexpr const char* kAbout =
    "Profiles continuously until SIGTERM or SIGINT: the whole host by default (or -p,\n"
    "--comm, --cgroup), at 19 Hz by default (-F), in windows of --window seconds\n"
    "(default 10). Each window is symbolized here, inline frames included, from\n"
    "GSYM files by build ID (--symbolize none sends addresses and build IDs only),\n"
    "and exported: one pprof file per window (--output-dir, the newest kept), and\n"
    "an HTTP endpoint (--listen) that serves /debug/pprof/profile?seconds=N as Go's\n"
    "net/http/pprof does (go tool pprof, Parca and Pyroscope scrape it) and\n"
    "/metrics for Prometheus. Every sample carries process.pid, thread.id,\n"
    "thread.name, process.executable.name and .path, container.id, the cgroup and\n"
    "service.name. Memory follows what runs, not the uptime. SIGTERM exports the\n"
    "window in progress, then exits. Needs root.\n";

struct AgentFlags {
  double window_s = 10;
  std::string listen, output_dir;
  size_t output_max_files = 360;             // an hour of 10 s windows
  uint64_t output_max_bytes = 512ull << 20;  // whichever comes first
  std::string symbolize = "host";
  OtlpSinkOptions otlp;  // used with --otlp-endpoint
};

// Targets, windows and labels, and how frames are named.
void add_session_flags(CommandLine& cli, AgentSessionOptions& session, AgentFlags& flags,
                       SymbolizeFlags& symbolize_flags) {
  cli.section("targets");
  add_agent_target_flags(cli, session.targets);
  cli.value("--comm", "NAME", "only processes named NAME (repeatable)",
            [&session](const std::string& name) { session.comms.push_back(name); });
  cli.value("--cgroup", "PATH", "only processes in this cgroup or below (as /proc/PID/cgroup shows it, e.g. /system.slice/nginx.service)",
            [&session](const std::string& path) { session.cgroup = path; });
  cli.section("windows and labels");
  cli.value("--window", "SECONDS", "seconds per exported profile (default 10, 1 to 3600)", [&flags](const std::string& v) {
    flags.window_s = parse_flag_number<uint32_t>("--window", v, "seconds", 1, 3600);
  });
  cli.value("--service-name", "NAME", "service.name of every sample", [&session](const std::string& v) { session.service_name = v; });
  cli.value("--service-env", "VAR",
            "service.name from this variable of each process's environment (else the executable's name)",
            [&session](const std::string& v) { session.service_env = v; });
  cli.value("--symbolize", "host|none", "name frames here (host, the default) or send addresses, build IDs and mappings only (none)",
            [&flags](const std::string& v) {
              if (v != "host" && v != "none") throw UsageError("--symbolize: host or none, not '" + v + "'");
              flags.symbolize = v;
            });
  add_symbolize_flags(cli, symbolize_flags);
}

// Where windows go: files, the HTTP endpoint, OTLP; and the examples.
void add_export_flags(CommandLine& cli, AgentFlags& flags) {
  cli.section("export");
  cli.value("--listen", "HOST:PORT",
            "serve /debug/pprof/profile?seconds=N and /metrics (e.g. 127.0.0.1:8787; PORT 0 picks a free one; "
            "bind a public address only on a trusted network)",
            [&flags](const std::string& v) { flags.listen = v; });
  cli.path("--output-dir", "DIR", "write one gzipped pprof per window into DIR (made private, 0700)", flags.output_dir);
  cli.value("--output-max-files", "N", "--output-dir keeps the newest N files (default 360)", [&flags](const std::string& v) {
    flags.output_max_files = parse_flag_number<uint32_t>("--output-max-files", v, "a number of files", 1);
  });
  cli.value("--output-max-bytes", "N", "--output-dir keeps at most N bytes (default 536870912)", [&flags](const std::string& v) {
    flags.output_max_bytes = parse_flag_number<uint64_t>("--output-max-bytes", v, "bytes", 4096);
  });
  cli.value("--otlp-endpoint", "HOST:PORT", "send each window as OTLP Profiles to this OpenTelemetry Collector or backend",
            [&flags](const std::string& v) { flags.otlp.endpoint = v; });
  cli.value("--otlp-protocol", "grpc|http", "OTLP over gRPC (the default; port 4317 by convention) or HTTP/protobuf (4318)",
            [&flags](const std::string& v) {
              if (v != "grpc" && v != "http") throw UsageError("--otlp-protocol: grpc or http, not '" + v + "'");
              flags.otlp.protocol = v == "grpc" ? OtlpProtocol::Grpc : OtlpProtocol::Http;
            });
  cli.flag("--otlp-insecure", "OTLP in plaintext, without TLS", [&flags] { flags.otlp.insecure = true; });
  cli.path("--otlp-ca", "FILE", "TLS: trust the CA certificates in this PEM file (default: the system's)", flags.otlp.ca_file);
  cli.value("--otlp-headers-env", "VAR",
            "OTLP request headers from this environment variable, \"key1=value1,key2=value2\" (API keys stay off the command line)",
            [&flags](const std::string& v) { flags.otlp.headers_env = v; });
  cli.path("--spool-dir", "DIR", "windows not yet taken by the OTLP backend wait here, sent after a restart too (default /var/lib/gsymprof/spool)",
           flags.otlp.spool_dir);
  cli.value("--spool-max-bytes", "N", "the spool keeps at most N bytes, the oldest windows dropped first (default 67108864)",
            [&flags](const std::string& v) {
              flags.otlp.spool_max_bytes = parse_flag_number<uint64_t>("--spool-max-bytes", v, "bytes", 4096);
            });
  cli.example("the whole host at 19 Hz, pulled by go tool pprof or Parca",
              "sudo gsymprof agent --listen 127.0.0.1:8787")
      .example("then, from the same host",
               "go tool pprof http://127.0.0.1:8787/debug/pprof/profile?seconds=30")
      .example("one pprof per minute on disk, an hour of them kept",
               "sudo gsymprof agent --window 60 --output-dir /srv/prof --output-max-files 60")
      .example("only nginx, labelled by the SVC variable of its environment",
               "sudo gsymprof agent --comm nginx --service-env SVC --listen 127.0.0.1:8787");
}

// The sinks the flags ask for (files, OTLP); the HTTP endpoint pulls instead.
gsym::Expected<std::vector<std::unique_ptr<WindowSink>>> open_sinks(const AgentFlags& flags) {
  std::vector<std::unique_ptr<WindowSink>> sinks;
  if (!flags.output_dir.empty()) {
    auto store = WindowStore::open(flags.output_dir, "profile", ".pb.gz", flags.output_max_files, flags.output_max_bytes);
    if (!store) return gsym::Error("--output-dir " + store.error().to_string());
    sinks.push_back(std::make_unique<PprofFiles>(std::move(*store)));
  }
  if (!flags.otlp.endpoint.empty()) {
    auto otlp = OtlpSink::open(flags.otlp);
    if (!otlp) return otlp.error();
    sinks.push_back(std::move(*otlp));
  }
  return sinks;
}

}  // namespace

int cmd_agent(int argc, char** argv) {
  // Before any thread makes an arena: two arenas at most, and blocks of
  // 1 MiB and more mapped on their own (glibc's threshold otherwise climbs
  // to 32 MiB after the first big free), so what a window allocated goes
  // back to the kernel when freed. Measured on a busy host: median VmRSS
  // 44 MB against 64 without, for the same CPU (tests/bench/README.md).
  ::mallopt(M_ARENA_MAX, 2);
  ::mallopt(M_MMAP_THRESHOLD, 1 << 20);
  AgentSessionOptions session;
  session.targets.frequency_hz = 19;
  AgentFlags flags;
  SymbolizeFlags symbolize_flags;
  CommandLine cli("agent", kAbout);
  add_session_flags(cli, session, flags, symbolize_flags);
  add_export_flags(cli, flags);
  if (auto exit_status = cli.parse(argc, argv)) return *exit_status;
  if (std::string problem = validate_target_options(session.targets); !problem.empty())
    return cli.usage_error(problem);
  if (flags.listen.empty() && flags.output_dir.empty() && flags.otlp.endpoint.empty())
    return cli.usage_error("nothing to export to: give --otlp-endpoint HOST:PORT, --listen HOST:PORT and/or --output-dir DIR");

  auto sinks = open_sinks(flags);
  if (!sinks) return cli.failure(sinks.error().to_string());
  AgentExporterOptions export_options;
  export_options.window_s = flags.window_s;
  export_options.symbolize = symbolize_flags.options;
  GsymLocator locator;
  if (flags.symbolize == "host") {
    // Conversions in a child process each: the converter's heap (hundreds
    // of MB for a large binary's DWARF) leaves with it, where glibc would
    // keep much of it in the agent; and no lookup indexes, which were most
    // of its heap (tests/bench/README.md, the agent).
    auto opened = open_locator(symbolize_flags.gsym_dirs, LocatorUse::Daemon);
    if (!opened) return cli.failure(opened.error().to_string());
    locator = std::move(*opened);
    // Each module's GSYM pages go as soon as it is looked up, not at the
    // window's end: the export's peak holds one module's (symbolize.h).
    export_options.symbolize.release_pages_per_module = true;
    // The --gsym-dirs indexed again every 10 minutes or so, the readers of
    // the last ones unmapped (a dir that went away: the cache only).
    export_options.make_locator = [dirs = symbolize_flags.gsym_dirs] {
      auto fresh = open_locator(dirs, LocatorUse::Daemon);
      return fresh ? std::move(*fresh) : open_locator({}, LocatorUse::Daemon).value();
    };
    // A pull is answered on a thread of its own, with what the cache holds
    // and what converts quickly: its client waits (go tool pprof: 1.5 times
    // the seconds asked), while a window's export may be converting a big
    // binary for minutes.
    export_options.make_pull_locator = [dirs = symbolize_flags.gsym_dirs] {
      auto fresh = open_locator(dirs, LocatorUse::Pull);
      return fresh ? std::move(*fresh) : open_locator({}, LocatorUse::Pull).value();
    };
  } else {
    // Addresses, build IDs and mappings: no GSYM is read or made.
    export_options.symbolize.local_elf_path = [](const CaptureModule&) { return std::string(); };
  }
  AgentMetrics metrics;
  AgentExporter exporter(std::move(export_options), std::move(locator), std::move(*sinks), metrics);
  std::unique_ptr<HttpEndpoint> endpoint;
  if (!flags.listen.empty()) {
    auto started = HttpEndpoint::start(flags.listen, exporter, metrics);
    if (!started) return cli.failure(started.error().to_string());
    endpoint = std::move(*started);
  }

  session.on_started = [&](const std::vector<std::string>& notices) {
    print_notices(notices);
    std::string what = session.targets.pids.empty() ? "the whole host" : "the -p processes";
    std::fprintf(stderr, "gsymprof agent: sampling %s at %u Hz, windows of %.0f s", what.c_str(),
                 session.targets.frequency_hz, flags.window_s);
    if (endpoint)
      std::fprintf(stderr, "; serving http://%s:%d/debug/pprof/profile and /metrics", endpoint->host().c_str(),
                   endpoint->port());
    if (!flags.output_dir.empty()) std::fprintf(stderr, "; writing %s", escape_control(flags.output_dir).c_str());
    if (!flags.otlp.endpoint.empty())
      std::fprintf(stderr, "; OTLP to %s", escape_control(flags.otlp.endpoint).c_str());
    std::fprintf(stderr, " (SIGTERM stops)\n");
  };
  session.on_tick = [&exporter](Capture&& tick) { exporter.on_tick(std::move(tick)); };
  AgentSessionStats stats;
  gsym::Status status = run_agent_session(session, &stats);
  exporter.finish();
  endpoint.reset();
  if (!status) return cli.failure(status.error().to_string());
  std::fprintf(stderr, "gsymprof agent: stopped after %llu s of sampling\n",
               static_cast<unsigned long long>(stats.ticks));
  return 0;
}

}  // namespace gsymprof
