// Fuzzes gsymprof diff's pprof input and what diff makes of it: any bytes
// give stacks or a one-line error; the stacks, compared with themselves and
// with nothing, give a text table, JSON and SVG that are valid UTF-8 with
// every name escaped, and a profile compared with itself changes nothing.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "userspace/output/flamegraph.h"
#include "userspace/output/pprof_input.h"
#include "userspace/output/profile_diff.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto stacks = gsymprof::folded_from_pprof(bytes);
  if (!stacks) {
    if (stacks.error().message.find('\n') != std::string::npos) std::abort();
    return 0;
  }
  for (const gsymprof::FoldedLine& line : stacks->stacks)
    if (line.count == 0 || line.stack.empty() || line.stack.find('\n') != std::string::npos) std::abort();
  auto same = gsymprof::diff_profiles("a", stacks->stacks, "b", stacks->stacks, true);
  if (!same) return 0;
  for (const gsymprof::FunctionChange& f : same->functions)
    if (f.self_change != 0 || f.total_change != 0) std::abort();
  auto gone = gsymprof::diff_profiles("a", stacks->stacks, "b", {}, true);
  if (!gone) std::abort();
  for (const gsymprof::ProfileDiff* diff : {&*same, &*gone}) {
    const std::string text = gsymprof::diff_text(*diff);
    const std::string json = gsymprof::diff_json(*diff);
    for (char c : text + json)
      if (c == '\x1b') std::abort();
    for (bool negate : {false, true}) {
      auto svg = gsymprof::diff_flamegraph_svg(*diff, negate);
      if (!svg) continue;
      if (gsymprof::sanitize_xml_text(*svg) != *svg) std::abort();
      for (size_t at = svg->find("<title>"); at != std::string::npos; at = svg->find("<title>", at + 1)) {
        size_t end = svg->find("</title>", at);
        if (end == std::string::npos) std::abort();
        if (std::string_view(svg->data() + at + 7, end - at - 7).find('<') != std::string_view::npos) std::abort();
      }
    }
  }
  return 0;
}
