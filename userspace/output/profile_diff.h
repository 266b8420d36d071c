// userspace/output/profile_diff.h - two profiles' folded stacks compared
// (`gsymprof diff BASE NEW`): a differential SVG flame graph, and a table of
// the functions whose share changed most, as text or JSON.
//
// Normalization (the default): BASE's counts are multiplied by NEW's total /
// BASE's total (difffolded.pl -n), so a change means a change of share, not
// of run length; every output says so. Without it (or when either profile
// has no samples) counts are compared as they are.
//
// The flame graph follows FlameGraph's differential convention
// (difffolded.pl + flamegraph.pl): widths from NEW; each frame coloured by
// the change of its own (self) samples, NEW - BASE: red grew, blue shrank,
// white unchanged, intensity |change| / the largest |change| of any frame
// (rgb(255,v,v) or rgb(v,v,255), v = int(210 x (max - |change|) / max)).
// Tooltips: "NAME (new N samples P%, base M samples Q%, self change +D)",
// N and M the frame's total (inclusive) samples, raw, P and Q their shares,
// D in NEW's samples. Negated (--negate): widths from BASE, colours keep
// their meaning (red: more in NEW), so frames that vanished from NEW show,
// blue (flamegraph.pl --negate on difffolded.pl NEW BASE).
//
// Functions: every distinct frame name (as in the folded text: "_[i]" and
// the like are part of the name; the root comm frame counts as one), its
// self samples (stacks it ends) and total samples (stacks it is in, once
// per stack however often it recurses) in each profile, ranked by |self
// change| (largest first; pprof -top's "flat" order), then |total change|,
// then name. Deterministic: equal inputs, equal bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gsym/base/expected.h"
#include "userspace/output/folded_output.h"

namespace gsymprof {

struct FunctionChange {
  std::string name;  // a folded frame
  uint64_t base_self = 0, base_total = 0;  // BASE's samples, raw
  uint64_t new_self = 0, new_total = 0;    // NEW's samples
  double self_change = 0, total_change = 0;  // NEW - BASE x base_scale
};

struct ProfileDiff {
  std::string base_name, new_name;  // as the outputs name the inputs (their paths)
  uint64_t base_samples = 0, new_samples = 0;
  bool normalized = false;  // BASE's counts were scaled
  double base_scale = 1;    // NEW's total / BASE's total when normalized, else 1
  std::vector<FoldedLine> base_stacks, new_stacks;  // sorted, equal stacks summed
  std::vector<FunctionChange> functions;            // ranked, largest change first
};

// `normalize`: scale BASE to NEW's total (when both have samples). The
// stacks need not be sorted or unique. Error: counts overflow 64 bits.
gsym::Expected<ProfileDiff> diff_profiles(std::string base_name, std::vector<FoldedLine> base_stacks,
                                          std::string new_name, std::vector<FoldedLine> new_stacks,
                                          bool normalize);

// The table: a header naming both profiles and the normalization, then one
// line per function: self share base, new, change (percentage points), the
// same for total share, the self and total change in samples, the name
// (escaped for a terminal).
std::string diff_text(const ProfileDiff& diff);

// {"format":"gsymprof-diff","version":1,
//  "base":{"file":...,"samples":N},"new":{"file":...,"samples":N},
//  "normalized":true,"base_scale":1.234567,
//  "functions":[{"name":...,
//    "self_base":N,"self_new":N,"self_change":D,
//    "self_base_percent":P,"self_new_percent":P,"self_change_percent":P,
//    "total_base":N,"total_new":N,"total_change":D,
//    "total_base_percent":P,"total_new_percent":P,"total_change_percent":P},...]}
// one function per line, ranked; *_base and *_new raw samples, *_change in
// NEW's samples (3 decimals), percents of each profile's samples (4
// decimals), *_change_percent in percentage points.
std::string diff_json(const ProfileDiff& diff);

// The colour of a frame whose self samples changed by `change` when the
// largest |change| of any frame is `max_change` (FlameGraph's color_scale).
std::string diff_color(double change, double max_change);

// The differential flame graph; `negate`: BASE's widths.
gsym::Expected<std::string> diff_flamegraph_svg(const ProfileDiff& diff, bool negate);

}  // namespace gsymprof
