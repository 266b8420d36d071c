// userspace/perf_data/perf_data_format.h - the perf.data layout this reader
// knows: the constants of the perf tool's own file format (tools/perf/
// Documentation/perf.data-file-format.txt); the kernel's record and sample
// layouts come from <linux/perf_event.h> (PERF_RECORD_*, PERF_SAMPLE_*).
//
// The subset read (little-endian files only; everything else is skipped by
// its size or refused with a one-line error):
//   file form:  perf_file_header (magic "PERFILE2", size 104) -> attrs
//               section (perf_file_attr: perf_event_attr of attr.size bytes,
//               then the section of its u64 sample ids), data section,
//               feature sections (one perf_file_section per bit set in the
//               header's 256-bit feature bitmap, in bit order, right after
//               the data section): HEADER_BUILD_ID, HOSTNAME, OSRELEASE,
//               CMDLINE read, the others skipped.
//   pipe form:  (perf record -o -) a 16-byte header, then records only:
//               HEADER_ATTR (attr + ids), HEADER_BUILD_ID, HEADER_FEATURE.
//   records:    MMAP, MMAP2 (with or without PERF_RECORD_MISC_MMAP_BUILD_ID),
//               COMM (PERF_RECORD_MISC_COMM_EXEC), FORK, EXIT, SAMPLE, LOST,
//               LOST_SAMPLES, and the sample_id_all trailer of each; every
//               other type skipped by header.size (AUXTRACE also by its
//               payload size); COMPRESSED and COMPRESSED2 (perf record -z):
//               one zstd stream across the file's compressed records, the
//               records inside read as if they stood in their place;
//               EVENT_UPDATE (pipe form): an event's name.
//   features:   also HEADER_EVENT_DESC (the events' names, for --event).
#pragma once

#include <linux/perf_event.h>

#include <cstdint>

namespace gsymprof::perf_data {

inline constexpr uint64_t kMagic = 0x32454c4946524550ull;             // "PERFILE2" read as LE
inline constexpr uint64_t kMagicByteSwapped = 0x50455246494c4532ull;  // a big-endian file
inline constexpr uint64_t kFileHeaderSize = 104;  // magic, size, attr_size, 3 sections, bitmap
inline constexpr uint64_t kPipeHeaderSize = 16;   // magic, size
inline constexpr uint64_t kRecordHeaderSize = 8;  // struct perf_event_header
inline constexpr uint32_t kFeatureBits = 256;

// Records the perf tool adds (not the kernel's): types 64 and up.
enum UserRecordType : uint32_t {
  kRecordHeaderAttr = 64,
  kRecordHeaderBuildId = 67,
  kRecordFinishedRound = 68,
  kRecordAuxtrace = 71,  // followed by a payload of its own `size` field
  kRecordEventUpdate = 78,
  kRecordHeaderFeature = 80,
  kRecordCompressed = 81,   // header, zstd bytes up to header.size
  kRecordCompressed2 = 83,  // header, u64 data_size, zstd bytes (padded to 8)
};

// EVENT_UPDATE: header, u64 type, u64 id (a sample id of the event), then
// the type's payload (UNIT 0, SCALE 1, NAME 2, CPUS 3); NAME's is a
// NUL-padded name.
inline constexpr uint64_t kEventUpdateName = 2;

// Feature bits (perf_file_header.adds_features) whose sections are read.
enum Feature : uint32_t {
  kFeatureBuildId = 2,
  kFeatureHostname = 3,
  kFeatureOsRelease = 4,
  kFeatureCmdline = 11,
  // u32 nr, u32 attr_size, then per event: attr (attr_size bytes), u32
  // nr_ids, perf_header_string name, u64 ids[nr_ids].
  kFeatureEventDesc = 12,
};

// perf_event_attr field offsets (the ABI; checked against the kernel header
// in perf_data_reader.cpp). Fields past an attr's own `size` read as 0.
inline constexpr uint32_t kAttrSizeVer0 = PERF_ATTR_SIZE_VER0;
namespace attr_offset {
inline constexpr uint32_t kType = 0, kSize = 4, kConfig = 8, kSamplePeriod = 16, kSampleType = 24,
                          kReadFormat = 32, kFlags = 40, kBranchSampleType = 72,
                          kSampleRegsUser = 80, kSampleStackUser = 88, kSampleRegsIntr = 96;
}  // namespace attr_offset
// Bits of the flags word at kFlags.
inline constexpr uint64_t kAttrFlagFreq = 1ull << 10;
inline constexpr uint64_t kAttrFlagSampleIdAll = 1ull << 18;

// HEADER_BUILD_ID entries (and PERF_RECORD_HEADER_BUILD_ID): header, s32 pid,
// 24 bytes of build ID (20 used; its length in byte 20 when misc has this
// bit, else trailing zero words are padding), NUL-padded file name.
inline constexpr uint16_t kBuildIdMiscSize = 1u << 15;
inline constexpr uint32_t kBuildIdFieldSize = 24, kBuildIdMaxSize = 20;

// PERF_SAMPLE_REGS_USER's abi word.
inline constexpr uint64_t kRegsAbi64 = 2;  // PERF_SAMPLE_REGS_ABI_64

}  // namespace gsymprof::perf_data
