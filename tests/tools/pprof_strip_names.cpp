// pprof_strip_names IN OUT: a pprof as an agent that leaves naming to a
// backend sends it: every location of a mapping with a build ID loses its
// lines, the profile its functions that no other location uses, those
// mappings their has_* flags. Addresses, mappings and samples stay.
// The input for tests of `gsymprof serve` (tests/e2e/serve_pprof.sh).
#include <cstdio>
#include <set>
#include <string>

#include "gsym/base/file_io.h"
#include "userspace/output/pprof_input.h"
#include "userspace/output/pprof_output.h"
#include "userspace/output/profile.pb.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: pprof_strip_names IN OUT\n");
    return 2;
  }
  auto bytes = gsym::read_file_text(argv[1], uint64_t{1} << 30);
  if (!bytes) {
    std::fprintf(stderr, "pprof_strip_names: %s\n", bytes.error().to_string().c_str());
    return 1;
  }
  std::string plain = *bytes;
  if (gsymprof::is_gzip(plain)) {
    auto inflated = gsymprof::gunzip_bytes(plain, uint64_t{1} << 30);
    if (!inflated) {
      std::fprintf(stderr, "pprof_strip_names: %s\n", inflated.error().message.c_str());
      return 1;
    }
    plain = std::move(*inflated);
  }
  perftools::profiles::Profile profile;
  if (!profile.ParseFromString(plain)) {
    std::fprintf(stderr, "pprof_strip_names: not a pprof\n");
    return 1;
  }
  std::set<uint64_t> stripped;  // mapping ids
  for (auto& mapping : *profile.mutable_mapping()) {
    if (mapping.build_id() == 0 || profile.string_table(static_cast<int>(mapping.build_id())).empty()) continue;
    stripped.insert(mapping.id());
    mapping.set_has_functions(false);
    mapping.set_has_filenames(false);
    mapping.set_has_line_numbers(false);
    mapping.set_has_inline_frames(false);
  }
  std::set<uint64_t> used;  // function ids still referenced
  for (auto& location : *profile.mutable_location()) {
    if (stripped.contains(location.mapping_id())) location.clear_line();
    for (const auto& line : location.line()) used.insert(line.function_id());
  }
  auto* functions = profile.mutable_function();
  for (int i = functions->size() - 1; i >= 0; --i)
    if (!used.contains(functions->Get(i).id())) functions->DeleteSubrange(i, 1);
  auto gzipped = gsymprof::gzip_bytes(profile.SerializeAsString());
  if (!gzipped) return 1;
  gsym::Status written = gsym::write_file_atomically(argv[2], std::string_view(*gzipped));
  if (!written) {
    std::fprintf(stderr, "pprof_strip_names: %s\n", written.error().to_string().c_str());
    return 1;
  }
  return 0;
}
