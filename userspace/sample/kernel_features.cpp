#include "userspace/sample/kernel_features.h"

#include "userspace/base/pseudo_file.h"

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <ctime>

namespace gsymprof {
namespace {

// A short kernel text file (/proc/sys, /sys/kernel/security): its first line.
std::string first_line_of(const char* path) {
  auto text = read_pseudo_file(path, 4096);
  if (!text) return "";
  return text->substr(0, text->find('\n'));
}

bool helper_present(enum bpf_func_id helper) {
  return libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, helper, nullptr) == 1;
}

// The dummy event with the side-band records perf's own side-band asks for.
bool perf_sideband_present() {
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_DUMMY;
  attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
  attr.mmap = attr.mmap2 = attr.comm = attr.comm_exec = attr.task = 1;
  attr.sample_id_all = 1;
  attr.use_clockid = 1;
  attr.clockid = CLOCK_MONOTONIC;
  int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// Whether the kernel's sched_switch tracepoint passes prev_state (Linux
// 5.18), from its BTF: btf_trace_sched_switch is a pointer to a function of
// (void *ctx, preempt, prev, next, prev_state). Without it a program that
// reads the fifth argument fails to verify.
bool sched_switch_has_prev_state() {
  btf* vmlinux = btf__load_vmlinux_btf();
  if (!vmlinux) return false;
  bool found = false;
  const int id = btf__find_by_name_kind(vmlinux, "btf_trace_sched_switch", BTF_KIND_TYPEDEF);
  if (id > 0) {
    const btf_type* target = btf__type_by_id(vmlinux, btf__resolve_type(vmlinux, id));
    if (target && btf_is_ptr(target)) {
      const btf_type* proto = btf__type_by_id(vmlinux, target->type);
      found = proto && btf_is_func_proto(proto) && btf_vlen(proto) >= 5;
    }
  }
  btf__free(vmlinux);
  return found;
}

}  // namespace

bool KernelFeatures::has(const char* key) const { return feature(key).present; }

const KernelFeature& KernelFeatures::feature(const char* key) const {
  for (const KernelFeature& f : features)
    if (std::strcmp(f.key, key) == 0) return f;
  std::abort();  // a key that is not in the table: a programming error
}

const KernelFeature* KernelFeatures::missing_for_sampling() const {
  for (const KernelFeature& f : features)
    if (!f.present && f.without[0] == '\0') return &f;
  return nullptr;
}

KernelFeatures probe_kernel_features() {
  KernelFeatures k;
  utsname name{};
  if (uname(&name) == 0) {
    k.release = name.release;
    k.version = name.version;
  }
  const bool btf = ::access("/sys/kernel/btf/vmlinux", R_OK) == 0;
  // The probes load tiny programs: quiet libbpf's complaints meanwhile.
  libbpf_print_fn_t previous = libbpf_set_print(nullptr);
  k.features = {
      {"btf", "kernel BTF (/sys/kernel/btf/vmlinux)", "5.5", "", btf},
      {"ringbuf", "BPF ring buffer", "5.8", "", libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, nullptr) == 1},
      {"task_btf", "bpf_get_current_task_btf", "5.11", "", helper_present(BPF_FUNC_get_current_task_btf)},
      {"task_pt_regs", "bpf_task_pt_regs", "5.15",
       "--call-graph dwarf (the stack copy) falls back to frame pointers: stacks through code "
       "built without them are cut short",
       helper_present(BPF_FUNC_task_pt_regs)},
      {"ringbuf_dynptr", "bpf_ringbuf_reserve_dynptr", "5.19",
       "--call-graph dwarf (the stack copy) falls back to frame pointers: stacks through code "
       "built without them are cut short",
       helper_present(BPF_FUNC_ringbuf_reserve_dynptr)},
      {"find_vma", "bpf_find_vma", "5.17",
       "stack copies of threads that are neither a main thread nor a glibc thread (Go, other "
       "runtimes) may stop at the copy size instead of the stack's top",
       helper_present(BPF_FUNC_find_vma)},
      {"bpf_loop", "bpf_loop", "5.17",
       "CPython processes show their native frames (_PyEval_EvalFrameDefault), not their Python functions",
       helper_present(BPF_FUNC_loop)},
      {"raw_tracepoint", "raw tracepoint programs", "4.17",
       "children of -p/-- CMD targets are not followed: they are sampled only once /proc shows them",
       libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_RAW_TRACEPOINT, nullptr) == 1},
      {"off_cpu", "BTF tracepoints, bpf_get_task_stack, bpf_task_pt_regs and sched_switch's prev_state", "5.18",
       "--off-cpu has nothing to sample and --wall only its CPU samples: time off the CPU is not seen",
       // libbpf cannot probe tracing programs (they need a target): BTF
       // and the helper say enough; attaching says the rest.
       btf && helper_present(BPF_FUNC_get_task_stack) && helper_present(BPF_FUNC_task_pt_regs) &&
           sched_switch_has_prev_state()},
      {"perf_sideband", "perf side-band records (MMAP2, COMM exec, FORK, EXIT)", "4.16",
       "mappings are learnt from /proc only: a process that lives less than a /proc read "
       "(~10 ms) may go unnamed, and dlopen'd code is seen late",
       perf_sideband_present()},
  };
  libbpf_set_print(previous);
  if (const char* without = std::getenv("GSYMPROF_KERNEL_WITHOUT")) {
    const std::string list = std::string(",") + without + ",";
    for (KernelFeature& f : k.features)
      if (list.find(std::string(",") + f.key + ",") != std::string::npos) f.present = false;
  }
  const std::string paranoid = first_line_of("/proc/sys/kernel/perf_event_paranoid");
  if (!paranoid.empty()) k.perf_event_paranoid = std::atoi(paranoid.c_str());
  // "none [integrity] confidentiality": the bracketed word is the mode.
  const std::string lockdown = first_line_of("/sys/kernel/security/lockdown");
  const size_t open = lockdown.find('['), close = lockdown.find(']');
  if (open != std::string::npos && close != std::string::npos && close > open)
    k.lockdown = lockdown.substr(open + 1, close - open - 1);
  return k;
}

std::string libbpf_version() {
  const char* version = libbpf_version_string();  // "v1.1"
  std::string text = version ? version : "unknown";
  if (text.starts_with('v')) text.erase(0, 1);
  return text;
}

}  // namespace gsymprof
