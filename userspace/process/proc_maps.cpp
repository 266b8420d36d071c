#include "userspace/process/proc_maps.h"

#include <charconv>
#include <cstdio>

namespace gsymprof {
namespace {

constexpr std::string_view kDeletedSuffix = " (deleted)";

// A cursor over one line; each read consumes one field.
class LineCursor {
 public:
  explicit LineCursor(std::string_view line) : rest_(line) {}

  bool read_hex(uint64_t& out, char terminator) {
    const char* begin = rest_.data();
    const char* end = begin + rest_.size();
    auto [ptr, ec] = std::from_chars(begin, end, out, 16);
    if (ec != std::errc() || ptr == begin) return false;
    // from_chars accepts no sign or prefix, but reject them explicitly anyway.
    if (*begin == '-' || *begin == '+') return false;
    rest_.remove_prefix(static_cast<size_t>(ptr - begin));
    return consume(terminator);
  }
  bool read_dec(uint64_t& out, char terminator) {
    const char* begin = rest_.data();
    const char* end = begin + rest_.size();
    auto [ptr, ec] = std::from_chars(begin, end, out, 10);
    if (ec != std::errc() || ptr == begin) return false;
    rest_.remove_prefix(static_cast<size_t>(ptr - begin));
    return terminator == '\0' ? true : consume(terminator);
  }
  bool read_word(std::string_view& out, size_t length) {
    if (rest_.size() < length) return false;
    out = rest_.substr(0, length);
    rest_.remove_prefix(length);
    return consume(' ');
  }
  bool consume(char c) {
    if (rest_.empty() || rest_.front() != c) return false;
    rest_.remove_prefix(1);
    return true;
  }
  std::string_view rest() const { return rest_; }

 private:
  std::string_view rest_;
};

bool valid_perms(std::string_view perms) {
  return (perms[0] == 'r' || perms[0] == '-') && (perms[1] == 'w' || perms[1] == '-') &&
         (perms[2] == 'x' || perms[2] == '-') && (perms[3] == 'p' || perms[3] == 's');
}

}  // namespace

gsym::Expected<MapEntry> parse_proc_maps_line(std::string_view line) {
  // start-end perms offset major:minor inode [padding path]
  LineCursor cursor(line);
  MapEntry entry;
  uint64_t major = 0, minor = 0;
  std::string_view perms;
  if (!cursor.read_hex(entry.start, '-') || !cursor.read_hex(entry.end, ' '))
    return gsym::Error("bad address range");
  if (entry.end < entry.start) return gsym::Error("address range ends before it starts");
  if (!cursor.read_word(perms, 4) || !valid_perms(perms)) return gsym::Error("bad permissions");
  if (!cursor.read_hex(entry.file_offset, ' ')) return gsym::Error("bad file offset");
  if (!cursor.read_hex(major, ':') || !cursor.read_hex(minor, ' ') || major > UINT32_MAX ||
      minor > UINT32_MAX)
    return gsym::Error("bad device");
  if (!cursor.read_dec(entry.inode, '\0')) return gsym::Error("bad inode");
  entry.perms = std::string(perms);
  entry.dev_major = static_cast<uint32_t>(major);
  entry.dev_minor = static_cast<uint32_t>(minor);

  // The kernel pads with spaces to a column, then writes the path, which may
  // itself contain spaces; only the padding is stripped.
  std::string_view path = cursor.rest();
  if (!path.empty() && path.front() != ' ') return gsym::Error("bad inode");
  while (!path.empty() && path.front() == ' ') path.remove_prefix(1);
  if (path.size() > kDeletedSuffix.size() && path.ends_with(kDeletedSuffix) && entry.inode != 0) {
    entry.deleted = true;
    path.remove_suffix(kDeletedSuffix.size());
  }
  entry.path = std::string(path);
  return entry;
}

gsym::Expected<std::vector<MapEntry>> parse_proc_maps(std::string_view text) {
  std::vector<MapEntry> entries;
  size_t line_number = 0;
  while (!text.empty()) {
    ++line_number;
    size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    auto entry = parse_proc_maps_line(line);
    if (!entry)
      return gsym::Error("line " + std::to_string(line_number) + ": " + entry.error().message);
    entries.push_back(std::move(*entry));
  }
  return entries;
}

std::string map_files_path(const std::string& proc_root, uint32_t pid, const MapEntry& mapping) {
  char range[40];
  std::snprintf(range, sizeof range, "%llx-%llx", static_cast<unsigned long long>(mapping.start),
                static_cast<unsigned long long>(mapping.end));
  return proc_root + "/" + std::to_string(pid) + "/map_files/" + range;
}

}  // namespace gsymprof
