#include "userspace/process/normalize.h"

namespace gsymprof {

const LoadSegment* segment_for_file_offset(std::span<const LoadSegment> segments,
                                           uint64_t file_offset, bool prefer_executable) {
  const LoadSegment* found = nullptr;
  for (const LoadSegment& seg : segments) {
    if (file_offset < seg.file_offset || file_offset - seg.file_offset >= seg.file_size) continue;
    if (!found || (prefer_executable && seg.executable && !found->executable)) found = &seg;
  }
  return found;
}

std::optional<uint64_t> unslid_address(std::span<const LoadSegment> segments,
                                       uint64_t file_offset, bool prefer_executable) {
  const LoadSegment* seg = segment_for_file_offset(segments, file_offset, prefer_executable);
  if (!seg) return std::nullopt;
  return file_offset - seg->file_offset + seg->vaddr;
}

std::optional<uint64_t> load_bias(std::span<const LoadSegment> segments, const MapEntry& map) {
  const uint64_t map_size = map.end - map.start;
  const LoadSegment* chosen = nullptr;
  for (const LoadSegment& seg : segments) {
    // Overlap of [map.file_offset, +map_size) with the segment's file bytes.
    if (seg.file_size == 0) continue;
    if (seg.file_offset >= map.file_offset + map_size ||
        map.file_offset >= seg.file_offset + seg.file_size)
      continue;
    if (!chosen || (map.executable() && seg.executable && !chosen->executable)) chosen = &seg;
  }
  if (!chosen) return std::nullopt;
  // runtime = map.start + (file_offset - map.file_offset)
  // unslid  = file_offset - p_offset + p_vaddr
  return map.start - map.file_offset + chosen->file_offset - chosen->vaddr;
}

NormalizedFrame normalize_frame(const ProcessImage& image, uint64_t ip, size_t frame_index) {
  NormalizedFrame frame;
  const uint64_t addr = lookup_address(ip, frame_index);
  frame.address = ip;  // runtime_addr until resolved
  int32_t map_index = image.find_map(addr);
  if (map_index < 0) {
    frame.reason = image.maps.empty() && !image.error.empty() ? UnresolvedReason::ProcessGone
                                                              : UnresolvedReason::NoMapping;
    return frame;
  }
  const MapEntry& map = image.maps[static_cast<size_t>(map_index)];
  const int32_t module = image.map_module[static_cast<size_t>(map_index)];
  if (module < 0) {
    frame.reason = UnresolvedReason::AnonymousMapping;
    return frame;
  }
  if (!map.executable()) {
    // A file mapped without execute permission (data, a GSYM): no code of
    // any module runs here, whatever the file is.
    frame.reason = UnresolvedReason::NotExecutable;
    return frame;
  }
  frame.file_offset = addr - map.start + map.file_offset;
  const ProcessModule& m = image.modules[static_cast<size_t>(module)];
  if (!m.error.empty()) {
    frame.reason = UnresolvedReason::ModuleUnreadable;
    return frame;
  }
  auto unslid = unslid_address(m.identity.segments, frame.file_offset, map.executable());
  if (!unslid) {
    frame.reason = UnresolvedReason::NoSegment;
    return frame;
  }
  frame.module = module;
  frame.address = *unslid;
  return frame;
}

}  // namespace gsymprof
