// userspace/base/monotonic_clock.h - CLOCK_MONOTONIC in nanoseconds: the
// clock of bpf_ktime_get_ns, the side-band's records and the sample times.
#pragma once

#include <time.h>

#include <cstdint>

namespace gsymprof {

inline uint64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec);
}

}  // namespace gsymprof
