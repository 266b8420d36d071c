// tests/bench/unique_stacks.c - a random walk through 64 functions of
// different frame sizes, 8-31 calls deep: nearly every sample is a new
// stack. The memory section of tests/bench/run.sh measures the profiler's
// peak RSS per unique stack on it. Usage: unique_stacks SECONDS
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static uint64_t state = 88172645463325252ull;

static inline uint64_t next_random(void) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

typedef unsigned (*step_fn)(unsigned depth);
extern step_fn steps[64];

__attribute__((noinline)) static unsigned burn(void) {
  volatile unsigned x = 0;
  for (int i = 0; i < 2000; ++i) x += i;
  return x;
}

#define STEP(I, PAD)                                                  \
  __attribute__((noinline)) unsigned step##I(unsigned depth) {        \
    volatile char pad[PAD];                                           \
    pad[0] = (char)depth;                                             \
    if (depth == 0) return burn() + pad[0];                           \
    return steps[next_random() % 64](depth - 1) + pad[0];             \
  }

STEP(0, 16)
STEP(1, 24)
STEP(2, 32)
STEP(3, 40)
STEP(4, 48)
STEP(5, 16)
STEP(6, 24)
STEP(7, 32)
STEP(8, 40)
STEP(9, 48)
STEP(10, 16)
STEP(11, 24)
STEP(12, 32)
STEP(13, 40)
STEP(14, 48)
STEP(15, 16)
STEP(16, 24)
STEP(17, 32)
STEP(18, 40)
STEP(19, 48)
STEP(20, 16)
STEP(21, 24)
STEP(22, 32)
STEP(23, 40)
STEP(24, 48)
STEP(25, 16)
STEP(26, 24)
STEP(27, 32)
STEP(28, 40)
STEP(29, 48)
STEP(30, 16)
STEP(31, 24)
STEP(32, 32)
STEP(33, 40)
STEP(34, 48)
STEP(35, 16)
STEP(36, 24)
STEP(37, 32)
STEP(38, 40)
STEP(39, 48)
STEP(40, 16)
STEP(41, 24)
STEP(42, 32)
STEP(43, 40)
STEP(44, 48)
STEP(45, 16)
STEP(46, 24)
STEP(47, 32)
STEP(48, 40)
STEP(49, 48)
STEP(50, 16)
STEP(51, 24)
STEP(52, 32)
STEP(53, 40)
STEP(54, 48)
STEP(55, 16)
STEP(56, 24)
STEP(57, 32)
STEP(58, 40)
STEP(59, 48)
STEP(60, 16)
STEP(61, 24)
STEP(62, 32)
STEP(63, 40)

step_fn steps[64] = {
  step0, step1, step2, step3, step4, step5, step6, step7,
  step8, step9, step10, step11, step12, step13, step14, step15,
  step16, step17, step18, step19, step20, step21, step22, step23,
  step24, step25, step26, step27, step28, step29, step30, step31,
  step32, step33, step34, step35, step36, step37, step38, step39,
  step40, step41, step42, step43, step44, step45, step46, step47,
  step48, step49, step50, step51, step52, step53, step54, step55,
  step56, step57, step58, step59, step60, step61, step62, step63,
};

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 5;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  unsigned sum = 0;
  do {
    for (int i = 0; i < 100; ++i) sum += steps[next_random() % 64](8 + next_random() % 24);
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
  return sum == 1u ? 2 : 0;  // uses sum, so the walks are not optimized away
}
