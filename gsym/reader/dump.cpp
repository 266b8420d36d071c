// gsym/reader/dump.cpp - the text dump of a GSYM file (see dump.h).
#include "gsym/reader/dump.h"

#include "gsym/base/hex.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "gsym/format/format.h"

namespace gsym {

namespace {

std::string join_path(const std::string& dir, const std::string& base) {
  if (dir.empty()) return base;
  if (base.empty()) return dir;
  return dir + "/" + base;
}

std::string range_text(const AddressRange& r) {
  return "[" + hex_number(r.start, 16) + " - " + hex_number(r.end, 16) + ")";
}

class Dumper {
 public:
  Dumper(const Reader& reader, std::ostream& stream, const DumpOptions& options)
      : reader_(reader), stream_(stream), options_(options) {}

  Status run();

 private:
  static constexpr size_t kChunk = 1u << 16;

  void text(std::string_view s) {
    if (options_.append_text)
      options_.append_text(out_, s);
    else
      out_.append(s);
  }
  void file_path(uint32_t index) {
    if (index >= files_.size()) {
      out_.append("<invalid file " + std::to_string(index) + ">");
      return;
    }
    text(join_path(files_[index].directory, files_[index].basename));
  }
  void flush() {
    stream_.write(out_.data(), static_cast<std::streamsize>(out_.size()));
    out_.clear();
  }

  void header();
  void address_table();
  void file_table();
  void function(const Function& fn, int indent);
  void inline_node(const InlineNode& node, int depth, const std::string& pad);

  const Reader& reader_;
  std::ostream& stream_;
  const DumpOptions& options_;
  std::vector<FileEntry> files_;
  std::string out_;
};

void Dumper::header() {
  const Header& h = reader_.header();
  out_.append("Header:\n");
  out_.append("  Magic        = " + hex_number(h.magic, 8) +
              (h.endian == Endian::Little ? " (little-endian)\n" : " (big-endian)\n"));
  out_.append("  Version      = " + hex_number(h.version, 4) + "\n");
  out_.append("  AddrOffSize  = " + hex_number(h.addr_off_size, 2) + "\n");
  if (h.version == kVersion2) {
    out_.append("  StrTableEncoding = " + hex_number(h.string_table_encoding, 2) + "\n");
    out_.append("  BaseAddress  = " + hex_number(h.base_address, 16) + "\n");
    out_.append("  NumAddresses = " + hex_number(h.num_addresses, 8) + "\n");
    out_.append("  UUID         = ");
    out_.append(to_hex(reader_.build_id()));
    // Version 2 places its tables through this directory, in file order.
    out_.append("\n\nGlobal Data:\nTYPE                 OFFSET             SIZE\n");
    for (const GlobalDataEntry& section : reader_.sections()) {
      std::string name = global_info_type_name(section.type);
      if (name.empty() || section.type == 0) name = "unknown " + std::to_string(section.type);
      name.resize(std::max<size_t>(name.size(), 20), ' ');
      out_.append(name + " " + hex_number(section.offset, 16) + " " + hex_number(section.size, 16) +
                  "\n");
    }
    out_.pop_back();  // the address table's blank line follows
    return;
  }
  out_.append("  UUIDSize     = " + hex_number(h.uuid_size, 2) + "\n");
  out_.append("  BaseAddress  = " + hex_number(h.base_address, 16) + "\n");
  out_.append("  NumAddresses = " + hex_number(h.num_addresses, 8) + "\n");
  out_.append("  StrtabOffset = " + hex_number(h.strtab_offset, 8) + "\n");
  out_.append("  StrtabSize   = " + hex_number(h.strtab_size, 8) + "\n");
  out_.append("  UUID         = ");
  out_.append(to_hex(reader_.build_id()));
}

void Dumper::address_table() {
  const Header& h = reader_.header();
  out_.append("\n\nAddress Table:\nINDEX  OFFSET (ADDRESS)\n");
  const int width = h.addr_off_size * 2;
  for (size_t i = 0; i < reader_.function_count(); ++i) {
    char idx[24];
    std::snprintf(idx, sizeof idx, "[%4zu] ", i);
    const uint64_t start = reader_.function_start(i);
    out_.append(idx + hex_number(start - h.base_address, width) + " (" + hex_number(start, 16) + ")\n");
  }
}

void Dumper::file_table() {
  out_.append("\nFiles:\nINDEX  PATH\n");
  for (size_t i = 0; i < files_.size(); ++i) {
    char idx[24];
    std::snprintf(idx, sizeof idx, "[%4zu] ", i);
    out_.append(idx);
    file_path(static_cast<uint32_t>(i));
    out_.append("\n");
  }
  out_.append("\n");
}

void Dumper::inline_node(const InlineNode& node, int depth, const std::string& pad) {
  out_.append(pad);
  out_.append(static_cast<size_t>(depth) * 2, ' ');
  for (size_t i = 0; i < node.ranges.size(); ++i) {
    if (i) out_.push_back(' ');
    out_.append(range_text(node.ranges[i]));
  }
  out_.push_back(' ');
  text(node.name);
  if (depth > 0 || node.call_file != 0) {
    out_.append(" called from ");
    file_path(node.call_file);
    out_.append(":" + std::to_string(node.call_line));
  }
  out_.push_back('\n');
  for (const InlineNode& child : node.children) inline_node(child, depth + 1, pad);
}

void Dumper::function(const Function& fn, int indent) {
  const std::string pad(static_cast<size_t>(indent), ' ');
  if (!fn.lines.empty()) {
    out_.append(pad + "LineTable:\n");
    for (const LineEntry& row : fn.lines) {
      out_.append(pad + "  " + hex_number(row.address, 16) + " ");
      file_path(row.file);
      out_.append(":" + std::to_string(row.line) + "\n");
    }
  }
  if (fn.inline_tree) {
    out_.append(pad + "InlineInfo:\n");
    inline_node(*fn.inline_tree, 0, pad);
  }
  if (!fn.merged.empty()) {
    out_.append(pad + "MergedFunctions[" + std::to_string(fn.merged.size()) + "]:\n");
    for (size_t i = 0; i < fn.merged.size(); ++i) {
      const Function& m = fn.merged[i];
      out_.append(pad + "  [" + std::to_string(i) + "] " + range_text(m.range) + " \"");
      text(m.name);
      out_.append("\"\n");
      function(m, indent + 4);
    }
  }
  if (!fn.call_sites.empty()) {
    out_.append(pad + "CallSites:\n");
    for (const CallSite& cs : fn.call_sites) {
      out_.append(pad + "  " + hex_number(fn.range.start + cs.return_offset, 16) + " flags=" +
                  hex_number(cs.flags, 2));
      for (size_t i = 0; i < cs.match_regex.size(); ++i) {
        out_.append(i ? ", \"" : " regex=\"");
        text(cs.match_regex[i]);
        out_.append("\"");
      }
      out_.push_back('\n');
    }
  }
}

Status Dumper::run() {
  header();
  address_table();
  auto files = reader_.decode_files();
  if (!files) return Error(files.error().to_string());  // nothing written yet
  files_ = std::move(*files);
  file_table();
  std::string first_error;
  for (size_t i = 0; i < reader_.function_count(); ++i) {
    auto fn = reader_.decode_function(i);
    const uint64_t start = reader_.function_start(i);
    if (!fn) {
      out_.append("FunctionInfo[" + std::to_string(i) + "] @ " + hex_number(start, 16) + ": error: ");
      text(fn.error().to_string());
      out_.append("\n");
      if (first_error.empty())
        first_error = "function[" + std::to_string(i) + "] at " + hex_number(start, 1) + ": " +
                      fn.error().to_string();
    } else {
      out_.append("FunctionInfo[" + std::to_string(i) + "]: " + range_text(fn->range) + " \"");
      text(fn->name);
      out_.append("\"\n");
      function(*fn, 0);
    }
    if (out_.size() >= kChunk) flush();
  }
  flush();
  if (!first_error.empty()) return Error(first_error);
  return {};
}

}  // namespace

Status write_dump(const Reader& reader, std::ostream& out, const DumpOptions& options) {
  return Dumper(reader, out, options).run();
}

}  // namespace gsym
