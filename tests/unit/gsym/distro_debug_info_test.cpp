// Debug info as distributions ship it. Compressed debug sections as
// toolchains write them: the GSYM of a program
// whose DWARF objcopy compressed (zstd, zlib, zlib-gnu .zdebug_*) is byte
// for byte the GSYM of the uncompressed program; a damaged zstd payload
// costs the DWARF only, with a one-line reason.
#include <doctest/doctest.h>
#include <gelf.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "gsym/convert/convert.h"
#include "gsym/convert/elf_image.h"
#include "gsym/reader/reader.h"
#include "tests/unit/test_files.h"

namespace {

bool run(const std::string& command) { return std::system((command + " > /dev/null 2>&1").c_str()) == 0; }

// A -O2 -g C++ program with inlining, built once per test run.
std::string build_program(const test_files::TempDir& dir) {
  const std::string source = dir / "program.cpp";
  std::vector<uint8_t> text;
  const std::string code =
      "#include <vector>\n#include <algorithm>\n"
      "static inline int twice(int x) { return x * 2; }\n"
      "int sum(const std::vector<int>& v) { int s = 0; for (int x : v) s += twice(x); return s; }\n"
      "int main(int argc, char**) { std::vector<int> v(argc, 3); std::sort(v.begin(), v.end());"
      " return sum(v); }\n";
  test_files::write_file(source, std::vector<uint8_t>(code.begin(), code.end()));
  const std::string binary = dir / "program";
  REQUIRE(run("g++ -O2 -g " + source + " -o " + binary));
  return binary;
}

std::vector<uint8_t> convert(const std::string& path, gsym::ConvertStats* stats = nullptr) {
  gsym::ConvertOptions options;
  options.threads = 1;
  options.search_debug_file = false;
  auto bytes = gsym::convert_elf(path, options, stats);
  if (!bytes.ok()) FAIL(path << ": " << bytes.error().to_string());
  return *bytes;
}

}  // namespace

TEST_CASE("compressed sections: zstd, zlib and zlib-gnu give the uncompressed program's GSYM") {
  test_files::TempDir dir("compressed_sections");
  const std::string binary = build_program(dir);
  gsym::ConvertStats plain_stats;
  const std::vector<uint8_t> plain = convert(binary, &plain_stats);
  REQUIRE(plain_stats.compile_units > 0);
  for (const char* kind : {"zstd", "zlib", "zlib-gnu"}) {
    CAPTURE(kind);
    const std::string compressed = dir / (std::string("program.") + kind);
    if (!run(std::string("objcopy --compress-debug-sections=") + kind + " " + binary + " " + compressed)) {
      MESSAGE("objcopy cannot write " << kind << " sections here");
      continue;
    }
    gsym::ConvertStats stats;
    CHECK(convert(compressed, &stats) == plain);
    CHECK(stats.dwarf_error.empty());
    CHECK(stats.compile_units == plain_stats.compile_units);
  }
}

TEST_CASE("compressed sections: a damaged zstd payload costs the DWARF, not the run") {
  test_files::TempDir dir("compressed_sections");
  const std::string binary = build_program(dir);
  const std::string compressed = dir / "program.zstd";
  if (!run("objcopy --compress-debug-sections=zstd " + binary + " " + compressed)) return;
  // Overwrite the zstd frame after .debug_info's compression header.
  auto image = gsym::ElfImage::open(compressed);
  REQUIRE(image.ok());
  std::vector<uint8_t> bytes = test_files::read_file(compressed);
  GElf_Shdr shdr{};
  bool found = false;
  for (Elf_Scn* scn = elf_nextscn(image->elf(), nullptr); scn; scn = elf_nextscn(image->elf(), scn)) {
    size_t names = 0;
    elf_getshdrstrndx(image->elf(), &names);
    if (gelf_getshdr(scn, &shdr) && std::string(elf_strptr(image->elf(), names, shdr.sh_name)) == ".debug_info") {
      found = true;
      break;
    }
  }
  REQUIRE(found);
  REQUIRE(shdr.sh_size > 40);
  for (uint64_t i = shdr.sh_offset + 24; i < shdr.sh_offset + shdr.sh_size; ++i) bytes[i] ^= 0x5a;
  const std::string damaged = dir / "damaged";
  test_files::write_file(damaged, bytes);
  gsym::ConvertStats stats;
  convert(damaged, &stats);
  CHECK(stats.compile_units == 0);
  CHECK(stats.dwarf_error.find("cannot decompress section .debug_info: zstd: ") != std::string::npos);
  CHECK(stats.symbol_functions > 0);
}

// MiniDebugInfo as Fedora builds it (gdb's manual, "MiniDebugInfo"): a
// stripped binary keeps .dynsym, and .gnu_debugdata holds an xz ELF whose
// .symtab has the function symbols .dynsym lacks.
TEST_CASE("MiniDebugInfo: .gnu_debugdata's symbols name what .dynsym does not") {
  test_files::TempDir dir("minidebuginfo");
  const std::string code =
      "static __attribute__((noinline)) int local_helper(int x) { return x * 7 + 1; }\n"
      "__attribute__((noinline)) int exported(int x) { return local_helper(x) + 2; }\n"
      "int main(int argc, char**) { return exported(argc); }\n";
  test_files::write_file(dir / "m.c", std::vector<uint8_t>(code.begin(), code.end()));
  const std::string d = dir.path;
  REQUIRE(run("gcc -O1 -g -rdynamic " + d + "/m.c -o " + d + "/m"));
  const bool built = run("cd " + d +
                         " && nm -D m --format=posix --defined-only | awk '{print $1}' | sort > dynsyms"
                         " && nm m --format=posix --defined-only | awk '$2 ~ /[Tt]/ {print $1}' | sort > funcsyms"
                         " && comm -13 dynsyms funcsyms > keep"
                         " && objcopy --only-keep-debug m debug"
                         " && objcopy -S --remove-section .comment --keep-symbols=keep debug mini"
                         " && xz -k mini && strip --strip-all -R .comment -o stripped m"
                         " && cp stripped m.mini && objcopy --add-section .gnu_debugdata=mini.xz m.mini"
                         " && head -c 100 mini.xz > broken.xz && cp stripped m.broken"
                         " && objcopy --add-section .gnu_debugdata=broken.xz m.broken");
  if (!built) {
    MESSAGE("nm/objcopy/xz cannot build a MiniDebugInfo binary here");
    return;
  }
  auto names_of = [](const std::vector<uint8_t>& gsym_bytes) {
    auto reader = gsym::Reader::parse(gsym_bytes);
    REQUIRE(reader.ok());
    std::vector<std::string> names;
    for (size_t i = 0; i < reader->function_count(); ++i) {
      auto function = reader->decode_function(i);
      REQUIRE(function.ok());
      names.emplace_back(function->name);
    }
    return names;
  };
  auto has = [](const std::vector<std::string>& names, const char* name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  gsym::ConvertStats stats;
  const std::vector<std::string> mini = names_of(convert(d + "/m.mini", &stats));
  CHECK(stats.used_minidebuginfo);
  CHECK(has(mini, "exported"));      // .dynsym
  CHECK(has(mini, "local_helper"));  // .gnu_debugdata only
  const std::vector<std::string> stripped = names_of(convert(d + "/stripped"));
  CHECK(has(stripped, "exported"));
  CHECK_FALSE(has(stripped, "local_helper"));

  // A truncated xz stream: a warning, and .dynsym's names still.
  gsym::ConvertOptions options;
  options.threads = 1;
  std::vector<std::string> warnings;
  options.warning = [&](const std::string& w) { warnings.push_back(w); };
  auto broken = gsym::convert_elf(d + "/m.broken", options, &stats);
  REQUIRE(broken.ok());
  CHECK_FALSE(stats.used_minidebuginfo);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find(".gnu_debugdata: xz: ") != std::string::npos);
  CHECK(has(names_of(*broken), "exported"));
}
