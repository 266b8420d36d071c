// userspace/perf_data/perf_data_reader.h - stage: perf.data bytes -> its
// attrs, feature data and records (the subset in perf_data_format.h).
//
// Pure over bytes (no I/O), so it is unit-tested and fuzzed. The input is
// untrusted: every size and offset is checked against the bytes, nothing is
// allocated for a claimed count beyond what the bytes can hold (at most one
// index entry per 8 bytes of records), and every loop advances. Errors are
// one line: "perf.data: WHAT at offset 0x...".
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gsym/base/expected.h"
#include "userspace/base/build_id.h"

struct ZSTD_DCtx_s;
using ZSTD_DCtx = ZSTD_DCtx_s;

namespace gsymprof {

// The perf_event_attr fields this reader uses (0 past the attr's own size).
struct PerfEventAttr {
  uint32_t type = 0, size = 0;
  uint64_t config = 0;
  uint64_t sample_period = 0;  // sample_freq when freq() is set
  uint64_t sample_type = 0, read_format = 0, flags = 0;
  uint64_t branch_sample_type = 0, sample_regs_user = 0, sample_regs_intr = 0;
  uint32_t sample_stack_user = 0;
  bool freq() const;
  bool sample_id_all() const;
  bool is_dummy() const;  // the software "dummy" event: never samples
};

struct PerfAttr {
  PerfEventAttr attr;
  std::vector<uint64_t> ids;  // the sample ids of this event's per-CPU/thread fds
  // perf's name for the event ("cycles", "cpu-clock", "cycles:u"), from
  // HEADER_EVENT_DESC (file form) or EVENT_UPDATE (pipe form); empty if none.
  std::string name;
};

// One HEADER_BUILD_ID entry.
struct PerfBuildId {
  int32_t pid = -1;     // the machine's pid: -1 for the host
  bool kernel = false;  // a kernel entry ([kernel.kallsyms], modules)
  BuildId build_id;
  std::string filename;
};

// The struct sample_id fields present (a sample's own, or a trailer's).
struct PerfSampleId {
  bool has_tid = false, has_time = false, has_id = false;
  uint32_t pid = 0, tid = 0;
  uint64_t time = 0, id = 0;
};

// A decoded record. Views point into the file's bytes.
struct PerfRecord {
  uint32_t type = 0;
  uint16_t misc = 0;
  uint64_t offset = 0;  // in the file
  size_t attr = 0;      // index into PerfDataFile::attrs()
  PerfSampleId id;      // SAMPLE: its own fields; others: the sample_id_all trailer

  struct Mmap {  // MMAP, MMAP2
    uint32_t pid = 0, tid = 0;
    uint64_t addr = 0, len = 0, pgoff = 0;
    bool has_inode = false;  // MMAP2 without a build ID
    uint32_t maj = 0, min = 0;
    uint64_t ino = 0;
    BuildId build_id;        // MMAP2 with PERF_RECORD_MISC_MMAP_BUILD_ID
    bool executable = true;  // MMAP2: PROT_EXEC; MMAP: not PERF_RECORD_MISC_MMAP_DATA
    uint32_t prot = 0, flags = 0;  // MMAP2: PROT_* and MAP_* of the mapping
    std::string_view filename;
  } mmap;
  struct Comm {
    uint32_t pid = 0, tid = 0;
    std::string_view comm;
    bool exec = false;  // PERF_RECORD_MISC_COMM_EXEC
  } comm;
  struct Task {  // FORK, EXIT
    uint32_t pid = 0, ppid = 0, tid = 0, ptid = 0;
  } task;
  uint64_t lost = 0;  // LOST, LOST_SAMPLES
  struct Sample {
    bool has_ip = false;
    uint64_t ip = 0;
    bool has_callchain = false;
    std::span<const uint8_t> callchain;  // u64 entries, little-endian
    uint64_t regs_abi = 0;               // 0: no user registers
    uint64_t regs_mask = 0;              // attr.sample_regs_user
    std::span<const uint8_t> regs;       // u64 per bit of regs_mask, low bit first
    bool has_stack = false;
    std::span<const uint8_t> stack;  // the dyn_size bytes actually copied
    size_t callchain_size() const { return callchain.size() / 8; }
    uint64_t callchain_entry(size_t i) const;
    // The user register with this PERF_REG_X86_* number, if it was sampled.
    bool user_register(unsigned reg, uint64_t* value) const;
  } sample;
};

// Where a record lies, and when it happened (for ordering).
struct PerfRecordRef {
  uint64_t offset = 0;  // of its header, in the file or in the decompressed data
  uint64_t time = 0;    // its time, else the previous record's
  uint32_t type = 0;
  uint32_t size = 0;
  bool decompressed = false;  // it came out of COMPRESSED records (perf record -z)
};

class PerfDataFile {
 public:
  // Reads the header, attrs, features and the index of the records this
  // reader decodes. `bytes` must outlive the result.
  static gsym::Expected<PerfDataFile> parse(std::span<const uint8_t> bytes);

  bool pipe() const { return pipe_; }
  const std::vector<PerfAttr>& attrs() const { return attrs_; }
  const std::vector<PerfBuildId>& build_ids() const { return build_ids_; }
  const std::string& hostname() const { return hostname_; }
  const std::string& os_release() const { return os_release_; }
  // MMAP, MMAP2, COMM, FORK, EXIT, SAMPLE, LOST and LOST_SAMPLES records,
  // sorted by time (stable: file order among equal times).
  const std::vector<PerfRecordRef>& records() const { return records_; }
  // Bytes of records decompressed from COMPRESSED records (perf record -z).
  uint64_t decompressed_bytes() const { return decompressed_.size(); }

  gsym::Expected<PerfRecord> decode(const PerfRecordRef& ref) const;

 private:
  PerfDataFile() = default;
  gsym::Status parse_file_header();
  gsym::Status parse_attr(std::span<const uint8_t> attr_bytes, uint64_t offset,
                          std::vector<uint64_t> ids);
  gsym::Status parse_features(uint64_t table_offset, const uint64_t (&bitmap)[4]);
  gsym::Status parse_feature(uint32_t feature, std::span<const uint8_t> bytes, uint64_t offset);
  gsym::Status parse_build_ids(std::span<const uint8_t> bytes, uint64_t offset);
  gsym::Status parse_event_desc(std::span<const uint8_t> bytes, uint64_t offset);
  gsym::Status index_records(uint64_t begin, uint64_t end);
  // Indexes the records of `buf` (the file, or decompressed_) from `at`
  // to `end`; `at` ends where it stopped. With `partial_ok` (decompressed
  // data, whose records may continue in the next COMPRESSED record) a
  // record that `buf` does not yet hold whole stops the walk.
  gsym::Status index_range(std::span<const uint8_t> buf, bool decompressed, uint64_t& at,
                           uint64_t end, bool partial_ok, uint64_t& last_time);
  // A COMPRESSED(2) record's `body`: decompressed, and the records now
  // whole indexed, in stream order, as if they stood at `offset`.
  gsym::Status index_compressed(uint32_t type, std::span<const uint8_t> body, uint64_t offset,
                                uint64_t& last_time);
  // A pipe's header records (HEADER_ATTR, HEADER_BUILD_ID, HEADER_FEATURE):
  // what a file's header holds. `record` is the whole record.
  gsym::Status index_pipe_header(uint32_t type, std::span<const uint8_t> record, uint64_t offset,
                                 bool decompressed);
  // Appends what one COMPRESSED record's zstd bytes decompress to.
  gsym::Status inflate(std::span<const uint8_t> zstd_bytes, uint64_t offset);
  std::span<const uint8_t> buffer_of(const PerfRecordRef& ref) const;
  gsym::Expected<size_t> attr_of(uint32_t type, std::span<const uint8_t> body,
                                 uint64_t offset) const;
  gsym::Status decode_into(uint32_t type, uint16_t misc, std::span<const uint8_t> body,
                           uint64_t offset, PerfRecord& out) const;

  std::span<const uint8_t> bytes_;
  bool pipe_ = false;
  std::vector<PerfAttr> attrs_;
  bool uniform_layout_ = true;  // every attr has the same sample_type and sample_id_all
  std::unordered_map<uint64_t, size_t> attr_by_id_;
  std::vector<PerfBuildId> build_ids_;
  std::string hostname_, os_release_;
  std::vector<PerfRecordRef> records_;
  // perf record -z: the file's compressed records form one zstd stream; what
  // it decompresses to is kept whole (records index into it), bounded by
  // gsym::decompressed_bound of the compressed bytes read so far.
  std::vector<uint8_t> decompressed_;
  uint64_t decompressed_indexed_ = 0;  // records of decompressed_ before this are indexed
  uint64_t compressed_in_ = 0;
  std::shared_ptr<ZSTD_DCtx> zstd_;  // while indexing
};

// Decodes one record (not a SAMPLE) of an event with `attr`: its type, misc
// and the bytes after its header, as PerfDataFile::decode does for a record
// of a file; for records read elsewhere (the live side-band's rings).
// `offset` names the record in errors.
gsym::Status decode_perf_record(const PerfEventAttr& attr, uint32_t type, uint16_t misc,
                                std::span<const uint8_t> body, uint64_t offset, PerfRecord& out);

// Whether an MMAP/MMAP2 record's file name names a file: perf names
// anonymous memory "//anon" (and other unreachable mappings "//..."), the
// vDSO "[vdso]".
inline bool perf_mapping_names_file(std::string_view filename) {
  return filename.size() > 1 && filename[0] == '/' && filename[1] != '/';
}

// Whether `bytes` start like a perf.data file of either byte order.
bool looks_like_perf_data(std::span<const uint8_t> bytes);

}  // namespace gsymprof
