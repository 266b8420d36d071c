#include "userspace/cli/cli_common.h"

#include "userspace/report/progress_line.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "gsym/base/file_io.h"
#include "userspace/base/text_escape.h"
#include "userspace/output/folded_output.h"
#include "userspace/output/json_output.h"
#include "userspace/output/pprof_output.h"

namespace gsymprof {

void add_target_flags(CommandLine& cli, TargetOptions& options) {
  for (const TargetFlag& flag : target_flags()) {
    cli.value(flag.name, flag.value_name, flag.help, [&flag, &options](const std::string& value) {
      if (std::string error = flag.store(value, options); !error.empty()) throw UsageError(error);
    });
  }
  cli.flag(kUserCallchainsFlag, kUserCallchainsHelp, [&options] { options.kernel_stacks = false; });
  cli.command_after_dashes(kTargetCommandHelp, options.command);
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

gsym::Expected<GsymLocator> open_locator(const std::vector<std::string>& gsym_dirs) {
  LocatorOptions options;
  options.cache_dir = default_cache_dir();
  options.progress = terminal_progress();
  GsymLocator locator(options);
  for (const std::string& dir : gsym_dirs)
    if (auto status = locator.add_gsym_dir(dir); !status) return status.error();
  return locator;
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
      const size_t slash = report.path.rfind('/');
      names += (names.empty() ? "" : ", ") +
               (slash == std::string::npos ? report.path : report.path.substr(slash + 1));
    }
    if (count == 0) continue;
    if (count > kNamesShown) names += " and " + std::to_string(count - kNamesShown) + " more";
    // Module names are file names anyone can choose: escaped.
    std::fprintf(stderr, "  %s (%zu: %s): %s\n", group.what, count, escape_control(names).c_str(),
                 group.remedy);
  }
}

void print_fallback_identities(const std::vector<ModuleReport>& reports) {
  size_t count = 0;
  for (const ModuleReport& report : reports)
    if (report.resolved() && !report.build_id.empty() && report.build_id.kind() != BuildId::Kind::Gnu)
      ++count;
  if (count == 0) return;
  std::fprintf(stderr, "gsymprof: modules identified without a GNU build ID: %zu\n", count);
  for (const ModuleReport& report : reports)
    if (report.resolved() && !report.build_id.empty() && report.build_id.kind() != BuildId::Kind::Gnu)
      print_module_report(report);
}

void print_locator_notes(const GsymLocator& locator) {
  for (const std::string& note : locator.notes())
    std::fprintf(stderr, "gsymprof: note: %s\n", escape_control(note).c_str());
}

gsym::Status check_output_directory(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
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
  cli.value("--format", "folded|json|pprof",
            "folded (default): \"comm;root;...;leaf count\" lines; json: per stack its frames "
            "with name, file, line, inlined, module and build ID; pprof: gzipped profile.proto "
            "for go tool pprof, Pyroscope, Parca (binary: give -o FILE)",
            [&format](const std::string& value) {
              if (value == "folded") format = OutputFormat::Folded;
              else if (value == "json") format = OutputFormat::Json;
              else if (value == "pprof") format = OutputFormat::Pprof;
              else throw UsageError("--format must be folded, json or pprof, not '" + value + "'");
            });
}

std::string check_format_destination(OutputFormat format, const std::string& output_path) {
  if (format == OutputFormat::Pprof && output_path.empty() && ::isatty(STDOUT_FILENO) == 1)
    return "--format pprof writes binary data: give -o FILE (or redirect stdout)";
  return "";
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
  auto result = symbolize(capture, locator, options);
  if (!result) return result.error();
  if (free_stacks) std::vector<CaptureStack>().swap(capture.stacks);
  out.bytes = format == OutputFormat::Json ? symbolized_json(*result) : folded_text(*result);
  out.modules = std::move(result->modules);
  out.unique_stacks = result->stacks.size();
  return out;
}

}  // namespace gsymprof
