#include "userspace/perf_data/perf_data_reader.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>

#include <zstd.h>

#include "gsym/convert/elf_image.h"
#include "userspace/perf_data/perf_data_format.h"

namespace gsymprof {

using namespace perf_data;

// The attr offsets of perf_data_format.h are the kernel's.
static_assert(offsetof(perf_event_attr, sample_type) == attr_offset::kSampleType);
static_assert(offsetof(perf_event_attr, read_format) == attr_offset::kReadFormat);
static_assert(offsetof(perf_event_attr, branch_sample_type) == attr_offset::kBranchSampleType);
static_assert(offsetof(perf_event_attr, sample_regs_user) == attr_offset::kSampleRegsUser);
static_assert(offsetof(perf_event_attr, sample_stack_user) == attr_offset::kSampleStackUser);
static_assert(offsetof(perf_event_attr, sample_regs_intr) == attr_offset::kSampleRegsIntr);

namespace {

gsym::Error format_error(const std::string& what, uint64_t offset) {
  return gsym::Error("perf.data: " + what + " at offset " + gsym::hex_number(offset), offset);
}

// Errors of records in decompressed data say so: their offsets are not the
// file's.
gsym::Status in_data(gsym::Status status, bool decompressed) {
  if (status || !decompressed) return status;
  return gsym::Error(status.error().message + " of the decompressed data", status.error().offset);
}
gsym::Status record_error(const std::string& what, uint64_t offset, bool decompressed) {
  return in_data(format_error(what, offset), decompressed);
}

bool is_pipe_header(uint32_t type) {
  return type == kRecordHeaderAttr || type == kRecordHeaderBuildId || type == kRecordHeaderFeature;
}

uint64_t load_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;  // little-endian files only, on a little-endian host
}

// A bounds-checked little-endian reader over one range of the file. The
// first failure is sticky (later reads return 0), so callers check ok() once
// after a group of reads.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, uint64_t offset) : bytes_(bytes), base_(offset) {}

  bool ok() const { return ok_; }
  size_t remaining() const { return bytes_.size() - pos_; }
  uint64_t offset() const { return base_ + pos_; }

  uint16_t u16() { return fixed<uint16_t>(); }
  uint32_t u32() { return fixed<uint32_t>(); }
  uint64_t u64() { return fixed<uint64_t>(); }
  std::span<const uint8_t> take(uint64_t n) {
    if (!ok_ || n > remaining()) {
      ok_ = false;
      return {};
    }
    auto out = bytes_.subspan(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return out;
  }
  void skip(uint64_t n) { take(n); }

 private:
  template <class T>
  T fixed() {
    auto b = take(sizeof(T));
    if (b.empty()) return 0;
    T v;
    std::memcpy(&v, b.data(), sizeof(T));
    return v;
  }

  std::span<const uint8_t> bytes_;
  uint64_t base_ = 0;
  size_t pos_ = 0;
  bool ok_ = true;
};

// A NUL-padded string field: the bytes up to the first NUL.
std::string_view c_string(std::span<const uint8_t> bytes) {
  const char* p = reinterpret_cast<const char*>(bytes.data());
  return std::string_view(p, strnlen(p, bytes.size()));
}

// perf_header_string: u32 len, then len bytes (NUL-padded).
bool read_header_string(Cursor& c, std::string& out) {
  const uint32_t len = c.u32();
  auto bytes = c.take(len);
  if (!c.ok()) return false;
  out = std::string(c_string(bytes));
  return true;
}

// The build ID bytes of a build_id event's 24-byte field.
BuildId build_id_of(std::span<const uint8_t> field, uint16_t misc) {
  size_t size = kBuildIdMaxSize;
  if (misc & kBuildIdMiscSize) {
    size = std::min<size_t>(field[kBuildIdMaxSize], kBuildIdMaxSize);
  } else {
    // Older perf wrote no size: trailing zero words are padding.
    while (size >= 4 && std::all_of(field.begin() + static_cast<ptrdiff_t>(size - 4),
                                    field.begin() + static_cast<ptrdiff_t>(size),
                                    [](uint8_t b) { return b == 0; }))
      size -= 4;
  }
  return BuildId(field.first(size));
}

// Bytes of the read_format values of PERF_SAMPLE_READ; false if they cannot fit.
bool skip_read_values(Cursor& c, uint64_t read_format) {
  const uint64_t times = ((read_format & PERF_FORMAT_TOTAL_TIME_ENABLED) ? 8 : 0) +
                         ((read_format & PERF_FORMAT_TOTAL_TIME_RUNNING) ? 8 : 0);
  const uint64_t per_value =
      8 + ((read_format & PERF_FORMAT_ID) ? 8 : 0) + ((read_format & PERF_FORMAT_LOST) ? 8 : 0);
  if (!(read_format & PERF_FORMAT_GROUP)) {
    c.skip(times + per_value);
    return c.ok();
  }
  const uint64_t nr = c.u64();
  if (!c.ok() || nr > c.remaining() / per_value) return false;
  c.skip(times + nr * per_value);
  return c.ok();
}

// Bytes of the sample_id_all trailer for `sample_type`.
uint64_t trailer_size(uint64_t sample_type) {
  uint64_t words = 0;
  for (uint64_t bit : {PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_SAMPLE_ID, PERF_SAMPLE_STREAM_ID,
                       PERF_SAMPLE_CPU, PERF_SAMPLE_IDENTIFIER})
    if (sample_type & bit) ++words;
  return words * 8;
}

// Whether a record of this type is decoded (and so indexed).
bool decoded_type(uint32_t type) {
  switch (type) {
    case PERF_RECORD_MMAP:
    case PERF_RECORD_MMAP2:
    case PERF_RECORD_COMM:
    case PERF_RECORD_FORK:
    case PERF_RECORD_EXIT:
    case PERF_RECORD_SAMPLE:
    case PERF_RECORD_LOST:
    case PERF_RECORD_LOST_SAMPLES:
      return true;
    default:
      return false;
  }
}

// PERF_RECORD_SAMPLE: the fields of `attr.sample_type`, in the kernel's order.
gsym::Status decode_sample(const PerfEventAttr& attr, std::span<const uint8_t> body,
                           uint64_t offset, PerfRecord& out) {
  const uint64_t st = attr.sample_type;
  auto truncated = [&](const char* what) {
    return format_error(std::string(what) + " record is truncated", offset);
  };
  Cursor c(body, offset + kRecordHeaderSize);
  PerfSampleId& id = out.id;
  PerfRecord::Sample& s = out.sample;
  if (st & PERF_SAMPLE_IDENTIFIER) id.id = c.u64(), id.has_id = true;
  if (st & PERF_SAMPLE_IP) s.ip = c.u64(), s.has_ip = true;
  if (st & PERF_SAMPLE_TID) id.pid = c.u32(), id.tid = c.u32(), id.has_tid = true;
  if (st & PERF_SAMPLE_TIME) id.time = c.u64(), id.has_time = true;
  if (st & PERF_SAMPLE_ADDR) c.skip(8);
  if (st & PERF_SAMPLE_ID) id.id = c.u64(), id.has_id = true;
  if (st & PERF_SAMPLE_STREAM_ID) c.skip(8);
  if (st & PERF_SAMPLE_CPU) c.skip(8);
  if (st & PERF_SAMPLE_PERIOD) c.skip(8);
  if ((st & PERF_SAMPLE_READ) && !skip_read_values(c, attr.read_format))
    return format_error("sample read values are truncated", offset);
  if (st & PERF_SAMPLE_CALLCHAIN) {
    const uint64_t nr = c.u64();
    if (nr > c.remaining() / 8) return format_error("callchain runs past its sample", offset);
    s.callchain = c.take(nr * 8);
    s.has_callchain = true;
  }
  if (st & PERF_SAMPLE_RAW) c.skip(c.u32());
  if (st & PERF_SAMPLE_BRANCH_STACK) {
    const uint64_t nr = c.u64();
    if (attr.branch_sample_type & PERF_SAMPLE_BRANCH_HW_INDEX) c.skip(8);
    if (nr > c.remaining() / 24) return format_error("branch stack runs past its sample", offset);
    c.skip(nr * 24);  // struct perf_branch_entry
  }
  if (st & PERF_SAMPLE_REGS_USER) {
    s.regs_abi = c.u64();
    s.regs_mask = attr.sample_regs_user;
    if (s.regs_abi != 0) s.regs = c.take(uint64_t{8} * std::popcount(s.regs_mask));
  }
  if (st & PERF_SAMPLE_STACK_USER) {
    const uint64_t size = c.u64();
    if (size != 0) {
      auto data = c.take(size);
      const uint64_t dyn_size = c.u64();
      s.stack = data.first(static_cast<size_t>(std::min<uint64_t>(dyn_size, data.size())));
    }
    s.has_stack = true;
  }
  // The fields after these (weight, data_src, ...) are not used.
  if (!c.ok()) return truncated("sample");
  return gsym::Status::success();
}

// Every other decoded type: its payload, then the sample_id_all trailer.
gsym::Status decode_other(const PerfEventAttr& attr, uint32_t type, uint16_t misc,
                          std::span<const uint8_t> body, uint64_t offset, PerfRecord& out) {
  const uint64_t st = attr.sample_type;
  const uint64_t body_offset = offset + kRecordHeaderSize;
  auto truncated = [&](const char* what) {
    return format_error(std::string(what) + " record is truncated", offset);
  };
  // The sample_id_all trailer.
  size_t payload_size = body.size();
  if (attr.sample_id_all()) {
    const uint64_t trailer = trailer_size(st);
    if (trailer > body.size()) return format_error("sample_id trailer is truncated", offset);
    payload_size = body.size() - static_cast<size_t>(trailer);
    Cursor t(body.subspan(payload_size), body_offset + payload_size);
    PerfSampleId& id = out.id;
    if (st & PERF_SAMPLE_TID) id.pid = t.u32(), id.tid = t.u32(), id.has_tid = true;
    if (st & PERF_SAMPLE_TIME) id.time = t.u64(), id.has_time = true;
    if (st & PERF_SAMPLE_ID) id.id = t.u64(), id.has_id = true;
    if (st & PERF_SAMPLE_STREAM_ID) t.skip(8);
    if (st & PERF_SAMPLE_CPU) t.skip(8);
    if (st & PERF_SAMPLE_IDENTIFIER) id.id = t.u64(), id.has_id = true;
  }
  Cursor c(body.first(payload_size), body_offset);
  switch (type) {
    case PERF_RECORD_MMAP:
    case PERF_RECORD_MMAP2: {
      PerfRecord::Mmap& m = out.mmap;
      m.pid = c.u32(), m.tid = c.u32();
      m.addr = c.u64(), m.len = c.u64(), m.pgoff = c.u64();
      if (type == PERF_RECORD_MMAP2) {
        auto identity = c.take(24);
        if (!c.ok()) return truncated("MMAP2");
        Cursor i(identity, body_offset + 32);
        if (misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
          const uint8_t size = identity[0];
          if (size > kBuildIdMaxSize) return format_error("MMAP2 build ID size is over 20", offset);
          m.build_id = BuildId(identity.subspan(4, size));
        } else {
          m.maj = i.u32(), m.min = i.u32(), m.ino = i.u64();
          m.has_inode = true;
        }
        m.prot = c.u32();
        m.flags = c.u32();
        m.executable = m.prot & 4;  // PROT_EXEC
      } else {
        m.executable = !(misc & PERF_RECORD_MISC_MMAP_DATA);
      }
      if (!c.ok()) return truncated(type == PERF_RECORD_MMAP ? "MMAP" : "MMAP2");
      m.filename = c_string(c.take(c.remaining()));
      return gsym::Status::success();
    }
    case PERF_RECORD_COMM:
      out.comm.pid = c.u32(), out.comm.tid = c.u32();
      if (!c.ok()) return truncated("COMM");
      out.comm.comm = c_string(c.take(c.remaining()));
      out.comm.exec = misc & PERF_RECORD_MISC_COMM_EXEC;
      return gsym::Status::success();
    case PERF_RECORD_FORK:
    case PERF_RECORD_EXIT:
      out.task.pid = c.u32(), out.task.ppid = c.u32();
      out.task.tid = c.u32(), out.task.ptid = c.u32();
      {
        const uint64_t time = c.u64();
        if (!c.ok()) return truncated(type == PERF_RECORD_FORK ? "FORK" : "EXIT");
        if (!out.id.has_time) out.id.time = time, out.id.has_time = true;
      }
      return gsym::Status::success();
    case PERF_RECORD_LOST:
      c.u64();  // id
      out.lost = c.u64();
      if (!c.ok()) return truncated("LOST");
      return gsym::Status::success();
    case PERF_RECORD_LOST_SAMPLES:
      out.lost = c.u64();
      if (!c.ok()) return truncated("LOST_SAMPLES");
      return gsym::Status::success();
    default:
      return format_error("record type " + std::to_string(type) + " is not decoded", offset);
  }
}

}  // namespace

bool PerfEventAttr::freq() const { return flags & kAttrFlagFreq; }
bool PerfEventAttr::sample_id_all() const { return flags & kAttrFlagSampleIdAll; }
bool PerfEventAttr::is_dummy() const {
  return type == PERF_TYPE_SOFTWARE && config == PERF_COUNT_SW_DUMMY;
}

uint64_t PerfRecord::Sample::callchain_entry(size_t i) const {
  return load_u64(callchain.data() + i * 8);
}

bool PerfRecord::Sample::user_register(unsigned reg, uint64_t* value) const {
  if (regs_abi == 0 || reg >= 64 || !(regs_mask & (uint64_t{1} << reg))) return false;
  const size_t index = static_cast<size_t>(std::popcount(regs_mask & ((uint64_t{1} << reg) - 1)));
  if ((index + 1) * 8 > regs.size()) return false;
  *value = load_u64(regs.data() + index * 8);
  return true;
}

gsym::Status decode_perf_record(const PerfEventAttr& attr, uint32_t type, uint16_t misc,
                                std::span<const uint8_t> body, uint64_t offset, PerfRecord& out) {
  out.type = type;
  out.misc = misc;
  out.offset = offset;
  if (type == PERF_RECORD_SAMPLE) return decode_sample(attr, body, offset, out);
  return decode_other(attr, type, misc, body, offset, out);
}

bool looks_like_perf_data(std::span<const uint8_t> bytes) {
  if (bytes.size() < 8) return false;
  const uint64_t magic = load_u64(bytes.data());
  return magic == kMagic || magic == kMagicByteSwapped;
}

gsym::Expected<PerfDataFile> PerfDataFile::parse(std::span<const uint8_t> bytes) {
  PerfDataFile file;
  file.bytes_ = bytes;
  if (auto status = file.parse_file_header(); !status) return status.error();
  return file;
}

gsym::Status PerfDataFile::parse_file_header() {
  Cursor c(bytes_, 0);
  const uint64_t magic = c.u64();
  const uint64_t header_size = c.u64();
  if (!c.ok()) return format_error("file header is truncated", 0);
  if (magic == kMagicByteSwapped)
    return format_error("big-endian file (only little-endian files are read)", 0);
  if (magic != kMagic) return format_error("no PERFILE2 magic", 0);
  if (header_size == kPipeHeaderSize) {
    pipe_ = true;
    return index_records(kPipeHeaderSize, bytes_.size());
  }
  if (header_size != kFileHeaderSize)
    return format_error("unknown header size " + std::to_string(header_size), 8);
  const uint64_t attr_size = c.u64();
  const uint64_t attrs_offset = c.u64(), attrs_size = c.u64();
  const uint64_t data_offset = c.u64(), data_size = c.u64();
  c.skip(16);  // event_types: unused since 2012
  uint64_t bitmap[4];
  for (uint64_t& word : bitmap) word = c.u64();
  if (!c.ok()) return format_error("file header is truncated", c.offset());

  auto section = [&](uint64_t offset, uint64_t size, const char* what) -> gsym::Status {
    if (offset > bytes_.size() || size > bytes_.size() - offset)
      return format_error(std::string(what) + " section (" + gsym::hex_number(size) +
                              " bytes) ends past the end of the file",
                          offset);
    return gsym::Status::success();
  };
  if (auto s = section(attrs_offset, attrs_size, "attrs"); !s) return s;
  if (auto s = section(data_offset, data_size, "data"); !s) return s;
  if (attr_size < kAttrSizeVer0 + 16)
    return format_error("attr entry size " + std::to_string(attr_size) + " is too small", 16);
  if (attrs_size % attr_size != 0 || attrs_size == 0)
    return format_error("attrs section size " + std::to_string(attrs_size) +
                            " is not a positive multiple of the attr size",
                        attrs_offset);
  for (uint64_t at = attrs_offset; at < attrs_offset + attrs_size; at += attr_size) {
    auto entry = bytes_.subspan(at, attr_size);
    // perf_file_attr: the attr (its own size), then the section of its ids.
    Cursor e(entry, at);
    e.skip(attr_offset::kSize);
    uint32_t size = e.u32();
    if (size == 0) size = kAttrSizeVer0;
    if (size > attr_size - 16)
      return format_error("attr size " + std::to_string(size) + " exceeds its entry", at + 4);
    Cursor ids_section(entry.subspan(size), at + size);
    const uint64_t ids_offset = ids_section.u64(), ids_size = ids_section.u64();
    if (auto s = section(ids_offset, ids_size, "attr ids"); !s) return s;
    std::vector<uint64_t> ids(ids_size / 8);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = load_u64(bytes_.data() + ids_offset + i * 8);
    if (auto s = parse_attr(entry.first(size), at, std::move(ids)); !s) return s;
  }
  if (auto s = parse_features(data_offset + data_size, bitmap); !s) return s;
  return index_records(data_offset, data_offset + data_size);
}

gsym::Status PerfDataFile::parse_attr(std::span<const uint8_t> attr_bytes, uint64_t offset,
                                      std::vector<uint64_t> ids) {
  // The fields an older (shorter) attr lacks are 0.
  uint8_t full[sizeof(perf_event_attr)] = {};
  std::memcpy(full, attr_bytes.data(), std::min(attr_bytes.size(), sizeof(full)));
  auto u64_at = [&](uint32_t at) { return load_u64(full + at); };
  auto u32_at = [&](uint32_t at) {
    uint32_t v;
    std::memcpy(&v, full + at, sizeof(v));
    return v;
  };
  PerfAttr attr;
  attr.attr.type = u32_at(attr_offset::kType);
  attr.attr.size = static_cast<uint32_t>(attr_bytes.size());
  attr.attr.config = u64_at(attr_offset::kConfig);
  attr.attr.sample_period = u64_at(attr_offset::kSamplePeriod);
  attr.attr.sample_type = u64_at(attr_offset::kSampleType);
  attr.attr.read_format = u64_at(attr_offset::kReadFormat);
  attr.attr.flags = u64_at(attr_offset::kFlags);
  attr.attr.branch_sample_type = u64_at(attr_offset::kBranchSampleType);
  attr.attr.sample_regs_user = u64_at(attr_offset::kSampleRegsUser);
  attr.attr.sample_stack_user = u32_at(attr_offset::kSampleStackUser);
  attr.attr.sample_regs_intr = u64_at(attr_offset::kSampleRegsIntr);
  attr.ids = std::move(ids);
  if (!attrs_.empty()) {
    const PerfEventAttr& first = attrs_.front().attr;
    if (first.sample_type != attr.attr.sample_type ||
        first.sample_id_all() != attr.attr.sample_id_all())
      uniform_layout_ = false;
  }
  attrs_.push_back(std::move(attr));
  if (!uniform_layout_ && attrs_.size() > 1) {
    // Records can then be told apart only by their PERF_SAMPLE_IDENTIFIER.
    for (const PerfAttr& a : attrs_)
      if (!(a.attr.sample_type & PERF_SAMPLE_IDENTIFIER))
        return format_error("events differ in sample_type and lack PERF_SAMPLE_IDENTIFIER", offset);
  }
  for (uint64_t id : attrs_.back().ids) attr_by_id_.try_emplace(id, attrs_.size() - 1);
  return gsym::Status::success();
}

gsym::Status PerfDataFile::parse_features(uint64_t table_offset, const uint64_t (&bitmap)[4]) {
  Cursor table(bytes_.subspan(std::min<uint64_t>(table_offset, bytes_.size())), table_offset);
  for (uint32_t feature = 0; feature < kFeatureBits; ++feature) {
    if (!(bitmap[feature / 64] & (uint64_t{1} << (feature % 64)))) continue;
    const uint64_t entry_offset = table.offset();
    const uint64_t offset = table.u64(), size = table.u64();
    if (!table.ok()) return format_error("feature section table is truncated", entry_offset);
    if (offset > bytes_.size() || size > bytes_.size() - offset)
      return format_error(
          "feature " + std::to_string(feature) + " section ends past the end of the file",
          entry_offset);
    if (auto s = parse_feature(feature, bytes_.subspan(offset, size), offset); !s) return s;
  }
  return gsym::Status::success();
}

gsym::Status PerfDataFile::parse_feature(uint32_t feature, std::span<const uint8_t> bytes,
                                         uint64_t offset) {
  Cursor c(bytes, offset);
  switch (feature) {
    case kFeatureBuildId:
      return parse_build_ids(bytes, offset);
    case kFeatureEventDesc:
      return parse_event_desc(bytes, offset);
    case kFeatureHostname:
      if (!read_header_string(c, hostname_)) return format_error("hostname is truncated", offset);
      return gsym::Status::success();
    case kFeatureOsRelease:
      if (!read_header_string(c, os_release_))
        return format_error("os release is truncated", offset);
      return gsym::Status::success();
    default:
      return gsym::Status::success();
  }
}

gsym::Status PerfDataFile::parse_event_desc(std::span<const uint8_t> bytes, uint64_t offset) {
  Cursor c(bytes, offset);
  const uint32_t nr = c.u32(), attr_size = c.u32();
  if (!c.ok()) return format_error("event description is truncated", offset);
  // Each entry holds at least its attr, its id count and its name's length.
  if (attr_size < kAttrSizeVer0 || nr > c.remaining() / (uint64_t{attr_size} + 8))
    return format_error("event description of " + std::to_string(nr) + " events of " +
                            std::to_string(attr_size) + " bytes is malformed",
                        offset);
  for (uint32_t i = 0; i < nr; ++i) {
    const uint64_t entry = c.offset();
    c.skip(attr_size);
    const uint32_t nr_ids = c.u32();
    std::string name;
    if (!read_header_string(c, name) || nr_ids > c.remaining() / 8)
      return format_error("event description is truncated", entry);
    // The event is the attr that has its ids (perf matches them so), else
    // the attr in the same place (an event recorded without ids).
    size_t attr = i;
    for (uint32_t k = 0; k < nr_ids; ++k)
      if (auto it = attr_by_id_.find(c.u64()); it != attr_by_id_.end()) attr = it->second;
    if (attr < attrs_.size()) attrs_[attr].name = std::move(name);
  }
  return gsym::Status::success();
}

gsym::Status PerfDataFile::parse_build_ids(std::span<const uint8_t> bytes, uint64_t offset) {
  // A sequence of build_id events: header, s32 pid, 24-byte build ID, name.
  constexpr uint64_t kFixed = kRecordHeaderSize + 4 + kBuildIdFieldSize;
  size_t at = 0;
  while (at < bytes.size()) {
    Cursor c(bytes.subspan(at), offset + at);
    c.u32();  // type
    const uint16_t misc = c.u16(), size = c.u16();
    if (!c.ok() || size < kFixed || size > bytes.size() - at)
      return format_error("build ID entry of size " + std::to_string(size) + " is malformed",
                          offset + at);
    PerfBuildId entry;
    entry.pid = static_cast<int32_t>(c.u32());
    entry.build_id = build_id_of(c.take(kBuildIdFieldSize), misc);
    entry.filename = std::string(c_string(c.take(size - kFixed)));
    const uint16_t cpumode = misc & PERF_RECORD_MISC_CPUMODE_MASK;
    entry.kernel = cpumode == PERF_RECORD_MISC_KERNEL || cpumode == PERF_RECORD_MISC_GUEST_KERNEL;
    build_ids_.push_back(std::move(entry));
    at += size;
  }
  return gsym::Status::success();
}

gsym::Status PerfDataFile::index_records(uint64_t begin, uint64_t end) {
  uint64_t at = begin, last_time = 0;
  gsym::Status status = index_range(bytes_, false, at, end, false, last_time);
  zstd_.reset();
  if (!status) return status;
  if (decompressed_indexed_ != decompressed_.size())
    return gsym::Error(
        format_error("compressed data ends inside a record", decompressed_indexed_).message +
            " of the decompressed data",
        decompressed_indexed_);
  std::stable_sort(records_.begin(), records_.end(),
                   [](const PerfRecordRef& a, const PerfRecordRef& b) { return a.time < b.time; });
  return gsym::Status::success();
}

gsym::Status PerfDataFile::inflate(std::span<const uint8_t> zstd_bytes, uint64_t offset) {
  if (!zstd_) {
    zstd_.reset(ZSTD_createDCtx(), ZSTD_freeDCtx);
    if (!zstd_) return format_error("cannot allocate a zstd context", offset);
  }
  compressed_in_ += zstd_bytes.size();
  const uint64_t bound =
      std::min<uint64_t>(gsym::decompressed_bound(compressed_in_), gsym::kMaxDecompressedTotal);
  ZSTD_inBuffer in{zstd_bytes.data(), zstd_bytes.size(), 0};
  bool output_full = false;
  // Until the input is used up and zstd has nothing more to flush.
  while (in.pos < in.size || output_full) {
    const size_t have = decompressed_.size();
    if (have >= bound)
      return format_error("compressed records decompress to more than " + std::to_string(bound) +
                              " bytes (" + std::to_string(gsym::kMaxCompressionRatio) +
                              "x their size, at least " +
                              std::to_string(gsym::kMinDecompressedBound) + ")",
                          offset);
    const size_t room = static_cast<size_t>(std::min<uint64_t>(ZSTD_DStreamOutSize(), bound - have));
    decompressed_.resize(have + room);
    ZSTD_outBuffer out{decompressed_.data() + have, room, 0};
    const size_t in_before = in.pos;
    const size_t result = ZSTD_decompressStream(zstd_.get(), &out, &in);
    decompressed_.resize(have + out.pos);
    if (ZSTD_isError(result))
      return format_error(std::string("zstd: ") + ZSTD_getErrorName(result), offset);
    if (out.pos == 0 && in.pos == in_before) break;  // nothing more to give
    output_full = out.pos == room;
  }
  return gsym::Status::success();
}

std::span<const uint8_t> PerfDataFile::buffer_of(const PerfRecordRef& ref) const {
  if (ref.decompressed) return decompressed_;
  return bytes_;
}

gsym::Status PerfDataFile::index_compressed(uint32_t type, std::span<const uint8_t> body, uint64_t offset,
                                            uint64_t& last_time) {
  auto zstd_bytes = body;
  if (type == kRecordCompressed2) {
    Cursor c(body, offset + kRecordHeaderSize);
    const uint64_t data_size = c.u64();
    if (!c.ok() || data_size > c.remaining())
      return format_error("COMPRESSED2 data size runs past its record", offset);
    zstd_bytes = body.subspan(8, static_cast<size_t>(data_size));
  }
  if (auto s = inflate(zstd_bytes, offset); !s) return s;
  uint64_t from = decompressed_indexed_;
  auto s = index_range(decompressed_, true, from, decompressed_.size(), true, last_time);
  decompressed_indexed_ = from;
  if (!s)
    return gsym::Error(s.error().message + " (COMPRESSED record at offset " + gsym::hex_number(offset) + ")",
                       s.error().offset);
  return gsym::Status::success();
}

gsym::Status PerfDataFile::index_pipe_header(uint32_t type, std::span<const uint8_t> record, uint64_t offset,
                                             bool decompressed) {
  const std::span<const uint8_t> body = record.subspan(kRecordHeaderSize);
  if (type == kRecordHeaderAttr) {
    Cursor a(body, offset + kRecordHeaderSize);
    a.skip(attr_offset::kSize);
    uint32_t attr_size = a.u32();
    if (attr_size == 0) attr_size = kAttrSizeVer0;
    if (!a.ok() || attr_size < kAttrSizeVer0 || attr_size > body.size())
      return record_error("HEADER_ATTR record is malformed", offset, decompressed);
    std::vector<uint64_t> ids((body.size() - attr_size) / 8);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = load_u64(body.data() + attr_size + i * 8);
    return in_data(parse_attr(body.first(attr_size), offset, std::move(ids)), decompressed);
  }
  if (type == kRecordHeaderBuildId) return in_data(parse_build_ids(record, offset), decompressed);
  Cursor f(body, offset + kRecordHeaderSize);
  const uint64_t feature = f.u64();
  if (!f.ok()) return record_error("HEADER_FEATURE record is truncated", offset, decompressed);
  // Build IDs come as their own records in a pipe.
  if (feature == kFeatureBuildId || feature >= kFeatureBits) return gsym::Status::success();
  return in_data(parse_feature(static_cast<uint32_t>(feature), body.subspan(8), offset + kRecordHeaderSize + 8),
                 decompressed);
}

gsym::Status PerfDataFile::index_range(std::span<const uint8_t> buf, bool decompressed,
                                       uint64_t& at, uint64_t end, bool partial_ok,
                                       uint64_t& last_time) {
  auto fail = [&](const std::string& what, uint64_t offset) { return record_error(what, offset, decompressed); };
  while (at < end) {
    if (end - at < kRecordHeaderSize) {
      if (partial_ok) return gsym::Status::success();
      return fail("record header is truncated", at);
    }
    Cursor h(buf.subspan(at, kRecordHeaderSize), at);
    const uint32_t type = h.u32();
    const uint16_t misc = h.u16();
    uint64_t size = h.u16();
    if (size < kRecordHeaderSize)
      return fail("record size " + std::to_string(size) + " is below 8", at);
    if (size > end - at) {
      if (partial_ok) return gsym::Status::success();
      return fail("record of type " + std::to_string(type) + " and size " + std::to_string(size) +
                      " runs past the end of the data",
                  at);
    }
    auto body = buf.subspan(at + kRecordHeaderSize, size - kRecordHeaderSize);
    if (type == kRecordAuxtrace && body.size() >= 8) {
      // The AUX data follows the record, outside its size.
      const uint64_t payload = load_u64(body.data());
      if (payload > end - at - size) {
        if (partial_ok) return gsym::Status::success();
        return fail("AUXTRACE data runs past the end", at);
      }
      size += payload;
    }
    if (type == kRecordCompressed || type == kRecordCompressed2) {
      if (decompressed) return fail("compressed record inside compressed data", at);
      if (auto s = index_compressed(type, body, at, last_time); !s) return s;
    } else if (pipe_ && is_pipe_header(type)) {
      if (auto s = index_pipe_header(type, buf.subspan(at, size), at, decompressed); !s) return s;
    } else if (type == kRecordEventUpdate) {
      Cursor u(body, at + kRecordHeaderSize);
      const uint64_t update = u.u64(), id = u.u64();
      if (!u.ok()) return fail("EVENT_UPDATE record is truncated", at);
      if (update == kEventUpdateName)
        if (auto it = attr_by_id_.find(id); it != attr_by_id_.end())
          attrs_[it->second].name = std::string(c_string(u.take(u.remaining())));
    } else if (decoded_type(type)) {
      if (attrs_.empty()) return fail("record before any event attr", at);
      PerfRecord record;
      if (auto s = decode_into(type, misc, body, at, record); !s) return in_data(s, decompressed);
      if (record.id.has_time) last_time = record.id.time;
      records_.push_back({at, last_time, type, static_cast<uint32_t>(size), decompressed});
    }
    at += size;
  }
  return gsym::Status::success();
}

gsym::Expected<size_t> PerfDataFile::attr_of(uint32_t type, std::span<const uint8_t> body,
                                             uint64_t offset) const {
  if (attrs_.size() == 1) return size_t{0};
  const PerfEventAttr& first = attrs_.front().attr;
  // Where the id lies: first in a sample / last in a trailer with
  // PERF_SAMPLE_IDENTIFIER, else at PERF_SAMPLE_ID's place in the common layout.
  uint64_t id_at = UINT64_MAX;
  if (type == PERF_RECORD_SAMPLE) {
    if (first.sample_type & PERF_SAMPLE_IDENTIFIER) {
      id_at = 0;
    } else if (first.sample_type & PERF_SAMPLE_ID) {
      id_at = 0;
      for (uint64_t bit : {PERF_SAMPLE_IP, PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_SAMPLE_ADDR})
        if (first.sample_type & bit) id_at += 8;
    }
  } else if (first.sample_id_all()) {
    const uint64_t trailer = trailer_size(first.sample_type);
    if (trailer > body.size()) return format_error("sample_id trailer is truncated", offset);
    if (first.sample_type & PERF_SAMPLE_IDENTIFIER) {
      id_at = body.size() - 8;
    } else if (first.sample_type & PERF_SAMPLE_ID) {
      id_at = body.size() - trailer;
      for (uint64_t bit : {PERF_SAMPLE_TID, PERF_SAMPLE_TIME})
        if (first.sample_type & bit) id_at += 8;
    }
  }
  if (id_at == UINT64_MAX) return size_t{0};
  if (id_at + 8 > body.size()) return format_error("record is too short for its id", offset);
  auto it = attr_by_id_.find(load_u64(body.data() + id_at));
  return it == attr_by_id_.end() ? size_t{0} : it->second;
}

gsym::Expected<PerfRecord> PerfDataFile::decode(const PerfRecordRef& ref) const {
  const std::span<const uint8_t> buf = buffer_of(ref);
  if (ref.offset > buf.size() || ref.size < kRecordHeaderSize || ref.size > buf.size() - ref.offset)
    return format_error("record reference out of range", ref.offset);
  Cursor h(buf.subspan(ref.offset, kRecordHeaderSize), ref.offset);
  const uint32_t type = h.u32();
  const uint16_t misc = h.u16();
  const uint16_t size = h.u16();
  PerfRecord record;
  auto body = buf.subspan(ref.offset + kRecordHeaderSize, size - kRecordHeaderSize);
  if (auto s = decode_into(type, misc, body, ref.offset, record); !s) return s.error();
  return record;
}

gsym::Status PerfDataFile::decode_into(uint32_t type, uint16_t misc, std::span<const uint8_t> body,
                                       uint64_t offset, PerfRecord& out) const {
  out.type = type;
  out.misc = misc;
  out.offset = offset;
  auto attr_index = attr_of(type, body, offset);
  if (!attr_index) return attr_index.error();
  out.attr = *attr_index;
  const PerfEventAttr& attr = attrs_[out.attr].attr;
  if (type == PERF_RECORD_SAMPLE) return decode_sample(attr, body, offset, out);
  return decode_other(attr, type, misc, body, offset, out);
}

}  // namespace gsymprof
