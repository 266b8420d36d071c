#include "tests/support/recorded_snapshot.h"

#include "gsym/base/file_io.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

namespace gsymprof {

namespace {

constexpr char kMagic[8] = {'G', 'S', 'P', 'S', 'N', 'A', 'P', '\0'};
constexpr uint32_t kVersion = 1;

void put_le(std::vector<uint8_t>& out, uint64_t value, int size) {
  for (int i = 0; i < size; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

// Bounds-checked little-endian reader over untrusted bytes.
class Cursor {
 public:
  explicit Cursor(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  size_t offset() const { return offset_; }
  size_t remaining() const { return bytes_.size() - offset_; }

  bool read(uint64_t& value, int size) {
    if (remaining() < static_cast<size_t>(size)) return false;
    value = 0;
    for (int i = 0; i < size; ++i)
      value |= static_cast<uint64_t>(bytes_[offset_ + i]) << (8 * i);
    offset_ += size;
    return true;
  }
  bool read_bytes(size_t size, std::span<const uint8_t>& out) {
    if (remaining() < size) return false;
    out = bytes_.subspan(offset_, size);
    offset_ += size;
    return true;
  }

 private:
  std::span<const uint8_t> bytes_;
  size_t offset_ = 0;
};

gsym::Error error_at(const std::string& what, size_t offset) {
  return gsym::Error("stack snapshot: " + what, offset);
}

}  // namespace

const UnwindModule* RecordedSnapshot::find_module(uint64_t runtime_addr) const {
  auto after = std::upper_bound(mappings.begin(), mappings.end(), runtime_addr,
                                [](uint64_t addr, const SnapshotMapping& m) { return addr < m.start; });
  if (after == mappings.begin()) return nullptr;
  const SnapshotMapping& m = *(after - 1);
  if (runtime_addr >= m.end || m.module >= modules.size()) return nullptr;
  return &modules[m.module];
}

gsym::Expected<std::vector<uint8_t>> serialize_snapshot(const RecordedSnapshot& s) {
  const StackSnapshot& snap = s.snapshot;
  if (snap.stack.size() > kMaxSnapshotStack) return gsym::Error("stack snapshot: stack copy too large");
  if (s.modules.size() > kMaxSnapshotModules) return gsym::Error("stack snapshot: too many modules");
  if (s.mappings.size() > kMaxSnapshotMappings) return gsym::Error("stack snapshot: too many mappings");
  for (const UnwindModule& m : s.modules) {
    if (m.build_id.bytes().size() > kMaxSnapshotBuildId)
      return gsym::Error("stack snapshot: build ID too long");
    if (m.elf_path.size() > kMaxSnapshotPath) return gsym::Error("stack snapshot: path too long");
  }
  for (size_t i = 0; i < s.mappings.size(); ++i) {
    const SnapshotMapping& m = s.mappings[i];
    if (m.start >= m.end) return gsym::Error("stack snapshot: empty mapping");
    if (m.module >= s.modules.size()) return gsym::Error("stack snapshot: mapping names a missing module");
    if (i > 0 && m.start < s.mappings[i - 1].end)
      return gsym::Error("stack snapshot: mappings unsorted or overlapping");
  }

  std::vector<uint8_t> out(std::begin(kMagic), std::end(kMagic));
  put_le(out, kVersion, 4);
  put_le(out, 0, 4);
  put_le(out, snap.regs.ip, 8);
  put_le(out, snap.regs.sp, 8);
  put_le(out, snap.regs.bp, 8);
  put_le(out, snap.stack_start, 8);
  put_le(out, snap.stack.size(), 4);
  put_le(out, s.modules.size(), 4);
  put_le(out, s.mappings.size(), 4);
  put_le(out, 0, 4);
  out.insert(out.end(), snap.stack.begin(), snap.stack.end());
  for (const UnwindModule& m : s.modules) {
    put_le(out, m.load_bias, 8);
    put_le(out, m.build_id.bytes().size(), 2);
    put_le(out, m.elf_path.size(), 2);
    out.insert(out.end(), m.build_id.bytes().begin(), m.build_id.bytes().end());
    out.insert(out.end(), m.elf_path.begin(), m.elf_path.end());
  }
  for (const SnapshotMapping& m : s.mappings) {
    put_le(out, m.start, 8);
    put_le(out, m.end, 8);
    put_le(out, m.module, 4);
    put_le(out, 0, 4);
  }
  return out;
}

gsym::Expected<RecordedSnapshot> parse_snapshot(std::span<const uint8_t> bytes) {
  Cursor in(bytes);
  std::span<const uint8_t> magic;
  if (!in.read_bytes(sizeof kMagic, magic) || std::memcmp(magic.data(), kMagic, sizeof kMagic) != 0)
    return error_at("bad magic (not a stack snapshot)", 0);
  uint64_t version = 0, reserved = 0;
  if (!in.read(version, 4)) return error_at("truncated header", in.offset());
  if (version != kVersion)
    return error_at("unsupported version " + std::to_string(version), in.offset() - 4);
  if (!in.read(reserved, 4)) return error_at("truncated header", in.offset());
  if (reserved != 0) return error_at("reserved field not zero", 12);

  RecordedSnapshot s;
  uint64_t stack_size = 0, module_count = 0, mapping_count = 0;
  if (!in.read(s.snapshot.regs.ip, 8) || !in.read(s.snapshot.regs.sp, 8) ||
      !in.read(s.snapshot.regs.bp, 8) || !in.read(s.snapshot.stack_start, 8) ||
      !in.read(stack_size, 4) || !in.read(module_count, 4) || !in.read(mapping_count, 4) ||
      !in.read(reserved, 4))
    return error_at("truncated header", in.offset());
  if (reserved != 0) return error_at("reserved field not zero", 60);
  if (stack_size > kMaxSnapshotStack) return error_at("stack copy too large", 48);
  if (module_count > kMaxSnapshotModules) return error_at("too many modules", 52);
  if (mapping_count > kMaxSnapshotMappings) return error_at("too many mappings", 56);

  std::span<const uint8_t> stack;
  if (!in.read_bytes(stack_size, stack)) return error_at("truncated stack bytes", in.offset());
  s.snapshot.stack.assign(stack.begin(), stack.end());

  s.modules.reserve(module_count);
  for (uint64_t i = 0; i < module_count; ++i) {
    size_t record = in.offset();
    UnwindModule m;
    uint64_t id_size = 0, path_size = 0;
    if (!in.read(m.load_bias, 8) || !in.read(id_size, 2) || !in.read(path_size, 2))
      return error_at("truncated module " + std::to_string(i), in.offset());
    if (id_size > kMaxSnapshotBuildId) return error_at("build ID too long", record + 8);
    if (path_size > kMaxSnapshotPath) return error_at("path too long", record + 10);
    std::span<const uint8_t> id, path;
    if (!in.read_bytes(id_size, id) || !in.read_bytes(path_size, path))
      return error_at("truncated module " + std::to_string(i), in.offset());
    m.build_id = BuildId(id);
    m.elf_path.assign(path.begin(), path.end());
    s.modules.push_back(std::move(m));
  }

  s.mappings.reserve(mapping_count);
  for (uint64_t i = 0; i < mapping_count; ++i) {
    size_t record = in.offset();
    SnapshotMapping m;
    uint64_t module = 0;
    if (!in.read(m.start, 8) || !in.read(m.end, 8) || !in.read(module, 4) || !in.read(reserved, 4))
      return error_at("truncated mapping " + std::to_string(i), in.offset());
    if (reserved != 0) return error_at("reserved field not zero", record + 20);
    if (m.start >= m.end) return error_at("empty mapping", record);
    if (module >= s.modules.size()) return error_at("mapping names a missing module", record + 16);
    if (!s.mappings.empty() && m.start < s.mappings.back().end)
      return error_at("mappings unsorted or overlapping", record);
    m.module = static_cast<uint32_t>(module);
    s.mappings.push_back(m);
  }
  if (in.remaining() != 0) return error_at("trailing bytes", in.offset());
  return s;
}

gsym::Status write_snapshot_file(const std::string& path, const RecordedSnapshot& snapshot) {
  gsym::Expected<std::vector<uint8_t>> bytes = serialize_snapshot(snapshot);
  if (!bytes) return bytes.error();
  return gsym::write_file_atomically(path, *bytes);
}

gsym::Expected<RecordedSnapshot> read_snapshot_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return gsym::Error(path + ": cannot open");
  // Bounded read: a snapshot is never larger than its limits allow.
  constexpr size_t kMaxFile = kMaxSnapshotStack + 64 +
                              kMaxSnapshotModules * (12 + kMaxSnapshotBuildId + kMaxSnapshotPath) +
                              kMaxSnapshotMappings * 24;
  std::vector<uint8_t> bytes;
  char buffer[65536];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    bytes.insert(bytes.end(), buffer, buffer + in.gcount());
    if (bytes.size() > kMaxFile) return gsym::Error(path + ": too large for a stack snapshot");
  }
  gsym::Expected<RecordedSnapshot> parsed = parse_snapshot(bytes);
  if (!parsed) {
    char where[40];
    std::snprintf(where, sizeof where, " at offset 0x%llx",
                  static_cast<unsigned long long>(parsed.error().offset));
    return gsym::Error(path + ": " + parsed.error().message +
                           (parsed.error().offset == gsym::Error::kNoOffset ? "" : where),
                       parsed.error().offset);
  }
  return parsed;
}

}  // namespace gsymprof
