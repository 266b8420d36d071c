// gsym_reencode - test tool for tests/compat/gsym_llvm_builder.sh: decodes a
// GSYM file with our Reader and re-encodes it with our Builder.
//
//   gsym_reencode [--own-strings] [--big-endian] [--shuffle]
//                 [--gsym-version=N] [--addresses=FILE] IN OUT
//
// Default: strings re-added in string-table offset order, files in index
// order, functions as decoded, deduplicate=false - LLVM's file must come back
// byte for byte. --own-strings leaves string order to the builder (and turns
// de-duplication on), --shuffle adds functions in a scrambled order,
// --big-endian swaps the byte order, --gsym-version=2 writes version 2 (the
// input may be either): those outputs differ in bytes but must answer every
// lookup the same. --addresses writes one hex address per line
// to probe: every function start and last byte, line-row address and inline
// range boundary, plus a few addresses outside every function.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "gsym/builder/builder.h"
#include "gsym/reader/reader.h"

using namespace gsym;

namespace {

int fail(const std::string& what) {
  std::fprintf(stderr, "gsym_reencode: %s\n", what.c_str());
  return 1;
}

void collect_inline(const InlineNode& node, std::set<uint64_t>& out) {
  for (const AddressRange& r : node.ranges) {
    out.insert(r.start);
    if (r.end > r.start) out.insert(r.end - 1);
  }
  for (const InlineNode& child : node.children) collect_inline(child, out);
}

}  // namespace

int main(int argc, char** argv) {
  bool own_strings = false, big_endian = false, shuffle = false;
  uint16_t version = kVersion;
  std::string addresses_path;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--own-strings") own_strings = true;
    else if (arg == "--big-endian") big_endian = true;
    else if (arg == "--shuffle") shuffle = true;
    else if (arg == "--gsym-version=1") version = kVersion;
    else if (arg == "--gsym-version=2") version = kVersion2;
    else if (arg.rfind("--addresses=", 0) == 0) addresses_path = arg.substr(12);
    else if (!arg.empty() && arg[0] == '-') {
      fail("unknown option " + arg);
      return 2;
    }
    else paths.push_back(arg);
  }
  if (paths.size() != 2) {
    std::fprintf(stderr, "usage: gsym_reencode [--own-strings] [--big-endian] [--shuffle] "
                         "[--gsym-version=N] [--addresses=FILE] IN OUT\n");
    return 2;
  }
  auto reader = Reader::open(paths[0]);
  if (!reader) return fail(paths[0] + ": " + reader.error().to_string());
  const Header& header = reader->header();

  BuilderOptions options;
  options.endian = big_endian ? Endian::Big : header.endian;
  options.version = version;
  options.base_address = header.base_address;
  options.build_id.assign(reader->build_id().begin(), reader->build_id().end());
  options.deduplicate = own_strings;
  Builder builder(options);

  if (!own_strings) {
    for (uint64_t offset = 1; offset < header.strtab_size;) {
      std::string_view s = reader->string(offset);
      uint32_t got = builder.add_string(s);
      if (got != offset)
        return fail("string at offset " + std::to_string(offset) + " re-added at " +
                    std::to_string(got));
      offset += s.size() + 1;
    }
  }
  auto files = reader->decode_files();
  if (!files) return fail(paths[0] + ": " + files.error().to_string());
  for (size_t i = 0; i < files->size(); ++i) {
    uint32_t index = builder.add_file((*files)[i]);
    if (index != i)
      return fail("file " + std::to_string(i) + " re-added as " + std::to_string(index));
  }

  std::vector<Function> functions;
  std::set<uint64_t> probes;
  for (size_t i = 0; i < reader->function_count(); ++i) {
    auto f = reader->decode_function(i);
    if (!f) return fail(paths[0] + ": function " + std::to_string(i) + ": " + f.error().to_string());
    const AddressRange& r = f->range;
    probes.insert(r.start);
    if (r.end > r.start) probes.insert(r.end - 1);
    probes.insert(r.end);  // often a gap or the next function
    if (r.start > 0) probes.insert(r.start - 1);
    for (const LineEntry& row : f->lines) probes.insert(row.address);
    if (f->inline_tree) collect_inline(*f->inline_tree, probes);
    functions.push_back(std::move(*f));
  }
  if (shuffle) {
    // A fixed scramble: odd indices backwards, then even ones.
    std::vector<Function> scrambled;
    for (size_t i = functions.size(); i-- > 0;)
      if (i % 2) scrambled.push_back(functions[i]);
    for (size_t i = 0; i < functions.size(); i += 2) scrambled.push_back(functions[i]);
    functions = std::move(scrambled);
  }
  for (Function& f : functions) {
    std::string name = f.name;
    Status s = builder.add_function(std::move(f));
    if (!s) return fail("add_function(" + name + "): " + s.error().to_string());
  }
  Status written = builder.write_file(paths[1]);
  if (!written) return fail(written.error().to_string());

  if (!addresses_path.empty()) {
    if (header.base_address > 0) probes.insert(header.base_address - 1);
    probes.insert(UINT64_MAX - 1);
    std::ofstream out(addresses_path);
    for (uint64_t a : probes) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "0x%llx\n", static_cast<unsigned long long>(a));
      out << buf;
    }
    if (!out) return fail(addresses_path + ": write failed");
  }
  return 0;
}
