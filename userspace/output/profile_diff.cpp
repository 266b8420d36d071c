#include "userspace/output/profile_diff.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <string_view>
#include <unordered_map>

#include "userspace/base/json_text.h"
#include "userspace/base/text_escape.h"
#include "userspace/output/flamegraph.h"

namespace gsymprof {
namespace {

// Sorted bytewise, equal stacks summed, zero counts dropped; the sum of the
// counts in `total`.
gsym::Status canonical_stacks(std::vector<FoldedLine>& stacks, uint64_t& total) {
  std::sort(stacks.begin(), stacks.end(),
            [](const FoldedLine& a, const FoldedLine& b) { return a.stack < b.stack; });
  std::vector<FoldedLine> merged;
  merged.reserve(stacks.size());
  total = 0;
  for (FoldedLine& line : stacks) {
    if (line.count == 0) continue;
    if (total > std::numeric_limits<uint64_t>::max() - line.count)
      return gsym::Error("sample counts overflow 64 bits");
    total += line.count;
    if (!merged.empty() && merged.back().stack == line.stack) merged.back().count += line.count;
    else merged.push_back(std::move(line));
  }
  stacks = std::move(merged);
  return gsym::Status::success();
}

struct Counts {
  uint64_t self = 0, total = 0;
  size_t last_line = SIZE_MAX;  // the last stack counted in `total` (a recursing frame counts once)
};

// Self and total samples per frame name of `stacks`.
void count_functions(const std::vector<FoldedLine>& stacks, std::unordered_map<std::string_view, Counts>& counts) {
  for (size_t i = 0; i < stacks.size(); ++i) {
    std::string_view rest = stacks[i].stack;
    for (;;) {
      const size_t semicolon = rest.find(';');
      Counts& entry = counts[rest.substr(0, semicolon)];
      if (entry.last_line != i) {
        entry.total += stacks[i].count;
        entry.last_line = i;
      }
      if (semicolon == std::string_view::npos) {
        entry.self += stacks[i].count;
        break;
      }
      rest.remove_prefix(semicolon + 1);
    }
  }
}

double percent(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0 : static_cast<double>(part) / static_cast<double>(whole) * 100;
}

// `value` printed by `spec`, whose precision is `decimals`; a value that
// rounds to nothing prints as 0, never "-0.00".
std::string format(const char* spec, int decimals, double value) {
  if (std::fabs(value) < 0.5 * std::pow(10.0, -decimals)) value = 0;
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, spec, value);
  return buffer;
}

std::string normalization_line(const ProfileDiff& diff) {
  if (diff.normalized)
    return "BASE's counts scaled x" + format("%.6f", 6, diff.base_scale) +
           " to NEW's total (--no-normalize compares raw counts)";
  if (diff.base_samples == 0 || diff.new_samples == 0)
    return std::string("counts not normalized: ") + (diff.base_samples == 0 ? "BASE" : "NEW") + " has no samples";
  return "counts compared raw (--no-normalize)";
}

// One profile's stacks (sorted, unique) with running sums of their counts:
// a frame's self and total samples by binary search on its folded prefix,
// with no tree of either profile beside the one the flame graph draws.
class StackIndex {
 public:
  explicit StackIndex(const std::vector<FoldedLine>& stacks) : stacks_(stacks), sums_(stacks.size() + 1, 0) {
    for (size_t i = 0; i < stacks.size(); ++i) sums_[i + 1] = sums_[i] + stacks[i].count;
  }

  // Samples of the stack that is exactly `stack`.
  uint64_t self(std::string_view stack) const {
    const size_t at = lower(stack);
    return at < stacks_.size() && stacks_[at].stack == stack ? stacks_[at].count : 0;
  }

  // Samples of `stack` and of every stack under it ("stack;..."); "" is the
  // root, every sample. Sorted bytewise, the stacks under it are those from
  // "stack;" up to "stack<" (';' + 1).
  uint64_t total(std::string_view stack) const {
    if (stack.empty()) return sums_.back();
    std::string key(stack);
    key += ';';
    const size_t first = lower(key);
    key.back() = ';' + 1;
    return self(stack) + sums_[lower(key)] - sums_[first];
  }

 private:
  size_t lower(std::string_view key) const {
    return static_cast<size_t>(
        std::lower_bound(stacks_.begin(), stacks_.end(), key,
                         [](const FoldedLine& line, std::string_view k) { return line.stack < k; }) -
        stacks_.begin());
  }

  const std::vector<FoldedLine>& stacks_;
  std::vector<uint64_t> sums_;  // sums_[i]: the counts of stacks_[0, i)
};

// The largest |self change| of any frame: a frame's self samples are those
// of the one stack that ends in it, so this is the largest change of a stack.
double max_self_change(const ProfileDiff& diff) {
  double max = 0;
  auto change = [&](uint64_t base, uint64_t now) {
    max = std::max(max, std::fabs(static_cast<double>(now) - static_cast<double>(base) * diff.base_scale));
  };
  auto b = diff.base_stacks.begin(), n = diff.new_stacks.begin();
  while (b != diff.base_stacks.end() || n != diff.new_stacks.end()) {
    if (n == diff.new_stacks.end() || (b != diff.base_stacks.end() && b->stack < n->stack)) {
      change((b++)->count, 0);
    } else if (b == diff.base_stacks.end() || n->stack < b->stack) {
      change(0, (n++)->count);
    } else {
      change((b++)->count, (n++)->count);
    }
  }
  return max;
}

}  // namespace

gsym::Expected<ProfileDiff> diff_profiles(std::string base_name, std::vector<FoldedLine> base_stacks,
                                          std::string new_name, std::vector<FoldedLine> new_stacks,
                                          bool normalize) {
  ProfileDiff diff;
  diff.base_name = std::move(base_name);
  diff.new_name = std::move(new_name);
  diff.base_stacks = std::move(base_stacks);
  diff.new_stacks = std::move(new_stacks);
  if (auto status = canonical_stacks(diff.base_stacks, diff.base_samples); !status)
    return gsym::Error("BASE: " + status.error().message);
  if (auto status = canonical_stacks(diff.new_stacks, diff.new_samples); !status)
    return gsym::Error("NEW: " + status.error().message);
  diff.normalized = normalize && diff.base_samples != 0 && diff.new_samples != 0;
  diff.base_scale = diff.normalized ? static_cast<double>(diff.new_samples) / static_cast<double>(diff.base_samples) : 1;

  std::unordered_map<std::string_view, Counts> base_counts, new_counts;
  count_functions(diff.base_stacks, base_counts);
  count_functions(diff.new_stacks, new_counts);
  std::map<std::string_view, FunctionChange> functions;
  for (const auto& [name, counts] : base_counts) {
    FunctionChange& change = functions[name];
    change.base_self = counts.self;
    change.base_total = counts.total;
  }
  for (const auto& [name, counts] : new_counts) {
    FunctionChange& change = functions[name];
    change.new_self = counts.self;
    change.new_total = counts.total;
  }
  diff.functions.reserve(functions.size());
  for (auto& [name, change] : functions) {
    change.name = std::string(name);
    change.self_change = static_cast<double>(change.new_self) - static_cast<double>(change.base_self) * diff.base_scale;
    change.total_change =
        static_cast<double>(change.new_total) - static_cast<double>(change.base_total) * diff.base_scale;
    diff.functions.push_back(std::move(change));
  }
  // By |self change| (pprof's "flat" order: without normalization every
  // caller's total changes with the run's length), then |total change|;
  // stable over the name order the map gave.
  std::stable_sort(diff.functions.begin(), diff.functions.end(), [](const FunctionChange& a, const FunctionChange& b) {
    if (std::fabs(a.self_change) != std::fabs(b.self_change))
      return std::fabs(a.self_change) > std::fabs(b.self_change);
    return std::fabs(a.total_change) > std::fabs(b.total_change);
  });
  return diff;
}

std::string diff_text(const ProfileDiff& diff) {
  std::string out = "gsymprof diff: BASE " + escape_control(diff.base_name) + ", " +
                    with_thousands(diff.base_samples) + " samples; NEW " + escape_control(diff.new_name) + ", " +
                    with_thousands(diff.new_samples) + " samples\n";
  out += normalization_line(diff) + "\n";
  out += "      self share (%)            total share (%)          change (samples)\n";
  out += "    base     new  change      base     new  change        self       total  function\n";
  for (const FunctionChange& f : diff.functions) {
    const double self_base = percent(f.base_self, diff.base_samples), self_new = percent(f.new_self, diff.new_samples);
    const double total_base = percent(f.base_total, diff.base_samples);
    const double total_new = percent(f.new_total, diff.new_samples);
    out += format("%8.2f", 2, self_base) + format("%8.2f", 2, self_new) + format("%+8.2f", 2, self_new - self_base) + "  " +
           format("%8.2f", 2, total_base) + format("%8.2f", 2, total_new) + format("%+8.2f", 2, total_new - total_base) +
           format("%+12.1f", 1, f.self_change) + format("%+12.1f", 1, f.total_change) + "  " + escape_control(f.name) +
           "\n";
  }
  return out;
}

std::string diff_json(const ProfileDiff& diff) {
  std::string out = "{\"format\":\"gsymprof-diff\",\"version\":1,\n\"base\":{\"file\":";
  append_terminal_safe_json_string(out, diff.base_name);
  out += ",\"samples\":" + std::to_string(diff.base_samples) + "},\n\"new\":{\"file\":";
  append_terminal_safe_json_string(out, diff.new_name);
  out += ",\"samples\":" + std::to_string(diff.new_samples) + "},\n\"normalized\":";
  out += diff.normalized ? "true" : "false";
  out += ",\"base_scale\":" + format("%.6f", 6, diff.base_scale) + ",\n\"functions\":[";
  bool first = true;
  for (const FunctionChange& f : diff.functions) {
    out += first ? "\n" : ",\n";
    first = false;
    const double self_base = percent(f.base_self, diff.base_samples), self_new = percent(f.new_self, diff.new_samples);
    const double total_base = percent(f.base_total, diff.base_samples);
    const double total_new = percent(f.new_total, diff.new_samples);
    out += "{\"name\":";
    append_terminal_safe_json_string(out, f.name);
    out += ",\"self_base\":" + std::to_string(f.base_self) + ",\"self_new\":" + std::to_string(f.new_self) +
           ",\"self_change\":" + format("%.3f", 3, f.self_change) + ",\"self_base_percent\":" +
           format("%.4f", 4, self_base) + ",\"self_new_percent\":" + format("%.4f", 4, self_new) +
           ",\"self_change_percent\":" + format("%.4f", 4, self_new - self_base) +
           ",\"total_base\":" + std::to_string(f.base_total) + ",\"total_new\":" + std::to_string(f.new_total) +
           ",\"total_change\":" + format("%.3f", 3, f.total_change) + ",\"total_base_percent\":" +
           format("%.4f", 4, total_base) + ",\"total_new_percent\":" + format("%.4f", 4, total_new) +
           ",\"total_change_percent\":" + format("%.4f", 4, total_new - total_base) + "}";
  }
  out += "\n]}\n";
  return out;
}

std::string diff_color(double change, double max_change) {
  int r = 255, g = 255, b = 255;
  // A change below a billionth of the largest is rounding, not a change.
  if (max_change > 0 && std::fabs(change) > max_change * 1e-9) {
    const int v = static_cast<int>(210 * (max_change - std::min(std::fabs(change), max_change)) / max_change);
    if (change > 0) g = b = v;
    else r = g = v;
  }
  return "rgb(" + std::to_string(r) + "," + std::to_string(g) + "," + std::to_string(b) + ")";
}

gsym::Expected<std::string> diff_flamegraph_svg(const ProfileDiff& diff, bool negate) {
  const StackIndex base(diff.base_stacks), now(diff.new_stacks);
  const double max_change = max_self_change(diff);
  FlamegraphOptions options;
  options.title = negate ? "Differential Flame Graph, negated: widths from BASE" : "Differential Flame Graph";
  options.legend = {
      {"grew", diff_color(1, 1)},
      {"shrank", diff_color(-1, 1)},
      {"unchanged", diff_color(0, 1)},
      {std::string("self samples NEW - BASE; ") + (diff.normalized ? "BASE x" + format("%.4f", 4, diff.base_scale) +
                                                                       " to NEW's total"
                                                                 : "not normalized"),
       ""},
  };
  options.frame_style = [&](std::string_view stack, uint64_t) -> FlameFrameStyle {
    const uint64_t base_total = base.total(stack), new_total = now.total(stack);
    const double change =
        static_cast<double>(now.self(stack)) - static_cast<double>(base.self(stack)) * diff.base_scale;
    return {diff_color(change, max_change),
            "new " + with_thousands(new_total) + (new_total == 1 ? " sample " : " samples ") +
                format("%.2f", 2, percent(new_total, diff.new_samples)) + "%, base " +
                with_thousands(base_total) + (base_total == 1 ? " sample " : " samples ") +
                format("%.2f", 2, percent(base_total, diff.base_samples)) + "%, self change " +
                format("%+.1f", 1, change)};
  };
  return render_flamegraph_svg(negate ? diff.base_stacks : diff.new_stacks, options);
}

}  // namespace gsymprof
