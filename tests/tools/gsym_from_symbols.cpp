// gsym_from_symbols - test tool for tests/compat/gsym_llvm_builder.sh: builds
// a GSYM file from a symbol list the script extracted with readelf, the way
// llvm-gsymutil converts a binary without DWARF (names interned and functions
// added in .symtab order, LLVM's insertion-order ties), so that our finalize
// rules (aliases, overlaps, zero-size symbols, trailing extension) can be
// compared byte for byte with LLVM's.
//
//   gsym_from_symbols [--content-ties] [--reverse] LIST OUT
// --content-ties uses the builder's default (order-independent) tiebreak and
// --reverse adds the functions backwards: those two must agree byte for byte.
// LIST lines:  base ADDR | build_id HEX | text START SIZE | func ADDR SIZE NAME
// (numbers in hex with 0x or decimal).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gsym/builder/builder.h"

using namespace gsym;

namespace {

bool parse_number(const std::string& s, uint64_t& out) {
  try {
    size_t used = 0;
    out = std::stoull(s, &used, 0);
    return used == s.size();
  } catch (...) {
    return false;
  }
}

int fail(const std::string& what) {
  std::fprintf(stderr, "gsym_from_symbols: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  bool content_ties = false, reverse = false;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--content-ties") content_ties = true;
    else if (arg == "--reverse") reverse = true;
    else paths.push_back(arg);
  }
  if (paths.size() != 2) {
    std::fprintf(stderr, "usage: gsym_from_symbols [--content-ties] [--reverse] LIST OUT\n");
    return 2;
  }
  std::ifstream in(paths[0]);
  if (!in) return fail(paths[0] + ": cannot open");
  BuilderOptions options;
  options.insertion_order_ties = !content_ties;
  std::vector<Function> functions;
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    std::istringstream fields(line);
    std::string kind, a, b;
    fields >> kind >> a;
    uint64_t x = 0, y = 0;
    const std::string where = paths[0] + ":" + std::to_string(number);
    if (kind == "base" && parse_number(a, x)) {
      options.base_address = x;
    } else if (kind == "build_id" && a.size() % 2 == 0 &&
               a.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos) {
      for (size_t i = 0; i < a.size(); i += 2)
        options.build_id.push_back(static_cast<uint8_t>(std::stoul(a.substr(i, 2), nullptr, 16)));
    } else if (kind == "text" && (fields >> b) && parse_number(a, x) && parse_number(b, y)) {
      options.text_ranges.push_back({x, x + y});
    } else if (kind == "func" && (fields >> b) && parse_number(a, x) && parse_number(b, y)) {
      std::string name;
      fields >> name;
      if (name.empty()) return fail(where + ": function without a name");
      functions.push_back(Function{{x, x + y}, name, {}, std::nullopt, {}, {}});
    } else if (!line.empty()) {
      return fail(where + ": cannot parse '" + line + "'");
    }
  }
  // LLVM only takes symbols inside an executable section.
  std::erase_if(functions, [&](const Function& f) {
    for (const AddressRange& text : options.text_ranges)
      if (text.contains(f.range.start)) return false;
    return true;
  });
  if (reverse) std::reverse(functions.begin(), functions.end());
  Builder builder(options);
  // LLVM interns each name as it adds the symbol; reversed runs keep that
  // string order so only the function order differs.
  for (auto it = functions.begin(); it != functions.end(); ++it)
    builder.add_string(reverse ? functions.rbegin()[it - functions.begin()].name : it->name);
  for (Function& f : functions) {
    Status s = builder.add_function(std::move(f));
    if (!s) return fail(s.error().to_string());
  }
  Status written = builder.write_file(paths[1]);
  if (!written) return fail(written.error().to_string());
  return 0;
}
