// tests/bench/fixed_work.c - a fixed amount of arithmetic, timed: prints the
// wall-clock ns it took. On a CPU of its own, whatever else interrupts that
// CPU (a profiler's sampling timer) shows as extra time.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char** argv) {
  const unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000000000UL;
  volatile unsigned long sum = 0;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (unsigned long i = 0; i < n; ++i) sum += i * i;
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("%.0f\n", (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec));
  return 0;
}
