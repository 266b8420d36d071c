#include "userspace/perf_data/perf_data_capture.h"

#include <sys/sysmacros.h>

#include <algorithm>
#include <asm/perf_regs.h>
#include <cctype>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>

#include "gsym/file_io.h"
#include "userspace/aggregate/normalize.h"
#include "userspace/capture/capture.h"
#include "userspace/perf_data/perf_data_format.h"
#include "userspace/process/kernel_symbols.h"
#include "userspace/process/vdso_file.h"
#include "userspace/sample/counters.h"
#include "userspace/unwind/cfi_unwinder.h"
#include "userspace/unwind/stack_copy_unwind.h"

namespace gsymprof {
namespace {

// An executable mapping of a process, as its MMAP/MMAP2 record said.
struct Mapping {
  uint64_t start = 0, end = 0, pgoff = 0;
  int32_t module = -1;  // index into CaptureBuilder::modules_; -1: anonymous

  // As normalize.h's functions take it (only executable mappings are kept).
  MapEntry entry() const {
    MapEntry e;
    e.start = start, e.end = end, e.file_offset = pgoff, e.perms = "r-xp";
    return e;
  }
};

// One address space: a process from its fork or exec on.
struct AddressSpace {
  uint32_t id = 0;
  std::vector<Mapping> maps;  // sorted by start, non-overlapping

  const Mapping* find(uint64_t addr) const {
    auto it = std::upper_bound(maps.begin(), maps.end(), addr,
                               [](uint64_t a, const Mapping& m) { return a < m.start; });
    if (it == maps.begin()) return nullptr;
    --it;
    return addr < it->end ? &*it : nullptr;
  }

  // A new mapping replaces the parts of older ones it overlaps (the kernel's
  // MAP_FIXED semantics: ld.so maps a library's segments over its reservation).
  void add(const Mapping& fresh) {
    std::vector<Mapping> out;
    out.reserve(maps.size() + 2);
    for (const Mapping& m : maps) {
      if (m.end <= fresh.start || fresh.end <= m.start) {
        out.push_back(m);
        continue;
      }
      if (m.start < fresh.start) out.push_back({m.start, fresh.start, m.pgoff, m.module});
      if (fresh.end < m.end)
        out.push_back({fresh.end, m.end, m.pgoff + (fresh.end - m.start), m.module});
    }
    out.push_back(fresh);
    std::sort(out.begin(), out.end(),
              [](const Mapping& a, const Mapping& b) { return a.start < b.start; });
    maps = std::move(out);
  }
};

struct ModuleState {
  PerfModuleFile file;
  bool loaded = false;
  ModuleIdentity identity;  // valid when loaded and error is empty
  std::string error;
};

struct StackKey {
  uint32_t pid = 0, tid = 0;
  std::string comm;
  bool truncated = false;
  std::vector<CaptureFrame> frames;
  auto operator<=>(const StackKey&) const = default;
};

bool is_context_marker(uint64_t entry) { return entry >= static_cast<uint64_t>(PERF_CONTEXT_MAX); }

class CaptureBuilder {
 public:
  CaptureBuilder(const PerfDataFile& file, const PerfCaptureOptions& options)
      : file_(file), options_(options) {}

  gsym::Expected<Capture> run();

 private:
  void on_mmap(const PerfRecord::Mmap& mmap);
  void on_comm(const PerfRecord::Comm& comm);
  void on_fork(const PerfRecord::Task& task);
  void on_exit(const PerfRecord::Task& task);
  void on_sample(const PerfRecord& record);
  // Fills kernel_ips_ and ips_ with the kernel and user IPs of a sample,
  // leaf first; returns the Capture::lost key that counts it instead when it
  // has neither.
  const char* sample_ips(const PerfRecord& record, const AddressSpace& space, bool* truncated);

  AddressSpace& space_of(uint32_t pid);
  std::unique_ptr<AddressSpace> new_space();
  int32_t module_index(const PerfRecord::Mmap& mmap);
  const ModuleState& module(int32_t index);
  CaptureFrame normalize(uint32_t pid, const AddressSpace& space, uint64_t ip, size_t index);
  int32_t capture_module(uint32_t pid, const AddressSpace& space, const Mapping& map,
                         uint64_t bias);
  const UnwindModule* unwind_module(const AddressSpace& space, uint64_t addr);
  std::string comm_of(uint32_t pid, uint32_t tid) const;

  const PerfDataFile& file_;
  const PerfCaptureOptions& options_;
  size_t sampling_attr_ = 0;
  Capture capture_;

  std::unordered_map<uint32_t, std::unique_ptr<AddressSpace>> spaces_;  // by pid
  uint32_t next_space_id_ = 0;
  std::unordered_map<uint32_t, std::string> comms_;  // by tid
  std::map<std::string, BuildId> header_build_ids_;  // host files; ambiguous ones dropped
  std::map<std::tuple<std::string, BuildId, uint32_t, uint32_t, uint64_t>, int32_t> module_ids_;
  std::vector<ModuleState> modules_;
  // (address space, module, load bias) -> index into capture_.modules
  std::map<std::tuple<uint32_t, int32_t, uint64_t>, int32_t> capture_modules_;
  std::map<uint32_t, size_t> processes_;  // pid -> index into capture_.processes
  std::map<StackKey, uint64_t> stacks_;

  CfiUnwinder unwinder_;
  UnwindResult unwound_;
  std::map<std::pair<int32_t, uint64_t>, UnwindModule> unwind_modules_;
  std::vector<uint64_t> ips_, kernel_ips_;
  bool have_sample_time_ = false;
  uint64_t first_time_ = 0, last_time_ = 0;
};

std::unique_ptr<AddressSpace> CaptureBuilder::new_space() {
  auto space = std::make_unique<AddressSpace>();
  space->id = next_space_id_++;
  return space;
}

AddressSpace& CaptureBuilder::space_of(uint32_t pid) {
  auto& slot = spaces_[pid];
  if (!slot) slot = new_space();
  return *slot;
}

int32_t CaptureBuilder::module_index(const PerfRecord::Mmap& mmap) {
  PerfModuleFile file;
  file.path = std::string(mmap.filename);
  file.build_id = mmap.build_id;
  if (file.build_id.empty()) {
    auto it = header_build_ids_.find(file.path);
    if (it != header_build_ids_.end()) file.build_id = it->second;
  }
  file.has_inode = mmap.has_inode;
  file.maj = mmap.maj, file.min = mmap.min, file.ino = mmap.ino;
  auto key = std::make_tuple(file.path, file.build_id, file.maj, file.min, file.ino);
  auto [it, inserted] = module_ids_.try_emplace(key, static_cast<int32_t>(modules_.size()));
  if (inserted) modules_.push_back({std::move(file), false, {}, {}});
  return it->second;
}

const ModuleState& CaptureBuilder::module(int32_t index) {
  ModuleState& m = modules_[static_cast<size_t>(index)];
  if (!m.loaded) {
    m.loaded = true;
    auto identity =
        options_.load_module ? options_.load_module(m.file) : load_recorded_module(m.file);
    if (identity)
      m.identity = std::move(*identity);
    else
      m.error = identity.error().message.empty() ? "unreadable" : identity.error().message;
  }
  return m;
}

void CaptureBuilder::on_mmap(const PerfRecord::Mmap& mmap) {
  // Only code is sampled; data mappings (perf record --data) would hide
  // the code mapped over them later.
  if (!mmap.executable || mmap.len == 0 || mmap.addr + mmap.len < mmap.addr) return;
  if (mmap.pid == UINT32_MAX) return;  // the kernel's own maps
  const bool file_backed = !mmap.filename.empty() && mmap.filename[0] == '/';
  const bool vdso = mmap.filename == kVdsoPath;
  const int32_t module = file_backed || vdso ? module_index(mmap) : -1;
  space_of(mmap.pid).add({mmap.addr, mmap.addr + mmap.len, mmap.pgoff, module});
}

void CaptureBuilder::on_comm(const PerfRecord::Comm& comm) {
  comms_[comm.tid] = std::string(comm.comm);
  // exec: the old mappings are gone; the new program's MMAPs follow.
  if (comm.exec && comm.pid == comm.tid) spaces_[comm.pid] = new_space();
}

void CaptureBuilder::on_fork(const PerfRecord::Task& task) {
  if (auto it = comms_.find(task.ptid); it != comms_.end()) comms_[task.tid] = it->second;
  if (task.pid == task.ppid) return;  // a new thread shares its process's space
  auto child = new_space();
  if (auto parent = spaces_.find(task.ppid); parent != spaces_.end() && parent->second)
    child->maps = parent->second->maps;
  spaces_[task.pid] = std::move(child);
}

void CaptureBuilder::on_exit(const PerfRecord::Task& task) {
  if (task.pid == task.tid) spaces_.erase(task.pid);
}

std::string CaptureBuilder::comm_of(uint32_t pid, uint32_t tid) const {
  if (auto it = comms_.find(tid); it != comms_.end()) return it->second;
  if (auto it = comms_.find(pid); it != comms_.end()) return it->second;
  return ":" + std::to_string(pid);  // as perf names a thread it never saw
}

int32_t CaptureBuilder::capture_module(uint32_t pid, const AddressSpace& space, const Mapping& map,
                                       uint64_t bias) {
  auto [it, inserted] = capture_modules_.try_emplace({space.id, map.module, bias}, 0);
  if (inserted) {
    const ModuleState& m = modules_[static_cast<size_t>(map.module)];
    CaptureModule cm;
    cm.path = m.file.path;
    cm.load_bias = bias;
    if (m.error.empty()) {
      cm.build_id = m.identity.build_id;
    } else {
      cm.error = m.error;
    }
    it->second = static_cast<int32_t>(capture_.modules.size());
    capture_.modules.push_back(std::move(cm));
  }
  CaptureModule& cm = capture_.modules[static_cast<size_t>(it->second)];
  const ModuleMapping mapping{map.start, map.end, map.pgoff, "r-xp"};
  if (std::none_of(cm.mappings.begin(), cm.mappings.end(), [&](const ModuleMapping& m) {
        return m.start == mapping.start && m.end == mapping.end &&
               m.file_offset == mapping.file_offset;
      }))
    cm.mappings.push_back(mapping);
  auto& process_modules = capture_.processes[processes_.at(pid)].modules;
  const uint32_t index = static_cast<uint32_t>(it->second);
  if (std::find(process_modules.begin(), process_modules.end(), index) == process_modules.end())
    process_modules.push_back(index);
  return it->second;
}

CaptureFrame CaptureBuilder::normalize(uint32_t pid, const AddressSpace& space, uint64_t ip,
                                       size_t index) {
  CaptureFrame frame;
  frame.address = ip;  // runtime_addr until resolved
  const uint64_t addr = lookup_address(ip, index);
  const Mapping* map = space.find(addr);
  if (!map) {
    frame.reason = UnresolvedReason::NoMapping;
    return frame;
  }
  if (map->module < 0) {
    frame.reason = UnresolvedReason::AnonymousMapping;
    return frame;
  }
  const ModuleState& m = module(map->module);
  if (!m.error.empty()) {
    // No segments: any constant bias round-trips the runtime address, which
    // is all a module+offset frame needs (as for live unreadable modules).
    const uint64_t bias = map->start - map->pgoff;
    frame.module = capture_module(pid, space, *map, bias);
    frame.address = addr - bias;
    return frame;
  }
  const uint64_t file_offset = addr - map->start + map->pgoff;
  const MapEntry entry = map->entry();
  auto unslid = unslid_address(m.identity.segments, file_offset, /*prefer_executable=*/true);
  auto bias = load_bias(m.identity.segments, entry);
  if (!unslid || !bias) {
    frame.reason = UnresolvedReason::NoSegment;
    return frame;
  }
  frame.module = capture_module(pid, space, *map, *bias);
  frame.address = *unslid;
  return frame;
}

const UnwindModule* CaptureBuilder::unwind_module(const AddressSpace& space, uint64_t addr) {
  const Mapping* map = space.find(addr);
  if (!map || map->module < 0) return nullptr;
  const ModuleState& m = module(map->module);
  if (!m.error.empty()) return nullptr;
  const MapEntry entry = map->entry();
  auto bias = load_bias(m.identity.segments, entry);
  if (!bias) return nullptr;
  auto key = std::make_pair(map->module, *bias);
  auto it = unwind_modules_.find(key);
  if (it == unwind_modules_.end()) {
    const std::string& path = m.identity.local_file.empty() ? m.file.path : m.identity.local_file;
    it = unwind_modules_
             .emplace(key, UnwindModule{path, m.identity.build_id, *bias, m.identity.file})
             .first;
  }
  return &it->second;
}

const char* CaptureBuilder::sample_ips(const PerfRecord& record, const AddressSpace& space,
                                       bool* truncated) {
  const PerfRecord::Sample& s = record.sample;
  const uint64_t sample_type = file_.attrs()[record.attr].attr.sample_type;
  const char* const no_user_stack = counter_info(PROFILE_COUNTER_NO_USER_STACK).name;
  ips_.clear();
  kernel_ips_.clear();
  // A callchain: [PERF_CONTEXT_KERNEL, kernel IPs..., PERF_CONTEXT_USER, user IPs...].
  if (s.has_callchain) {
    uint64_t context = 0;
    for (size_t i = 0; i < s.callchain_size(); ++i) {
      const uint64_t entry = s.callchain_entry(i);
      if (is_context_marker(entry))
        context = entry;
      else if (context == PERF_CONTEXT_USER)
        ips_.push_back(entry);
      else if (context == PERF_CONTEXT_KERNEL)
        kernel_ips_.push_back(entry);
    }
  } else if (s.has_ip) {
    const uint16_t mode = record.misc & PERF_RECORD_MISC_CPUMODE_MASK;
    if (mode == PERF_RECORD_MISC_USER)
      ips_.push_back(s.ip);
    else if (mode == PERF_RECORD_MISC_KERNEL)
      kernel_ips_.push_back(s.ip);
  }
  // A kernel thread's sample (or one whose user part is gone) keeps its
  // kernel frames, as live profiles keep them.
  const char* const none = kernel_ips_.empty() ? no_user_stack : nullptr;
  if (!(sample_type & PERF_SAMPLE_REGS_USER) || !(sample_type & PERF_SAMPLE_STACK_USER))
    return ips_.empty() ? none : nullptr;

  // --call-graph dwarf: the user stack is unwound from the registers and the
  // stack copy (the callchain, if any, is the kernel's part only).
  ips_.clear();
  if (s.regs_abi == 0) return none;  // no user context (kernel thread)
  StackView view;
  if (s.regs_abi != PERF_SAMPLE_REGS_ABI_64 || !s.user_register(PERF_REG_X86_IP, &view.regs.ip) ||
      !s.user_register(PERF_REG_X86_SP, &view.regs.sp) ||
      !s.user_register(PERF_REG_X86_BP, &view.regs.bp))
    return kLostNoUserRegisters;
  view.stack_start = view.regs.sp;
  view.stack = s.stack;
  unwinder_.unwind(
      view, [&](uint64_t addr) { return unwind_module(space, addr); }, unwound_);
  ips_ = unwound_.ips;
  *truncated = unwound_.truncated();
  if (*truncated) ++capture_.lost[unwind_stop_loss_key(unwound_.stop)];
  return ips_.empty() ? none : nullptr;
}

void CaptureBuilder::on_sample(const PerfRecord& record) {
  if (record.attr != sampling_attr_) return;  // another event's samples
  const uint32_t pid = record.id.pid, tid = record.id.tid;
  if (record.id.has_time) {
    if (!have_sample_time_) first_time_ = record.id.time;
    have_sample_time_ = true;
    last_time_ = std::max(last_time_, record.id.time);
  }
  const AddressSpace& space = space_of(pid);
  StackKey key;
  key.pid = pid;
  key.tid = tid;
  key.comm = comm_of(pid, tid);
  if (const char* loss = sample_ips(record, space, &key.truncated)) {
    ++capture_.lost[loss];
    return;
  }
  auto [pit, new_process] = processes_.try_emplace(pid, capture_.processes.size());
  if (new_process) capture_.processes.push_back({pid, comm_of(pid, pid), {}});
  key.frames.reserve(kernel_ips_.size() + ips_.size());
  // Kernel frames leafward of the user frames, as live: the leaf exact,
  // return addresses minus one; the user leaf stays exact too.
  for (size_t i = 0; i < kernel_ips_.size(); ++i) {
    CaptureFrame frame;
    frame.kernel = true;
    frame.address = lookup_address(kernel_ips_[i], i);
    key.frames.push_back(frame);
  }
  for (size_t i = 0; i < ips_.size(); ++i) key.frames.push_back(normalize(pid, space, ips_[i], i));
  ++stacks_[std::move(key)];
}

gsym::Expected<Capture> CaptureBuilder::run() {
  const auto& attrs = file_.attrs();
  auto sampling = std::find_if(attrs.begin(), attrs.end(), [&](const PerfAttr& a) {
    return !a.attr.is_dummy() && (options_.event.empty() || a.name == options_.event);
  });
  if (sampling == attrs.end() && !options_.event.empty()) {
    std::string names;
    for (const PerfAttr& a : attrs)
      if (!a.attr.is_dummy())
        names += (names.empty() ? "" : ", ") + (a.name.empty() ? std::string("(unnamed)") : a.name);
    return gsym::Error("perf.data: no event named '" + options_.event + "' (events: " +
                       (names.empty() ? std::string("none") : names) + ")");
  }
  if (sampling == attrs.end()) return gsym::Error("perf.data: no sampling event");
  sampling_attr_ = static_cast<size_t>(sampling - attrs.begin());
  const PerfEventAttr& attr = sampling->attr;
  capture_.host = file_.hostname();
  capture_.kernel_release = file_.os_release();
  if (attr.freq())
    capture_.frequency_hz =
        static_cast<uint32_t>(std::min<uint64_t>(attr.sample_period, UINT32_MAX));
  const bool dwarf =
      (attr.sample_type & PERF_SAMPLE_REGS_USER) && (attr.sample_type & PERF_SAMPLE_STACK_USER);
  capture_.call_graph = dwarf                                        ? "dwarf"
                        : (attr.sample_type & PERF_SAMPLE_CALLCHAIN) ? "fp"
                                                                     : "none";
  for (const char* key :
       {counter_info(PROFILE_COUNTER_RINGBUF_FULL).name,
        counter_info(PROFILE_COUNTER_NO_USER_STACK).name, kLostSamplesRecord})
    capture_.lost[key] = 0;
  if (dwarf) capture_.lost[kLostNoUserRegisters] = 0;

  // Host user-space build IDs by file name; a name listed with two build IDs
  // (the file was replaced while recording) proves nothing.
  std::map<std::string, bool> ambiguous;
  for (const PerfBuildId& entry : file_.build_ids()) {
    if (entry.kernel || entry.pid != -1 || entry.build_id.empty()) continue;
    auto [it, inserted] = header_build_ids_.try_emplace(entry.filename, entry.build_id);
    if (!inserted && it->second != entry.build_id) ambiguous[entry.filename] = true;
  }
  for (const auto& [name, _] : ambiguous) header_build_ids_.erase(name);

  for (const PerfRecordRef& ref : file_.records()) {
    auto record = file_.decode(ref);
    if (!record) return record.error();
    switch (record->type) {
      case PERF_RECORD_MMAP:
      case PERF_RECORD_MMAP2:
        on_mmap(record->mmap);
        break;
      case PERF_RECORD_COMM:
        on_comm(record->comm);
        break;
      case PERF_RECORD_FORK:
        on_fork(record->task);
        break;
      case PERF_RECORD_EXIT:
        on_exit(record->task);
        break;
      case PERF_RECORD_SAMPLE:
        on_sample(*record);
        break;
      case PERF_RECORD_LOST:
        capture_.lost[counter_info(PROFILE_COUNTER_RINGBUF_FULL).name] += record->lost;
        break;
      case PERF_RECORD_LOST_SAMPLES:
        capture_.lost[kLostSamplesRecord] += record->lost;
        break;
      default:
        break;
    }
  }
  if (have_sample_time_) capture_.duration_ns = last_time_ - first_time_;
  for (auto& [key, count] : stacks_) {
    CaptureStack stack{key.pid, key.comm, key.frames, key.truncated, count, key.tid};
    capture_.samples += count;
    capture_.stacks.push_back(std::move(stack));
  }
  stacks_.clear();
  BuildId recorded_kernel;
  for (const PerfBuildId& entry : file_.build_ids())
    if (entry.kernel && entry.filename == kKernelModulePath) recorded_kernel = entry.build_id;
  if (has_kernel_frames(capture_)) {
    if (options_.name_kernel_frames)
      options_.name_kernel_frames(capture_, recorded_kernel);
    else
      name_kernel_frames_from_running_kernel(capture_, recorded_kernel);
  }
  canonicalize(capture_);
  return std::move(capture_);
}

}  // namespace

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
    return gsym::is_missing_file(file.error()) ? gsym::Error("file missing") : file.error();
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
  if (vdso) identity->local_file = path;
  return identity;
}

gsym::Expected<Capture> capture_from_perf_data(const PerfDataFile& file,
                                               const PerfCaptureOptions& options) {
  return CaptureBuilder(file, options).run();
}

}  // namespace gsymprof
