// SPDX-License-Identifier: GPL-2.0
/* bpf/profile.bpf.c - the sampler: one cpu-clock perf event per CPU runs
 * sample_stack, which sends tgid, tid, comm and the user IPs (or registers
 * and a copy of the user stack) of target tasks to user space through a ring
 * buffer. Every sample that cannot be sent is counted by reason; nothing is
 * dropped silently. No stack map is used, so there are no hash collisions.
 * follow_fork makes a target's children targets. Mappings, execs, forks and
 * exits reach user space as the kernel's own side-band records (perf's MMAP2,
 * COMM, FORK, EXIT), not from here: no program of ours runs on system calls.
 *
 * Kernels differ (bpf/README.md): what a kernel lacks is probed by user space
 * and switched off through rodata before load, so the verifier drops the
 * code that needs it; every kernel field is read through kernel_types.h. */
#include "bpf/kernel_types.h"

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
/* bpf_find_vma (Linux 5.17): without it the stack top of a thread that is
 * neither the main thread nor a glibc one is unknown, and its copy ends at
 * the first unreadable page or at stack_copy_bytes. */
const volatile bool have_find_vma = true;
/* gsymprof's own process: never sampled, not even system-wide. */
const volatile __u32 self_tgid = 0;

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
  if (tgid == 0 || tgid == self_tgid) return false; /* the idle task; gsymprof itself */
  if (!filter_by_tgid) return true;
  return bpf_map_lookup_elem(&target_tgids, &tgid) != NULL;
}

/* What a record says of time off the CPU: nothing for a CPU sample. */
struct off_cpu_wait {
  __u64 ns;
  __u32 state; /* profile_event_header.off_cpu_state */
};

/* A wait long enough for a stack, until its thread returns to user space
 * (off_cpu_sys_exit); its kernel stack was read when it was switched in. */
struct off_cpu_pending {
  __u64 ns;
  __u64 user_ip, user_sp;
  __u32 state;
  __u32 kernel_frame_count;
  __u64 kernel_ips[PROFILE_MAX_KERNEL_FRAMES];
};

/* A sample's records share one time: a Python stack record is matched with
 * the sample that follows it by (tid, time_ns). */
static __always_inline void fill_header(struct profile_event_header* header, __u32 kind,
                                        __u32 size, __u64 pid_tgid, __u64 time_ns,
                                        struct off_cpu_wait wait) {
  header->kind = kind;
  header->size = size;
  header->tgid = pid_tgid >> 32;
  header->tid = (__u32)pid_tgid;
  header->time_ns = time_ns;
  bpf_get_current_comm(header->comm, sizeof(header->comm));
  header->off_cpu_ns = wait.ns;
  header->off_cpu_state = wait.state;
  header->reserved = 0;
}

/* Whether the sample interrupted user mode. On x86 the helper call below
 * costs a sample taken in user mode about 0.5 us for nothing (it only finds
 * that there is no kernel stack), so the interrupted code segment's privilege
 * level is checked first; elsewhere the helper finds out. */
static __always_inline bool interrupted_user_mode(struct bpf_perf_event_data* ctx) {
#if defined(__TARGET_ARCH_x86)
  /* The context allows only full-width loads of its registers: volatile
   * keeps clang from narrowing the load to the byte the mask needs. */
  return (*(volatile __u64*)&ctx->regs.cs & 3) == 3;
#else
  return false;
#endif
}

/* The kernel part of the sample, leaf first, when there is one: a CPU
 * sample that interrupted the kernel, or a wait's (read when it ended). */
static __always_inline __u32 read_kernel_stack(void* ctx, bool in_kernel,
                                               const struct off_cpu_pending* pending, __u64* ips,
                                               __u32* flags) {
  if (!kernel_stacks) return 0;
  if (pending) {
    __builtin_memcpy(ips, pending->kernel_ips, sizeof(pending->kernel_ips));
    __u32 frames = pending->kernel_frame_count;
    return frames < PROFILE_MAX_KERNEL_FRAMES ? frames : PROFILE_MAX_KERNEL_FRAMES;
  }
  if (!in_kernel) return 0;
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
  /* Direct (BTF) loads: each BPF_CORE_READ would be a helper call. */
  __u64 guess = (__u32)pid_tgid == pid_tgid >> 32 ? task->mm->start_stack : task->thread.fsbase;
  if (guess > sp && guess - sp <= PROFILE_MAX_STACK_COPY) return guess;
  __u64 vma_end = 0;
  if (have_find_vma && bpf_find_vma(task, sp, note_vma_end, &vma_end, 0) == 0 && vma_end > sp) return vma_end;
  return guess > sp ? guess : 0;
}

/* Copies `size` (< PROFILE_STACK_CHUNK) bytes of user memory at `from` into
 * the record at `at` through the per-CPU scratch: a variable size cannot be
 * read straight into the ring buffer. Returns the bytes copied (0 or size). */
static __always_inline __u32 copy_through_scratch(struct bpf_dynptr* record, __u32 at, __u64 from,
                                                  __u32 size) {
  __u32 zero = 0;
  struct stack_chunk* scratch = bpf_map_lookup_elem(&stack_scratch, &zero);
  if (!scratch || size == 0) return 0;
  /* Tell the verifier size < a chunk; the empty asm keeps clang from
   * dropping a mask it knows to be a no-op. */
  asm volatile("" : "+r"(size));
  size &= PROFILE_STACK_CHUNK - 1;
  if (bpf_probe_read_user(scratch->bytes, size, (const void*)from)) return 0;
  if (bpf_dynptr_write(record, at, scratch->bytes, size, 0)) return 0;
  return size;
}

/* After a chunk at `from` could not be read: copies the bytes from `from` to
 * the end of its page (a chunk is a page on x86-64), the only part of that
 * chunk before the next page, the unreadable one, so the copy ends exactly
 * where the stack does. Returns the bytes copied. */
static __always_inline __u32 copy_to_page_end(struct bpf_dynptr* record, __u32 at, __u64 from) {
  const __u32 size = PROFILE_STACK_CHUNK - (from & (PROFILE_STACK_CHUNK - 1));
  if (size >= PROFILE_STACK_CHUNK) return 0; /* page-aligned: nothing before it */
  return copy_through_scratch(record, at, from, size);
}

/* Copies whole pieces of `piece_size` bytes of user stack while they fit
 * in `size`, from `done` on, at most `max_pieces`; returns the new `done`.
 * Stops at the first piece that cannot be read (it may hold an unreadable
 * page), leaving the rest to smaller pieces. */
static __always_inline __u32 copy_pieces(struct bpf_dynptr* record, __u32 fixed, __u64 sp,
                                         __u32 size, __u32 done, const __u32 piece_size,
                                         const __u32 max_pieces) {
  for (__u32 i = 0; i < max_pieces; i++) {
    if (size - done < piece_size) break;
    void* piece = bpf_dynptr_data(record, fixed + done, piece_size);
    if (!piece || bpf_probe_read_user(piece, piece_size, (const void*)(sp + done))) break;
    done += piece_size;
  }
  return done;
}

/* Copies `size` bytes of user stack from `sp` into the record at offset
 * `fixed`, straight into the ring buffer: 64 KiB pieces, then 16 KiB, then
 * PROFILE_STACK_CHUNK ones, the last overlapping the one before (the
 * verifier wants constant sizes). Each bpf_probe_read_user costs about
 * 0.1 us before it copies a byte, so a 38 KiB stack takes 4 calls, not 10.
 * A copy shorter than a chunk goes through the per-CPU scratch. Returns the
 * bytes copied before the first unreadable page (bpf_probe_read_user cannot
 * fault pages in). */
static __always_inline __u32 copy_user_stack(struct bpf_dynptr* record, __u32 fixed, __u64 sp,
                                             __u32 size) {
  if (size < PROFILE_STACK_CHUNK) return copy_through_scratch(record, fixed, sp, size);
  const __u32 big = 16 * PROFILE_STACK_CHUNK, medium = 4 * PROFILE_STACK_CHUNK;
  __u32 done = copy_pieces(record, fixed, sp, size, 0, big, PROFILE_MAX_STACK_COPY / big);
  /* After a failed piece, the smaller sizes find the unreadable page. */
  done = copy_pieces(record, fixed, sp, size, done, medium, big / medium);
  for (__u32 i = 0; i <= medium / PROFILE_STACK_CHUNK; i++) {
    if (done >= size) break;
    __u32 offset = done;
    if (offset > size - PROFILE_STACK_CHUNK) offset = size - PROFILE_STACK_CHUNK;
    void* piece = bpf_dynptr_data(record, fixed + offset, PROFILE_STACK_CHUNK);
    if (!piece || bpf_probe_read_user(piece, PROFILE_STACK_CHUNK, (const void*)(sp + offset)))
      return offset + copy_to_page_end(record, fixed + offset, sp + offset);
    done = offset + PROFILE_STACK_CHUNK;
  }
  return done < size ? done : size;
}

/* Stack-copy mode: user registers plus the live part of the user stack, for
 * the CFI unwinder in user space. The record holds exactly the bytes from sp
 * to the top of the stack (at most stack_copy_bytes), so a shallow stack
 * costs a small record and a deep one is copied whole. The registers are the
 * task's user registers (bpf_task_pt_regs), also when the sample interrupted
 * a system call. */
static __always_inline int send_stack_copy(void* ctx, bool in_kernel, const struct off_cpu_pending* pending,
                                           struct task_struct* task, __u64 pid_tgid, __u64 time_ns,
                                           struct off_cpu_wait wait) {
  struct pt_regs* regs = (struct pt_regs*)bpf_task_pt_regs(task);
  if (!regs) {
    count(PROFILE_COUNTER_NO_USER_STACK);
    return 0;
  }
  const __u64 sp = regs->sp;
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
  fill_header(&event->header, PROFILE_EVENT_STACK_COPY, fixed + size, pid_tgid, time_ns, wait);
  event->ip = regs->ip;
  event->sp = sp;
  event->bp = regs->bp;
  event->flags = 0;
  event->reserved = 0;
  event->kernel_frame_count = read_kernel_stack(ctx, in_kernel, pending, event->kernel_ips, &event->flags);
  const __u32 copied = copy_user_stack(&record, fixed, sp, size);
  event->stack_size = copied;
  if (copied < size) {
    event->flags |= PROFILE_STACK_TRUNCATED;
    count(PROFILE_COUNTER_STACK_COPY_SHORT);
  }
  bpf_ringbuf_submit_dynptr(&record, sample_wakeup(pid_tgid >> 32));
  return 0;
}

/* ---- CPython frames ----
 * For a process in python_processes (user space adds it once it has seen
 * its CPython runtime and knows that version's layout), each sample also
 * sends the thread's chain of interpreter frames: per frame its code object,
 * its instruction offset and whether the eval loop was entered there. User
 * space names the code objects from the process's memory and puts each run
 * of frames in place of the native _PyEval_EvalFrameDefault that ran it.
 * Everything is read with bpf_probe_read_user: a process's memory is
 * untrusted, a bad pointer only ends the walk. */

const volatile bool python_frames = true;

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32); /* tgid */
  __type(value, struct profile_python_process);
} python_processes SEC(".maps");

/* tid -> its PyThreadState, found once by walking the interpreter's list and
 * checked on every use (native_thread_id must still be the tid). */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32);
  __type(value, __u64);
} python_threads SEC(".maps");

/* One interpreter frame's first bytes, read at once; the layout's offsets
 * index into it (a map value: the verifier bounds variable offsets there). */
struct python_frame_bytes {
  __u8 bytes[128 + 8]; /* room for any offset masked to 7 bits, plus a word */
};
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct python_frame_bytes);
} python_scratch SEC(".maps");

static __always_inline __u64 read_user_word(__u64 address) {
  __u64 value = 0;
  if (bpf_probe_read_user(&value, sizeof(value), (const void*)address)) return 0;
  return value;
}

static __always_inline __u64 frame_word(const struct python_frame_bytes* frame, __u32 offset) {
  if (offset > PROFILE_PYTHON_FRAME_BYTES - 8) return 0;
  __u64 value;
  __builtin_memcpy(&value, &frame->bytes[offset & 0x7f], sizeof(value));
  return value;
}

/* bpf_loop (Linux 5.17) callbacks: the verifier checks a callback once,
 * not once per iteration as it does an unrolled or bounded loop. */
struct python_thread_search {
  const struct profile_python_process* py;
  __u64 state; /* the thread state looked at; 0 when the list ended */
  __u32 tid;
  bool found;
};

static long python_thread_step(__u64 index, void* data) {
  struct python_thread_search* search = data;
  if (!search->state) return 1;
  if (read_user_word(search->state + search->py->tstate_native_thread_id) == search->tid) {
    search->found = true;
    return 1;
  }
  search->state = read_user_word(search->state + search->py->tstate_next);
  return 0;
}

static __always_inline __u64 python_thread_state(const struct profile_python_process* py, __u32 tid) {
  __u64* known = bpf_map_lookup_elem(&python_threads, &tid);
  if (known && *known && read_user_word(*known + py->tstate_native_thread_id) == tid) return *known;
  /* The GIL holder is the thread most samples are of (3.11 says which). */
  __u64 state = 0;
  if (py->runtime_tstate_current != PROFILE_PYTHON_ABSENT)
    state = read_user_word(py->runtime + py->runtime_tstate_current);
  if (!state || read_user_word(state + py->tstate_native_thread_id) != tid) {
    __u64 interp = read_user_word(py->runtime + py->runtime_interpreters_head);
    struct python_thread_search search = {py, interp ? read_user_word(interp + py->interp_threads_head) : 0,
                                          tid, false};
    bpf_loop(PROFILE_MAX_PYTHON_THREADS, python_thread_step, &search, 0);
    state = search.found ? search.state : 0;
  }
  if (state) bpf_map_update_elem(&python_threads, &tid, &state, BPF_ANY);
  return state;
}

/* The Python stack is built here, then copied into the ring buffer whole. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct profile_python_stack_event);
} python_stack_scratch SEC(".maps");

struct python_frame_walk {
  const struct profile_python_process* py;
  struct python_frame_bytes* bytes;
  struct profile_python_stack_event* event;
  __u64 frame; /* the next frame to read; 0 after the outermost */
};

static long python_frame_step(__u64 index, void* data) {
  struct python_frame_walk* walk = data;
  struct profile_python_stack_event* event = walk->event;
  if (!walk->frame || event->frame_count >= PROFILE_MAX_PYTHON_FRAMES) return 1;
  const struct profile_python_process* py = walk->py;
  struct python_frame_bytes* bytes = walk->bytes;
  if (bpf_probe_read_user(bytes->bytes, PROFILE_PYTHON_FRAME_BYTES, (const void*)walk->frame)) {
    event->flags |= PROFILE_PYTHON_UNREADABLE;
    return 1;
  }
  walk->frame = frame_word(bytes, py->frame_previous);
  const __u32 owner_at = py->frame_owner;
  if (py->owned_by_cstack != PROFILE_PYTHON_ABSENT && owner_at < PROFILE_PYTHON_FRAME_BYTES &&
      bytes->bytes[owner_at & 0x7f] == py->owned_by_cstack) {
    /* 3.12: the frame an eval call pushes before running any: the frame
     * kept before it is where that call's run ends. Not a function. */
    if (event->frame_count > 0)
      event->frames[(event->frame_count - 1) & (PROFILE_MAX_PYTHON_FRAMES - 1)].flags |= PROFILE_PYTHON_ENTRY;
    return 0;
  }
  const __u64 code = frame_word(bytes, py->frame_code);
  const __u64 instr = frame_word(bytes, py->frame_prev_instr);
  const __u32 entry_at = py->frame_is_entry;
  bool entry = false;
  if (entry_at < PROFILE_PYTHON_FRAME_BYTES) entry = bytes->bytes[entry_at & 0x7f] != 0;
  struct profile_python_frame* out = &event->frames[event->frame_count & (PROFILE_MAX_PYTHON_FRAMES - 1)];
  out->code = code;
  out->instr_offset = (__s32)(__s64)(instr - (code + py->code_adaptive));
  out->flags = entry ? PROFILE_PYTHON_ENTRY : 0;
  event->frame_count++;
  return 0;
}

/* A global function: the verifier checks it once, on its own, so the
 * sample's stack copy after it is not checked again for each of its paths. */
__noinline int send_python_stack(__u64 pid_tgid, __u64 time_ns) {
  if (!python_frames) return 0;
  __u32 tgid = pid_tgid >> 32;
  const struct profile_python_process* py = bpf_map_lookup_elem(&python_processes, &tgid);
  if (!py) return 0;
  __u64 state = python_thread_state(py, (__u32)pid_tgid);
  if (!state) {
    count(PROFILE_COUNTER_PYTHON_NO_THREAD);
    return 0;
  }
  /* 3.11, 3.12: the thread's _PyCFrame holds the current frame; 3.13: the
   * thread state itself (cframe_current_frame absent). */
  __u64 frame = read_user_word(state + py->tstate_cframe);
  if (frame && py->cframe_current_frame != PROFILE_PYTHON_ABSENT)
    frame = read_user_word(frame + py->cframe_current_frame);
  if (!frame) return 0; /* the thread runs no Python code now */
  __u32 zero = 0;
  struct python_frame_bytes* bytes = bpf_map_lookup_elem(&python_scratch, &zero);
  struct profile_python_stack_event* event = bpf_map_lookup_elem(&python_stack_scratch, &zero);
  if (!bytes || !event) return 0;
  struct off_cpu_wait none = {0, 0};
  fill_header(&event->header, PROFILE_EVENT_PYTHON_STACK, sizeof(*event), pid_tgid, time_ns, none);
  event->frame_count = 0;
  event->flags = 0;
  struct python_frame_walk walk = {py, bytes, event, frame};
  /* Twice the frames kept: 3.12 has a C-stack frame per eval call. */
  bpf_loop(2 * PROFILE_MAX_PYTHON_FRAMES, python_frame_step, &walk, 0);
  if (walk.frame && event->frame_count == PROFILE_MAX_PYTHON_FRAMES) event->flags |= PROFILE_PYTHON_TRUNCATED;
  /* No wakeup: the sample right after it decides. */
  if (bpf_ringbuf_output(&events, event, sizeof(*event), BPF_RB_NO_WAKEUP))
    count(PROFILE_COUNTER_PYTHON_LOST);
  return 0;
}

/* Sends the current task's stack: a CPU sample (`in_kernel`: it interrupted
 * the kernel), or a wait that ended (`pending`: its kernel stack; without
 * `user_side`, no user frames: the thread is no longer where it blocked). */
static __always_inline int send_sample(void* ctx, bool in_kernel, const struct off_cpu_pending* pending,
                                       bool user_side, __u64 pid_tgid, struct off_cpu_wait wait) {
  struct task_struct* task = bpf_get_current_task_btf();
  /* A kernel thread has no user stack: with kernel stacks its sample is
   * kernel frames only (an fp record with no user frames, in either mode). */
  bool kernel_thread = !task->mm;
  if (kernel_thread && !kernel_stacks) {
    count(PROFILE_COUNTER_NO_USER_STACK);
    return 0;
  }
  const __u64 time_ns = bpf_ktime_get_ns();
  if (!kernel_thread && user_side) send_python_stack(pid_tgid, time_ns);
  if (sample_mode == PROFILE_MODE_STACK_COPY && !kernel_thread && user_side)
    return send_stack_copy(ctx, in_kernel, pending, task, pid_tgid, time_ns, wait);

  struct profile_fp_stack_event* event = bpf_ringbuf_reserve(&events, sizeof(*event), 0);
  if (!event) {
    count(PROFILE_COUNTER_RINGBUF_FULL);
    return 0;
  }
  event->flags = 0;
  event->reserved = 0;
  event->kernel_frame_count = read_kernel_stack(ctx, in_kernel, pending, event->kernel_ips, &event->flags);
  long bytes = 0;
  if (!kernel_thread && user_side) {
    bytes = bpf_get_stack(ctx, event->ips, sizeof(event->ips), BPF_F_USER_STACK);
    if (bytes < 0) {
      count(PROFILE_COUNTER_STACK_ERROR);
      bpf_ringbuf_discard(event, 0);
      return 0;
    }
  }
  if (bytes == 0 && ((!kernel_thread && user_side) || event->kernel_frame_count == 0)) {
    count(PROFILE_COUNTER_NO_USER_STACK);
    bpf_ringbuf_discard(event, 0);
    return 0;
  }
  if (kernel_thread) count(PROFILE_COUNTER_KERNEL_THREAD);
  fill_header(&event->header, PROFILE_EVENT_FP_STACK, sizeof(*event), pid_tgid, time_ns, wait);
  event->frame_count = bytes / sizeof(__u64);
  /* A full buffer means the walk may have been cut at the depth limit. */
  if (bytes >= (long)sizeof(event->ips)) {
    event->flags |= PROFILE_STACK_TRUNCATED;
    count(PROFILE_COUNTER_TRUNCATED);
  }
  bpf_ringbuf_submit(event, sample_wakeup(pid_tgid >> 32));
  return 0;
}

SEC("perf_event")
int sample_stack(struct bpf_perf_event_data* ctx) {
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  if (!is_target(pid_tgid >> 32)) return 0;
  count(PROFILE_COUNTER_SAMPLES);
  struct off_cpu_wait on_cpu = {0, 0};
  return send_sample(ctx, !interrupted_user_mode(ctx), NULL, true, pid_tgid, on_cpu);
}

/* ---- Time off the CPU (--off-cpu, --wall) ----
 * Only tracepoints: kprobes and BPF trampolines are not on every kernel
 * (some have neither). sched_switch sees both ends of a wait: when a target
 * thread is switched out it notes when, in which state and at which user
 * registers; when it is switched in, the time away is known, and its kernel
 * stack, frozen where it blocked, is read then (bpf_get_task_stack). Its
 * user stack is read in its own context, where the system call it blocked
 * in returns (sys_exit): the user registers are still those of the call, so
 * the stack is the one it blocked in. Waits shorter than off_cpu_min_ns, and
 * (--wall) time runnable but waiting for a CPU, are only summed per thread
 * in short_waits: a thread that switches every few microseconds costs a map
 * update per switch, not a stack copy. A wait outside a system call (a page
 * fault) is sent with its kernel stack only, at the thread's next switch.
 * A wait still going on when profiling stops is not counted. */

const volatile __u64 off_cpu_min_ns = 1000000;
/* --wall: also time runnable but not running (preempted, yielding). */
const volatile bool off_cpu_runqueue = false;

/* Kernel TASK_* states (stable since Linux 2.6) a switch-out is judged by. */
#define TASK_RUNNING 0x0000
#define TASK_STATE_EXITING (0x0010 | 0x0020 | 0x0080) /* EXIT_DEAD, EXIT_ZOMBIE, TASK_DEAD */

struct off_cpu_start {
  __u64 time_ns;
  __u64 user_ip, user_sp; /* where the thread entered the kernel */
  __u32 state;            /* off_cpu_state without PROFILE_OFF_CPU */
  __u32 reserved;
};

/* tid -> when and how it left the CPU. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u32);
  __type(value, struct off_cpu_start);
} off_cpu_starts SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32);
  __type(value, struct off_cpu_pending);
} off_cpu_pending SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct off_cpu_pending);
} pending_scratch SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, struct profile_short_wait_key);
  __type(value, struct profile_short_wait_value);
} short_waits SEC(".maps");

static __always_inline void add_to_sum(struct profile_short_wait_value* sum, __u64 ns) {
  __sync_fetch_and_add(&sum->ns, ns);
  __sync_fetch_and_add(&sum->count, 1);
  count(PROFILE_COUNTER_SHORT_WAITS);
}

/* Sums a wait of `task` without a stack of its own. */
static __always_inline void add_short_wait(struct task_struct* task, __u32 tgid, __u32 tid, __u32 state,
                                           __u64 ns) {
  struct profile_short_wait_key key = {tgid, tid, state, 0};
  struct profile_short_wait_value* sum = bpf_map_lookup_elem(&short_waits, &key);
  if (sum) {
    add_to_sum(sum, ns);
    return;
  }
  struct profile_short_wait_value first = {0, 0};
  bpf_probe_read_kernel_str(first.comm, sizeof(first.comm), task->comm);
  /* BPF_NOEXIST: another CPU may have added it meanwhile; then add to it. */
  bpf_map_update_elem(&short_waits, &key, &first, BPF_NOEXIST);
  sum = bpf_map_lookup_elem(&short_waits, &key);
  if (!sum) {
    count(PROFILE_COUNTER_SHORT_WAITS_LOST);
    return;
  }
  add_to_sum(sum, ns);
}

/* The current thread's wait `pending`, sent: with its user stack when the
 * thread is still at the user registers it blocked with (`same_place`),
 * else with its kernel stack only. */
static __always_inline void send_pending(void* ctx, __u64 pid_tgid, struct off_cpu_pending* pending,
                                         bool same_place) {
  count(PROFILE_COUNTER_SAMPLES);
  struct off_cpu_wait wait = {pending->ns, pending->state | PROFILE_OFF_CPU};
  send_sample(ctx, false, pending, same_place, pid_tgid, wait);
}

/* `prev_state` is the state the scheduler acted on. prev->__state is not:
 * once the thread is off its runqueue another CPU may wake it while this
 * tracepoint runs (TASK_WAKING, then TASK_RUNNING), which read as a wait of
 * no known kind or as time runnable. */
static __always_inline void switch_out(void* ctx, bool preempt, struct task_struct* prev, __u32 prev_state) {
  __u32 tgid = prev->tgid;
  if (!is_target(tgid) || !prev->mm) return; /* kernel threads have no user side */
  __u32 state = prev_state & PROFILE_TASK_STATE_MASK;
  if (state & TASK_STATE_EXITING) return; /* it never comes back */
  const bool runnable = preempt || state == TASK_RUNNING;
  if (runnable && !off_cpu_runqueue) return;
  struct pt_regs* regs = (struct pt_regs*)bpf_task_pt_regs(prev);
  struct off_cpu_start start = {bpf_ktime_get_ns(), regs->ip, regs->sp,
                                runnable ? PROFILE_OFF_CPU_PREEMPTED : state, 0};
  __u32 tid = prev->pid;
  /* A wait not sent yet from elsewhere than this system call (a page
   * fault): its user stack is gone, send its kernel stack. */
  struct off_cpu_pending* pending = bpf_map_lookup_elem(&off_cpu_pending, &tid);
  if (pending && (pending->user_ip != start.user_ip || pending->user_sp != start.user_sp)) {
    send_pending(ctx, bpf_get_current_pid_tgid(), pending, false);
    bpf_map_delete_elem(&off_cpu_pending, &tid);
  }
  if (bpf_map_update_elem(&off_cpu_starts, &tid, &start, BPF_ANY)) count(PROFILE_COUNTER_OFF_CPU_UNTRACKED);
}

static __always_inline void switch_in(struct task_struct* next) {
  __u32 tid = next->pid;
  struct off_cpu_start* start = bpf_map_lookup_elem(&off_cpu_starts, &tid);
  if (!start) return;
  const __u64 ns = bpf_ktime_get_ns() - start->time_ns;
  const __u32 state = start->state;
  const __u64 user_ip = start->user_ip, user_sp = start->user_sp;
  bpf_map_delete_elem(&off_cpu_starts, &tid);
  struct off_cpu_pending* pending = bpf_map_lookup_elem(&off_cpu_pending, &tid);
  if (pending && pending->state == state) {
    /* Blocked again in the same system call: one wait, the first stack. */
    __sync_fetch_and_add(&pending->ns, ns);
    return;
  }
  if ((state & PROFILE_OFF_CPU_PREEMPTED) || ns < off_cpu_min_ns) {
    add_short_wait(next, next->tgid, tid, state, ns);
    return;
  }
  __u32 zero = 0;
  struct off_cpu_pending* fresh = bpf_map_lookup_elem(&pending_scratch, &zero);
  if (!fresh) return;
  fresh->ns = ns;
  fresh->state = state;
  fresh->user_ip = user_ip;
  fresh->user_sp = user_sp;
  fresh->kernel_frame_count = 0;
  if (kernel_stacks) {
    long bytes = bpf_get_task_stack(next, fresh->kernel_ips, sizeof(fresh->kernel_ips), 0);
    if (bytes < 0) count(PROFILE_COUNTER_KERNEL_STACK_ERROR);
    else fresh->kernel_frame_count = bytes / sizeof(__u64);
  }
  if (bpf_map_update_elem(&off_cpu_pending, &tid, fresh, BPF_ANY)) count(PROFILE_COUNTER_OFF_CPU_UNTRACKED);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(off_cpu_switch, bool preempt, struct task_struct* prev, struct task_struct* next,
             unsigned int prev_state) { /* the 4th argument since Linux 5.18 */
  switch_out(ctx, preempt, prev, prev_state);
  switch_in(next);
  return 0;
}

/* A system call returns: a thread back from a long wait sends it, with the
 * user stack it blocked in (still the current one). One hash lookup per
 * system call otherwise. */
SEC("raw_tp/sys_exit")
int off_cpu_sys_exit(struct bpf_raw_tracepoint_args* ctx) {
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  __u32 tid = (__u32)pid_tgid;
  struct off_cpu_pending* pending = bpf_map_lookup_elem(&off_cpu_pending, &tid);
  if (!pending) return 0;
  struct task_struct* task = bpf_get_current_task_btf();
  struct pt_regs* regs = (struct pt_regs*)bpf_task_pt_regs(task);
  send_pending(ctx, pid_tgid, pending, regs->ip == pending->user_ip && regs->sp == pending->user_sp);
  bpf_map_delete_elem(&off_cpu_pending, &tid);
  return 0;
}

/* ---- Following forks ----
 * A forked child of a target becomes a target before it runs (threads share
 * the tgid and need nothing), so even a child that lives 2 ms is sampled.
 * The fork itself reaches user space as the kernel's FORK record. A raw
 * tracepoint (Linux 4.17) with probe reads: no BTF-typed arguments needed. */

#define PF_KTHREAD 0x00200000

/* Processes the targets have started: while it is 0, user space samples -p
 * targets with an event per thread; from the first, with an event per CPU,
 * which samples short-lived processes fairly (sampling_events.h). */
__u64 target_forks = 0;

SEC("raw_tp/sched_process_fork")
int BPF_PROG(follow_fork, struct task_struct* parent, struct task_struct* child) {
  if (!filter_by_tgid) return 0; /* every process is a target */
  __u32 parent_tgid = BPF_CORE_READ(parent, tgid);
  __u32 child_tgid = BPF_CORE_READ(child, tgid);
  if (parent_tgid == child_tgid) return 0;
  if (!follow_forks || !bpf_map_lookup_elem(&target_tgids, &parent_tgid) ||
      (BPF_CORE_READ(child, flags) & PF_KTHREAD)) {
    /* A pid reused after a target exited: the new process is not one. */
    bpf_map_delete_elem(&target_tgids, &child_tgid);
    return 0;
  }
  __u8 one = 1;
  if (bpf_map_update_elem(&target_tgids, &child_tgid, &one, BPF_ANY))
    count(PROFILE_COUNTER_SIDEBAND_LOST);
  __sync_fetch_and_add(&target_forks, 1);
  return 0;
}
