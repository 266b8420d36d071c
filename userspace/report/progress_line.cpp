#include "userspace/report/progress_line.h"

#include <unistd.h>

#include <cstdio>
#include <vector>

#include "userspace/base/text_escape.h"

namespace gsymprof {
namespace {

// "10 s", "0.5 s".
std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", s);
  return text;
}

// "a", "a or b", "a, b or c".
std::string either(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
  return out;
}

// What is sampled: "all processes", "pid 1234", "pids 1, 2", "make -j8 (and its children)".
std::string targets_text(const TargetOptions& targets) {
  if (!targets.command.empty()) {
    std::string command;
    for (const std::string& arg : targets.command) command += (command.empty() ? "" : " ") + arg;
    constexpr size_t kShown = 40;
    if (command.size() > kShown) command = command.substr(0, kShown) + "...";
    return command + " (and its children)";
  }
  if (targets.pids.empty()) return "all processes";
  std::string out = targets.pids.size() == 1 ? "pid " : "pids ";
  for (size_t i = 0; i < targets.pids.size(); ++i)
    out += (i ? ", " : "") + std::to_string(targets.pids[i]);
  return out;
}

}  // namespace

ProgressFn terminal_progress() {
  if (::isatty(STDERR_FILENO) != 1) return {};
  return [](const std::string& line) {
    if (line.empty())
      std::fputs("\r\033[K", stderr);
    else
      std::fprintf(stderr, "\r\033[Kgsymprof: %s", escape_control(line).c_str());
    std::fflush(stderr);
  };
}

SamplingProgress::SamplingProgress(const TargetOptions& targets) : line_(terminal_progress()) {
  if (!line_) return;
  std::vector<std::string> stops = {"Ctrl-C"};
  if (!targets.command.empty()) stops.push_back("when it exits");
  else if (targets.pids.size() == 1) stops.push_back("when it exits");
  else if (!targets.pids.empty()) stops.push_back("when they all exit");
  if (targets.duration_s) {
    stops.push_back("after " + seconds(*targets.duration_s));
    of_duration_ = " of " + seconds(*targets.duration_s);
  }
  start_line_ = "sampling " + targets_text(targets) + " at " + std::to_string(targets.frequency_hz) +
                " Hz, call graph " + call_graph_name(targets.call_graph) +
                (targets.kernel_stacks ? "" : ", user frames only") + "; stops on " + either(stops);
}

void SamplingProgress::start() const {
  if (line_) std::fprintf(stderr, "gsymprof: %s\n", escape_control(start_line_).c_str());
}

void SamplingProgress::update(uint64_t samples, double elapsed_s) const {
  if (!line_) return;
  char text[96];
  std::snprintf(text, sizeof text, "%llu %s, %.1f s", static_cast<unsigned long long>(samples),
                samples == 1 ? "sample" : "samples", elapsed_s);
  line_(text + of_duration_);
}

void SamplingProgress::finish() const {
  if (line_) line_("");
}

}  // namespace gsymprof
