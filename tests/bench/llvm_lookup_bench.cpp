// tests/bench/llvm_lookup_bench.cpp - LLVM 22's GsymReader::lookup timed on
// an address list, the peer of lookup_bench.cpp (same lists, same timing,
// same checksum). Also makes the address lists, from function ranges read by
// LLVM's reader, so the lists do not depend on the reader under test.
//
//   llvm_lookup_bench lookup GSYM ADDRS [MIN_PASSES MIN_SECONDS]
//       -> "llvm full ns=<median ns/lookup> found=<n> checksum=<hex>"
//   llvm_lookup_bench addresses GSYM uniform|zipf COUNT SEED
//       -> COUNT addresses, one per line (0x...)
//        uniform: every byte of every function range equally likely
//        zipf:    functions in a seeded random order, rank k drawn with weight
//                 1/k^1.1, address uniform inside the function (a skewed
//                 profile: a few hot functions carry most samples)
#include <llvm/DebugInfo/GSYM/GsymReader.h>
#include <llvm/DebugInfo/GSYM/LookupResult.h>
#include <llvm/Support/Error.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_common.h"

namespace {

struct FunctionRange {
  uint64_t start;
  uint64_t size;
};

// splitmix64: deterministic everywhere, unlike std:: distributions.
struct Random {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return next() % n; }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

bool open_reader(const char* path, std::optional<llvm::gsym::GsymReader>& out) {
  llvm::Expected<llvm::gsym::GsymReader> reader = llvm::gsym::GsymReader::openFile(path);
  if (!reader) {
    std::fprintf(stderr, "%s: %s\n", path, llvm::toString(reader.takeError()).c_str());
    return false;
  }
  out.emplace(std::move(*reader));
  return true;
}

int make_addresses(const char* gsym_path, const std::string& kind, uint64_t count, uint64_t seed) {
  std::optional<llvm::gsym::GsymReader> reader;
  if (!open_reader(gsym_path, reader)) return 1;
  std::vector<FunctionRange> functions;
  for (uint32_t i = 0; i < reader->getNumAddresses(); ++i) {
    llvm::Expected<llvm::gsym::FunctionInfo> info = reader->getFunctionInfoAtIndex(i);
    if (!info) {
      std::fprintf(stderr, "%s: function %u: %s\n", gsym_path, i,
                   llvm::toString(info.takeError()).c_str());
      return 1;
    }
    if (info->size() > 0) functions.push_back({info->startAddress(), info->size()});
  }
  if (functions.empty()) {
    std::fprintf(stderr, "%s: no function with a non-empty range\n", gsym_path);
    return 1;
  }
  Random random{seed};
  std::vector<double> cumulative;  // cumulative weight per function
  if (kind == "uniform") {
    double total = 0;
    for (const FunctionRange& f : functions) cumulative.push_back(total += static_cast<double>(f.size));
  } else if (kind == "zipf") {
    for (size_t i = functions.size(); i > 1; --i) std::swap(functions[i - 1], functions[random.below(i)]);
    double total = 0;
    for (size_t k = 0; k < functions.size(); ++k)
      cumulative.push_back(total += 1.0 / std::pow(static_cast<double>(k + 1), 1.1));
  } else {
    std::fprintf(stderr, "unknown address kind '%s' (uniform or zipf)\n", kind.c_str());
    return 2;
  }
  for (uint64_t n = 0; n < count; ++n) {
    double pick = random.unit() * cumulative.back();
    size_t i = static_cast<size_t>(std::upper_bound(cumulative.begin(), cumulative.end(), pick) -
                                   cumulative.begin());
    if (i >= functions.size()) i = functions.size() - 1;
    const FunctionRange& f = functions[i];
    std::printf("0x%" PRIx64 "\n", f.start + random.below(f.size));
  }
  return 0;
}

int time_lookups(const char* gsym_path, const char* address_path, int min_passes, double min_seconds) {
  std::optional<llvm::gsym::GsymReader> reader;
  if (!open_reader(gsym_path, reader)) return 1;
  std::vector<uint64_t> addresses;
  if (!bench::read_addresses(address_path, addresses)) return 1;

  // Answers first (untimed), folded into the checksum shared with ours.
  bench::Checksum checksum;
  uint64_t found = 0;
  for (uint64_t addr : addresses) {
    llvm::Expected<llvm::gsym::LookupResult> result = reader->lookup(addr);
    if (!result) {
      llvm::consumeError(result.takeError());
      checksum.add_number(0);
      continue;
    }
    ++found;
    checksum.add_number(result->Locations.size());
    for (const llvm::gsym::SourceLocation& loc : result->Locations)
      checksum.add_frame(std::string_view(loc.Name.data(), loc.Name.size()),
                         std::string_view(loc.Dir.data(), loc.Dir.size()),
                         std::string_view(loc.Base.data(), loc.Base.size()), loc.Line, loc.Offset);
  }

  double ns = bench::median_ns_per_lookup(addresses.size(), min_passes, min_seconds, [&] {
    for (uint64_t addr : addresses) {
      llvm::Expected<llvm::gsym::LookupResult> result = reader->lookup(addr);
      if (!result)
        llvm::consumeError(result.takeError());
      else
        bench::keep(result->Locations.size());
    }
  });
  std::printf("llvm full ns=%.1f found=%" PRIu64 " checksum=%016" PRIx64 "\n", ns, found, checksum.value);
  return 0;
}

int usage() {
  std::fprintf(stderr,
               "usage: llvm_lookup_bench lookup GSYM ADDRS [MIN_PASSES MIN_SECONDS]\n"
               "       llvm_lookup_bench addresses GSYM uniform|zipf COUNT SEED\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  std::string command = argv[1];
  if (command == "lookup" && (argc == 4 || argc == 6)) {
    int min_passes = argc == 6 ? std::atoi(argv[4]) : 3;
    double min_seconds = argc == 6 ? std::atof(argv[5]) : 0.5;
    return time_lookups(argv[2], argv[3], min_passes, min_seconds);
  }
  if (command == "addresses" && argc == 6)
    return make_addresses(argv[2], argv[3], std::strtoull(argv[4], nullptr, 0),
                          std::strtoull(argv[5], nullptr, 0));
  return usage();
}
