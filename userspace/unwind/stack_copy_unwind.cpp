#include "userspace/unwind/stack_copy_unwind.h"

#include "userspace/process/vdso_file.h"

#include <cctype>
#include <cstdio>

#include "userspace/process/normalize.h"

namespace gsymprof {

StackCopyUnwinder::StackCopyUnwinder(ProcessTable& processes, UnwindOptions options, PerfMaps* jit_code)
    : processes_(processes), unwinder_(options), jit_code_(jit_code) {}

const UnwindModule* StackCopyUnwinder::find_module(uint32_t image_id, uint64_t addr,
                                                   std::pair<uint64_t, uint64_t>& map_range) {
  int32_t map = processes_.image(image_id).find_map(addr);
  if (map < 0) {
    // Perhaps mapped since the maps were read (dlopen): read them again
    // (rate-limited by the process table).
    processes_.cover(image_id, std::span<const uint64_t>(&addr, 1));
    map = processes_.image(image_id).find_map(addr);
    if (map < 0) return nullptr;
  }
  const ProcessImage& image = processes_.image(image_id);
  const int32_t module_index = image.map_module[map];
  if (module_index < 0) return image.maps[map].executable() ? jit_module(image_id, addr) : nullptr;
  map_range = {image.maps[map].start, image.maps[map].end};
  auto key = std::pair(image_id, module_index);
  if (auto it = modules_.find(key); it != modules_.end()) return &it->second;

  const ProcessModule& module = image.modules[module_index];
  if (!module.error.empty()) return nullptr;
  const MapEntry& entry = image.maps[map];
  std::optional<uint64_t> bias = load_bias(module.identity.segments, entry);
  if (!bias) return nullptr;
  // The descriptor kept when the module was identified (module_identity.h)
  // is the very file mapped, also after the process exited; else map_files
  // reaches it while the process lives (also when deleted or in another
  // mount namespace). The CFI cache is keyed by identity, so this path is
  // opened once per build, not once per process.
  const std::string file = module.path == kVdsoPath               ? openable_module_path(module.path)
                           : !module.identity.local_file.empty() ? module.identity.local_file
                                                                  : map_files_path("/proc", image.pid, entry);
  return &modules_.emplace(key, UnwindModule{file, module.identity.build_id, *bias, module.identity.file, {}})
              .first->second;
}

const UnwindModule* StackCopyUnwinder::jit_module(uint32_t image_id, uint64_t addr) {
  if (!jit_code_) return nullptr;
  const uint32_t pid = processes_.image(image_id).pid;
  uint64_t moved_by = 0;
  const JitCode* code = jit_code_->find_code(pid, addr, moved_by);
  // V8 writes an .eh_frame_hdr alone for code it has no CFI for: no CFI.
  if (!code || code->unwind.size() <= code->eh_frame_hdr_size) return nullptr;
  // Code loaded again at the same place differs in its index (or size).
  const JitKey key{pid, image_id, code->start, code->end, code->code_index, moved_by, code->unwind.size()};
  if (auto it = jit_modules_.find(key); it != jit_modules_.end()) return &it->second;
  UnwindModule module;
  module.load_bias = moved_by;  // the CFI describes the code where it was loaded
  module.jit = JitUnwindCode{code->start, code->end, code->unwind, code->eh_frame_hdr_size, next_jit_serial_++};
  jit_module_bytes_ += code->unwind.size();
  return &jit_modules_.emplace(key, std::move(module)).first->second;
}

void StackCopyUnwinder::forget_jit_code(uint32_t pid) {
  JitKey first;
  first.pid = pid;
  for (auto it = jit_modules_.lower_bound(first); it != jit_modules_.end() && it->first.pid == pid;) {
    unwinder_.forget_module(it->second);
    jit_module_bytes_ -= it->second.jit->unwind.size();
    it = jit_modules_.erase(it);
  }
}

void StackCopyUnwinder::forget_jit_modules_over_bounds() {
  if (jit_modules_.size() <= kMaxJitModules && jit_module_bytes_ <= kMaxJitModuleBytes) return;
  for (const auto& [key, module] : jit_modules_) unwinder_.forget_module(module);
  jit_modules_.clear();
  jit_module_bytes_ = 0;
}

std::span<const uint8_t> StackCopyUnwinder::read_code(uint32_t image_id, uint64_t addr) {
  const auto key = std::pair(image_id, addr);
  auto it = code_.find(key);
  if (it == code_.end()) {
    if (code_.size() >= kMaxCodeEntries) code_.clear();
    Code code;
    code.size = static_cast<uint8_t>(processes_.read_code(image_id, addr, code.bytes));
    it = code_.emplace(key, code).first;
  }
  return std::span<const uint8_t>(it->second.bytes.data(), it->second.size);
}

bool StackCopyUnwinder::walk(uint32_t image_id, const StackView& stack, bool copy_short) {
  forget_jit_modules_over_bounds();  // between walks: a walk holds pointers to modules
  // Most frames lie in a module the frame before was in, and most samples'
  // first frame in the one the last sample's walk ended in: the last file
  // mapping found answers first (the maps' search and the module tree took
  // a tenth of the reader's time per sample at 9999 Hz). Kept per image (a
  // pinned image's mappings only grow); a re-read of the maps (find_module
  // may do one) forgets it.
  auto module_at = [&](uint64_t addr) {
    if (last_.module && last_.image == image_id && addr >= last_.range.first && addr < last_.range.second &&
        last_.map_reads == processes_.map_reads())
      return last_.module;
    std::pair<uint64_t, uint64_t> range{0, 0};
    const UnwindModule* module = find_module(image_id, addr, range);
    if (module && range.first < range.second) last_ = {image_id, range, module, processes_.map_reads()};
    return module;
  };
  unwinder_.unwind(stack, module_at, result_, [&](uint64_t addr) { return read_code(image_id, addr); });
  // The kernel stopped copying at a page it could not read (not at the
  // cap): a bigger copy would not help.
  if (copy_short && result_.stop == UnwindStop::StackCopyTooSmall)
    result_.stop = UnwindStop::UnreadableMemory;
  if (result_.stop != UnwindStop::NoModule && result_.frame_pointer_steps == 0) return false;
  // Any address in no mapping (the frame-pointer fallback may have stepped
  // over one) is worth another try once the maps were read again.
  const ProcessImage& image = processes_.image(image_id);
  for (size_t i = 0; i < result_.ips.size(); ++i)
    if (image.find_map(result_.exact[i] ? result_.ips[i] : result_.ips[i] - 1) < 0) return true;
  return false;
}

void StackCopyUnwinder::emit_result(const Origin& origin, const SampleCallback& emit) {
  ++stacks_;
  ++stops_[static_cast<size_t>(result_.stop)];
  frame_pointer_steps_ += result_.frame_pointer_steps;
  if (result_.frame_pointer_steps) ++frame_pointer_stacks_;
  epilogue_steps_ += result_.epilogue_steps;
  jit_cfi_steps_ += result_.jit_cfi_steps;
  RawSample sample;
  sample.pid = origin.pid;
  sample.tid = origin.tid;
  sample.comm = origin.comm;
  // In RawSample's form: past frame 0, an exact address (a signal frame)
  // is given as address + 1, so the return-address rule gives it back.
  ips_.assign(result_.ips.begin(), result_.ips.end());
  for (size_t i = 1; i < ips_.size(); ++i)
    if (result_.exact[i]) ++ips_[i];
  sample.ips = ips_;
  sample.truncated = result_.truncated();
  sample.kernel_ips = origin.kernel_ips;
  sample.off_cpu = origin.off_cpu;
  // A held walk is emitted later: keep the image and time it was taken in.
  sample.image = origin.image;
  sample.time_ns = origin.time_ns;
  sample.python = origin.python;
  emit(sample);
}

void StackCopyUnwinder::retry_held(const SampleCallback& emit, bool final) {
  std::vector<Held> held;
  held.swap(held_);
  held_bytes_ = 0;
  for (Held& h : held) {
    ++retried_;
    StackView view{h.regs, h.stack_start, h.stack};
    if (walk(h.image, view, h.copy_short) && !final && can_hold(h.stack.size())) {
      held_bytes_ += h.stack.size();
      held_.push_back(std::move(h));  // still unmapped: wait for the next re-read
      continue;
    }
    emit_result({h.image, h.pid, h.tid, h.comm, h.kernel_ips, h.off_cpu, h.time_ns,
                 {h.python, h.python_truncated, h.python_unreadable}},
                emit);
  }
  maps_reads_at_hold_ = processes_.map_reads();
}

void StackCopyUnwinder::unwind(const RawStackCopy& copy, const SampleCallback& emit) {
  // The maps were read again since walks were held: they may finish now.
  if (!held_.empty() && processes_.map_reads() != maps_reads_at_hold_) retry_held(emit, false);

  const uint32_t image_id = processes_.current_image(copy.pid);
  if (walk(image_id, copy.stack, copy.copy_short) && can_hold(copy.stack.stack.size())) {
    if (held_.empty()) maps_reads_at_hold_ = processes_.map_reads();
    held_bytes_ += copy.stack.stack.size();
    held_.push_back({image_id, copy.pid, copy.tid, std::string(copy.comm), copy.stack.regs,
                     copy.stack.stack_start,
                     std::vector<uint8_t>(copy.stack.stack.begin(), copy.stack.stack.end()),
                     std::vector<uint64_t>(copy.kernel_ips.begin(), copy.kernel_ips.end()),
                     copy.copy_short, copy.off_cpu, copy.time_ns,
                     std::vector<PythonFrameRef>(copy.python.frames.begin(), copy.python.frames.end()),
                     copy.python.truncated, copy.python.unreadable});
    return;
  }
  emit_result({image_id, copy.pid, copy.tid, copy.comm, copy.kernel_ips, copy.off_cpu, copy.time_ns, copy.python},
              emit);
}

void StackCopyUnwinder::flush(const SampleCallback& emit) { retry_held(emit, true); }

void StackCopyUnwinder::reset_counts() {
  stops_ = {};
  stacks_ = retried_ = frame_pointer_steps_ = frame_pointer_stacks_ = epilogue_steps_ = jit_cfi_steps_ = 0;
}

std::string unwind_stop_loss_key(UnwindStop stop) {
  std::string name = std::string("unwind_") + to_string(stop);
  for (char& c : name)
    c = c == ' ' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

std::map<std::string, uint64_t> StackCopyUnwinder::truncations() const {
  std::map<std::string, uint64_t> out;
  for (size_t i = 0; i < stops_.size(); ++i) {
    auto stop = static_cast<UnwindStop>(i);
    if (stop == UnwindStop::Complete) continue;
    out[unwind_stop_loss_key(stop)] = stops_[i];
  }
  return out;
}

}  // namespace gsymprof
