#include "userspace/output/speedscope_output.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "userspace/base/json_text.h"
#include "userspace/output/folded_output.h"
#include "userspace/output/frame_chains.h"

namespace gsymprof {
namespace {

struct Thread {
  std::map<std::string, uint64_t> comms;               // samples per comm
  std::map<std::vector<uint32_t>, uint64_t> stacks;    // frame indexes, root first -> samples
};


void append_string(std::string& out, std::string_view text) { append_terminal_safe_json_string(out, text); }

// speedscope's frames: one per distinct folded name (as the folded output
// and flame graphs merge them), numbered in name order, with the source
// file its occurrences agree on ("" when they differ: the concrete
// function's line at an address can be in a header). A Python frame is
// named without its "_[p]" (its name says what it is: "fib.fib
// (fib.py:3)") and keeps its line, which its name holds anyway.
struct Frame {
  uint32_t number = 0;
  std::string file;
  bool files_differ = false;
  uint32_t python_line = 0;  // 0: none, or not a Python frame
};

// The speedscope frame `named` is shown as, added to `frames` if new.
Frame& add_frame(std::map<std::string, Frame>& frames, const SymbolizedFrame& named) {
  const bool python = named.kind == FrameKind::Python;
  auto [it, added] = frames.try_emplace(python ? sanitize_folded_name(named.name) : folded_frame(named));
  if (added) {
    it->second.file = named.file;
    if (python) it->second.python_line = named.line;
  } else if (it->second.file != named.file) {
    it->second.files_differ = true;
  }
  return it->second;
}

void append_frame(std::string& json, const std::string& name, const Frame& frame) {
  json += "{\"name\":";
  append_string(json, name);
  if (!frame.file.empty() && !frame.files_differ) {
    json += ",\"file\":";
    append_string(json, frame.file);
    if (frame.python_line != 0) json += ",\"line\":" + std::to_string(frame.python_line);
  }
  json += '}';
}

// One thread's "sampled" profile: its stacks and their weights.
void append_thread_profile(std::string& json, uint32_t pid, uint32_t tid, const Thread& thread) {
  std::string name = most_sampled_comm(thread.comms) + " pid " + std::to_string(pid);
  if (tid != 0) name += " tid " + std::to_string(tid);
  uint64_t total = 0;
  for (const auto& [frames, count] : thread.stacks) total += count;
  json += "{\"type\":\"sampled\",\"name\":";
  append_string(json, name);
  json += ",\"unit\":\"none\",\"startValue\":0,\"endValue\":" + std::to_string(total) + ",\n\"samples\":[";
  bool first = true;
  for (const auto& [frames, count] : thread.stacks) {
    json += first ? "\n[" : ",\n[";
    first = false;
    for (size_t i = 0; i < frames.size(); ++i) {
      if (i != 0) json += ',';
      json += std::to_string(frames[i]);
    }
    json += ']';
  }
  json += "\n],\n\"weights\":[";
  first = true;
  for (const auto& [frames, count] : thread.stacks) {
    if (!first) json += ',';
    first = false;
    json += std::to_string(count);
  }
  json += "]}";
}

}  // namespace

gsym::Expected<SpeedscopeProfile> speedscope_profile(const Capture& capture, GsymLocator& locator,
                                                     const SymbolizeOptions& options) {
  gsym::Expected<FrameChains> chains = symbolize_frames(capture, locator, options);
  if (!chains) return chains.error();
  const std::vector<SymbolizedFrame>& named = chains->symbolized.frames;

  std::map<std::string, Frame> frame_numbers;
  std::vector<Frame*> frame_of(named.size(), nullptr);
  for (size_t id = 0; id < named.size(); ++id) frame_of[id] = &add_frame(frame_numbers, named[id]);
  const bool any_truncated = std::any_of(capture.stacks.begin(), capture.stacks.end(),
                                         [](const CaptureStack& s) { return s.count != 0 && s.truncated; });
  const std::string truncated_name = "[truncated]";
  if (any_truncated) frame_numbers.try_emplace(truncated_name);
  uint32_t next = 0;
  for (auto& [name, frame] : frame_numbers) frame.number = next++;

  // Each capture frame's chain in speedscope's numbers, root first.
  std::vector<std::vector<uint32_t>> chain_numbers(chains->frames.size());
  for (size_t i = 0; i < chains->frames.size(); ++i)
    for (uint32_t id : chains->chains[i]) chain_numbers[i].push_back(frame_of[id]->number);

  std::map<std::pair<uint32_t, uint32_t>, Thread> threads;  // (pid, tid)
  std::vector<uint32_t> stack_numbers;
  for (const CaptureStack& stack : capture.stacks) {
    if (stack.count == 0) continue;
    stack_numbers.clear();
    if (stack.truncated) stack_numbers.push_back(frame_numbers.at(truncated_name).number);
    for (auto frame = stack.frames.rbegin(); frame != stack.frames.rend(); ++frame) {
      const std::vector<uint32_t>& chain = chain_numbers[chains->numbers.at(*frame)];
      stack_numbers.insert(stack_numbers.end(), chain.begin(), chain.end());
    }
    Thread& thread = threads[{stack.pid, stack.tid}];
    thread.comms[sanitize_folded_name(stack.comm)] += stack.count;
    thread.stacks[stack_numbers] += stack.count;
  }

  SpeedscopeProfile out;
  std::string& json = out.json;
  json = "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"exporter\":\"gsymprof\",\"name\":";
  append_string(json, capture.host.empty() ? "gsymprof" : "gsymprof on " + capture.host);
  json += ",\"activeProfileIndex\":0,\n\"shared\":{\"frames\":[";
  bool first = true;
  for (const auto& [name, frame] : frame_numbers) {
    json += first ? "\n" : ",\n";
    first = false;
    append_frame(json, name, frame);
  }
  json += "\n]},\n\"profiles\":[";
  first = true;
  for (const auto& [id, thread] : threads) {
    json += first ? "\n" : ",\n";
    first = false;
    append_thread_profile(json, id.first, id.second, thread);
    out.samples += thread.stacks.size();
  }
  json += "\n]}\n";
  out.symbolized = std::move(chains->symbolized);
  return out;
}

}  // namespace gsymprof
