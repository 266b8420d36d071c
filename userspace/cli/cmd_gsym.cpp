// userspace/cli/cmd_gsym.cpp - `gsymprof gsym lookup|dump|verify|convert`.
// lookup prints exactly what `llvm-gsymutil --address` prints (or JSON lines);
// dump and verify expose the reader's decode and verify.
#include <unistd.h>

#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gsym/reader/dump.h"
#include "gsym/reader/reader.h"
#include "userspace/cli/command_line.h"
#include "userspace/cli/commands.h"
#include "userspace/base/json_text.h"
#include "userspace/base/parse_number.h"
#include "gsym/base/hex.h"
#include "userspace/base/text_escape.h"

namespace gsymprof {
namespace {

constexpr const char* kLookupAbout =
    "Looks up each ADDR (hex 0x... or decimal, an unslid address of the image\n"
    "the GSYM file describes). With no ADDR, reads one address per line from\n"
    "standard input.\n"
    "\n"
    "Text output matches llvm-gsymutil --address: one line per frame, innermost\n"
    "first, outer frames indented by 20 spaces:\n"
    "  0x0000000000001172: sq + 2 @ /tmp/inl2.c:3 [inlined]\n"
    "                      main + 18 @ /tmp/inl2.c:9\n"
    "  0x0000000000000005: error: address 0x5 is not in GSYM\n";

constexpr const char* kLookupJsonHelp =
    "one JSON object per address per line:\n"
    "{\"address\":\"0x1172\",\"found\":true,\"frames\":[{\"name\":...,\n"
    "\"directory\":...,\"basename\":...,\"line\":3,\"offset\":2,\n"
    "\"inlined\":true},...]}; a failed lookup adds \"error\"";

constexpr const char* kDumpAbout =
    "Prints the header, address table, address-info offsets, file table, string\n"
    "table and every function record (line table, inline tree, merged functions,\n"
    "call sites). Exit status: 0 ok, 1 if the file or a record is malformed,\n"
    "2 usage.\n";

constexpr const char* kVerifyAbout =
    "Checks the layout and every function record and what it references\n"
    "(strings, files, line programs, inline ranges, merged functions, call\n"
    "sites), then prints the counts. Exit status: 0 valid, 1 invalid (one line\n"
    "on stderr with the function index and address), 2 usage.\n";

void append_dec(std::string& out, uint64_t v) {
  char buf[24];
  const auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v);
  (void)ec;
  out.append(buf, ptr);
}

// LLVM's SourceLocation printer. Names and paths come from the GSYM file
// (anyone's DWARF): control characters are escaped (text_escape.h), so they
// reach the terminal as \xHH, not raw.
void append_frame_text(std::string& out, const gsym::LookupFrame& f) {
  append_escaped_control(out, f.name);
  if (f.offset > 0) {
    out.append(" + ");
    append_dec(out, f.offset);
  }
  if (!f.directory.empty() || !f.basename.empty()) {
    out.append(" @ ");
    if (!f.directory.empty()) {
      append_escaped_control(out, f.directory);
      const bool backslash = f.directory.find('\\') != std::string_view::npos &&
                             f.directory.find('/') == std::string_view::npos;
      out.push_back(backslash ? '\\' : '/');
    }
    if (f.basename.empty())
      out.append("<invalid-file>");
    else
      append_escaped_control(out, f.basename);
    out.push_back(':');
    append_dec(out, f.line);
  }
}

struct LookupCommand {
  const gsym::Reader* reader = nullptr;
  gsym::LookupOptions options;
  bool json = false;
  gsym::LookupScratch scratch{16};
  std::string out;

  void lookup(uint64_t addr) {
    gsym::Expected<bool> found = reader->lookup_into(addr, options, scratch);
    if (json) {
      out.append("{\"address\":\"");
      gsym::append_hex_number(out, addr);
      out.append("\",\"found\":");
      if (!found.ok() || !*found) {
        out.append("false,");
        if (!found.ok()) {
          out.append("\"error\":");
          append_terminal_safe_json_string(out, found.error().to_string());
          out.push_back(',');
        }
        out.append("\"frames\":[]}\n");
        return;
      }
      out.append("true,\"frames\":[");
      bool first = true;
      for (const gsym::LookupFrame& f : scratch.frames) {
        if (!first) out.push_back(',');
        first = false;
        out.append("{\"name\":");
        append_terminal_safe_json_string(out, f.name);
        out.append(",\"directory\":");
        append_terminal_safe_json_string(out, f.directory);
        out.append(",\"basename\":");
        append_terminal_safe_json_string(out, f.basename);
        out.append(",\"line\":");
        append_dec(out, f.line);
        out.append(",\"offset\":");
        append_dec(out, f.offset);
        out.append(f.inlined ? ",\"inlined\":true}" : ",\"inlined\":false}");
      }
      out.append("]}\n");
      return;
    }
    gsym::append_hex_number(out, addr, 16);
    out.append(": ");
    if (!found.ok()) {
      out.append("error: ");
      append_escaped_control(out, found.error().to_string());
    } else if (!*found) {
      out.append("error: address ");
      gsym::append_hex_number(out, addr);
      out.append(" is not in GSYM");
    } else {
      const auto& frames = scratch.frames;
      for (size_t i = 0; i < frames.size(); ++i) {
        if (i > 0) out.append("\n                    ");
        append_frame_text(out, frames[i]);
        if (i + 1 != frames.size()) out.append(" [inlined]");
      }
    }
    out.push_back('\n');
  }

  bool flush() {
    if (out.empty()) return true;
    const bool ok = std::fwrite(out.data(), 1, out.size(), stdout) == out.size() &&
                    std::fflush(stdout) == 0;
    out.clear();
    return ok;
  }
};

// Errors can quote the file's contents and the input: escaped for the terminal.
int fail(const char* cmd, const std::string& file, const std::string& what) {
  std::fprintf(stderr, "gsymprof gsym %s: %s: %s\n", cmd, escape_control(file).c_str(),
               escape_control(what).c_str());
  return 1;
}

// Streaming: answer every complete line read so far, and flush before the
// next read may block, so a driving process sees answers promptly.
int lookup_stdin(LookupCommand& cmd) {
  std::string pending;
  std::vector<char> buf(1 << 16);
  uint64_t line_number = 0;
  auto handle_line = [&](std::string_view line) -> bool {
    ++line_number;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.remove_suffix(1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty()) return true;
    uint64_t addr;
    if (auto parsed = parse_address(line)) addr = *parsed;
    else {
      cmd.flush();
      fail("lookup", "<stdin>",
           "line " + std::to_string(line_number) + ": invalid address '" + std::string(line) + "'");
      return false;
    }
    cmd.lookup(addr);
    return true;
  };
  while (true) {
    if (!cmd.flush()) return fail("lookup", "<stdout>", "write failed");
    const ssize_t got = ::read(STDIN_FILENO, buf.data(), buf.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      return fail("lookup", "<stdin>", std::strerror(errno));
    }
    if (got == 0) break;
    std::string_view chunk(buf.data(), static_cast<size_t>(got));
    size_t nl;
    while ((nl = chunk.find('\n')) != std::string_view::npos) {
      bool ok;
      if (pending.empty()) {
        ok = handle_line(chunk.substr(0, nl));
      } else {
        pending.append(chunk.substr(0, nl));
        ok = handle_line(pending);
        pending.clear();
      }
      if (!ok) return 1;
      chunk.remove_prefix(nl + 1);
      if (cmd.out.size() >= (1u << 16) && !cmd.flush()) return fail("lookup", "<stdout>", "write failed");
    }
    pending.append(chunk);
    if (pending.size() > 4096) {
      fail("lookup", "<stdin>", "line " + std::to_string(line_number + 1) + " is too long");
      return 1;
    }
  }
  if (!pending.empty() && !handle_line(pending)) return 1;
  return cmd.flush() ? 0 : fail("lookup", "<stdout>", "write failed");
}

int run_lookup(int argc, char** argv) {
  std::string file;
  std::vector<uint64_t> addresses;
  LookupCommand cmd;
  CommandLine cli("gsym lookup", kLookupAbout,
                  "Exit status: 0 ok (misses included), 1 bad file or input, 2 usage.\n");
  cli.section("arguments");
  cli.argument("FILE", "", "the GSYM file", file);
  cli.arguments("ADDR", "addresses to look up (none: read from standard input)",
                [&addresses](const std::string& text) {
                  uint64_t addr;
                  if (auto parsed = parse_address(text)) addr = *parsed;
                  else throw UsageError("invalid address '" + text + "'");
                  addresses.push_back(addr);
                });
  cli.section("options");
  cli.flag("--json", kLookupJsonHelp, [&cmd] { cmd.json = true; });
  cli.flag("--no-inline", "only the concrete function's frame",
           [&cmd] { cmd.options.inline_frames = false; });
  cli.flag("--no-lines", "names and offsets only (the line table is not read)",
           [&cmd] { cmd.options.line_information = false; });
  cli.example("two addresses (file addresses, as nm prints them)",
              "gsymprof gsym lookup myprog.gsym 0x1139 0x1150")
      .example("addresses from standard input, as JSON",
               "printf '0x1139\\n0x1150\\n' | gsymprof gsym lookup myprog.gsym --json");
  if (auto exit_status = cli.parse(argc, argv)) return *exit_status;
  auto reader = gsym::Reader::map(file);
  if (!reader) return fail("lookup", file, reader.error().to_string());
  cmd.reader = &*reader;
  if (addresses.empty()) return lookup_stdin(cmd);
  for (uint64_t addr : addresses) {
    cmd.lookup(addr);
    if (cmd.out.size() >= (1u << 16) && !cmd.flush()) return fail("lookup", "<stdout>", "write failed");
  }
  return cmd.flush() ? 0 : fail("lookup", "<stdout>", "write failed");
}

// --- dump ---

// The command line of dump and verify: one GSYM file, mapped into `reader`.
// nullopt: go on; otherwise the exit status to end with.
std::optional<int> map_file_argument(const char* subcommand, const char* about,
                                     const char* example, int argc, char** argv, std::string& file,
                                     std::optional<gsym::Reader>& reader) {
  CommandLine cli(std::string("gsym ") + subcommand, about);
  cli.section("arguments");
  cli.argument("FILE", "", "the GSYM file", file);
  cli.example(example, std::string("gsymprof gsym ") + subcommand + " myprog.gsym");
  if (auto exit_status = cli.parse(argc, argv)) return exit_status;
  auto mapped = gsym::Reader::map(file);
  if (!mapped) return fail(subcommand, file, mapped.error().to_string());
  reader.emplace(std::move(*mapped));
  return std::nullopt;
}

int run_dump(int argc, char** argv) {
  std::string file;
  std::optional<gsym::Reader> reader;
  if (auto exit_status =
          map_file_argument("dump", kDumpAbout, "every record, readable", argc, argv, file, reader))
    return *exit_status;
  gsym::DumpOptions options;
  options.append_text = [](std::string& out, std::string_view text) {
    append_escaped_control(out, text);  // names and paths are anyone's bytes
  };
  const gsym::Status dumped = gsym::write_dump(*reader, std::cout, options);
  if (!std::cout.flush() || std::fflush(stdout) != 0) return fail("dump", "<stdout>", "write failed");
  if (!dumped) return fail("dump", file, dumped.error().message);
  return 0;
}

int run_verify(int argc, char** argv) {
  std::string file;
  std::optional<gsym::Reader> reader;
  if (auto exit_status = map_file_argument("verify", kVerifyAbout, "check a GSYM file before shipping it",
                                           argc, argv, file, reader))
    return *exit_status;
  auto report = reader->verify();
  if (!report) return fail("verify", file, report.error().to_string());
  std::printf(
      "functions: %" PRIu64 "\nline rows: %" PRIu64 "\ninline nodes: %" PRIu64 "\nfiles: %" PRIu64
      "\nstrings: %" PRIu64 "\nmerged functions: %" PRIu64 "\ncall sites: %" PRIu64 "\n",
      report->functions, report->line_rows, report->inline_nodes, report->files, report->strings,
      report->merged_functions, report->call_sites);
  return std::fflush(stdout) == 0 ? 0 : fail("verify", "<stdout>", "write failed");
}

}  // namespace

int cmd_gsym(int argc, char** argv) {
  static constexpr Subcommand kSubcommands[] = {
      {"convert", "convert an ELF file's DWARF and symbols to GSYM", cmd_gsym_convert},
      {"lookup", "look up addresses in a GSYM file", run_lookup},
      {"dump", "print a GSYM file's header, tables and every function", run_dump},
      {"verify", "check every record of a GSYM file and print counts", run_verify},
  };
  return run_subcommand("gsymprof gsym", "subcommand", kSubcommands, argc, argv);
}

}  // namespace gsymprof
