#include "userspace/cli/cli_common.h"

#include "userspace/report/progress_line.h"
#include "userspace/report/session_summary.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "gsym/base/file_io.h"
#include "userspace/base/text_escape.h"
#include "userspace/output/folded_output.h"
#include "userspace/output/json_output.h"
#include "userspace/output/pprof_output.h"
#include "userspace/output/speedscope_output.h"

namespace gsymprof {

namespace {

void add_each_target_flag(CommandLine& cli, TargetOptions& options, bool with_duration) {
  for (const TargetFlag& flag : target_flags()) {
    if (!with_duration && std::string_view(flag.names) == "-d,--duration") continue;
    if (*flag.value_name == '\0') {
      cli.flag(flag.names, flag.help, [&flag, &options] {
        if (std::string error = flag.store("", options); !error.empty()) throw UsageError(error);
      });
      continue;
    }
    std::string help = flag.help;
    if (flag.current) help.insert(help.rfind(')'), ", default " + flag.current(options));
    cli.value(flag.names, flag.value_name, help, [&flag, &options](const std::string& value) {
      if (std::string error = flag.store(value, options); !error.empty()) throw UsageError(error);
    });
  }
  cli.flag(kUserCallchainsFlag, kUserCallchainsHelp, [&options] { options.kernel_stacks = false; });
}

}  // namespace

void add_target_flags(CommandLine& cli, TargetOptions& options) {
  add_each_target_flag(cli, options, /*with_duration=*/true);
  cli.command_after_dashes(kTargetCommandHelp, options.command);
}

gsym::Expected<Capture> sample_with_progress(SessionOptions& session, SessionStats& stats) {
  const SamplingProgress progress(session.targets);
  session.on_started = [&progress](const std::vector<std::string>& notices) {
    print_notices(notices);
    progress.start();
  };
  session.on_progress = [&progress](uint64_t samples, double elapsed_s) { progress.update(samples, elapsed_s); };
  auto capture = run_sampling_session(session, &stats);
  progress.finish();
  return capture;
}

void add_agent_target_flags(CommandLine& cli, TargetOptions& options) {
  add_each_target_flag(cli, options, /*with_duration=*/false);
}

void add_symbolize_flags(CommandLine& cli, SymbolizeFlags& flags) {
  cli.paths("--gsym-dir", "DIR",
            "look for GSYM files (*.gsym, any name, matched by the build ID in their header) "
            "in DIR; repeatable, searched in order before the cache",
            flags.gsym_dirs);
  cli.flag("--no-inline", "only the concrete function per address, no inlined frames",
           [&flags] { flags.options.inline_frames = false; });
  cli.flag("--pid-in-comm", "root frame is comm-PID instead of comm",
           [&flags] { flags.options.pid_in_comm = true; });
}

gsym::Expected<GsymLocator> open_locator(const std::vector<std::string>& gsym_dirs, LocatorUse use) {
  LocatorOptions options;
  options.convert_in_child = use == LocatorUse::Daemon;
  options.lookup_indexes = use == LocatorUse::Command;
  if (use == LocatorUse::Pull) {
    options.max_convert_input_bytes = options.child_min_input_bytes;
    options.use_debuginfod = false;
  }
  options.cache_dir = default_cache_dir();
  options.progress = terminal_progress();
  GsymLocator locator(options);
  for (const std::string& dir : gsym_dirs)
    if (auto status = locator.add_gsym_dir(dir); !status) return status.error();
  return locator;
}

void print_locator_notes(const GsymLocator& locator) {
  for (const std::string& note : locator.notes())
    std::fprintf(stderr, "gsymprof: note: %s\n", escape_control(note).c_str());
}

gsym::Status check_output_directory(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  struct stat status {};
  if (::stat(dir.c_str(), &status) != 0) {
    if (errno == ENOENT) return gsym::Error(path + ": directory " + dir + " does not exist");
    if (errno == ENOTDIR) return gsym::Error(path + ": " + dir + " is not a directory");
    return gsym::Error(path + ": directory " + dir + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(status.st_mode)) return gsym::Error(path + ": " + dir + " is not a directory");
  if (::access(dir.c_str(), W_OK) != 0)
    return gsym::Error(path + ": directory " + dir + " is not writable");
  return gsym::Status::success();
}

gsym::Status write_output(std::string_view text, const std::string& path) {
  if (!path.empty()) return gsym::write_file_atomically(path, text);
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
    return gsym::Error(std::string("cannot write to stdout: ") + std::strerror(errno));
  return gsym::Status::success();
}

void add_format_flag(CommandLine& cli, OutputFormat& format) {
  cli.value("--format", "folded|json|pprof|speedscope",
            "folded (default): \"comm;root;...;leaf count\" lines; json: per stack its frames "
            "with name, file, line, inlined, module and build ID; pprof: gzipped profile.proto "
            "for go tool pprof, Pyroscope, Parca (binary: give -o FILE); speedscope: "
            "speedscope's JSON file format, a sampled profile per thread",
            [&format](const std::string& value) {
              if (value == "folded") format = OutputFormat::Folded;
              else if (value == "json") format = OutputFormat::Json;
              else if (value == "pprof") format = OutputFormat::Pprof;
              else if (value == "speedscope") format = OutputFormat::Speedscope;
              else throw UsageError("--format must be folded, json, pprof or speedscope, not '" + value + "'");
            });
}

const char* format_contents(OutputFormat format) {
  switch (format) {
    case OutputFormat::Folded: return "folded stacks";
    case OutputFormat::Json: return "JSON stacks";
    case OutputFormat::Pprof: return "pprof profile";
    case OutputFormat::Speedscope: return "speedscope profile";
  }
  return "output";
}

std::string check_format_destination(OutputFormat format, const std::string& output_path) {
  if (format == OutputFormat::Pprof && output_path.empty() && ::isatty(STDOUT_FILENO) == 1)
    return "--format pprof writes binary data: give -o FILE (or redirect stdout)";
  return "";
}

void add_svg_flags(CommandLine& cli, SvgFlags& flags) {
  cli.path("--svg", "FILE",
           "also write the stacks as an interactive SVG flame graph (as 'gsymprof flamegraph' "
           "draws it) to FILE, atomically",
           flags.path);
  cli.value("--title", "TITLE", "the --svg flame graph's title (default: \"" + flags.title + "\")",
            [&flags](const std::string& title) {
              flags.title = title;
              flags.title_given = true;
            });
}

FlamegraphOptions svg_options(const SvgFlags& flags, ProfileClock clock) {
  FlamegraphOptions options;
  options.title = flags.title;
  if (clock == ProfileClock::Cpu) return options;
  options.unit = "ns";
  options.palette = FlamePalette::Cool;
  if (!flags.title_given) options.title = clock == ProfileClock::OffCpu ? "Off-CPU Time Flame Graph" : "Wall-Clock Time Flame Graph";
  return options;
}

std::string check_svg_format(const SvgFlags& flags, OutputFormat format) {
  if (flags.path.empty() || format == OutputFormat::Folded) return "";
  return std::string("--svg draws the folded stacks: it cannot be combined with --format ") +
         (format == OutputFormat::Json ? "json" : format == OutputFormat::Pprof ? "pprof" : "speedscope");
}

void add_summary_flags(CommandLine& cli, std::string& stats_path, bool& verbose) {
  cli.path("--stats", "FILE",
           "also write the summary's facts (samples, losses by reason, stacks, modules, hints, "
           "files written) as one JSON object to FILE, for scripts and CI",
           stats_path);
  cli.flag("-v,--verbose", "every summary line: zero counters and the ring buffer's size too",
           [&verbose] { verbose = true; });
}

gsym::Expected<RenderedOutput> render(Capture& capture, GsymLocator& locator,
                                      const SymbolizeOptions& options, OutputFormat format,
                                      bool free_stacks) {
  RenderedOutput out;
  if (format == OutputFormat::Pprof) {
    auto profile = pprof_profile(capture, locator, options);
    if (!profile) return profile.error();
    out.bytes = std::move(profile->gzipped);
    out.modules = std::move(profile->symbolized.modules);
    out.unique_stacks = profile->samples;
    return out;
  }
  if (format == OutputFormat::Speedscope) {
    auto profile = speedscope_profile(capture, locator, options);
    if (!profile) return profile.error();
    out.bytes = std::move(profile->json);
    out.modules = std::move(profile->symbolized.modules);
    out.unique_stacks = profile->samples;
    return out;
  }
  auto result = symbolize(capture, locator, options);
  if (!result) return result.error();
  if (free_stacks) std::vector<CaptureStack>().swap(capture.stacks);
  out.bytes = format == OutputFormat::Json ? symbolized_json(*result) : folded_text(*result);
  out.modules = std::move(result->modules);
  out.unique_stacks = result->stacks.size();
  return out;
}

gsym::Status write_stats_file(RunSummary& summary, const std::string& path) {
  if (path.empty()) return gsym::Status::success();
  summary.files.push_back({path, "summary as JSON"});
  return write_output(run_summary_json(summary), path);
}

}  // namespace gsymprof
