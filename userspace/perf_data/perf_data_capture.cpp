#include "userspace/perf_data/perf_data_capture.h"

#include <sys/sysmacros.h>

#include <algorithm>
#include <asm/perf_regs.h>
#include <cctype>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>

#include "gsym/base/file_io.h"
#include "userspace/capture/capture.h"
#include "userspace/perf_data/perf_data_format.h"
#include "userspace/process/kernel_symbols.h"
#include "userspace/process/vdso_file.h"
#include "userspace/events/counters.h"

namespace gsymprof {
namespace {

bool is_context_marker(uint64_t entry) { return entry >= static_cast<uint64_t>(PERF_CONTEXT_MAX); }

// MMAP2 with a build ID (or an old MMAP) records no device and inode, but the
// process model keys a process's modules by them: such a mapping gets this
// device and an inode hashed from its path and build ID, which the recorded
// loader knows not to check against the file.
constexpr uint32_t kNoDeviceRecorded = UINT32_MAX;

uint64_t synthetic_inode(std::string_view path, const BuildId& build_id) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  auto mix = [&](uint8_t byte) { h = (h ^ byte) * 1099511628211ull; };
  for (char c : path) mix(static_cast<uint8_t>(c));
  mix(0);
  for (uint8_t b : build_id.bytes()) mix(b);
  return h | 1;  // never 0 (anonymous)
}

}  // namespace

ProcSource recorded_proc_source(const PerfCaptureOptions& options) {
  using Key = std::tuple<std::string, BuildId, uint32_t, uint32_t, uint64_t>;
  auto loaded = std::make_shared<std::map<Key, gsym::Expected<ModuleIdentity>>>();
  ProcSource source;
  source.read_maps = [](uint32_t) -> gsym::Expected<std::string> {
    return gsym::Error("a recording: its processes are known from its records only");
  };
  source.load_module = [loaded, load = options.load_module](
                           uint32_t, const MapEntry& entry) -> gsym::Expected<ModuleIdentity> {
    PerfModuleFile file;
    file.path = entry.path;
    file.build_id = entry.build_id;
    file.has_inode = entry.inode != 0 && entry.dev_major != kNoDeviceRecorded;
    file.maj = entry.dev_major, file.min = entry.dev_minor, file.ino = entry.inode;
    Key key{file.path, file.build_id, file.maj, file.min, file.ino};
    auto it = loaded->find(key);
    if (it == loaded->end()) {
      auto identity = load ? load(file) : load_recorded_module(file);
      it = loaded->emplace(std::move(key), std::move(identity)).first;
    }
    return it->second;
  };
  return source;
}

PerfDataSource::PerfDataSource(const PerfDataFile& file, size_t sampling_attr, EventSink& sink)
    : file_(file), sampling_attr_(sampling_attr), sink_(sink) {
  // Host user-space build IDs by file name; a name listed with two build
  // IDs (the file was replaced while recording) proves nothing.
  std::map<std::string, bool> ambiguous;
  for (const PerfBuildId& entry : file_.build_ids()) {
    if (entry.kernel || entry.pid != -1 || entry.build_id.empty()) continue;
    auto [it, inserted] = header_build_ids_.try_emplace(entry.filename, entry.build_id);
    if (!inserted && it->second != entry.build_id) ambiguous[entry.filename] = true;
  }
  for (const auto& [name, _] : ambiguous) header_build_ids_.erase(name);
}

void PerfDataSource::on_mmap(const PerfRecord& record) {
  const PerfRecord::Mmap& mmap = record.mmap;
  // Data mappings too (perf record --data): a frame in one is classified
  // not-executable, as a live profile's /proc maps classify it.
  if (mmap.len == 0 || mmap.addr + mmap.len < mmap.addr) return;
  if (mmap.pid == UINT32_MAX) return;  // the kernel's own maps
  RawMapping m;
  m.pid = mmap.pid;
  m.start = mmap.addr;
  m.end = mmap.addr + mmap.len;
  m.time_ns = record.id.time;
  m.readable = record.type == PERF_RECORD_MMAP || (mmap.prot & 1);
  m.executable = mmap.executable;
  m.vdso = mmap.filename == kVdsoPath;
  const bool file_backed = perf_mapping_names_file(mmap.filename);
  if (file_backed) {
    m.path = mmap.filename;
    m.path_complete = true;
    m.file_offset = mmap.pgoff;
  }
  if (file_backed || m.vdso) {
    m.build_id = mmap.build_id;
    if (m.build_id.empty())
      if (auto it = header_build_ids_.find(std::string(mmap.filename)); it != header_build_ids_.end())
        m.build_id = it->second;
  }
  if (file_backed && mmap.has_inode && mmap.ino) {
    m.inode = mmap.ino;
    m.dev_major = mmap.maj, m.dev_minor = mmap.min;
  } else if (file_backed) {
    m.inode = synthetic_inode(mmap.filename, m.build_id);
    m.dev_major = kNoDeviceRecorded;
  }
  sink_.on_mapping(m);
}

void PerfDataSource::on_comm(const PerfRecord::Comm& comm) {
  comms_[comm.tid] = std::string(comm.comm);
  // exec: the old mappings are gone; the new program's MMAPs follow.
  if (comm.exec && comm.pid == comm.tid) sink_.on_exec(comm.pid, 0);
}

void PerfDataSource::on_fork(const PerfRecord::Task& task) {
  if (auto it = comms_.find(task.ptid); it != comms_.end()) comms_[task.tid] = it->second;
  if (task.pid == task.ppid) return;  // a new thread shares its process's image
  sink_.on_fork(task.ppid, task.pid, 0);
}

std::string PerfDataSource::comm_of(uint32_t pid, uint32_t tid) const {
  if (auto it = comms_.find(tid); it != comms_.end()) return it->second;
  if (auto it = comms_.find(pid); it != comms_.end()) return it->second;
  return ":" + std::to_string(pid);  // as perf names a thread it never saw
}

bool PerfDataSource::stack_copy(const PerfRecord::Sample& s, RawStackCopy& copy) {
  StackView& view = copy.stack;
  if (s.regs_abi != PERF_SAMPLE_REGS_ABI_64 || !s.user_register(PERF_REG_X86_IP, &view.regs.ip) ||
      !s.user_register(PERF_REG_X86_SP, &view.regs.sp) ||
      !s.user_register(PERF_REG_X86_BP, &view.regs.bp))
    return false;
  view.stack_start = view.regs.sp;
  view.stack = s.stack;
  return true;
}

void PerfDataSource::on_sample(const PerfRecord& record) {
  if (record.attr != sampling_attr_) return;  // another event's samples
  if (record.id.has_time) {
    if (!have_time_) first_time_ = record.id.time;
    have_time_ = true;
    last_time_ = std::max(last_time_, record.id.time);
  }
  const PerfRecord::Sample& s = record.sample;
  const uint64_t sample_type = file_.attrs()[record.attr].attr.sample_type;
  ips_.clear();
  kernel_ips_.clear();
  // A callchain: [PERF_CONTEXT_KERNEL, kernel IPs..., PERF_CONTEXT_USER, user IPs...].
  if (s.has_callchain) {
    uint64_t context = 0;
    for (size_t i = 0; i < s.callchain_size(); ++i) {
      const uint64_t entry = s.callchain_entry(i);
      if (is_context_marker(entry)) context = entry;
      else if (context == PERF_CONTEXT_USER) ips_.push_back(entry);
      else if (context == PERF_CONTEXT_KERNEL) kernel_ips_.push_back(entry);
    }
  } else if (s.has_ip) {
    const uint16_t mode = record.misc & PERF_RECORD_MISC_CPUMODE_MASK;
    if (mode == PERF_RECORD_MISC_USER) ips_.push_back(s.ip);
    else if (mode == PERF_RECORD_MISC_KERNEL) kernel_ips_.push_back(s.ip);
  }
  const std::string comm = comm_of(record.id.pid, record.id.tid);
  const bool dwarf = (sample_type & PERF_SAMPLE_REGS_USER) && (sample_type & PERF_SAMPLE_STACK_USER);
  // --call-graph dwarf: the user stack comes from the registers and the
  // stack copy (the callchain, if any, is the kernel's part only); a
  // kernel thread's sample (or one whose user part is gone) keeps its
  // kernel frames, as live profiles keep them.
  if (dwarf && s.regs_abi != 0) {
    RawStackCopy copy;
    copy.pid = record.id.pid;
    copy.tid = record.id.tid;
    copy.comm = comm;
    copy.kernel_ips = kernel_ips_;
    copy.time_ns = record.id.time;
    if (!stack_copy(s, copy)) {
      sink_.on_lost(kLostNoUserRegisters, 1);
      return;
    }
    sink_.on_stack_copy(copy);
    return;
  }
  if (dwarf) ips_.clear();
  if (ips_.empty() && kernel_ips_.empty()) {
    sink_.on_lost(counter_info(PROFILE_COUNTER_NO_USER_STACK).name, 1);
    return;
  }
  RawSample sample;
  sample.pid = record.id.pid;
  sample.tid = record.id.tid;
  sample.comm = comm;
  sample.ips = ips_;
  sample.kernel_ips = kernel_ips_;
  sample.time_ns = record.id.time;
  sink_.on_sample(sample);
}

gsym::Status PerfDataSource::run() {
  for (const PerfRecordRef& ref : file_.records()) {
    auto record = file_.decode(ref);
    if (!record) return record.error();
    switch (record->type) {
      case PERF_RECORD_MMAP:
      case PERF_RECORD_MMAP2:
        on_mmap(*record);
        break;
      case PERF_RECORD_COMM:
        on_comm(record->comm);
        break;
      case PERF_RECORD_FORK:
        on_fork(record->task);
        break;
      case PERF_RECORD_EXIT:
        if (record->task.pid == record->task.tid) sink_.on_exit(record->task.pid);
        break;
      case PERF_RECORD_SAMPLE:
        on_sample(*record);
        break;
      case PERF_RECORD_LOST:
        sink_.on_lost(counter_info(PROFILE_COUNTER_RINGBUF_FULL).name, record->lost);
        break;
      case PERF_RECORD_LOST_SAMPLES:
        sink_.on_lost(kLostSamplesRecord, record->lost);
        break;
      default:
        break;
    }
  }
  return gsym::Status::success();
}

gsym::Expected<size_t> sampling_attr(const PerfDataFile& file, const std::string& event) {
  const auto& attrs = file.attrs();
  auto sampling = std::find_if(attrs.begin(), attrs.end(), [&](const PerfAttr& a) {
    return !a.attr.is_dummy() && (event.empty() || a.name == event);
  });
  if (sampling == attrs.end() && !event.empty()) {
    std::string names;
    for (const PerfAttr& a : attrs)
      if (!a.attr.is_dummy())
        names += (names.empty() ? "" : ", ") + (a.name.empty() ? std::string("(unnamed)") : a.name);
    return gsym::Error("perf.data: no event named '" + event + "' (events: " +
                       (names.empty() ? std::string("none") : names) + ")");
  }
  if (sampling == attrs.end()) return gsym::Error("perf.data: no sampling event");
  return static_cast<size_t>(sampling - attrs.begin());
}

void name_kernel_frames_from_running_kernel(Capture& capture, const BuildId& recorded_kernel) {
  if (recorded_kernel.empty()) {
    attach_kernel_symbols(capture, nullptr, recorded_kernel,
                          "perf recorded no build ID for [kernel.kallsyms]: nothing proves "
                          "this machine's kernel symbols are the recording kernel's");
    return;
  }
  const BuildId& running = running_kernel_build_id();
  if (running.empty() || running != recorded_kernel) {
    attach_kernel_symbols(capture, nullptr, recorded_kernel,
                          "recorded on kernel " + recorded_kernel.hex() + ", this machine runs " +
                              (running.empty() ? std::string("a kernel without a readable build ID")
                                               : running.hex()) +
                              ": kernel frames keep their addresses");
    return;
  }
  attach_running_kernel_symbols(capture);
}

gsym::Expected<ModuleIdentity> load_recorded_module(const PerfModuleFile& module) {
  const bool vdso = module.path == kVdsoPath;
  const std::string path = vdso ? openable_module_path(module.path) : module.path;
  if (path.empty()) return gsym::Error("no local vDSO image");
  if (vdso && module.build_id.empty()) return gsym::Error("no build ID recorded for the vDSO");
  auto file = gsym::open_regular_file(path);
  if (!file)
    return file.error().code == gsym::ErrorCode::NotFound ? gsym::Error("file missing") : file.error();
  auto identity = read_module_identity_fd(file->fd.get());
  if (!identity) return identity.error();
  if (!module.build_id.empty()) {
    if (identity->build_id != module.build_id)
      return gsym::Error(
          "build-ID mismatch (recorded " + module.build_id.hex() + ", file has " +
          (identity->build_id.empty() ? std::string("none") : identity->build_id.hex()) + ")");
  } else if (!module.has_inode) {
    return gsym::Error("neither build ID nor inode recorded to check the file against");
  } else if (identity->file.inode != module.ino || major(identity->file.dev) != module.maj ||
             minor(identity->file.dev) != module.min) {
    return gsym::Error("file changed since recording (device/inode differ)");
  }
  // The very file checked, kept open: unwinding reads its CFI later.
  identity->local_file = vdso ? path : keep_module_file_open(file->fd.get(), identity->file);
  if (identity->local_file.empty()) identity->local_file = path;
  return identity;
}

}  // namespace gsymprof
