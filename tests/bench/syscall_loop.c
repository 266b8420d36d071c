/* tests/bench/syscall_loop.c - a getppid() loop for the syscalls section of
 * tests/bench/run.sh: N calls through syscall(2) (no libc caching), timed
 * with CLOCK_MONOTONIC; prints "ns_per_call=X". */
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 3000000;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < n; i++) syscall(SYS_getppid);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
  printf("ns_per_call=%.1f\n", ns / (double)n);
  return 0;
}
