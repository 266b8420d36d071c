// tests/bench/lookup_bench.cpp - our gsym::Reader timed on an address list,
// the peer of llvm_lookup_bench.cpp (same lists, same timing, same checksum).
//
//   lookup_bench GSYM ADDRS [MIN_PASSES MIN_SECONDS]
//   lookup_bench --answers GSYM ADDRS
// The first prints one line per path:
//   ours find        ns=...                       find_function() alone
//   ours into-names  ns=...                       lookup_into(), no lines/inlines
//   ours into-full   ns=... found=N checksum=...  lookup_into(), full answers
//   ours alloc-names ns=...                       lookup() (allocating), names only
//   ours alloc-full  ns=... found=N checksum=...  lookup() (allocating), full
// The checksum folds every frame (name, directory, basename, line, offset)
// exactly as llvm_lookup_bench does, so equal checksums mean equal answers.
// --answers prints each address's frames as text, one line per address, as
// tests/bench/rust_peers prints gsym-rs's and blazesym's: "0xADDR", then per
// frame, innermost first, a tab and "NAME BASENAME:LINE" ("NAME" when the
// line is unknown), or a tab and "?" when no function covers the address.
#include <cinttypes>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "bench_common.h"
#include "gsym/reader/reader.h"

namespace {

constexpr gsym::LookupOptions kFull{};
constexpr gsym::LookupOptions kNamesOnly{false, false};

bench::Checksum checksum_into(const gsym::Reader& reader, const std::vector<uint64_t>& addresses,
                              uint64_t& found, uint64_t& errors) {
  bench::Checksum checksum;
  gsym::LookupScratch scratch;
  for (uint64_t addr : addresses) {
    gsym::Expected<bool> hit = reader.lookup_into(addr, kFull, scratch);
    if (!hit.ok()) ++errors;
    if (!hit.ok() || !*hit) {
      checksum.add_number(0);
      continue;
    }
    ++found;
    checksum.add_number(scratch.frames.size());
    for (const gsym::LookupFrame& f : scratch.frames)
      checksum.add_frame(f.name, f.directory, f.basename, f.line, f.offset);
  }
  return checksum;
}

bench::Checksum checksum_alloc(const gsym::Reader& reader, const std::vector<uint64_t>& addresses) {
  bench::Checksum checksum;
  for (uint64_t addr : addresses) {
    auto result = reader.lookup(addr, kFull);
    if (!result.ok() || !result->has_value()) {
      checksum.add_number(0);
      continue;
    }
    const gsym::LookupResult& r = **result;
    checksum.add_number(r.frames.size());
    for (const gsym::LookupFrame& f : r.frames)
      checksum.add_frame(f.name, f.directory, f.basename, f.line, f.offset);
  }
  return checksum;
}

int print_answers(const gsym::Reader& reader, const std::vector<uint64_t>& addresses) {
  std::string out;
  gsym::LookupScratch scratch;
  char buf[64];
  for (uint64_t addr : addresses) {
    std::snprintf(buf, sizeof buf, "0x%" PRIx64, addr);
    out += buf;
    gsym::Expected<bool> hit = reader.lookup_into(addr, kFull, scratch);
    if (!hit.ok() || !*hit) out += "\t?";
    else
      for (const gsym::LookupFrame& f : scratch.frames) {
        out += '\t';
        out += f.name;
        if (f.line == 0) continue;
        std::snprintf(buf, sizeof buf, ":%" PRIu32, f.line);
        (out += ' ') += f.basename;
        out += buf;
      }
    out += '\n';
  }
  return std::fwrite(out.data(), 1, out.size(), stdout) == out.size() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string_view(argv[1]) == "--answers") {
    gsym::Expected<gsym::Reader> opened = gsym::Reader::map(argv[2]);
    if (!opened.ok()) {
      std::fprintf(stderr, "%s: %s\n", argv[2], opened.error().to_string().c_str());
      return 1;
    }
    std::vector<uint64_t> addresses;
    if (!bench::read_addresses(argv[3], addresses)) return 1;
    return print_answers(*opened, addresses);
  }
  if (argc != 3 && argc != 5) {
    std::fprintf(stderr, "usage: lookup_bench GSYM ADDRS [MIN_PASSES MIN_SECONDS] | --answers GSYM ADDRS\n");
    return 2;
  }
  int min_passes = argc == 5 ? std::atoi(argv[3]) : 3;
  double min_seconds = argc == 5 ? std::atof(argv[4]) : 0.5;

  gsym::Expected<gsym::Reader> opened = gsym::Reader::map(argv[1]);
  if (!opened.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[1], opened.error().to_string().c_str());
    return 1;
  }
  const gsym::Reader& reader = *opened;
  std::vector<uint64_t> addresses;
  if (!bench::read_addresses(argv[2], addresses)) return 1;

  uint64_t found = 0, errors = 0;
  bench::Checksum into = checksum_into(reader, addresses, found, errors);
  bench::Checksum alloc = checksum_alloc(reader, addresses);
  if (errors != 0) std::fprintf(stderr, "%s: %" PRIu64 " lookups failed with an error\n", argv[1], errors);
  if (into.value != alloc.value) {
    std::fprintf(stderr, "%s: lookup() and lookup_into() disagree\n", argv[1]);
    return 1;
  }

  const size_t n = addresses.size();
  double find_ns = bench::median_ns_per_lookup(n, min_passes, min_seconds, [&] {
    for (uint64_t addr : addresses) bench::keep(reader.find_function(addr));
  });
  gsym::LookupScratch scratch;
  auto time_into = [&](const gsym::LookupOptions& options) {
    return bench::median_ns_per_lookup(n, min_passes, min_seconds, [&] {
      for (uint64_t addr : addresses) {
        gsym::Expected<bool> hit = reader.lookup_into(addr, options, scratch);
        bench::keep(hit);
      }
    });
  };
  auto time_alloc = [&](const gsym::LookupOptions& options) {
    return bench::median_ns_per_lookup(n, min_passes, min_seconds, [&] {
      for (uint64_t addr : addresses) {
        auto result = reader.lookup(addr, options);
        bench::keep(result);
      }
    });
  };
  double into_names = time_into(kNamesOnly);
  double into_full = time_into(kFull);
  double alloc_names = time_alloc(kNamesOnly);
  double alloc_full = time_alloc(kFull);

  std::printf("ours find ns=%.1f\n", find_ns);
  std::printf("ours into-names ns=%.1f\n", into_names);
  std::printf("ours into-full ns=%.1f found=%" PRIu64 " checksum=%016" PRIx64 "\n", into_full, found, into.value);
  std::printf("ours alloc-names ns=%.1f\n", alloc_names);
  std::printf("ours alloc-full ns=%.1f found=%" PRIu64 " checksum=%016" PRIx64 "\n", alloc_full, found, alloc.value);
  return 0;
}
