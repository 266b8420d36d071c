// tests/bench/bench_common.h - pieces shared by the two lookup harnesses
// (ours and LLVM's), so both read the same address files, time the same way
// and fold their answers into the same checksum.
#pragma once

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace bench {

// One address per line, hex (0x...) or decimal; blank lines ignored.
// Returns false (with a message on stderr) on an unreadable or bad file.
inline bool read_addresses(const std::string& path, std::vector<uint64_t>& out) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "%s: cannot open\n", path.c_str());
    return false;
  }
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    char* end = nullptr;
    errno = 0;
    unsigned long long value = std::strtoull(line.c_str(), &end, 0);
    if (errno != 0 || end == line.c_str() || *end != '\0') {
      std::fprintf(stderr, "%s:%zu: bad address '%s'\n", path.c_str(), line_no, line.c_str());
      return false;
    }
    out.push_back(value);
  }
  if (out.empty()) {
    std::fprintf(stderr, "%s: no addresses\n", path.c_str());
    return false;
  }
  return true;
}

// FNV-1a, folded over every field of every frame: equal checksums mean the
// two readers gave the same answers for the whole list.
struct Checksum {
  uint64_t value = 1469598103934665603ULL;
  void add_bytes(std::string_view s) {
    for (unsigned char c : s) value = (value ^ c) * 1099511628211ULL;
    value = (value ^ 0xff) * 1099511628211ULL;  // field separator
  }
  void add_number(uint64_t n) {
    for (int i = 0; i < 8; ++i) value = (value ^ ((n >> (8 * i)) & 0xff)) * 1099511628211ULL;
  }
  void add_frame(std::string_view name, std::string_view dir, std::string_view base,
                 uint64_t line, uint64_t offset) {
    add_bytes(name);
    add_bytes(dir);
    add_bytes(base);
    add_number(line);
    add_number(offset);
  }
};

// CPU time of the calling thread: the machine is shared and busy, and time
// spent preempted says nothing about the code under test.
inline double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// Runs `pass` (one lookup of every address) until at least `min_passes`
// passes and `min_seconds` of CPU time have gone by after one untimed warm-up pass;
// returns the median ns per lookup over the timed passes.
template <class Pass>
double median_ns_per_lookup(size_t lookups_per_pass, int min_passes, double min_seconds,
                            Pass&& pass) {
  pass();
  std::vector<double> ns;
  const double begin = thread_cpu_ns();
  while (static_cast<int>(ns.size()) < min_passes || thread_cpu_ns() - begin < min_seconds * 1e9) {
    const double t0 = thread_cpu_ns();
    pass();
    ns.push_back((thread_cpu_ns() - t0) / static_cast<double>(lookups_per_pass));
    if (ns.size() >= 1000) break;
  }
  std::sort(ns.begin(), ns.end());
  return ns[ns.size() / 2];
}

// Keeps the optimizer from discarding a result.
template <class T>
inline void keep(const T& value) {
  asm volatile("" : : "g"(&value) : "memory");
}

}  // namespace bench
