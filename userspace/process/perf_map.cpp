#include "userspace/process/perf_map.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <iterator>
#include <map>

#include "userspace/base/parse_number.h"
#include "userspace/base/pseudo_file.h"
#include "userspace/base/text_fields.h"

namespace gsymprof {
namespace {

std::optional<uint64_t> parse_hex(std::string_view text) {
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) text.remove_prefix(2);
  return parse_unsigned<uint64_t>(text, 16);
}


struct Piece {
  uint64_t end = 0;
  uint32_t name = 0;  // index into the lines' names
};

// Paints [start, end) over the pieces: what it covers of older pieces is gone.
void paint(std::map<uint64_t, Piece>& pieces, uint64_t start, uint64_t end, uint32_t name) {
  auto it = pieces.lower_bound(start);
  if (it != pieces.begin()) {
    auto before = std::prev(it);
    if (before->second.end > start) {
      const Piece old = before->second;
      before->second.end = start;
      if (old.end > end) pieces.emplace(end, old);  // the part right of the new range
    }
  }
  it = pieces.lower_bound(start);
  while (it != pieces.end() && it->first < end) {
    if (it->second.end > end) {
      const Piece rest = it->second;
      pieces.erase(it);
      pieces.emplace(end, rest);
      break;
    }
    it = pieces.erase(it);
  }
  pieces[start] = Piece{end, name};
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The pid as the process itself sees it (its innermost pid namespace): the
// number in the perf map's name. /proc/PID/status "NSpid:" lists the pids
// outermost first; absent (old kernels): the same pid.
uint32_t namespace_pid(const std::string& proc_pid, uint32_t pid) {
  gsym::Expected<std::string> status = read_pseudo_file(proc_pid + "/status", 1 << 20);
  if (!status) return pid;
  size_t at = status->find("\nNSpid:");
  if (at == std::string::npos) return pid;
  std::string_view line(*status);
  line.remove_prefix(at + 7);
  line = line.substr(0, line.find('\n'));
  uint32_t last = pid;
  for (std::string_view field = next_field(line); !field.empty(); field = next_field(line))
    if (auto value = parse_unsigned<uint32_t>(field)) last = *value;
  return last;
}

// The path of the last jit-*.dump `pid` maps (/proc/PID/maps), or "": a
// process that was running before the session mapped it before the
// side-band could say so.
std::string mapped_jitdump(const std::string& proc_pid) {
  gsym::Expected<std::string> maps = read_pseudo_file(proc_pid + "/maps", 64 << 20);
  if (!maps) return "";
  std::string found;
  std::string_view rest(*maps);
  while (!rest.empty()) {
    const size_t newline = rest.find('\n');
    std::string_view line = rest.substr(0, newline);
    rest.remove_prefix(newline == std::string_view::npos ? rest.size() : newline + 1);
    // The path starts at the first '/' (the fields before it hold none).
    const size_t slash = line.find('/');
    if (slash != std::string_view::npos && is_jitdump_path(line.substr(slash))) found = line.substr(slash);
  }
  return found;
}

constexpr size_t kJitdumpChunkBytes = kMaxJitdumpRecordBytes + 16;

}  // namespace

bool is_jitdump_path(std::string_view path) {
  const size_t slash = path.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  return name.size() > 9 && name.starts_with("jit-") && name.ends_with(".dump");
}

ParsedPerfMap parse_perf_map(std::string_view text) {
  ParsedPerfMap out;
  std::vector<std::string_view> names;
  std::map<uint64_t, Piece> pieces;
  while (!text.empty()) {
    size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    std::optional<uint64_t> start = parse_hex(next_field(line));
    std::optional<uint64_t> size = parse_hex(next_field(line));
    // The name is the rest of the line, blanks and all.
    size_t name_begin = line.find_first_not_of(" \t");
    std::string_view name = name_begin == std::string_view::npos ? std::string_view() : line.substr(name_begin);
    if (!start || !size || *size == 0 || *start > UINT64_MAX - *size || name.empty() ||
        names.size() == UINT32_MAX) {
      ++out.bad_lines;
      continue;
    }
    names.push_back(name.substr(0, kMaxPerfMapNameBytes));
    paint(pieces, *start, *start + *size, static_cast<uint32_t>(names.size() - 1));
  }
  out.symbols.reserve(pieces.size());
  for (const auto& [start, piece] : pieces)
    out.symbols.push_back({start, piece.end, std::string(names[piece.name])});
  return out;
}

const JitSymbol* find_jit_symbol(const std::vector<JitSymbol>& symbols, uint64_t address) {
  auto it = std::upper_bound(symbols.begin(), symbols.end(), address,
                             [](uint64_t a, const JitSymbol& s) { return a < s.start; });
  if (it == symbols.begin()) return nullptr;
  --it;
  return address < it->end ? &*it : nullptr;
}

bool PerfMaps::has_map(uint32_t pid) const {
  auto it = entries_.find(pid);
  return it != entries_.end() && (it->second.found || it->second.jitdump.found);
}

std::string PerfMaps::jitdump_error(uint32_t pid) const {
  auto it = entries_.find(pid);
  return it == entries_.end() ? "" : it->second.jitdump.error;
}

void PerfMaps::note_jitdump_mapping(uint32_t pid, std::string_view path) {
  Jitdump& jitdump = entries_[pid].jitdump;
  if (jitdump.path == path) return;
  jitdump = Jitdump{};
  jitdump.path = std::string(path);
}

void PerfMaps::note_exec(uint32_t pid) {
  auto it = entries_.find(pid);
  if (it == entries_.end()) return;
  Entry& entry = it->second;
  entry.symbols.clear();
  entry.found = entry.final_read = false;
  entry.size = entry.inode = 0;
  entry.mtime_ns = -1;
  entry.last_try_ns = INT64_MIN / 2;
  entry.jitdump = Jitdump{};
}

PerfMaps::Entry& PerfMaps::entry_of(uint32_t pid) {
  Entry& entry = entries_[pid];
  if (!entry.root_tried) {
    // While the process lives: its root, owner and own pid.
    entry.root_tried = true;
    const std::string proc_pid = proc_root_ + "/" + std::to_string(pid);
    if (kept_roots_ < kMaxKeptRoots) {
      entry.root = gsym::FileDescriptor(::open((proc_pid + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
      if (entry.root.valid()) ++kept_roots_;
    }
    struct stat st {};
    if (::stat(proc_pid.c_str(), &st) == 0) {
      entry.owner = st.st_uid;
      entry.ns_pid = namespace_pid(proc_pid, pid);
    } else if (host_owner_) {
      // Gone (a recording): this host's root and /tmp, its recorder's files.
      entry.root = gsym::FileDescriptor(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
      entry.owner = *host_owner_;
      entry.ns_pid = pid;
    } else {
      entry.ns_pid = namespace_pid(proc_pid, pid);
    }
    if (entry.jitdump.path.empty()) entry.jitdump.path = mapped_jitdump(proc_pid);
  }
  return entry;
}

bool PerfMaps::may_read_again(Entry& entry, bool final) {
  if (final) {
    if (entry.final_read) return false;
    entry.final_read = true;
    return true;
  }
  // While sampling, at most one look at the file per interval per process.
  const int64_t now = steady_ns();
  if (now - entry.last_try_ns < kRetryIntervalNs) return false;
  entry.last_try_ns = now;
  return true;
}

const JitSymbol* PerfMaps::find(uint32_t pid, uint64_t address, bool final) {
  Entry& entry = entry_of(pid);
  if (const JitSymbol* symbol = find_jit_symbol(entry.jitdump.symbols, address)) return symbol;
  if (const JitSymbol* symbol = find_jit_symbol(entry.symbols, address)) return symbol;
  if (!may_read_again(entry, final)) return nullptr;
  read(pid, entry);
  if (const JitSymbol* symbol = find_jit_symbol(entry.jitdump.symbols, address)) return symbol;
  return find_jit_symbol(entry.symbols, address);
}

const JitCode* PerfMaps::find_code(uint32_t pid, uint64_t address, uint64_t& moved_by) {
  Entry& entry = entry_of(pid);
  if (const JitCode* code = entry.jitdump.code.find(address, &moved_by)) return code;
  if (!may_read_again(entry, false)) return nullptr;
  read(pid, entry);
  return entry.jitdump.code.find(address, &moved_by);
}

void PerfMaps::read(uint32_t pid, Entry& entry) {
  gsym::FileDescriptor opened_now;
  int root = entry.root.get();
  if (!entry.root.valid()) {
    // Not kept (too many processes): only while the process lives.
    opened_now = gsym::FileDescriptor(
        ::open((proc_root_ + "/" + std::to_string(pid) + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!opened_now.valid()) return;
    root = opened_now.get();
  }
  read_perf_map(root, entry);
  read_jitdump(root, entry);
}

void PerfMaps::read_perf_map(int root, Entry& entry) {
  const std::string path = "/tmp/perf-" + std::to_string(entry.ns_pid) + ".map";
  gsym::Expected<gsym::OpenFile> file = gsym::open_regular_file_in_root(root, path, path);
  if (!file) return;
  const struct stat& st = file->status;
  // Written by the process's user (or root), not planted by another one in
  // a shared /tmp.
  if (st.st_uid != 0 && entry.owner.has_value() && st.st_uid != *entry.owner) return;
  const int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (entry.found && static_cast<uint64_t>(st.st_size) == entry.size && st.st_ino == entry.inode &&
      mtime_ns == entry.mtime_ns)
    return;  // unchanged since the last read
  gsym::Expected<std::vector<uint8_t>> bytes = gsym::read_descriptor(file->fd.get(), kMaxPerfMapBytes, path);
  if (!bytes) return;
  ++reads_;
  ParsedPerfMap parsed = parse_perf_map(
      std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()));
  entry.symbols = std::move(parsed.symbols);
  entry.found = true;
  entry.size = static_cast<uint64_t>(st.st_size);
  entry.inode = st.st_ino;
  entry.mtime_ns = mtime_ns;
}


void PerfMaps::read_jitdump(int root, Entry& entry) {
  Jitdump& jitdump = entry.jitdump;
  if (!jitdump.error.empty()) return;  // said once why it stopped; what was read stays
  const std::string path = jitdump.path.empty() ? "/tmp/jit-" + std::to_string(entry.ns_pid) + ".dump" : jitdump.path;
  gsym::Expected<gsym::OpenFile> file = gsym::open_regular_file_in_root(root, path, path);
  if (!file) return;
  const struct stat& st = file->status;
  // The process's user's (or root's), as the perf map.
  if (st.st_uid != 0 && entry.owner.has_value() && st.st_uid != *entry.owner) return;
  const uint64_t size = std::min<uint64_t>(static_cast<uint64_t>(st.st_size), kMaxJitdumpBytes);
  if (st.st_ino != jitdump.inode || size < jitdump.parser.consumed()) {
    // A new file at the path (or one rewritten shorter): start over.
    const std::string kept_path = jitdump.path;
    jitdump = Jitdump{};
    jitdump.path = kept_path;
    jitdump.inode = st.st_ino;
  }
  std::vector<JitdumpEvent> events;
  std::vector<uint8_t> chunk;
  // From where the last read stopped, a chunk at a time (a chunk holds the
  // largest record, so a record that does not fit is not written yet).
  while (jitdump.parser.consumed() < size && jitdump.parser.error().empty() && !jitdump.parser.closed()) {
    const uint64_t offset = jitdump.parser.consumed();
    chunk.resize(static_cast<size_t>(std::min<uint64_t>(size - offset, kJitdumpChunkBytes)));
    size_t done = 0;
    while (done < chunk.size()) {
      const ssize_t n = ::pread(file->fd.get(), chunk.data() + done, chunk.size() - done,
                                static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    chunk.resize(done);
    if (jitdump.parser.parse(chunk, events) == 0) break;
  }
  if (!jitdump.parser.error().empty()) jitdump.error = path + ": " + jitdump.parser.error();
  else if (static_cast<uint64_t>(st.st_size) > kMaxJitdumpBytes)
    jitdump.error = path + ": read up to the limit of " + std::to_string(kMaxJitdumpBytes >> 20) + " MiB";
  jitdump.found = jitdump.parser.consumed() > 0;
  if (events.empty()) return;
  jitdump.code.apply(std::move(events));
  jitdump.symbols = jitdump.code.symbols();
}

}  // namespace gsymprof
