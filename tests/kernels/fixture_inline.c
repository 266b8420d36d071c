/* Fixture for the kernel matrix (tests/kernels/). Built with
 * gcc -O2 -g -fomit-frame-pointer: no frame pointers, so a complete stack
 * needs the CFI unwinder, and the hot loop's body is an always_inline
 * function, so a complete stack also needs inline frames:
 *   main;hot_loop;hot_step_[i]
 * Runs for about SECONDS (default 3) of wall time, then exits 0. */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink;

/* The inlined frame: nearly every instruction the program executes is
 * here (a dependent multiply/xorshift chain the compiler cannot fold). */
static inline __attribute__((always_inline)) uint64_t hot_step(uint64_t x) {
  for (int i = 0; i < 4096; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x *= 0x9e3779b97f4a7c15ull;
  }
  return x;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The concrete frame: noinline + noclone so it keeps its own name
 * (no .constprop/.isra clone). It checks the clock rarely, so its own
 * instructions and clock_gettime carry a negligible share of samples. */
__attribute__((noinline, noclone)) uint64_t hot_loop(double seconds) {
  uint64_t x = 88172645463325252ull;
  double end = now() + seconds;
  do {
    for (int i = 0; i < 256; i++) x = hot_step(x);
  } while (now() < end);
  return x;
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 3.0;
  sink = hot_loop(seconds);
  return 0;
}
