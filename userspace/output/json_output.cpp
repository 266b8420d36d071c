#include "userspace/output/json_output.h"

#include <nlohmann/json.hpp>

#include "userspace/base/json_text.h"

#include <string>
#include <vector>

namespace gsymprof {
namespace {

using ojson = nlohmann::ordered_json;

std::string dump(const ojson& value) { return terminal_safe_json(value); }

}  // namespace

const char* frame_kind_name(FrameKind kind) {
  switch (kind) {
    case FrameKind::Function: return "function";
    case FrameKind::ModuleOffset: return "module-offset";
    case FrameKind::Unknown: return "unknown";
    case FrameKind::Truncated: return "truncated";
    case FrameKind::Kernel: return "kernel";
    case FrameKind::Jit: return "jit";
    case FrameKind::OffCpu: return "off-cpu";
    case FrameKind::Python: return "python";
  }
  return "unknown";
}

std::string symbolized_json(const SymbolizeResult& result) {
  // Each distinct frame is serialized once; a stack's line splices the
  // pieces, the same bytes as dumping the whole stack object (compact dumps
  // nest verbatim).
  std::vector<std::string> frames;
  frames.reserve(result.frames.size());
  for (const SymbolizedFrame& frame : result.frames)
    frames.push_back(dump({{"name", frame.name},
                           {"kind", frame_kind_name(frame.kind)},
                           {"file", frame.file},
                           {"line", frame.line},
                           {"inlined", frame.inlined},
                           {"module", frame.module_path},
                           {"build_id", frame.build_id.hex()}}));
  uint64_t samples = 0;
  for (const SymbolizedStack& stack : result.stacks) samples += stack.count;
  // Off-CPU and wall-clock counts are nanoseconds: said, so no script adds
  // them to samples.
  std::string out = "{\"format\":\"gsymprof-stacks\",\"version\":1,\"samples\":" +
                    std::to_string(samples) + (result.unit == "samples" ? "" : ",\"unit\":\"" + result.unit + "\"") +
                    ",\n\"stacks\":[";
  bool first = true;
  for (const SymbolizedStack& stack : result.stacks) {
    out += first ? "\n" : ",\n";
    out += "{\"comm\":";
    out += dump(stack.comm);
    out += ",\"count\":";
    out += std::to_string(stack.count);
    out += ",\"frames\":[";
    for (size_t i = 0; i < stack.frames.size(); ++i) {
      if (i != 0) out += ',';
      out += frames.at(stack.frames[i]);
    }
    out += "]}";
    first = false;
  }
  out += "\n],\n\"modules\":[";
  first = true;
  for (const ModuleReport& report : result.modules) {
    ojson module = {{"path", report.path},
                    {"build_id", report.build_id.hex()},
                    {"build_id_kind", kind_name(report.build_id.kind())},
                    {"resolved", report.resolved()},
                    {"source", to_string(report.origin)},
                    {"gsym", report.gsym_path},
                    {"reason", report.reason}};
    out += first ? "\n" : ",\n";
    out += dump(module);
    first = false;
  }
  out += "\n]}\n";
  return out;
}

}  // namespace gsymprof
