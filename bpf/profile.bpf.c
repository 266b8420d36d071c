// SPDX-License-Identifier: GPL-2.0
/* bpf/profile.bpf.c - the sampler: one cpu-clock perf event per CPU runs
 * sample_stack, which sends tgid, tid, comm and the user IPs of target tasks
 * to user space through a ring buffer. Every sample that cannot be sent is
 * counted by reason; nothing is dropped silently. No stack map is used, so
 * there are no hash collisions. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "bpf/profile.h"

char LICENSE[] SEC("license") = "GPL";

/* Knobs, set through rodata between open and load. */
const volatile __u32 sample_mode = PROFILE_MODE_FRAME_POINTER;
const volatile bool filter_by_tgid = false;
const volatile bool follow_forks = false;
/* Kernel frames with every sample (off: --user-callchains). */
const volatile bool kernel_stacks = true;
/* Stack-copy mode: bytes of user stack per record (multiple of 8, at most
 * PROFILE_MAX_STACK_COPY). A frozen rodata constant, so the verifier knows
 * the record size. */
const volatile __u32 stack_copy_bytes = 8192;
/* Wake the reader only once this many bytes wait in the ring buffer (user
 * space sets a quarter of its size): a wakeup per sample costs the sampled
 * CPU an extra interrupt and the reader a context switch, and user space
 * reads the buffer every 10 ms anyway (Sampler::poll). */
const volatile __u64 wakeup_bytes = 1 << 20;

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 8 << 20); /* resized by user space before load */
} events SEC(".maps");

/* tgid -> 1: the processes to sample when filter_by_tgid is set. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32);
  __type(value, __u8);
} target_tgids SEC(".maps");

/* tgids already sent: the first sample of a process wakes the reader at once,
 * so it reads /proc/PID/maps while the process still exists. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32);
  __type(value, __u8);
} seen_tgids SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, PROFILE_COUNTER_COUNT);
  __type(key, __u32);
  __type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 counter) {
  __u64* value = bpf_map_lookup_elem(&counters, &counter);
  if (value) *value += 1; /* per-CPU slot: no other writer */
}

/* Ring-buffer submit flags for a sample of `tgid` (see wakeup_bytes). */
static __always_inline __u64 sample_wakeup(__u32 tgid) {
  if (!bpf_map_lookup_elem(&seen_tgids, &tgid)) {
    __u8 one = 1;
    bpf_map_update_elem(&seen_tgids, &tgid, &one, BPF_ANY);
    return BPF_RB_FORCE_WAKEUP;
  }
  return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP
                                                                         : BPF_RB_NO_WAKEUP;
}

static __always_inline bool is_target(__u32 tgid) {
  if (tgid == 0) return false; /* the idle task */
  if (!filter_by_tgid) return true;
  return bpf_map_lookup_elem(&target_tgids, &tgid) != NULL;
}

static __always_inline void fill_header(struct profile_event_header* header, __u32 kind,
                                        __u32 size, __u64 pid_tgid) {
  header->kind = kind;
  header->size = size;
  header->tgid = pid_tgid >> 32;
  header->tid = (__u32)pid_tgid;
  header->time_ns = bpf_ktime_get_ns();
  bpf_get_current_comm(header->comm, sizeof(header->comm));
}

/* The kernel part of the sample, leaf first, when it interrupted the kernel
 * (a sample taken in user mode has none: bpf_get_stack returns 0). */
static __always_inline __u32 read_kernel_stack(struct bpf_perf_event_data* ctx, __u64* ips,
                                               __u32* flags) {
  if (!kernel_stacks) return 0;
  const long size = PROFILE_MAX_KERNEL_FRAMES * sizeof(__u64);
  long bytes = bpf_get_stack(ctx, ips, size, 0);
  if (bytes < 0) {
    count(PROFILE_COUNTER_KERNEL_STACK_ERROR);
    return 0;
  }
  if (bytes >= size) {
    *flags |= PROFILE_KERNEL_STACK_TRUNCATED;
    count(PROFILE_COUNTER_KERNEL_TRUNCATED);
  }
  return bytes / sizeof(__u64);
}

/* Stack-copy mode: user registers plus the top of the user stack, for the
 * CFI unwinder in user space. The registers are the task's user registers
 * (bpf_task_pt_regs), also when the sample interrupted a system call. */
static __always_inline int send_stack_copy(struct bpf_perf_event_data* ctx,
                                           struct task_struct* task, __u64 pid_tgid) {
  struct pt_regs* regs = (struct pt_regs*)bpf_task_pt_regs(task);
  if (!regs) {
    count(PROFILE_COUNTER_NO_USER_STACK);
    return 0;
  }
  __u32 record_size = sizeof(struct profile_stack_copy_event) + stack_copy_bytes;
  struct profile_stack_copy_event* event = bpf_ringbuf_reserve(&events, record_size, 0);
  if (!event) {
    count(PROFILE_COUNTER_RINGBUF_FULL);
    return 0;
  }
  __u64 sp = BPF_CORE_READ(regs, sp);
  event->ip = BPF_CORE_READ(regs, ip);
  event->sp = sp;
  event->bp = BPF_CORE_READ(regs, bp);
  event->flags = 0;
  event->reserved = 0;
  event->kernel_frame_count = read_kernel_stack(ctx, event->kernel_ips, &event->flags);

  /* Main thread: nothing above the initial stack pointer (argv, environment)
   * is needed, and the stack mapping ends soon after it. */
  __u64 size = stack_copy_bytes;
  __u64 start_stack = BPF_CORE_READ(task, mm, start_stack);
  if (sp < start_stack && start_stack - sp < size) size = (start_stack - sp + 7) & ~7ULL;
  /* A read crossing the end of the mapping fails as a whole: retry shorter. */
  long err = -1;
  for (int attempt = 0; attempt < 8 && size > 0; attempt++) {
    if (size > stack_copy_bytes) size = stack_copy_bytes;
    err = bpf_probe_read_user(event->stack, size, (const void*)sp);
    if (err == 0) break;
    size = (size / 2) & ~7ULL;
    event->flags |= PROFILE_STACK_TRUNCATED;
  }
  event->stack_size = err == 0 ? size : 0;
  if (event->flags & PROFILE_STACK_TRUNCATED) count(PROFILE_COUNTER_STACK_COPY_SHORT);
  fill_header(&event->header, PROFILE_EVENT_STACK_COPY, record_size, pid_tgid);
  bpf_ringbuf_submit(event, sample_wakeup(pid_tgid >> 32));
  return 0;
}

SEC("perf_event")
int sample_stack(struct bpf_perf_event_data* ctx) {
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  if (!is_target(pid_tgid >> 32)) return 0;
  count(PROFILE_COUNTER_SAMPLES);

  struct task_struct* task = bpf_get_current_task_btf();
  /* A kernel thread has no user stack: with kernel stacks its sample is
   * kernel frames only (an fp record with no user frames, in either mode). */
  bool kernel_thread = !BPF_CORE_READ(task, mm);
  if (kernel_thread && !kernel_stacks) {
    count(PROFILE_COUNTER_NO_USER_STACK);
    return 0;
  }
  if (sample_mode == PROFILE_MODE_STACK_COPY && !kernel_thread)
    return send_stack_copy(ctx, task, pid_tgid);

  struct profile_fp_stack_event* event = bpf_ringbuf_reserve(&events, sizeof(*event), 0);
  if (!event) {
    count(PROFILE_COUNTER_RINGBUF_FULL);
    return 0;
  }
  event->flags = 0;
  event->reserved = 0;
  event->kernel_frame_count = read_kernel_stack(ctx, event->kernel_ips, &event->flags);
  long bytes = 0;
  if (!kernel_thread) {
    bytes = bpf_get_stack(ctx, event->ips, sizeof(event->ips), BPF_F_USER_STACK);
    if (bytes < 0) {
      count(PROFILE_COUNTER_STACK_ERROR);
      bpf_ringbuf_discard(event, 0);
      return 0;
    }
  }
  if (bytes == 0 && (!kernel_thread || event->kernel_frame_count == 0)) {
    count(PROFILE_COUNTER_NO_USER_STACK);
    bpf_ringbuf_discard(event, 0);
    return 0;
  }
  if (kernel_thread) count(PROFILE_COUNTER_KERNEL_THREAD);
  fill_header(&event->header, PROFILE_EVENT_FP_STACK, sizeof(*event), pid_tgid);
  event->frame_count = bytes / sizeof(__u64);
  /* A full buffer means the walk may have been cut at the depth limit. */
  if (bytes >= (long)sizeof(event->ips)) {
    event->flags |= PROFILE_STACK_TRUNCATED;
    count(PROFILE_COUNTER_TRUNCATED);
  }
  bpf_ringbuf_submit(event, sample_wakeup(pid_tgid >> 32));
  return 0;
}

/* A forked child of a target becomes a target (threads share the tgid and
 * need nothing). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(follow_fork, struct task_struct* parent, struct task_struct* child) {
  if (!filter_by_tgid || !follow_forks) return 0;
  __u32 parent_tgid = BPF_CORE_READ(parent, tgid);
  __u32 child_tgid = BPF_CORE_READ(child, tgid);
  if (parent_tgid == child_tgid) return 0;
  if (!bpf_map_lookup_elem(&target_tgids, &parent_tgid)) return 0;
  __u8 one = 1;
  bpf_map_update_elem(&target_tgids, &child_tgid, &one, BPF_NOEXIST);
  return 0;
}

/* exec replaces a target's mappings: user space must forget the old ones
 * before it reads the samples that follow. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(note_exec, struct task_struct* task, pid_t old_pid, struct linux_binprm* bprm) {
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  if (!is_target(pid_tgid >> 32)) return 0;
  struct profile_exec_event* event = bpf_ringbuf_reserve(&events, sizeof(*event), 0);
  if (!event) {
    count(PROFILE_COUNTER_EXEC_LOST);
    return 0;
  }
  fill_header(&event->header, PROFILE_EVENT_EXEC, sizeof(*event), pid_tgid);
  /* The new image's first sample must wake the reader again. */
  __u32 tgid = pid_tgid >> 32;
  bpf_map_delete_elem(&seen_tgids, &tgid);
  bpf_ringbuf_submit(event, BPF_RB_FORCE_WAKEUP);
  return 0;
}
