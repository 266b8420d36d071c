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
/* Stack-copy mode: most bytes of user stack per record (multiple of 8, at
 * most PROFILE_MAX_STACK_COPY); records carry only the live part. */
const volatile __u32 stack_copy_bytes = 262144;
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

/* Per-CPU scratch for copies shorter than one chunk (see copy_user_stack). */
struct stack_chunk {
  __u8 bytes[PROFILE_STACK_CHUNK];
};
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct stack_chunk);
} stack_scratch SEC(".maps");

static long note_vma_end(struct task_struct* task, struct vm_area_struct* vma, void* data) {
  *(__u64*)data = vma->vm_end;
  return 0;
}

/* The top of the sampled thread's stack, above sp: the frames live in
 * [sp, top). The main thread's frames lie below mm->start_stack (above it:
 * argv, environment, auxv); a glibc thread's below its TCB (fsbase), which
 * glibc puts at the top of the thread's stack mapping. These two reads are
 * cheap; only where they do not bracket sp (another runtime's threads, a
 * signal stack) is the stack mapping looked up, which costs more (it takes
 * the mmap lock and, with interrupts off, defers the unlock to an irq_work).
 * 0: unknown (the mmap lock was busy). */
static __always_inline __u64 stack_top(struct task_struct* task, __u64 sp, __u64 pid_tgid) {
  __u64 guess = (__u32)pid_tgid == pid_tgid >> 32 ? BPF_CORE_READ(task, mm, start_stack)
                                                  : BPF_CORE_READ(task, thread.fsbase);
  if (guess > sp && guess - sp <= PROFILE_MAX_STACK_COPY) return guess;
  __u64 vma_end = 0;
  if (bpf_find_vma(task, sp, note_vma_end, &vma_end, 0) == 0 && vma_end > sp) return vma_end;
  return guess > sp ? guess : 0;
}

/* Copies `size` bytes of user stack from `sp` into the record at offset
 * `fixed`, in PROFILE_STACK_CHUNK pieces written straight into the ring
 * buffer (the last piece overlaps the one before, so every piece has the
 * constant size the verifier wants); a copy shorter than a chunk goes
 * through the per-CPU scratch. Returns the bytes copied before the first
 * unreadable page (bpf_probe_read_user cannot fault pages in). */
static __always_inline __u32 copy_user_stack(struct bpf_dynptr* record, __u32 fixed, __u64 sp,
                                             __u32 size) {
  if (size < PROFILE_STACK_CHUNK) {
    __u32 zero = 0;
    struct stack_chunk* scratch = bpf_map_lookup_elem(&stack_scratch, &zero);
    if (!scratch || size == 0) return 0;
    /* Tell the verifier size < a chunk; the empty asm keeps clang from
     * dropping a mask it knows to be a no-op. */
    asm volatile("" : "+r"(size));
    size &= PROFILE_STACK_CHUNK - 1;
    if (bpf_probe_read_user(scratch->bytes, size, (const void*)sp)) return 0;
    if (bpf_dynptr_write(record, fixed, scratch->bytes, size, 0)) return 0;
    return size;
  }
  const __u32 chunks = (size + PROFILE_STACK_CHUNK - 1) / PROFILE_STACK_CHUNK;
  for (__u32 i = 0; i < PROFILE_MAX_STACK_COPY / PROFILE_STACK_CHUNK; i++) {
    if (i >= chunks) break;
    __u32 offset = i * PROFILE_STACK_CHUNK;
    if (offset > size - PROFILE_STACK_CHUNK) offset = size - PROFILE_STACK_CHUNK;
    void* piece = bpf_dynptr_data(record, fixed + offset, PROFILE_STACK_CHUNK);
    if (!piece || bpf_probe_read_user(piece, PROFILE_STACK_CHUNK, (const void*)(sp + offset)))
      return offset;
  }
  return size;
}

/* Stack-copy mode: user registers plus the live part of the user stack, for
 * the CFI unwinder in user space. The record holds exactly the bytes from sp
 * to the top of the stack (at most stack_copy_bytes), so a shallow stack
 * costs a small record and a deep one is copied whole. The registers are the
 * task's user registers (bpf_task_pt_regs), also when the sample interrupted
 * a system call. */
static __always_inline int send_stack_copy(struct bpf_perf_event_data* ctx,
                                           struct task_struct* task, __u64 pid_tgid) {
  struct pt_regs* regs = (struct pt_regs*)bpf_task_pt_regs(task);
  if (!regs) {
    count(PROFILE_COUNTER_NO_USER_STACK);
    return 0;
  }
  const __u64 sp = BPF_CORE_READ(regs, sp);
  const __u64 top = stack_top(task, sp, pid_tgid);
  /* Unknown top: as much as allowed; the copy stops at an unreadable page. */
  __u64 live = top ? top - sp : stack_copy_bytes;
  __u32 size = live < stack_copy_bytes ? (__u32)live : stack_copy_bytes;
  const __u32 fixed = sizeof(struct profile_stack_copy_event);

  struct bpf_dynptr record;
  if (bpf_ringbuf_reserve_dynptr(&events, fixed + size, 0, &record)) {
    bpf_ringbuf_discard_dynptr(&record, 0);
    count(PROFILE_COUNTER_RINGBUF_FULL);
    return 0;
  }
  /* The fixed part first; the copy is written behind it. */
  struct profile_stack_copy_event* event = bpf_dynptr_data(&record, 0, sizeof(*event));
  if (!event) {
    bpf_ringbuf_discard_dynptr(&record, 0);
    count(PROFILE_COUNTER_RINGBUF_FULL);
    return 0;
  }
  fill_header(&event->header, PROFILE_EVENT_STACK_COPY, fixed + size, pid_tgid);
  event->ip = BPF_CORE_READ(regs, ip);
  event->sp = sp;
  event->bp = BPF_CORE_READ(regs, bp);
  event->flags = 0;
  event->reserved = 0;
  event->kernel_frame_count = read_kernel_stack(ctx, event->kernel_ips, &event->flags);
  const __u32 copied = copy_user_stack(&record, fixed, sp, size);
  event->stack_size = copied;
  if (copied < size) {
    event->flags |= PROFILE_STACK_TRUNCATED;
    count(PROFILE_COUNTER_STACK_COPY_SHORT);
  }
  bpf_ringbuf_submit_dynptr(&record, sample_wakeup(pid_tgid >> 32));
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
