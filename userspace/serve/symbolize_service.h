// userspace/serve/symbolize_service.h - `gsymprof serve`: HTTP on --listen
//   POST /symbolize/pprof         a pprof (gzipped or not) -> the pprof named, gzipped
//   POST /v1development/profiles  OTLP/HTTP (application/x-protobuf): named,
//                                 then passed on to --forward (without it:
//                                 named and dropped, counted)
//   GET  /buildid/ID/debuginfo    the stored files, as a debuginfod server
//   GET  /buildid/ID/executable   serves them (debuginfod-find reads them)
//   PUT  /buildid/ID/debuginfo    uploads (also PUT .../executable): stored
//                                 only when the file's GNU build ID is ID
//   GET  /metrics                 Prometheus text (serve_metrics.h)
// and OTLP/gRPC (ProfilesService/Export) on --otlp-listen.
// Bounds: request bodies (pprof, OTLP) up to max_request_bytes (a gzipped
// pprof inflates to at most 8 times that), uploads up to max_upload_bytes;
// `threads` HTTP workers and as many gRPC threads; each request names frames
// until its deadline, then leaves the rest as they are ("deadline").
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "gsym/base/expected.h"
#include "userspace/export/otlp_sink.h"
#include "userspace/serve/serve_metrics.h"
#include "userspace/serve/symbol_store.h"

namespace gsymprof {

struct ServeOptions {
  std::string listen = "127.0.0.1:8788";
  std::string otlp_listen;             // "" = no gRPC receiver
  OtlpSinkOptions forward;             // endpoint "" = no forwarding (spool unused)
  uint64_t max_request_bytes = uint64_t{32} << 20;
  uint64_t max_upload_bytes = uint64_t{2} << 30;
  unsigned threads = 8;
  std::chrono::milliseconds deadline{10000};
  SymbolStoreOptions store;
};

class SymbolizeService {
 public:
  static gsym::Expected<std::unique_ptr<SymbolizeService>> start(ServeOptions options);
  ~SymbolizeService();  // stops serving, then the store's worker
  SymbolizeService(const SymbolizeService&) = delete;
  SymbolizeService& operator=(const SymbolizeService&) = delete;

  std::string http_address() const;  // HOST:PORT bound
  std::string grpc_address() const;  // "" without --otlp-listen

  struct State;

 private:
  explicit SymbolizeService(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace gsymprof
