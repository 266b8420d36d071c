/* bpf/kernel_types.h - the kernel's types, as far as bpf/profile.bpf.c reads
 * them, instead of a vmlinux.h dumped from the build machine's kernel.
 *
 * A dumped vmlinux.h bakes in one kernel's layout: built on 6.18, pt_regs.cs
 * is a u16 in a union, and libbpf refuses the program on 6.1, where it is an
 * unsigned long. Here every kernel struct names only the fields the program
 * reads, in types that every supported kernel (5.19 and later; see
 * bpf/README.md) agrees on, and carries preserve_access_index so libbpf
 * relocates each access to the running kernel's offsets (CO-RE). Nothing
 * else is declared; a field that moved between kernels is read through
 * bpf_core_field_exists and a flavour (struct NAME___flavour).
 *
 * The perf-event program's context is not a kernel struct but an ABI: the
 * user_regs layout of x86-64 (struct pt_regs of the uapi), whose fields the
 * kernel itself rewrites to full-width loads, so it is declared without
 * relocations (profile_user_regs). */
#ifndef GSYMPROF_BPF_KERNEL_TYPES_H
#define GSYMPROF_BPF_KERNEL_TYPES_H

#include <linux/bpf.h>
#include <linux/types.h>

typedef _Bool bool;
#define true 1
#define false 0
typedef int pid_t;

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct thread_struct {
  unsigned long fsbase; /* x86-64: the thread pointer (glibc: its TCB) */
};

struct mm_struct {
  unsigned long start_stack;
};

struct task_struct {
  unsigned int flags;
  pid_t pid;
  pid_t tgid;
  struct mm_struct* mm;
  struct thread_struct thread;
  char comm[16];
};

struct vm_area_struct {
  unsigned long vm_start;
  unsigned long vm_end;
};

/* The kernel's saved user registers (bpf_task_pt_regs): ip, sp and bp are
 * unsigned long on every x86-64 kernel. */
struct pt_regs {
  unsigned long bp;
  unsigned long ip;
  unsigned long sp;
};

#pragma clang attribute pop

/* The perf-event program's context: x86-64's user_regs_struct order, an ABI
 * (perf_event programs see struct bpf_perf_event_data, whose regs are the
 * uapi pt_regs). cs is 8 bytes here on every kernel: the context only
 * allows full-width loads, and 6.18's u16 cs sits in the low bytes of csx. */
struct profile_user_regs {
  __u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip, cs, flags,
      sp, ss;
};

struct bpf_perf_event_data {
  struct profile_user_regs regs;
  __u64 sample_period;
  __u64 addr;
};

#endif /* GSYMPROF_BPF_KERNEL_TYPES_H */
