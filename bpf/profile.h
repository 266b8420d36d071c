/* bpf/profile.h - the records that cross the kernel/user boundary between
 * bpf/profile.bpf.c and userspace/sample/sampler.cpp. Fixed-width types only.
 *
 * Every ring-buffer record starts with struct profile_event_header; `kind`
 * says which record follows and `size` its total size in bytes, so a reader
 * can skip kinds it does not know. A new unwinding mode (e.g. copied
 * registers + stack bytes for CFI) adds a kind and a mode, nothing else. */
#ifndef GSYMPROF_BPF_PROFILE_H
#define GSYMPROF_BPF_PROFILE_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

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
  PROFILE_EVENT_FP_STACK = 1, /* struct profile_fp_stack_event */
  PROFILE_EVENT_EXEC = 2,     /* struct profile_exec_event: tgid's image replaced */
  PROFILE_EVENT_STACK_COPY = 3, /* struct profile_stack_copy_event */
  /* Side-band: how target processes' executable mappings change, sent in
   * the samples' ring buffer so they arrive in order with the samples. */
  PROFILE_EVENT_MMAP = 16,    /* struct profile_mmap_event: a new executable mapping */
  PROFILE_EVENT_FORK = 17,    /* struct profile_fork_event: a new process */
  PROFILE_EVENT_EXIT = 18,    /* struct profile_exit_event: a process ended */
};

/* Per-CPU counters, indexes into the `counters` array map. */
enum profile_counter {
  PROFILE_COUNTER_SAMPLES = 0,    /* samples of target tasks, before any loss */
  PROFILE_COUNTER_RINGBUF_FULL,   /* lost: ring buffer reservation failed */
  PROFILE_COUNTER_STACK_ERROR,    /* lost: bpf_get_stack returned an error */
  PROFILE_COUNTER_NO_USER_STACK,  /* lost: kernel thread or no user frames */
  PROFILE_COUNTER_TRUNCATED,      /* kept, but the stack filled the buffer */
  PROFILE_COUNTER_SIDEBAND_LOST,  /* an mmap/fork/exec/exit event could not be
                                     queued: user space re-reads /proc instead */
  PROFILE_COUNTER_STACK_COPY_SHORT, /* kept: the user stack could be copied only
                                       partly (or not at all) */
  PROFILE_COUNTER_KERNEL_STACK_ERROR, /* kept without kernel frames:
                                         bpf_get_stack(kernel) failed */
  PROFILE_COUNTER_KERNEL_TRUNCATED,   /* kept: more kernel frames than
                                         PROFILE_MAX_KERNEL_FRAMES */
  PROFILE_COUNTER_KERNEL_THREAD,      /* kept: a kernel thread's sample (kernel
                                         frames only) */
  PROFILE_COUNTER_COUNT,
};

struct profile_event_header {
  __u32 kind; /* enum profile_event_kind */
  __u32 size; /* bytes of the whole record, header included */
  __u32 tgid;
  __u32 tid;
  __u64 time_ns; /* bpf_ktime_get_ns() */
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

/* exec: header.tgid's image is replaced; the mappings of the new image
 * follow (sent at the end of begin_new_exec, before the ELF loader maps the
 * program, so they are not mistaken for the old image's). */
struct profile_exec_event {
  struct profile_event_header header;
  __u64 mm; /* the new address space (an opaque id, as in profile_mmap_event) */
};

/* The file name of a mapping, as components from the file up to the root of
 * the mount tree it was reached through, each NUL-terminated ("libc.so.6\0
 * x86_64-linux-gnu\0lib\0usr\0"); a longer path is not sent. */
#define PROFILE_PATH_BYTES 512
#define PROFILE_PATH_COMPONENTS 32

#define PROFILE_MAP_READ 1u
#define PROFILE_MAP_WRITE 2u
#define PROFILE_MAP_EXEC 4u
#define PROFILE_MAP_SHARED 8u
#define PROFILE_MAP_VDSO 16u          /* the kernel's vDSO (no file) */
#define PROFILE_MAP_PATH_COMPLETE 32u /* path reached the root: every component is there */
/* Mapped by the kernel's ELF loader at exec (the program, its interpreter):
 * its other PF_X segments are mapped too, maybe past holes the VMA walk
 * cannot cross, so user space adds them from the file's program headers. */
#define PROFILE_MAP_ELF_LOADER 64u

/* A mapping with PROT_EXEC made (mmap, or mprotect adding PROT_EXEC) by
 * header.tgid: start/end/file_offset as in /proc/PID/maps, the file's device,
 * inode and the stamp a later open must match (fstat's st_size, st_mtim,
 * st_ctim), so a file replaced since is never taken for it. */
struct profile_mmap_event {
  struct profile_event_header header;
  __u64 mm; /* the address space, an opaque id: a new one means a new image */
  __u64 start, end, file_offset;
  __u64 inode; /* 0: anonymous memory (JIT code) or the vDSO */
  __u64 file_size;
  __s64 mtime_sec, ctime_sec;
  __u32 mtime_nsec, ctime_nsec;
  __u32 dev_major, dev_minor;
  __u32 flags;     /* PROFILE_MAP_* */
  __u32 path_size; /* bytes of path used */
  char path[PROFILE_PATH_BYTES];
};

/* A new process (not a thread): header.tgid forked child_tgid, which shares
 * the parent's image until it execs. */
struct profile_fork_event {
  struct profile_event_header header;
  __u64 child_mm;
  __u32 child_tgid;
  __u32 reserved;
};

/* header.tgid's last thread exited: its pid may be reused from now on. */
struct profile_exit_event {
  struct profile_event_header header;
};

#endif /* GSYMPROF_BPF_PROFILE_H */
