/* bpf/profile.h - the records that cross the kernel/user boundary between
 * bpf/profile.bpf.c and userspace/sample/sampler.cpp. Fixed-width types only.
 *
 * Every ring-buffer record starts with struct profile_event_header; `kind`
 * says which record follows and `size` its total size in bytes, so a reader
 * can skip kinds it does not know. A new unwinding mode (e.g. copied
 * registers + stack bytes for CFI) adds a kind and a mode, nothing else. */
#ifndef GSYMPROF_BPF_PROFILE_H
#define GSYMPROF_BPF_PROFILE_H

#include <linux/types.h>

#define PROFILE_COMM_LEN 16
/* The kernel's default kernel.perf_event_max_stack. */
#define PROFILE_MAX_FRAMES 127
/* Kernel frames kept per sample, leafward of the user frames. Kernel stacks
 * are shallow (16 KiB of stack; perf's samples here rarely pass 40 frames);
 * a fuller one is flagged PROFILE_KERNEL_STACK_TRUNCATED and counted. */
#define PROFILE_MAX_KERNEL_FRAMES 64

/* Set in rodata before load: how user stacks are captured. */
enum profile_mode {
  PROFILE_MODE_FRAME_POINTER = 0, /* bpf_get_stack(BPF_F_USER_STACK) */
  PROFILE_MODE_STACK_COPY = 1,    /* user regs + top of the user stack, unwound
                                     with CFI in user space (--call-graph dwarf) */
};

/* Largest stack copy a record may carry (--call-graph dwarf,SIZE): 1 MiB. The
 * copy is filled in PROFILE_STACK_CHUNK pieces, so the BPF loop is bounded by
 * PROFILE_MAX_STACK_COPY / PROFILE_STACK_CHUNK. */
#define PROFILE_STACK_CHUNK 4096
#define PROFILE_MAX_STACK_COPY (256 * PROFILE_STACK_CHUNK)

enum profile_event_kind {
  PROFILE_EVENT_FP_STACK = 1,   /* struct profile_fp_stack_event */
  PROFILE_EVENT_STACK_COPY = 3, /* struct profile_stack_copy_event */
  PROFILE_EVENT_PYTHON_STACK = 4, /* struct profile_python_stack_event, just before
                                     the sample it belongs to (same tid and time_ns) */
  /* 2 and 16-18 were the BPF side-band's exec, mmap, fork and exit records:
   * the kernel's own side-band records (perf's MMAP2, COMM, FORK, EXIT on a
   * dummy event) carry them now (userspace/sample/perf_sideband.h). */
};

/* Per-CPU counters, indexes into the `counters` array map. */
enum profile_counter {
  PROFILE_COUNTER_SAMPLES = 0,    /* samples of target tasks, before any loss */
  PROFILE_COUNTER_RINGBUF_FULL,   /* lost: ring buffer reservation failed */
  PROFILE_COUNTER_STACK_ERROR,    /* lost: bpf_get_stack returned an error */
  PROFILE_COUNTER_NO_USER_STACK,  /* lost: kernel thread or no user frames */
  PROFILE_COUNTER_TRUNCATED,      /* kept, but the stack filled the buffer */
  PROFILE_COUNTER_SIDEBAND_LOST,  /* a side-band event was lost (here: a target's
                                     child could not be made a target; user
                                     space adds the kernel side-band's LOST
                                     records): /proc is re-read instead */
  PROFILE_COUNTER_STACK_COPY_SHORT, /* kept: the user stack could be copied only
                                       partly (or not at all) */
  PROFILE_COUNTER_KERNEL_STACK_ERROR, /* kept without kernel frames:
                                         bpf_get_stack(kernel) failed */
  PROFILE_COUNTER_KERNEL_TRUNCATED,   /* kept: more kernel frames than
                                         PROFILE_MAX_KERNEL_FRAMES */
  PROFILE_COUNTER_KERNEL_THREAD,      /* kept: a kernel thread's sample (kernel
                                         frames only) */
  PROFILE_COUNTER_OFF_CPU_UNTRACKED,  /* lost: a wait that could not be timed
                                         (the switch-out map was full) */
  PROFILE_COUNTER_SHORT_WAITS,        /* waits shorter than off_cpu_min_ns,
                                         summed in short_waits, not sent */
  PROFILE_COUNTER_SHORT_WAITS_LOST,   /* lost: a short wait not summed (the
                                         short_waits map was full) */
  PROFILE_COUNTER_PYTHON_NO_THREAD,   /* kept without Python frames: a sample of
                                         a CPython process whose thread state was
                                         not found (not a Python thread, or past
                                         PROFILE_MAX_PYTHON_THREADS) */
  PROFILE_COUNTER_PYTHON_LOST,        /* kept without Python frames: the ring
                                         buffer had no room for them */
  PROFILE_COUNTER_COUNT,
};

/* profile_event_header.off_cpu_state: the task's state when it was
 * switched out (the kernel's TASK_* bits, __state) in the low bits, plus: */
#define PROFILE_OFF_CPU 0x80000000u           /* an off-CPU record: the stack where
                                                 the thread blocked, off_cpu_ns long */
#define PROFILE_OFF_CPU_PREEMPTED 0x40000000u /* switched out while runnable */
#define PROFILE_TASK_STATE_MASK 0x0000ffffu

struct profile_event_header {
  __u32 kind; /* enum profile_event_kind */
  __u32 size; /* bytes of the whole record, header included */
  __u32 tgid;
  __u32 tid;
  __u64 time_ns; /* bpf_ktime_get_ns() */
  char comm[PROFILE_COMM_LEN];
  __u64 off_cpu_ns;    /* off-CPU records: nanoseconds off the CPU */
  __u32 off_cpu_state; /* 0 for a CPU sample; PROFILE_OFF_CPU | ... */
  __u32 reserved;
};

/* The short_waits map: waits shorter than off_cpu_min_ns, summed per thread
 * and state at switch-out (state as in off_cpu_state, without
 * PROFILE_OFF_CPU). */
struct profile_short_wait_key {
  __u32 tgid;
  __u32 tid;
  __u32 state;
  __u32 reserved;
};
struct profile_short_wait_value {
  __u64 ns;
  __u64 count;
  char comm[PROFILE_COMM_LEN];
};

#define PROFILE_STACK_TRUNCATED 1u        /* the user stack was cut short */
#define PROFILE_KERNEL_STACK_TRUNCATED 2u /* the kernel stack filled kernel_ips */

/* Frame-pointer mode, and every kernel thread's sample (frame_count 0). */
struct profile_fp_stack_event {
  struct profile_event_header header;
  __u32 frame_count;        /* valid entries of ips, leaf first */
  __u32 flags;              /* PROFILE_STACK_* */
  __u32 kernel_frame_count; /* valid entries of kernel_ips, leaf first */
  __u32 reserved;
  __u64 kernel_ips[PROFILE_MAX_KERNEL_FRAMES];
  __u64 ips[PROFILE_MAX_FRAMES];
};

/* Stack-copy mode: the user registers an x86-64 CFI unwind starts from and
 * the live part of the user stack, from sp up to the top of the thread's
 * stack (at most stack_copy_bytes, rodata). The record is variable-size:
 * header.size bytes, the fixed part then the copy, of which the first
 * stack_size bytes are valid (less than the record holds when a page could
 * not be read; PROFILE_STACK_TRUNCATED is then set). */
struct profile_stack_copy_event {
  struct profile_event_header header;
  __u64 ip, sp, bp;
  __u32 stack_size; /* valid bytes of stack[] */
  __u32 flags;      /* PROFILE_STACK_* */
  __u32 kernel_frame_count; /* valid entries of kernel_ips, leaf first */
  __u32 reserved;
  __u64 kernel_ips[PROFILE_MAX_KERNEL_FRAMES];
  __u8 stack[];
};

/* ---- CPython frames ----
 * The interpreter's frames live in its own memory, not on the C stack, so
 * they are read at sample time. User space puts one entry per CPython
 * process in the python_processes map (tgid -> this struct): where
 * _PyRuntime is and the layout of the version it runs (offsets from a
 * table per CPython version, userspace/process/python_runtime.h). */
struct profile_python_process {
  __u64 runtime; /* address of _PyRuntime in the process */
  __u32 runtime_tstate_current;    /* _PyRuntimeState.gilstate.tstate_current */
  __u32 runtime_interpreters_head; /* _PyRuntimeState.interpreters.head */
  __u32 interp_threads_head;       /* PyInterpreterState.threads.head */
  __u32 tstate_next;               /* PyThreadState.next */
  __u32 tstate_native_thread_id;   /* PyThreadState.native_thread_id */
  __u32 tstate_cframe;             /* PyThreadState.cframe (3.13: .current_frame) */
  __u32 cframe_current_frame;      /* _PyCFrame.current_frame (3.13: absent) */
  __u32 frame_code;                /* _PyInterpreterFrame.f_code */
  __u32 frame_previous;            /* _PyInterpreterFrame.previous */
  __u32 frame_prev_instr;          /* _PyInterpreterFrame.prev_instr */
  __u32 frame_is_entry;            /* _PyInterpreterFrame.is_entry (a byte; 3.11) */
  __u32 frame_owner;               /* _PyInterpreterFrame.owner (a byte) */
  __u32 owned_by_cstack;           /* owner of the frame each eval call pushes
                                      first (3.12: FRAME_OWNED_BY_CSTACK) */
  __u32 code_adaptive;             /* PyCodeObject.co_code_adaptive */
};
/* An offset or value the version does not have (3.12: no tstate_current,
 * no is_entry; 3.11: no C-stack frames). */
#define PROFILE_PYTHON_ABSENT 0xffffffffu
/* Every frame offset above must lie within this many bytes (one read per frame). */
#define PROFILE_PYTHON_FRAME_BYTES 80
/* Frames kept per sample, leaf first; a deeper stack keeps its leafmost
 * frames and is flagged PROFILE_PYTHON_TRUNCATED. */
#define PROFILE_MAX_PYTHON_FRAMES 64
/* Threads of the interpreter's list walked to find the sampled one (found
 * once per thread, then kept in the python_threads map). */
#define PROFILE_MAX_PYTHON_THREADS 128

#define PROFILE_PYTHON_ENTRY 1u     /* frame flag: the eval loop was entered here
                                       (is_entry): the last frame of its run */
#define PROFILE_PYTHON_TRUNCATED 1u /* stack flag: more frames than were kept */
#define PROFILE_PYTHON_UNREADABLE 2u /* stack flag: a frame could not be read */

struct profile_python_frame {
  __u64 code;         /* the PyCodeObject */
  __s32 instr_offset; /* prev_instr - co_code_adaptive, bytes */
  __u32 flags;        /* PROFILE_PYTHON_ENTRY */
};

struct profile_python_stack_event {
  struct profile_event_header header;
  __u32 frame_count; /* valid entries of frames, leaf first */
  __u32 flags;       /* PROFILE_PYTHON_TRUNCATED, PROFILE_PYTHON_UNREADABLE */
  struct profile_python_frame frames[PROFILE_MAX_PYTHON_FRAMES];
};

#endif /* GSYMPROF_BPF_PROFILE_H */
