#include "userspace/report/run_summary.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "userspace/base/json_text.h"
#include "userspace/base/text_escape.h"
#include "userspace/session/profile_session.h"
#include "userspace/unwind/stack_copy_unwind.h"

namespace gsymprof {
namespace {

std::string basename_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "1 process", "2 processes".
std::string count_of(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::vector<ModuleSamples> by_samples(const std::map<std::string, uint64_t>& counts) {
  std::vector<ModuleSamples> out;
  for (const auto& [module, samples] : counts) out.push_back({module, samples});
  std::stable_sort(out.begin(), out.end(),
                   [](const ModuleSamples& a, const ModuleSamples& b) { return a.samples > b.samples; });
  return out;
}

// "fixture (95%), libc.so.6 (3%)": the first few, as shares of `total`;
// those under 1% are left out (but for the first).
std::string module_shares(const std::vector<ModuleSamples>& modules, uint64_t total, size_t shown) {
  std::string out;
  size_t listed = 0;
  for (const ModuleSamples& module : modules) {
    const double share = total ? 100.0 * static_cast<double>(module.samples) / static_cast<double>(total) : 0.0;
    if (listed == shown || (listed > 0 && share < 1.0)) break;
    char text[32];
    std::snprintf(text, sizeof text, "%.0f%%", share);
    out += (out.empty() ? "" : ", ") + module.module + " (" + text + ")";
    ++listed;
  }
  return out;
}

uint64_t no_cfi_truncations(const LossSummary& losses) {
  auto it = losses.truncated_by_reason.find(unwind_stop_loss_key(UnwindStop::NoCfi));
  return it == losses.truncated_by_reason.end() ? 0 : it->second;
}

// --- the live session's lines ---

// Kernel stacks the sampler had to cut or could not read, with what it means.
void print_kernel_stack_counters(const SamplerCounters& counters) {
  const uint64_t kernel_truncated = counters[PROFILE_COUNTER_KERNEL_TRUNCATED];
  const uint64_t kernel_errors = counters[PROFILE_COUNTER_KERNEL_STACK_ERROR];
  if (kernel_truncated || kernel_errors)
    std::fprintf(stderr,
                 "gsymprof: kernel stacks: %" PRIu64 " cut at %d frames, %" PRIu64
                 " unreadable (those samples keep their user frames)\n",
                 kernel_truncated, PROFILE_MAX_KERNEL_FRAMES, kernel_errors);
}

// JIT code: how much a perf map named, and where one was missing, with the
// flag that writes one.
void print_jit_summary(size_t jit_symbols, const JitReport& jit) {
  if (jit.named_samples)
    std::fprintf(stderr, "gsymprof: JIT code: %" PRIu64 " samples named from perf maps and jitdumps (%zu symbols)\n",
                 jit.named_samples, jit_symbols);
  // A dump the runtime's user wrote that could not be read to its end.
  for (const auto& [pid, error] : jit.jitdump_errors)
    std::fprintf(stderr, "gsymprof: JIT code: jitdump of pid %u read in part: %s\n", pid,
                 escape_control(error).c_str());
  if (!jit.unnamed_samples) return;
  // The processes with most such samples first, a few per line.
  std::vector<std::pair<uint64_t, uint32_t>> by_samples;
  for (const auto& [pid, samples] : jit.unnamed_by_pid) by_samples.emplace_back(samples, pid);
  std::sort(by_samples.begin(), by_samples.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  constexpr size_t kShown = 8;
  std::string without, partial;
  size_t without_count = 0, partial_count = 0;
  for (const auto& [samples, pid] : by_samples) {
    auto has = jit.has_map.find(pid);
    const bool has_map = has != jit.has_map.end() && has->second;
    std::string& list = has_map ? partial : without;
    size_t& count = has_map ? partial_count : without_count;
    if (++count <= kShown)
      list += (list.empty() ? "" : ", ") + std::to_string(pid) + " (" + std::to_string(samples) + ")";
  }
  if (without_count > kShown) without += " and " + std::to_string(without_count - kShown) + " more";
  if (partial_count > kShown) partial += " and " + std::to_string(partial_count - kShown) + " more";
  std::fprintf(stderr,
               "gsymprof: %" PRIu64 " samples in anonymous executable memory (JIT code?) that no perf map names\n",
               jit.unnamed_samples);
  if (!without.empty())
    std::fprintf(stderr,
                 "gsymprof:   no /tmp/perf-PID.map for pid (samples): %s; have the runtime write one "
                 "(node --perf-basic-prof, python -X perf, a Java perf-map agent)\n",
                 without.c_str());
  if (!partial.empty())
    std::fprintf(stderr, "gsymprof:   perf map covers not all of it, pid (samples): %s\n", partial.c_str());
}

// CPython processes: how many samples got their Python frames, why others
// kept native ones, and versions without a layout table.
void print_python_summary(const PythonReport& python) {
  for (const auto& [version, processes] : python.unsupported_versions)
    std::fprintf(stderr,
                 "gsymprof: python %s: frames left native in %" PRIu64
                 " process%s (gsymprof has no layout of CPython %s's frames)\n",
                 version.c_str(), processes, processes == 1 ? "" : "es", version.c_str());
  if (!python.samples_with_python) return;
  std::string native;
  auto add = [&](uint64_t count, const char* why) {
    if (!count) return;
    native += (native.empty() ? "" : ", ") + std::to_string(count) + " " + why;
  };
  add(python.samples_unpaired, "inside the eval loop's entry or exit");
  add(python.samples_unnamed, "with a code object that could not be read");
  std::fprintf(stderr, "gsymprof: Python frames: %" PRIu64 " of %" PRIu64 " samples of %" PRIu64
               " CPython process%s%s%s%s\n",
               python.samples_merged, python.samples_with_python, python.processes,
               python.processes == 1 ? "" : "es", native.empty() ? "" : "; kept native: ", native.c_str(),
               python.samples_cut ? ("; " + std::to_string(python.samples_cut) +
                                     " deeper than 64 Python frames (cut there, [truncated])").c_str()
                                  : "");
}

void print_session_lines(const RunSummary& summary, const SessionStats& stats, bool verbose) {
  if (stats.frame_pointer_stacks)
    std::fprintf(stderr,
                 "gsymprof: frame-pointer fallback: %" PRIu64 " frames in %" PRIu64
                 " stacks where no CFI covered the code (JIT code, assembly)\n",
                 stats.frame_pointer_steps, stats.frame_pointer_stacks);
  if (stats.jit_cfi_steps || stats.jit_cfi_rejected) {
    // The reason may quote the runtime's bytes (an augmentation string).
    const std::string refused =
        stats.jit_cfi_rejected ? "; refused for " + std::to_string(stats.jit_cfi_rejected) +
                                     " pieces of code (first: " + escape_control(stats.jit_cfi_rejection) + ")"
                               : "";
    std::fprintf(stderr,
                 "gsymprof: JIT code's own CFI: %" PRIu64
                 " frames stepped over by the .eh_frame its runtime wrote in its jitdump%s\n",
                 stats.jit_cfi_steps, refused.c_str());
  }
  if (stats.epilogue_steps)
    std::fprintf(stderr,
                 "gsymprof: code without CFI: %" PRIu64
                 " frames stepped over by reading how they return (CPython's -X perf trampolines)\n",
                 stats.epilogue_steps);
  print_jit_summary(summary.jit_symbols, stats.jit);
  print_python_summary(stats.python);
  print_kernel_stack_counters(stats.counters);
  if (verbose && stats.counters.sample_records)
    std::fprintf(stderr, "gsymprof: ring buffer: %zu KiB, %" PRIu64 " bytes per sample record\n",
                 stats.ring_buffer_bytes >> 10,
                 stats.counters.sample_record_bytes / stats.counters.sample_records);
  if (const uint64_t lost = stats.counters[PROFILE_COUNTER_SIDEBAND_LOST])
    std::fprintf(stderr,
                 "gsymprof: side-band events lost: %" PRIu64
                 " (ring buffer full); mappings were read from /proc/PID/maps instead, too late "
                 "for processes that had exited (a larger -F interval or fewer targets help)\n",
                 lost);
}

// The resolved modules identified by a Go build ID or a content hash (the
// unresolved ones are listed with their reasons anyway): a count line, then
// print_module_report of each, so the summary says which identity served.
void print_fallback_identities(const std::vector<ModuleReport>& reports) {
  auto fallback = [](const ModuleReport& report) {
    return report.resolved() && !report.build_id.empty() && report.build_id.kind() != BuildId::Kind::Gnu;
  };
  const size_t count = static_cast<size_t>(std::count_if(reports.begin(), reports.end(), fallback));
  if (count == 0) return;
  std::fprintf(stderr, "gsymprof: modules identified without a GNU build ID: %zu\n", count);
  for (const ModuleReport& report : reports)
    if (fallback(report)) print_module_report(report);
}

// How the launched command ended, for the JSON.
nlohmann::ordered_json command_end_json(const SessionStats& stats) {
  const int status = stats.command_exit_status;
  if (status < 0) return nullptr;
  nlohmann::ordered_json out;
  out["name"] = stats.command_name;
  if (WIFEXITED(status)) {
    out["ended"] = "exited";
    out["exit_status"] = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    const char* name = sigabbrev_np(WTERMSIG(status));
    out["ended"] = stats.command_stopped ? "stopped" : "killed";
    out["signal"] = name ? std::string("SIG") + name : std::to_string(WTERMSIG(status));
  }
  return out;
}

}  // namespace

// The runtime a process runs, by its modules' names: "node", "java" (a
// JVM), "python3.N" (CPython, from libpython3.N.so or python3.N), or "".
std::string runtime_of(const Capture& capture, const CaptureProcess& process) {
  for (uint32_t m : process.modules) {
    if (m >= capture.modules.size()) continue;
    const std::string name = basename_of(capture.modules[m].path);
    if (name == "node" || name.starts_with("libnode.so")) return "node";
    if (name == "libjvm.so") return "java";
    for (std::string_view prefix : {"libpython3.", "python3."}) {
      if (!name.starts_with(prefix)) continue;
      const std::string minor = name.substr(prefix.size(), name.find_first_not_of("0123456789", prefix.size()) - prefix.size());
      if (!minor.empty()) return "python3." + minor;
    }
  }
  return "";
}

// The processes whose runtime would name their code with a flag they were
// not given: JIT frames no perf map named (node, a JVM), or CPython 3.12+
// with neither a perf map nor Python frames read from the interpreter (its
// Python functions are all _PyEval_EvalFrameDefault).
std::map<std::string, std::vector<uint32_t>> runtimes_to_flag(const Capture& capture) {
  std::map<uint32_t, bool> unnamed_jit, named_jit;
  for (const CaptureStack& stack : capture.stacks)
    for (const CaptureFrame& frame : stack.frames) {
      // Python frames read from the interpreter name its functions as well.
      if (frame.jit >= 0 || frame.python >= 0) named_jit[stack.pid] = true;
      else if (!frame.kernel && frame.module < 0 && frame.reason == UnresolvedReason::AnonymousMapping)
        unnamed_jit[stack.pid] = true;
    }
  std::map<std::string, std::vector<uint32_t>> out;
  for (const CaptureProcess& process : capture.processes) {
    const std::string runtime = runtime_of(capture, process);
    if (runtime.empty()) continue;
    bool wants_flag = false;
    if (runtime == "node" || runtime == "java") wants_flag = unnamed_jit.count(process.pid) != 0;
    if (runtime.starts_with("python3.")) {
      const int minor = std::atoi(runtime.c_str() + 8);
      wants_flag = minor >= 12 && !named_jit.count(process.pid);
    }
    if (wants_flag) out[runtime].push_back(process.pid);
  }
  return out;
}

RunSummary summarize_run(std::string command, const Capture& capture) {
  RunSummary summary;
  summary.command = std::move(command);
  summary.samples = capture.samples;
  summary.processes = capture.processes.size();
  summary.modules = capture.modules.size();
  summary.unique_stacks = capture.stacks.size();
  summary.duration_s = static_cast<double>(capture.duration_ns) / 1e9;
  summary.frequency_hz = capture.frequency_hz;
  summary.call_graph = call_graph_name(capture.call_graph);
  summary.clock = clock_name(capture.clock);
  for (const CaptureStack& stack : capture.stacks) {
    if (stack.off_cpu == OffCpuReason::None) continue;
    (stack.short_waits ? summary.summed_waits : summary.waits) += stack.count;
    (stack.short_waits ? summary.summed_ns : summary.off_cpu_ns) += stack.off_cpu_ns;
  }
  summary.jit_symbols = capture.jit_symbols.size();
  summary.runtimes_to_flag = runtimes_to_flag(capture);
  summary.losses = summarize_losses(capture);
  const bool count_no_cfi = no_cfi_truncations(summary.losses) > 0;
  std::map<std::string, uint64_t> shallow_ends, no_cfi_ends;
  for (const CaptureStack& stack : capture.stacks) {
    size_t user_frames = 0;
    int32_t outermost_module = -1;  // of the outermost user frame in a module
    for (const CaptureFrame& frame : stack.frames) {
      if (frame.kernel) continue;
      ++user_frames;
      if (frame.module >= 0) outermost_module = frame.module;
    }
    if (user_frames == 0 || stack.count == 0) continue;
    const std::string module =
        outermost_module >= 0 && static_cast<size_t>(outermost_module) < capture.modules.size()
            ? basename_of(capture.modules[static_cast<size_t>(outermost_module)].path)
            : "[unknown]";
    summary.user_samples += stack.count;
    if (user_frames <= kShallowUserFrames) {
      summary.shallow_samples += stack.count;
      shallow_ends[module] += stack.count;
    }
    if (count_no_cfi && stack.truncated && outermost_module >= 0) no_cfi_ends[module] += stack.count;
  }
  summary.shallow_ends = by_samples(shallow_ends);
  summary.no_cfi_ends = by_samples(no_cfi_ends);
  return summary;
}

bool leaves_frames_unnamed(const ModuleReport& report) {
  return !report.resolved() || (report.symbols_only && report.unnamed_frames > 0);
}

std::vector<Hint> summary_hints(const RunSummary& summary) {
  std::vector<Hint> hints;
  const bool live = summary.session != nullptr;
  if (live && summary.samples == 0) {
    for (uint32_t pid : summary.session->kernel_threads)
      hints.push_back({"kernel_thread",
                       "pid " + std::to_string(pid) + " is a kernel thread: it has no user stack; " +
                           (summary.kernel_stacks ? "it did not run while sampled (profile system-wide)"
                                                  : "profile system-wide or drop --user-callchains")});
    if (summary.session->kernel_threads.empty())
      hints.push_back({"no_samples",
                       "no samples: the targets were not on a CPU while sampled (gsymprof samples "
                       "running code; a sleeping or blocked process has none)"});
  }
  // A runtime that names its code for profilers when asked: once each.
  for (const auto& [runtime, pids] : summary.runtimes_to_flag) {
    std::string which = "pid";
    for (size_t i = 0; i < pids.size() && i < 4; ++i) which += (i ? ", " : " ") + std::to_string(pids[i]);
    if (pids.size() > 4) which += " and " + std::to_string(pids.size() - 4) + " more";
    if (runtime == "node")
      hints.push_back({"runtime_node", "node (" + which + "): JavaScript frames unnamed: start node with "
                                       "--perf-basic-prof (names from /tmp/perf-PID.map) or --perf-prof (a "
                                       "jitdump: names with lines), and "
                                       "--interpreted-frames-native-stack for interpreted frames"});
    else if (runtime == "java")
      hints.push_back({"runtime_java", "Java (" + which + "): JIT frames unnamed: run the JVM with a perf-map "
                                       "agent (e.g. -agentpath:.../libperf-jvmti.so from Debian's linux-perf) "
                                       "and -XX:+PreserveFramePointer so stacks go through compiled code"});
    else
      hints.push_back({"runtime_python", runtime + " (" + which + "): Python functions show as "
                                         "_PyEval_EvalFrameDefault: run it with -X perf (or "
                                         "PYTHONPERFSUPPORT=1) so gsymprof names them from its perf map"});
  }
  // Most stacks shallow under frame pointers: code without them.
  constexpr uint64_t kMinSamples = 20;
  if (summary.call_graph == "fp" && summary.user_samples >= kMinSamples &&
      summary.shallow_samples * 2 > summary.user_samples) {
    char share[16];
    std::snprintf(share, sizeof share, "%.0f%%",
                  100.0 * static_cast<double>(summary.shallow_samples) / static_cast<double>(summary.user_samples));
    const std::string remedy =
        summary.command == "symbolize"
            ? "record with 'perf record --call-graph dwarf' or 'gsymprof record' (CFI unwinding)"
            : "profile with --call-graph dwarf (the default: unwinds with the modules' CFI), or "
              "rebuild with -fno-omit-frame-pointer";
    hints.push_back({"shallow_stacks",
                     "shallow stacks: " + std::string(share) + " of the samples have at most " +
                         std::to_string(kShallowUserFrames) + " user frames under --call-graph fp, " +
                         "ending in " + module_shares(summary.shallow_ends, summary.shallow_samples, 3) +
                         ": the program (or a library it runs in) lacks frame pointers, so the "
                         "callers are lost; " + remedy});
  }
  if (const uint64_t no_cfi = no_cfi_truncations(summary.losses))
    hints.push_back(
        {"no_cfi", std::to_string(no_cfi) + " stacks end in code without CFI (unwind tables)" +
                       (summary.no_cfi_ends.empty()
                            ? std::string()
                            : ", in " + module_shares(summary.no_cfi_ends, summary.losses.truncated, 4)) +
                       ": the unwinder cannot find its callers; install a build of it with unwind "
                       "tables (.eh_frame: -fasynchronous-unwind-tables, gcc's default) or frame "
                       "pointers (-fno-omit-frame-pointer: the frame-pointer fallback then steps over it)"});
  return hints;
}

void print_run_summary(const RunSummary& summary, bool verbose) {
  const LossSummary& losses = summary.losses;
  if (summary.session) {
    std::fprintf(stderr,
                 "gsymprof: %" PRIu64 " samples taken, %" PRIu64 " recorded, %" PRIu64
                 " lost, %s, %s, %s (%.2f s at %u Hz, stopped: %s)\n",
                 // Short waits summed in the kernel are not samples taken.
                 summary.session->counters.samples(), summary.samples - summary.summed_waits, losses.lost,
                 count_of(summary.processes, "process", "processes").c_str(),
                 count_of(summary.modules, "module", "modules").c_str(),
                 count_of(summary.unique_stacks, "unique stack", "unique stacks").c_str(),
                 summary.duration_s, summary.frequency_hz, summary.session->stop_reason.c_str());
  } else {
    const size_t resolved = static_cast<size_t>(std::count_if(
        summary.module_reports.begin(), summary.module_reports.end(),
        [](const ModuleReport& report) { return report.resolved(); }));
    const size_t unnamed = static_cast<size_t>(std::count_if(
        summary.module_reports.begin(), summary.module_reports.end(),
        [](const ModuleReport& report) { return report.resolved() && leaves_frames_unnamed(report); }));
    std::fprintf(stderr,
                 "gsymprof: %" PRIu64 " samples, %" PRIu64 " lost, %s, %s; modules resolved: %zu of %zu%s\n",
                 summary.samples, losses.lost, count_of(summary.processes, "process", "processes").c_str(),
                 count_of(summary.unique_stacks, "unique stack", "unique stacks").c_str(), resolved,
                 summary.module_reports.size(),
                 unnamed ? (" (" + std::to_string(unnamed) + " with unnamed frames)").c_str() : "");
  }
  if (summary.session && !summary.session->features_off.empty())
    std::fprintf(stderr, "gsymprof: %zu kernel feature%s off for this session (said at the start; "
                 "gsymprof doctor lists them)\n",
                 summary.session->features_off.size(), summary.session->features_off.size() == 1 ? "" : "s");
  if (summary.clock != "cpu")
    std::fprintf(stderr,
                 "gsymprof: off-CPU: %.3f s in %" PRIu64 " waits with stacks, %.3f s in %" PRIu64
                 " short or runnable waits summed per thread\n",
                 static_cast<double>(summary.off_cpu_ns) / 1e9, summary.waits,
                 static_cast<double>(summary.summed_ns) / 1e9, summary.summed_waits);
  print_losses(losses, verbose);
  if (summary.session) print_session_lines(summary, *summary.session, verbose);
  for (const Hint& hint : summary_hints(summary))
    std::fprintf(stderr, "gsymprof: %s\n", escape_control(hint.message).c_str());
  if (!summary.symbolized) return;
  if (summary.session) {
    // profile: the modules that left frames unnamed, grouped by remedy.
    const size_t unnamed = static_cast<size_t>(std::count_if(
        summary.module_reports.begin(), summary.module_reports.end(), leaves_frames_unnamed));
    if (unnamed || verbose)
      std::fprintf(stderr, "gsymprof: modules with unnamed frames: %zu of %zu\n", unnamed,
                   summary.module_reports.size());
    print_unresolved_modules(summary.module_reports, /*and_the_rest=*/true);
    print_fallback_identities(summary.module_reports);
  } else {
    // symbolize: every module, resolved (from where) or why not.
    for (const ModuleReport& report : summary.module_reports) print_module_report(report);
    print_unresolved_modules(summary.module_reports, /*and_the_rest=*/false);
  }
}

void print_files_written(const RunSummary& summary, bool folded_to_stdout) {
  if (!summary.files.empty()) {
    std::string list;
    for (const WrittenFile& file : summary.files)
      list += (list.empty() ? "" : ", ") + escape_control(file.path) + " (" + file.what + ")";
    std::fprintf(stderr, "gsymprof: wrote %s\n", list.c_str());
  }
  if (folded_to_stdout && ::isatty(STDOUT_FILENO) == 1 && ::isatty(STDERR_FILENO) == 1)
    std::fprintf(stderr,
                 "gsymprof: the lines above are folded stacks (\"frame;frame;... count\"), input for "
                 "flame-graph tools ('gsymprof flamegraph', flamegraph.pl, speedscope); "
                 "--svg FILE draws a flame graph, -o FILE keeps them\n");
}

std::string run_summary_json(const RunSummary& summary) {
  nlohmann::ordered_json out;
  out["format"] = "gsymprof-stats";
  out["version"] = 1;
  out["command"] = summary.command;
  const SessionStats* session = summary.session;
  out["samples_taken"] = session ? nlohmann::ordered_json(session->counters.samples()) : nullptr;
  out["samples"] = summary.samples;
  out["lost"] = summary.losses.lost;
  out["truncated_stacks"] = summary.losses.truncated;
  out["processes"] = summary.processes;
  out["modules"] = summary.modules;
  out["unique_stacks"] = summary.unique_stacks;
  out["duration_s"] = summary.duration_s;
  out["frequency_hz"] = summary.frequency_hz;
  out["call_graph"] = summary.call_graph;
  out["clock"] = summary.clock;
  if (summary.clock != "cpu")
    out["off_cpu"] = {{"waits", summary.waits},
                      {"ns", summary.off_cpu_ns},
                      {"summed_waits", summary.summed_waits},
                      {"summed_ns", summary.summed_ns}};
  out["stop_reason"] = session ? nlohmann::ordered_json(session->stop_reason) : nullptr;
  // What this kernel could not do (lines as printed at the start): a count
  // scripts can alert on, and the reasons.
  out["features_off"] = session ? nlohmann::ordered_json(session->features_off.size()) : nullptr;
  out["features_off_reasons"] =
      session ? nlohmann::ordered_json(session->features_off) : nlohmann::ordered_json::array();
  out["lost_by_reason"] = summary.losses.lost_by_reason;
  out["truncated_by_reason"] = summary.losses.truncated_by_reason;
  out["user_stacks"] = {{"samples", summary.user_samples},
                        {"shallow_samples", summary.shallow_samples},
                        {"shallow_max_frames", kShallowUserFrames}};
  if (session) {
    const PythonReport& py = session->python;
    nlohmann::ordered_json unsupported = nlohmann::ordered_json::object();
    for (const auto& [version, processes] : py.unsupported_versions) unsupported[version] = processes;
    out["python"] = {{"processes", py.processes},
                     {"samples", py.samples_with_python},
                     {"merged", py.samples_merged},
                     {"unpaired", py.samples_unpaired},
                     {"unnamed", py.samples_unnamed},
                     {"cut", py.samples_cut},
                     {"versions_left_native", unsupported}};
  } else {
    out["python"] = nullptr;
  }
  // How the CFI unwinder (--call-graph dwarf) stepped over code without a
  // module's CFI.
  out["unwind"] = session ? nlohmann::ordered_json{{"jit_cfi_steps", session->jit_cfi_steps},
                                                   {"jit_cfi_rejected", session->jit_cfi_rejected},
                                                   {"epilogue_steps", session->epilogue_steps},
                                                   {"frame_pointer_steps", session->frame_pointer_steps},
                                                   {"frame_pointer_stacks", session->frame_pointer_stacks}}
                          : nlohmann::ordered_json(nullptr);
  out["ring_buffer_bytes"] = session ? nlohmann::ordered_json(session->ring_buffer_bytes) : nullptr;
  out["sample_record_bytes"] =
      session && session->counters.sample_records
          ? nlohmann::ordered_json(session->counters.sample_record_bytes / session->counters.sample_records)
          : nullptr;
  nlohmann::ordered_json modules = nlohmann::ordered_json::array();
  for (const ModuleReport& report : summary.module_reports)
    modules.push_back({{"path", report.path},
                       {"build_id", report.build_id.hex()},
                       {"resolved", report.resolved()},
                       {"unnamed_frames", leaves_frames_unnamed(report)},
                       {"description", describe(report)}});
  out["module_reports"] = summary.symbolized ? modules : nullptr;
  out["modules_with_unnamed_frames"] =
      summary.symbolized ? nlohmann::ordered_json(std::count_if(summary.module_reports.begin(),
                                                               summary.module_reports.end(),
                                                               leaves_frames_unnamed))
                         : nullptr;
  nlohmann::ordered_json hints = nlohmann::ordered_json::array();
  for (const Hint& hint : summary_hints(summary)) hints.push_back({{"key", hint.key}, {"message", hint.message}});
  out["hints"] = hints;
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const WrittenFile& file : summary.files) files.push_back({{"path", file.path}, {"what", file.what}});
  out["files"] = files;
  out["command_exit"] = session ? command_end_json(*session) : nullptr;
  return terminal_safe_json(out) + "\n";
}

void print_module_report(const ModuleReport& report) {
  // Paths, reasons and notes hold file names anyone can choose: escaped.
  std::fprintf(stderr, "  %s\n", escape_control(describe(report)).c_str());
}

void print_unresolved_modules(const std::vector<ModuleReport>& reports, bool and_the_rest) {
  if (and_the_rest)
    for (const ModuleReport& report : reports)
      if (!report.resolved() && (report.problem == ModuleProblem::Other ||
                                 report.problem == ModuleProblem::NoIdentity ||
                                 report.problem == ModuleProblem::None))
        print_module_report(report);
  struct Group {
    ModuleProblem problem;
    const char* what;
    const char* remedy;
  };
  static constexpr Group kGroups[] = {
      {ModuleProblem::Stripped, "stripped, no debug file: frames without names",
       "install their debug symbols (Debian: the PACKAGE-dbgsym package, 'dpkg -S FILE' names "
       "PACKAGE, from the debian-debug archive) or set DEBUGINFOD_URLS "
       "(https://debuginfod.debian.net)"},
      {ModuleProblem::ProcessExited, "never read, their processes exited first",
       "profile such programs from their start (profile -- CMD) or while they run"},
      {ModuleProblem::FileMissing, "file gone, no GSYM for it",
       "symbolize where the files are, or give --gsym-dir DIR with their GSYM files "
       "('gsymprof gsym convert' where they are)"},
      {ModuleProblem::IdentityMismatch, "file replaced since it ran",
       "give --gsym-dir DIR with GSYM files of the builds that ran"},
  };
  constexpr size_t kNamesShown = 8;
  for (const Group& group : kGroups) {
    size_t count = 0;
    std::string names;
    for (const ModuleReport& report : reports) {
      // Stripped files resolved from their dynamic symbols and PLT alone
      // miss names as much as those with nothing: the same remedy.
      const bool stripped = report.resolved() && report.symbols_only && report.unnamed_frames > 0;
      if (group.problem == ModuleProblem::Stripped ? !stripped && (report.resolved() || report.problem != group.problem)
                                                   : report.resolved() || report.problem != group.problem)
        continue;
      if (++count > kNamesShown) continue;
      names += (names.empty() ? "" : ", ") + basename_of(report.path);
    }
    if (count == 0) continue;
    if (count > kNamesShown) names += " and " + std::to_string(count - kNamesShown) + " more";
    // Module names are file names anyone can choose: escaped.
    std::fprintf(stderr, "  %s (%zu: %s): %s\n", group.what, count, escape_control(names).c_str(),
                 group.remedy);
  }
}

}  // namespace gsymprof
