#include "userspace/assemble/capture_assembler.h"

#include <sys/sysmacros.h>

#include "userspace/process/vdso_file.h"

namespace gsymprof {

CaptureAssembler::CaptureAssembler(ProcSource source, UnwindOptions unwind)
    : processes_(std::move(source)), aggregator_(processes_, &perf_maps_, &python_), unwinder_(processes_, unwind, &perf_maps_) {}

void CaptureAssembler::on_stack_copy(const RawStackCopy& copy) { unwinder_.unwind(copy, add_); }

void CaptureAssembler::on_mapping(const RawMapping& mapping) {
  MapEntry entry;
  entry.start = mapping.start;
  entry.end = mapping.end;
  entry.file_offset = mapping.file_offset;
  entry.dev_major = mapping.dev_major;
  entry.dev_minor = mapping.dev_minor;
  entry.inode = mapping.inode;
  entry.perms = {mapping.readable ? 'r' : '-', mapping.writable ? 'w' : '-',
                 mapping.executable ? 'x' : '-',
                 mapping.shared ? 's' : 'p'};
  entry.path = mapping.vdso ? std::string(kVdsoPath) : std::string(mapping.path);
  entry.deleted = mapping.deleted;
  entry.build_id = mapping.build_id;
  // A file mapping without a full path (an unreachable or very deep one) is
  // still opened through /proc/PID/map_files where the source can.
  // A runtime maps its jitdump (executable) so that profilers find it.
  if (mapping.executable && mapping.path_complete && is_jitdump_path(mapping.path))
    perf_maps_.note_jitdump_mapping(mapping.pid, mapping.path);
  const FileStamp stamp = processes_.stamp_of_mapping(mapping.pid, entry, mapping.time_ns);
  processes_.note_mapping(mapping.pid, mapping.mm, std::move(entry), stamp,
                          mapping.path_complete || mapping.vdso, mapping.elf_loader);
}

void CaptureAssembler::on_lost(std::string_view reason, uint64_t count) {
  auto it = lost_.find(reason);
  if (it == lost_.end()) it = lost_.emplace(std::string(reason), 0).first;
  it->second += count;
}

void CaptureAssembler::finish() {
  processes_.refresh_stale();
  unwinder_.flush(add_);
}

void CaptureAssembler::next_window(bool compact) {
  lost_.clear();
  unwinder_.reset_counts();
  aggregator_.clear(compact);
  if (!compact) return;
  // Beyond this many file identities from the side-band, start over: a
  // host that builds and runs new binaries all day must not grow forever.
  constexpr size_t kMaxStampedModules = 4096;
  processes_.compact(kMaxStampedModules);
  unwinder_.forget_images();
}

void CaptureAssembler::build(Capture& capture, JitReport* jit, bool unwound) const {
  aggregator_.build(capture, jit);
  for (const auto& [reason, count] : lost_) capture.lost[reason] += count;
  if (unwound)
    for (const auto& [reason, count] : unwinder_.truncations()) capture.truncations[reason] += count;
}

}  // namespace gsymprof
