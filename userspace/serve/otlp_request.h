// userspace/serve/otlp_request.h - OTLP Profiles (v1.11.0,
// profiles/v1development) requests: the dictionary's locations named in
// place. A location is named when it has no lines and its mapping carries
// a process.executable.build_id.gnu attribute (hex) that the store can
// name: its lines become the inline chain innermost first, with Functions
// (name, system_name, filename) and strings added to the dictionary,
// deduplicated. Nothing else changes; every location but the zero entry is
// counted by outcome. Mappings with only the OTel eBPF profiler's file ID
// (process.executable.build_id.htlhash) or a Go build ID are NoBuildId.
//
// Hostile input: references out of range (mapping, attribute, string,
// function indexes) are errors, one line; the request is then refused.
#pragma once

#include <string>
#include <string_view>

#include "gsym/base/expected.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb.h"
#include "userspace/serve/frame_namer.h"

namespace gsymprof {

namespace otlp_collector = opentelemetry::proto::collector::profiles::v1development;

// The mapping attribute key of a GNU build ID (the semantic conventions').
inline constexpr const char* kGnuBuildIdAttribute = "process.executable.build_id.gnu";

gsym::Status symbolize_otlp(otlp_collector::ExportProfilesServiceRequest& request, FrameNamer& namer);

// `body` parsed (an error, one line, when it is not an
// ExportProfilesServiceRequest), symbolized, serialized again.
gsym::Expected<std::string> symbolize_otlp_bytes(std::string_view body, FrameNamer& namer);

}  // namespace gsymprof
