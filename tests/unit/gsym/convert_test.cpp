// Converter units: LLVM's path splitting, the DWARF line-program decoder and
// its LLVM lookupAddressRange semantics, ELF checks, a whole conversion of
// this test binary (built -g) checked against a function defined here, and
// the symbol-table fallback when the DWARF cannot be used.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/unit/test_files.h"
#include "gsym/convert/convert.h"
#include "gsym/convert/dwarf_line_table.h"
#include "gsym/convert/elf_image.h"
#include "gsym/reader/reader.h"

using namespace gsym;

namespace {

// One line so that its only line-table row is this line.
extern "C" __attribute__((noinline, used)) int convert_test_marker(int x) { return x * 3 + 1; }
constexpr uint32_t kMarkerLine = __LINE__ - 1;

// A method defined outside its class (its DIE names it through the
// declaration inside the struct, which the walk skips) and one of a local
// class (GCC puts its code inside the local struct's DIE, which the walk
// must not skip).
struct ConvertTestShape {
  struct Inner {
    __attribute__((noinline, used)) int scaled(int x) const;
  };
  int unused_member = 0;
};
__attribute__((noinline, used)) int ConvertTestShape::Inner::scaled(int x) const { return x * 5 + 2; }
__attribute__((noinline, used)) int convert_test_local_class(int x) {
  struct Local {
    __attribute__((noinline, used)) static int twice(int v) { return v * 2 + 1; }
  };
  return Local::twice(x);
}

using test_files::read_file;
using test_files::write_file;
struct TempDir : test_files::TempDir {
  TempDir() : test_files::TempDir("convert_test") {}
};

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// A DWARF 4 line program: two real sequences and one at a tombstone address.
std::vector<uint8_t> v4_line_program() {
  std::vector<uint8_t> header = {
      1,    1, 1, static_cast<uint8_t>(-5), 14, 13,  // min_inst, max_ops, is_stmt, base, range, opcode_base
      0,    1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1,  // standard opcode lengths
      'i',  'n', 'c', 0, 0,                    // include_directories: "inc"
      'a',  '.', 'c', 0, 0, 0, 0,              // file 1: a.c, dir 0
      'b',  '.', 'h', 0, 1, 0, 0,              // file 2: b.h, dir 1
      0,
  };
  auto set_address = [](std::vector<uint8_t>& p, uint64_t a) {
    p.insert(p.end(), {0, 9, 2});
    for (int i = 0; i < 8; ++i) p.push_back(static_cast<uint8_t>(a >> (8 * i)));
  };
  std::vector<uint8_t> program;
  set_address(program, 0x1000);
  program.push_back(1);                       // copy: 0x1000 a.c:1
  program.insert(program.end(), {3, 4, 1});   // line += 4, copy: 0x1000 a.c:5
  program.insert(program.end(), {2, 0x10, 4, 2, 1});  // pc += 16, file 2, copy: 0x1010 b.h:5
  program.insert(program.end(), {2, 0x10, 0, 1, 1});  // pc += 16, end_sequence at 0x1020
  set_address(program, UINT64_MAX);
  program.insert(program.end(), {1, 2, 4, 0, 1, 1});  // rows at the tombstone: dropped
  set_address(program, 0x2000);
  program.insert(program.end(), {3, 9, 1, 2, 8, 0, 1, 1});  // 0x2000 a.c:10, end at 0x2008
  std::vector<uint8_t> unit;
  auto u16 = [&](uint16_t v) { unit.push_back(v & 0xff); unit.push_back(v >> 8); };
  auto u32 = [&](uint32_t v) { for (int i = 0; i < 4; ++i) unit.push_back(static_cast<uint8_t>(v >> (8 * i))); };
  const uint32_t length = 2 + 4 + static_cast<uint32_t>(header.size() + program.size());
  u32(length);
  u16(4);
  u32(static_cast<uint32_t>(header.size()));
  unit.insert(unit.end(), header.begin(), header.end());
  unit.insert(unit.end(), program.begin(), program.end());
  return unit;
}

uint64_t load_bias_of_main_program() {
  uint64_t bias = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        *static_cast<uint64_t*>(data) = info->dlpi_addr;
        return 1;  // the first entry is the main program
      },
      &bias);
  return bias;
}

}  // namespace

TEST_CASE("convert: paths split like LLVM's sys::path (POSIX)") {
  struct Case {
    const char *path, *parent, *filename;
  } cases[] = {
      {"/a/b.c", "/a", "b.c"},   {"b.c", "", "b.c"},           {"/b.c", "/", "b.c"},
      {"/a//b.c", "/a", "b.c"},  {"a/b/", "a/b", "."},         {"/", "", "/"},
      {"/tmp/x/../y.c", "/tmp/x/..", "y.c"}, {"", "", ""},
  };
  for (const Case& c : cases) {
    CAPTURE(c.path);
    CHECK(path_parent(c.path) == c.parent);
    CHECK(path_filename(c.path) == c.filename);
  }
}

TEST_CASE("convert: a line table decoded into a reused one equals a fresh decode") {
  // Two units' tables in one section: the first, then a second program
  // with one sequence, decoded into the first's storage.
  std::vector<uint8_t> bytes = v4_line_program();
  const size_t second = bytes.size();
  std::vector<uint8_t> other = v4_line_program();
  other.resize(other.size() - 19);  // drop the last sequence (set_address and 8 bytes of rows)
  const uint32_t length = static_cast<uint32_t>(other.size() - 4);
  for (int i = 0; i < 4; ++i) other[i] = static_cast<uint8_t>(length >> (8 * i));
  bytes.insert(bytes.end(), other.begin(), other.end());
  DwarfLineSections sections;
  sections.debug_line = bytes;
  DwarfLineTable reused;
  REQUIRE(parse_line_table_into(sections, 0, 8, reused).ok());
  CHECK(reused.sequences.size() == 2);
  REQUIRE(parse_line_table_into(sections, second, 8, reused).ok());
  Expected<DwarfLineTable> fresh = parse_line_table(sections, second, 8);
  REQUIRE(fresh.ok());
  CHECK(reused.version == fresh->version);
  CHECK(reused.include_directories == fresh->include_directories);
  REQUIRE(reused.file_names.size() == fresh->file_names.size());
  REQUIRE(reused.rows.size() == fresh->rows.size());
  for (size_t i = 0; i < reused.rows.size(); ++i) {
    CHECK(reused.rows[i].address == fresh->rows[i].address);
    CHECK(reused.rows[i].line == fresh->rows[i].line);
    CHECK(reused.ends_sequence(i) == fresh->ends_sequence(i));
  }
  CHECK(reused.sequences.size() == 1);
  CHECK(fresh->sequences.size() == 1);
  // A failed decode leaves no rows of the previous table behind.
  CHECK_FALSE(parse_line_table_into(sections, bytes.size(), 8, reused).ok());
  CHECK(reused.rows.empty());
}

// lookup_address_runs as LLVM's lookupAddressRange gives them: row indexes.
static bool row_indexes(const DwarfLineTable& t, uint64_t address, uint64_t size, std::vector<uint32_t>& out) {
  out.clear();
  std::vector<DwarfLineTable::RowRun> runs;
  if (!t.lookup_address_runs(address, size, runs)) return false;
  for (const DwarfLineTable::RowRun& run : runs)
    for (uint64_t i = run.first; i <= run.last; ++i) out.push_back(static_cast<uint32_t>(i));
  return true;
}

TEST_CASE("convert: DWARF 4 line program rows, sequences and tombstones") {
  const std::vector<uint8_t> bytes = v4_line_program();
  DwarfLineSections sections;
  sections.debug_line = bytes;
  Expected<DwarfLineTable> parsed = parse_line_table(sections, 0, 8);
  REQUIRE(parsed.ok());
  const DwarfLineTable& t = *parsed;
  CHECK(t.version == 4);
  REQUIRE(t.rows.size() == 6);
  const uint64_t want[][4] = {{0x1000, 1, 1, 0}, {0x1000, 1, 5, 0}, {0x1010, 2, 5, 0},
                              {0x1020, 2, 5, 1}, {0x2000, 1, 10, 0}, {0x2008, 1, 10, 1}};
  for (size_t i = 0; i < 6; ++i) {
    CAPTURE(i);
    CHECK(t.rows[i].address == want[i][0]);
    CHECK(t.rows[i].file == want[i][1]);
    CHECK(t.rows[i].line == want[i][2]);
    CHECK(t.ends_sequence(i) == (want[i][3] == 1));
  }
  REQUIRE(t.sequences.size() == 2);
  CHECK(t.sequences[0].low_pc == 0x1000);
  CHECK(t.sequences[0].high_pc == 0x1020);
  CHECK(t.sequences[1].low_pc == 0x2000);

  std::string path;
  CHECK(t.file_path(1, "/cd", path));
  CHECK(path == "/cd/a.c");
  CHECK(t.file_path(2, "/cd", path));
  CHECK(path == "/cd/inc/b.h");
  CHECK_FALSE(t.file_path(0, "/cd", path));
  CHECK_FALSE(t.file_path(3, "/cd", path));

  std::vector<uint32_t> rows;
  // Several rows at the start address: only the last one describes it.
  CHECK(row_indexes(t, 0x1000, 0x20, rows));
  CHECK(rows == std::vector<uint32_t>{1, 2});
  CHECK(row_indexes(t, 0x1008, 8, rows));
  CHECK(rows == std::vector<uint32_t>{1});
  // A range running to the sequence end includes the end_sequence row.
  CHECK(row_indexes(t, 0x1000, 0x30, rows));
  CHECK(rows == std::vector<uint32_t>{1, 2, 3});
  CHECK_FALSE(row_indexes(t, 0x1500, 0x1000, rows));
  CHECK_FALSE(row_indexes(t, 0x3000, 4, rows));
  CHECK(row_indexes(t, 0x2004, 2, rows));
  CHECK(rows == std::vector<uint32_t>{4});
}

TEST_CASE("convert: DWARF 5 file paths (directory 0 is the compilation directory)") {
  DwarfLineTable t;
  t.version = 5;
  t.include_directories = {"/cd", "sub", "/abs"};
  t.file_names = {{"a.c", 0}, {"b.h", 1}, {"c.h", 2}, {"/x/d.h", 1}, {"e.h", 9}};
  std::string p;
  CHECK(t.file_path(0, "/comp", p));
  CHECK(p == "/cd/a.c");
  CHECK(t.file_path(1, "/comp", p));
  CHECK(p == "/comp/sub/b.h");
  CHECK(t.file_path(2, "/comp", p));
  CHECK(p == "/abs/c.h");
  CHECK(t.file_path(3, "/comp", p));
  CHECK(p == "/x/d.h");
  CHECK(t.file_path(4, "/comp", p));  // a directory index past the table: no directory
  CHECK(p == "/comp/e.h");
  CHECK_FALSE(t.file_path(5, "/comp", p));
}

// A relative source's directory comes from the unit's DW_AT_comp_dir in
// whichever form the compiler wrote it (inline string, strp, line_strp,
// clang's strx1) and DWARF 2's data4 DW_AT_stmt_list: each gives the same
// absolute path.
TEST_CASE("convert: the unit's compilation directory and line table in each form compilers write") {
  if (std::system("command -v gcc >/dev/null") != 0) {
    MESSAGE("skipped: no gcc");
    return;
  }
  TempDir dir;
  REQUIRE(mkdir(dir.file("src").c_str(), 0755) == 0);
  std::ofstream(dir.file("src/b.c")) << "static inline int sq(int x) { return x * x; }\n"
                                        "__attribute__((noinline)) int helper(int x) { return sq(x) + 1; }\n"
                                        "int main(int c, char** v) { (void)v; return helper(c); }\n";
  struct Variant {
    std::string compiler;
    std::string flags;  // comp_dir's form
  };
  std::vector<Variant> variants = {{"gcc", "-gdwarf-2"},                               // strp, stmt_list data4
                                   {"gcc", "-gdwarf-4"},                               // strp
                                   {"gcc", "-gdwarf-5"},                               // line_strp
                                   {"gcc", "-gdwarf-4 -fno-merge-debug-strings"}};    // string
  if (std::system("command -v clang >/dev/null") == 0) variants.push_back({"clang", "-gdwarf-5"});  // strx1
  const std::string real_dir = [&] {
    char* p = realpath(dir.path.c_str(), nullptr);
    std::string s = p ? p : dir.path;
    std::free(p);
    return s;
  }();
  for (const Variant& v : variants) {
    CAPTURE(v.compiler);
    CAPTURE(v.flags);
    const std::string command = "cd '" + real_dir + "' && " + v.compiler + " -O2 -g " + v.flags + " -o prog src/b.c";
    REQUIRE(std::system(command.c_str()) == 0);
    ConvertOptions options;
    options.threads = 1;
    options.search_debug_file = false;
    Expected<std::vector<uint8_t>> bytes = convert_elf(dir.file("prog"), options);
    REQUIRE_MESSAGE(bytes.ok(), bytes.error().message);
    Expected<Reader> reader = Reader::parse(*bytes);
    REQUIRE(reader.ok());
    Expected<ElfImage> image = ElfImage::open(dir.file("prog"));
    REQUIRE(image.ok());
    bool found_helper = false;
    for (const ElfSymbol& sym : image->function_symbols()) {
      if (sym.name != "helper") continue;
      Expected<std::optional<LookupResult>> found = reader->lookup(sym.value);
      REQUIRE(found.ok());
      REQUIRE(found->has_value());
      const LookupFrame& frame = (*found)->frames.back();
      CHECK(frame.name == "helper");
      CHECK(frame.line == 2);
      CHECK(std::string(frame.directory) == real_dir + "/src");
      CHECK(frame.basename == "b.c");
      found_helper = true;
    }
    CHECK(found_helper);
  }
}

TEST_CASE("convert: truncated or corrupt line programs never crash") {
  const std::vector<uint8_t> bytes = v4_line_program();
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    DwarfLineSections sections;
    sections.debug_line = cut;
    // The unit length now exceeds the data: always an error.
    CHECK_FALSE(parse_line_table(sections, 0, 8).ok());
  }
  DwarfLineSections sections;
  sections.debug_line = bytes;
  CHECK_FALSE(parse_line_table(sections, bytes.size(), 8).ok());
  std::vector<uint8_t> bad = bytes;
  bad[4] = 9;  // version 9
  sections.debug_line = bad;
  Expected<DwarfLineTable> r = parse_line_table(sections, 0, 8);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == "unsupported line table version 9");
  // Flip every program byte: decoding stays bounded.
  for (size_t i = 10; i < bytes.size(); ++i) {
    std::vector<uint8_t> flipped = bytes;
    flipped[i] ^= 0xff;
    sections.debug_line = flipped;
    Expected<DwarfLineTable> t = parse_line_table(sections, 0, 8);
    if (t.ok()) {
      std::vector<uint32_t> rows;
      row_indexes(*t, 0x1000, 0x100, rows);
      for (uint32_t row : rows) CHECK(row < t->rows.size());
    }
  }
}

TEST_CASE("convert: this test binary, checked against a function defined here") {
  ConvertOptions options;
  options.threads = 2;
  ConvertStats stats;
  Expected<std::vector<uint8_t>> bytes = convert_elf("/proc/self/exe", options, &stats);
  REQUIRE_MESSAGE(bytes.ok(), bytes.error().message);
  CHECK(stats.compile_units >= 1);
  CHECK(stats.skipped_units == 0);
  CHECK(stats.dwarf_functions > 10);
  Expected<Reader> reader = Reader::parse(*bytes);
  REQUIRE(reader.ok());
  Expected<ElfImage> self = ElfImage::open("/proc/self/exe");
  REQUIRE(self.ok());
  std::vector<uint8_t> id = self->build_id();
  CHECK(std::vector<uint8_t>(reader->build_id().begin(), reader->build_id().end()) == id);
  CHECK(reader->header().base_address == self->first_load_address().value_or(1));

  const uint64_t unslid =
      reinterpret_cast<uintptr_t>(&convert_test_marker) - load_bias_of_main_program();
  for (uint64_t addr : {unslid, unslid + 1}) {
    Expected<std::optional<LookupResult>> found = reader->lookup(addr);
    REQUIRE(found.ok());
    REQUIRE(found->has_value());
    const LookupFrame& frame = (*found)->frames.back();
    CHECK(frame.name == "convert_test_marker");
    CHECK(frame.basename == "convert_test.cpp");
    CHECK(frame.line == kMarkerLine);
    CHECK(frame.offset == addr - unslid);
  }
  CHECK(convert_test_marker(1) == 4);
}

TEST_CASE("convert: skipping the children of types changes no byte, and methods keep their class") {
  // This binary is g++'s C++: types with DW_AT_sibling, methods of
  // namespace-scope and local classes.
  ConvertOptions options;
  options.threads = 2;
  Expected<std::vector<uint8_t>> skipped = convert_elf("/proc/self/exe", options);
  options.skip_children_without_code = false;
  Expected<std::vector<uint8_t>> walked = convert_elf("/proc/self/exe", options);
  REQUIRE_MESSAGE(skipped.ok(), skipped.error().message);
  REQUIRE_MESSAGE(walked.ok(), walked.error().message);
  CHECK(*skipped == *walked);

  Expected<Reader> reader = Reader::parse(*skipped);
  REQUIRE(reader.ok());
  auto name_at = [&](const void* code) {
    const uint64_t address = reinterpret_cast<uintptr_t>(code) - load_bias_of_main_program();
    Expected<std::optional<LookupResult>> found = reader->lookup(address);
    REQUIRE(found.ok());
    REQUIRE(found->has_value());
    return std::string((*found)->frames.back().name);
  };
  int (ConvertTestShape::Inner::*method)(int) const = &ConvertTestShape::Inner::scaled;
  void* method_code = nullptr;
  static_assert(sizeof method == 2 * sizeof(void*));
  std::memcpy(&method_code, &method, sizeof method_code);  // a non-virtual member's code address (Itanium ABI)
  CHECK(name_at(method_code) == "ConvertTestShape::Inner::scaled");
  CHECK(name_at(reinterpret_cast<const void*>(&convert_test_local_class)) == "convert_test_local_class");
  CHECK(ConvertTestShape::Inner().scaled(1) == 7);
  CHECK(convert_test_local_class(3) == 7);
}

TEST_CASE("convert: bad inputs give one clear error and no output file") {
  TempDir dir;
  const std::string out = dir.file("out.gsym");
  auto expect_error = [&](const std::string& input, const std::string& phrase) {
    CAPTURE(input);
    Status s = convert_elf_to_file(input, out, ConvertOptions{});
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message.find(input) == 0);
    CHECK(s.error().message.find(phrase) != std::string::npos);
    CHECK(s.error().message.find('\n') == std::string::npos);
    CHECK_FALSE(exists(out));
  };
  write_file(dir.file("text"), {'h', 'e', 'l', 'l', 'o', '\n'});
  expect_error(dir.file("text"), "not an ELF file");
  write_file(dir.file("empty"), {});
  expect_error(dir.file("empty"), "not an ELF file");
  expect_error(dir.file("missing"), "cannot open");
  expect_error(dir.path, "is a directory");
  std::vector<uint8_t> self = read_file("/proc/self/exe");
  REQUIRE(self.size() > 100000);
  write_file(dir.file("truncated"), std::vector<uint8_t>(self.begin(), self.begin() + 65536));
  expect_error(dir.file("truncated"), "truncated ELF");
  // A valid ELF header with nothing else in the file.
  write_file(dir.file("header_only"), std::vector<uint8_t>(self.begin(), self.begin() + 64));
  expect_error(dir.file("header_only"), "truncated ELF");
  // An explicit debug file must belong to the ELF.
  ConvertOptions wrong_debug;
  wrong_debug.debug_file = "/proc/self/exe";
  Expected<ElfImage> libc = ElfImage::open("/lib/x86_64-linux-gnu/libc.so.6");
  if (libc.ok() && !libc->build_id().empty()) {
    Status s = convert_elf_to_file("/lib/x86_64-linux-gnu/libc.so.6", out, wrong_debug);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message.find("does not match") != std::string::npos);
    CHECK_FALSE(exists(out));
  }
}

TEST_CASE("convert: unusable DWARF costs the DWARF only; the symbol table still names the functions") {
  if (std::system("command -v gcc >/dev/null && command -v strip >/dev/null") != 0) {
    MESSAGE("skipped: no gcc or strip");
    return;
  }
  TempDir dir;
  std::ofstream(dir.file("a.c")) << "int helper(int x);\n"
                                    "int main(int argc, char** argv) { (void)argv; return helper(argc); }\n";
  std::ofstream(dir.file("b.c")) << "static inline int sq(int x) { return x * x; }\n"
                                    "__attribute__((noinline)) int helper(int x) { return sq(x) + 1; }\n";
  const std::string d = "'" + dir.path + "'/";
  REQUIRE(std::system(("cd " + d + " && gcc -O2 -g -gdwarf-5 -o good a.c b.c").c_str()) == 0);
  // Version 0x63 in the first unit header: libdw cannot read any unit.
  std::vector<uint8_t> bad = read_file(dir.file("good"));
  {
    Expected<ElfImage> good = ElfImage::open(dir.file("good"));
    REQUIRE(good.ok());
    Elf* elf = good->elf();
    size_t shstrndx = 0;
    REQUIRE(elf_getshdrstrndx(elf, &shstrndx) == 0);
    uint64_t info = 0;
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr shdr;
      const char* n = gelf_getshdr(scn, &shdr) ? elf_strptr(elf, shstrndx, shdr.sh_name) : nullptr;
      if (n && std::string(n) == ".debug_info") info = shdr.sh_offset;
    }
    REQUIRE(info != 0);
    bad[info + 4] = 0x63;
    bad[info + 5] = 0;
  }
  write_file(dir.file("bad_version"), bad);
  REQUIRE(chmod(dir.file("bad_version").c_str(), 0755) == 0);

  ConvertOptions options;
  options.threads = 2;
  options.search_debug_file = false;
  std::vector<std::string> warnings;
  options.warning = [&](const std::string& w) { warnings.push_back(w); };
  ConvertStats stats;
  Expected<std::vector<uint8_t>> bytes = convert_elf(dir.file("bad_version"), options, &stats);
  REQUIRE_MESSAGE(bytes.ok(), bytes.error().message);
  CHECK(stats.dwarf_error.find(dir.file("bad_version") + ": corrupt DWARF: cannot read the first unit header") == 0);
  CHECK(stats.dwarf_functions == 0);
  CHECK(stats.compile_units == 0);
  CHECK(stats.symbol_functions >= 2);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] == stats.dwarf_error + "; functions come from the symbol table only");
  Expected<Reader> reader = Reader::parse(*bytes);
  REQUIRE(reader.ok());
  CHECK(reader->verify().ok());
  // `helper` is named from .symtab (no line info).
  bool named = false;
  Expected<ElfImage> good = ElfImage::open(dir.file("good"));
  REQUIRE(good.ok());
  for (const ElfSymbol& sym : good->function_symbols()) {
    if (sym.name != "helper") continue;
    Expected<std::optional<LookupResult>> found = reader->lookup(sym.value);
    REQUIRE(found.ok());
    REQUIRE(found->has_value());
    CHECK((*found)->frames.back().name == "helper");
    CHECK((*found)->frames.back().line == 0);
    named = true;
  }
  CHECK(named);

  // Without function symbols as well, the DWARF error is the error, as before.
  REQUIRE(std::system(("cd " + d + " && strip --strip-all --keep-section='.debug_*' -o bare bad_version").c_str()) == 0);
  warnings.clear();
  Expected<std::vector<uint8_t>> bare = convert_elf(dir.file("bare"), options, &stats);
  REQUIRE_FALSE(bare.ok());
  CHECK(bare.error().message.find(dir.file("bare") + ": corrupt DWARF: cannot read the first unit header") == 0);
  CHECK(warnings.empty());
}
