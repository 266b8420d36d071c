// tests/bench/bench_common.h - pieces shared by the two lookup harnesses
// (ours and LLVM's), so both read the same address files, time the same way
// and fold their answers into the same checksum.
#pragma once

#include <algorithm>
#include <cerrno>
#include <chrono>
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

using Clock = std::chrono::steady_clock;

// Runs `pass` (one lookup of every address) until at least `min_passes`
// passes and `min_seconds` have gone by after one untimed warm-up pass;
// returns the median ns per lookup over the timed passes.
template <class Pass>
double median_ns_per_lookup(size_t lookups_per_pass, int min_passes, double min_seconds,
                            Pass&& pass) {
  pass();
  std::vector<double> ns;
  Clock::time_point begin = Clock::now();
  while (static_cast<int>(ns.size()) < min_passes ||
         std::chrono::duration<double>(Clock::now() - begin).count() < min_seconds) {
    Clock::time_point t0 = Clock::now();
    pass();
    Clock::time_point t1 = Clock::now();
    ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() /
                 static_cast<double>(lookups_per_pass));
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
