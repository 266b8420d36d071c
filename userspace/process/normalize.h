// userspace/process/normalize.h - stage: (process image, IP, frame index) ->
// {module, unslid_addr} or {reason, runtime_addr}.
//
//   lookup addr  = ip for frame 0, ip - 1 for every return address (so the
//                  address lies inside the call instruction, not after it)
//   file_offset  = lookup_addr - map.start + map.file_offset
//   unslid_addr  = file_offset - seg.p_offset + seg.p_vaddr, with seg the
//                  PT_LOAD segment holding file_offset (never via .text)
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "userspace/capture/capture.h"
#include "userspace/process/module_identity.h"
#include "userspace/process/process_image.h"

namespace gsymprof {

// The address to look up for the frame at `frame_index` (0 = leaf).
inline uint64_t lookup_address(uint64_t ip, size_t frame_index) {
  return frame_index == 0 || ip == 0 ? ip : ip - 1;
}

// The PT_LOAD segment whose file bytes hold `file_offset`, or nullptr. When
// segments share a file page, an executable one wins for code addresses.
const LoadSegment* segment_for_file_offset(std::span<const LoadSegment> segments,
                                           uint64_t file_offset, bool prefer_executable);

// unslid_addr for `file_offset`, or nullopt when no segment holds it.
std::optional<uint64_t> unslid_address(std::span<const LoadSegment> segments,
                                       uint64_t file_offset, bool prefer_executable);

// load_bias (runtime_addr - unslid_addr) of the module behind `map`, or
// nullopt when no segment overlaps the mapping's file range.
std::optional<uint64_t> load_bias(std::span<const LoadSegment> segments, const MapEntry& map);

struct NormalizedFrame {
  int32_t module = -1;  // index into ProcessImage::modules; -1: unresolved
  uint64_t address = 0; // unslid_addr if module >= 0, else runtime_addr (the IP)
  UnresolvedReason reason = UnresolvedReason::None;
  uint64_t file_offset = 0;  // valid when the address lay in a file mapping
};

// Normalizes the frame at `frame_index` whose IP is `ip`.
NormalizedFrame normalize_frame(const ProcessImage& image, uint64_t ip, size_t frame_index);

}  // namespace gsymprof
