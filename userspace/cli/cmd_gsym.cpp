// userspace/cli/cmd_gsym.cpp - `gsymprof gsym lookup|dump|verify|convert`.
// lookup prints exactly what `llvm-gsymutil --address` prints (or JSON lines);
// dump and verify expose the reader's decode and verify.
#include <unistd.h>

#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "gsym/reader.h"
#include "userspace/cli/commands.h"
#include "userspace/base/text_escape.h"

namespace gsymprof {
namespace {

constexpr const char* kGsymUsage =
    "usage: gsymprof gsym SUBCOMMAND [ARGS...]\n"
    "\n"
    "subcommands:\n"
    "  convert   convert an ELF file's DWARF and symbols to GSYM\n"
    "  lookup    look up addresses in a GSYM file\n"
    "  dump      print a GSYM file's header, tables and every function\n"
    "  verify    check every record of a GSYM file and print counts\n"
    "\n"
    "Run 'gsymprof gsym SUBCOMMAND --help' for a subcommand's options.\n";

constexpr const char* kLookupUsage =
    "usage: gsymprof gsym lookup FILE [--json] [--no-inline] [--no-lines] [ADDR...]\n"
    "\n"
    "Looks up each ADDR (hex 0x... or decimal, an unslid address of the image\n"
    "the GSYM file describes). With no ADDR, reads one address per line from\n"
    "standard input.\n"
    "\n"
    "Text output matches llvm-gsymutil --address: one line per frame, innermost\n"
    "first, outer frames indented by 20 spaces:\n"
    "  0x0000000000001172: sq + 2 @ /tmp/inl2.c:3 [inlined]\n"
    "                      main + 18 @ /tmp/inl2.c:9\n"
    "  0x0000000000000005: error: address 0x5 is not in GSYM\n"
    "\n"
    "options:\n"
    "  --json       one JSON object per address per line:\n"
    "               {\"address\":\"0x1172\",\"found\":true,\"frames\":[{\"name\":...,\n"
    "               \"directory\":...,\"basename\":...,\"line\":3,\"offset\":2,\n"
    "               \"inlined\":true},...]}; a failed lookup adds \"error\"\n"
    "  --no-inline  only the concrete function's frame\n"
    "  --no-lines   names and offsets only (the line table is not read)\n"
    "  --help       show this help\n"
    "\n"
    "Exit status: 0 ok (misses included), 1 bad file or input, 2 usage.\n";

constexpr const char* kDumpUsage =
    "usage: gsymprof gsym dump FILE\n"
    "\n"
    "Prints the header, address table, address-info offsets, file table, string\n"
    "table and every function record (line table, inline tree, merged functions,\n"
    "call sites). Exit status: 0 ok, 1 if the file or a record is malformed,\n"
    "2 usage.\n";

constexpr const char* kVerifyUsage =
    "usage: gsymprof gsym verify FILE\n"
    "\n"
    "Checks the layout and every function record and what it references\n"
    "(strings, files, line programs, inline ranges, merged functions, call\n"
    "sites), then prints the counts. Exit status: 0 valid, 1 invalid (one line\n"
    "on stderr with the function index and address), 2 usage.\n";

bool is_help(const char* arg) { return !std::strcmp(arg, "--help") || !std::strcmp(arg, "-h"); }

// Hex with 0x prefix or decimal; the whole text must be a number.
bool parse_address(std::string_view text, uint64_t& out) {
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    text.remove_prefix(2);
    base = 16;
  }
  if (text.empty()) return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out, base);
  return ec == std::errc() && ptr == text.data() + text.size();
}

void append_fmt_hex16(std::string& out, uint64_t v) {
  char buf[24];
  const int n = std::snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
  out.append(buf, static_cast<size_t>(n));
}

void append_hex(std::string& out, uint64_t v) {
  char buf[24];
  const int n = std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  out.append(buf, static_cast<size_t>(n));
}

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

// JSON string; names are bytes: invalid UTF-8 becomes U+FFFD. DEL and C1
// controls are \u-escaped too (JSON allows them raw) so that the lines are
// as safe on a terminal as the text output.
void append_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const size_t len = decode_utf8(s, i, &cp);
    if (len == 0) {
      out.append("\xef\xbf\xbd");
      ++i;
    } else if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      out.append(buf);
      i += len;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  out.push_back('"');
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
      append_hex(out, addr);
      out.append("\",\"found\":");
      if (!found.ok() || !*found) {
        out.append("false,");
        if (!found.ok()) {
          out.append("\"error\":");
          append_json_string(out, found.error().to_string());
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
        append_json_string(out, f.name);
        out.append(",\"directory\":");
        append_json_string(out, f.directory);
        out.append(",\"basename\":");
        append_json_string(out, f.basename);
        out.append(",\"line\":");
        append_dec(out, f.line);
        out.append(",\"offset\":");
        append_dec(out, f.offset);
        out.append(f.inlined ? ",\"inlined\":true}" : ",\"inlined\":false}");
      }
      out.append("]}\n");
      return;
    }
    append_fmt_hex16(out, addr);
    out.append(": ");
    if (!found.ok()) {
      out.append("error: ");
      append_escaped_control(out, found.error().to_string());
    } else if (!*found) {
      out.append("error: address ");
      append_hex(out, addr);
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

int usage_error(const char* cmd, const std::string& what, const char* usage) {
  std::fprintf(stderr, "gsymprof gsym %s: %s\n%s", cmd, what.c_str(), usage);
  return 2;
}

int run_lookup(int argc, char** argv) {
  std::string file;
  std::vector<uint64_t> addresses;
  LookupCommand cmd;
  bool have_file = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (is_help(argv[i])) {
      std::fputs(kLookupUsage, stdout);
      return 0;
    }
    if (arg == "--json") {
      cmd.json = true;
    } else if (arg == "--no-inline") {
      cmd.options.inline_frames = false;
    } else if (arg == "--no-lines") {
      cmd.options.line_information = false;
    } else if (arg.size() > 1 && arg[0] == '-') {
      return usage_error("lookup", "unknown option '" + std::string(arg) + "'", kLookupUsage);
    } else if (!have_file) {
      file = arg;
      have_file = true;
    } else {
      uint64_t addr;
      if (!parse_address(arg, addr))
        return usage_error("lookup", "invalid address '" + std::string(arg) + "'", kLookupUsage);
      addresses.push_back(addr);
    }
  }
  if (!have_file) return usage_error("lookup", "missing FILE", kLookupUsage);
  auto reader = gsym::Reader::map(file);
  if (!reader) return fail("lookup", file, reader.error().to_string());
  cmd.reader = &*reader;

  if (!addresses.empty()) {
    for (uint64_t addr : addresses) {
      cmd.lookup(addr);
      if (cmd.out.size() >= (1u << 16) && !cmd.flush()) return fail("lookup", "<stdout>", "write failed");
    }
    return cmd.flush() ? 0 : fail("lookup", "<stdout>", "write failed");
  }

  // Streaming: answer every complete line read so far, and flush before the
  // next read may block, so a driving process sees answers promptly.
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
    if (!parse_address(line, addr)) {
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

// --- dump ---

std::string hex_fixed(uint64_t v, int width) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*" PRIx64, width, v);
  return buf;
}

std::string join_path(const std::string& dir, const std::string& base) {
  if (dir.empty()) return base;
  if (base.empty()) return dir;
  return dir + "/" + base;
}

struct Dumper {
  const gsym::Reader& reader;
  std::vector<gsym::FileEntry> files;
  std::string out;

  std::string file_path(uint32_t index) const {
    if (index >= files.size()) return "<invalid file " + std::to_string(index) + ">";
    return escape_control(join_path(files[index].directory, files[index].basename));
  }

  std::string range_text(const gsym::AddressRange& r) const {
    return "[" + hex_fixed(r.start, 16) + " - " + hex_fixed(r.end, 16) + ")";
  }

  void inline_node(const gsym::InlineNode& node, int depth, const std::string& pad) {
    out.append(pad);
    out.append(static_cast<size_t>(depth) * 2, ' ');
    for (size_t i = 0; i < node.ranges.size(); ++i) {
      if (i) out.push_back(' ');
      out.append(range_text(node.ranges[i]));
    }
    out.push_back(' ');
    append_escaped_control(out, node.name);
    if (depth > 0 || node.call_file != 0)
      out.append(" called from " + file_path(node.call_file) + ":" + std::to_string(node.call_line));
    out.push_back('\n');
    for (const gsym::InlineNode& child : node.children) inline_node(child, depth + 1, pad);
  }

  void function(const gsym::Function& fn, int indent) {
    const std::string pad(static_cast<size_t>(indent), ' ');
    if (!fn.lines.empty()) {
      out.append(pad + "LineTable:\n");
      for (const gsym::LineEntry& row : fn.lines)
        out.append(pad + "  " + hex_fixed(row.address, 16) + " " + file_path(row.file) + ":" +
                   std::to_string(row.line) + "\n");
    }
    if (fn.inline_tree) {
      out.append(pad + "InlineInfo:\n");
      inline_node(*fn.inline_tree, 0, pad);
    }
    if (!fn.merged.empty()) {
      out.append(pad + "MergedFunctions[" + std::to_string(fn.merged.size()) + "]:\n");
      for (size_t i = 0; i < fn.merged.size(); ++i) {
        const gsym::Function& m = fn.merged[i];
        out.append(pad + "  [" + std::to_string(i) + "] " + range_text(m.range) + " \"" +
                   escape_control(m.name) + "\"\n");
        function(m, indent + 4);
      }
    }
    if (!fn.call_sites.empty()) {
      out.append(pad + "CallSites:\n");
      for (const gsym::CallSite& cs : fn.call_sites) {
        out.append(pad + "  " + hex_fixed(fn.range.start + cs.return_offset, 16) + " flags=" +
                   hex_fixed(cs.flags, 2));
        for (size_t i = 0; i < cs.match_regex.size(); ++i)
          out.append((i ? ", \"" : " regex=\"") + escape_control(cs.match_regex[i]) + "\"");
        out.push_back('\n');
      }
    }
  }
};

int run_dump(int argc, char** argv) {
  std::string file;
  bool have_file = false;
  for (int i = 1; i < argc; ++i) {
    if (is_help(argv[i])) {
      std::fputs(kDumpUsage, stdout);
      return 0;
    }
    if (argv[i][0] == '-' && argv[i][1])
      return usage_error("dump", std::string("unknown option '") + argv[i] + "'", kDumpUsage);
    if (have_file) return usage_error("dump", "more than one FILE", kDumpUsage);
    file = argv[i];
    have_file = true;
  }
  if (!have_file) return usage_error("dump", "missing FILE", kDumpUsage);
  auto reader = gsym::Reader::map(file);
  if (!reader) return fail("dump", file, reader.error().to_string());
  const gsym::Reader& r = *reader;
  const gsym::Header& h = r.header();
  Dumper d{r, {}, {}};
  std::string& out = d.out;
  out.append("Header:\n");
  out.append("  Magic        = " + hex_fixed(h.magic, 8) +
             (h.endian == gsym::Endian::Little ? " (little-endian)\n" : " (big-endian)\n"));
  out.append("  Version      = " + hex_fixed(h.version, 4) + "\n");
  out.append("  AddrOffSize  = " + hex_fixed(h.addr_off_size, 2) + "\n");
  out.append("  UUIDSize     = " + hex_fixed(h.uuid_size, 2) + "\n");
  out.append("  BaseAddress  = " + hex_fixed(h.base_address, 16) + "\n");
  out.append("  NumAddresses = " + hex_fixed(h.num_addresses, 8) + "\n");
  out.append("  StrtabOffset = " + hex_fixed(h.strtab_offset, 8) + "\n");
  out.append("  StrtabSize   = " + hex_fixed(h.strtab_size, 8) + "\n");
  out.append("  UUID         = ");
  for (uint8_t b : r.build_id()) {
    char buf[4];
    std::snprintf(buf, sizeof buf, "%02x", b);
    out.append(buf);
  }
  out.append("\n\nAddress Table:\nINDEX  OFFSET (ADDRESS)\n");
  const int width = h.addr_off_size * 2;
  for (size_t i = 0; i < r.function_count(); ++i) {
    char idx[24];
    std::snprintf(idx, sizeof idx, "[%4zu] ", i);
    const uint64_t start = r.function_start(i);
    out.append(idx + hex_fixed(start - h.base_address, width) + " (" + hex_fixed(start, 16) + ")\n");
  }
  auto files = r.decode_files();
  if (!files) return fail("dump", file, files.error().to_string());
  d.files = std::move(*files);
  out.append("\nFiles:\nINDEX  PATH\n");
  for (size_t i = 0; i < d.files.size(); ++i) {
    char idx[24];
    std::snprintf(idx, sizeof idx, "[%4zu] ", i);
    out.append(idx + d.file_path(static_cast<uint32_t>(i)) + "\n");
  }
  out.append("\n");
  int status = 0;
  std::string first_error;
  for (size_t i = 0; i < r.function_count(); ++i) {
    auto fn = r.decode_function(i);
    const uint64_t start = r.function_start(i);
    if (!fn) {
      out.append("FunctionInfo[" + std::to_string(i) + "] @ " + hex_fixed(start, 16) +
                 ": error: " + escape_control(fn.error().to_string()) + "\n");
      if (status == 0)
        first_error = "function[" + std::to_string(i) + "] at " + hex_fixed(start, 1) + ": " +
                      fn.error().to_string();
      status = 1;
    } else {
      out.append("FunctionInfo[" + std::to_string(i) + "]: " + d.range_text(fn->range) + " \"" +
                 escape_control(fn->name) + "\"\n");
      d.function(*fn, 0);
    }
    if (out.size() >= (1u << 16)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (std::fflush(stdout) != 0) return fail("dump", "<stdout>", "write failed");
  if (status) return fail("dump", file, first_error);
  return 0;
}

int run_verify(int argc, char** argv) {
  std::string file;
  bool have_file = false;
  for (int i = 1; i < argc; ++i) {
    if (is_help(argv[i])) {
      std::fputs(kVerifyUsage, stdout);
      return 0;
    }
    if (argv[i][0] == '-' && argv[i][1])
      return usage_error("verify", std::string("unknown option '") + argv[i] + "'", kVerifyUsage);
    if (have_file) return usage_error("verify", "more than one FILE", kVerifyUsage);
    file = argv[i];
    have_file = true;
  }
  if (!have_file) return usage_error("verify", "missing FILE", kVerifyUsage);
  auto reader = gsym::Reader::map(file);
  if (!reader) return fail("verify", file, reader.error().to_string());
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
  if (argc < 2) {
    std::fputs(kGsymUsage, stderr);
    return 2;
  }
  const std::string_view sub = argv[1];
  if (is_help(argv[1]) || sub == "help") {
    std::fputs(kGsymUsage, stdout);
    return 0;
  }
  if (sub == "lookup") return run_lookup(argc - 1, argv + 1);
  if (sub == "dump") return run_dump(argc - 1, argv + 1);
  if (sub == "verify") return run_verify(argc - 1, argv + 1);
  if (sub == "convert") return cmd_gsym_convert(argc - 1, argv + 1);
  std::fprintf(stderr, "gsymprof gsym: unknown subcommand '%s'\n%s", argv[1], kGsymUsage);
  return 2;
}

}  // namespace gsymprof
