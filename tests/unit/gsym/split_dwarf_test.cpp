// Split DWARF readers (gsym/convert/split_dwarf.h) on hand-built sections: the .dwp
// index (both versions, both byte orders, probing, every malformed header
// a one-line error), unit headers, range lists relative to the skeleton's
// base; and the dwz alt file found by build ID and under .dwz/ of a debug
// directory (convert_elf).
#include <doctest/doctest.h>

#include <dwarf.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gsym/convert/convert.h"
#include "gsym/convert/debug_file_locator.h"
#include "gsym/convert/elf_image.h"
#include "gsym/base/hex.h"
#include "gsym/convert/split_dwarf.h"
#include "tests/unit/test_files.h"

using namespace gsym;

namespace {

struct Bytes {
  std::vector<uint8_t> b;
  bool little = true;
  Bytes& put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * (little ? i : n - 1 - i))));
    return *this;
  }
  Bytes& uleb(uint64_t v) {
    do {
      uint8_t byte = v & 0x7f;
      v >>= 7;
      b.push_back(byte | (v ? 0x80 : 0));
    } while (v);
    return *this;
  }
};

// A version 5 index: 2 units in 4 slots, columns info, abbrev, str_offsets,
// rnglists. Signatures 0x10 and 0x14 both hash to slot 0; the second is
// probed to slot (0 + 1) & 3 = 1 (step: (sig >> 32) & 3 | 1 = 1).
std::vector<uint8_t> index_v5(bool little, uint32_t version = 5) {
  Bytes x;
  x.little = little;
  if (version == 5) x.put(5, 2).put(0, 2);
  else x.put(version, 4);
  x.put(4, 4).put(2, 4).put(4, 4);
  for (uint64_t s : {0x10, 0x14, 0, 0}) x.put(s, 8);
  for (uint32_t r : {1, 2, 0, 0}) x.put(r, 4);
  for (uint32_t id : {1, 3, 6, 8}) x.put(id, 4);
  for (uint32_t o : {0x00, 0x00, 0x00, 0x00, 0x40, 0x20, 0x10, 0x30}) x.put(o, 4);  // offsets
  for (uint32_t z : {0x40, 0x20, 0x10, 0x30, 0x50, 0x28, 0x18, 0x38}) x.put(z, 4);  // sizes
  return x.b;
}

bool have_tools(const char* tools) {
  return std::system(("for t in " + std::string(tools) + "; do command -v $t >/dev/null || exit 1; done").c_str()) == 0;
}

}  // namespace

TEST_CASE("dwp index: lookups in both byte orders, probing past a taken slot") {
  for (bool little : {true, false}) {
    Expected<DwpIndex> index = DwpIndex::parse(index_v5(little), little);
    REQUIRE_MESSAGE(index.ok(), index.error().message);
    CHECK(index->version() == 5);
    CHECK(index->unit_count() == 2);
    std::optional<DwpUnit> second = index->find(0x14);
    REQUIRE(second);
    const DwpContribution& info = (*second)[static_cast<size_t>(DwpSection::Info)];
    CHECK((info.present && info.offset == 0x40 && info.size == 0x50));
    CHECK((*second)[static_cast<size_t>(DwpSection::Rnglists)].offset == 0x30);
    CHECK_FALSE((*second)[static_cast<size_t>(DwpSection::Line)].present);
    REQUIRE(index->find(0x10));
    CHECK((*index->find(0x10))[static_cast<size_t>(DwpSection::Abbrev)].size == 0x20);
    CHECK_FALSE(index->find(0x18));  // slot 0 taken by another, then an empty slot
    CHECK_FALSE(index->find(0x13));  // an empty slot at once
  }
}

TEST_CASE("dwp index: GNU version 2 reads its own section numbering") {
  Expected<DwpIndex> index = DwpIndex::parse(index_v5(true, 2), true);
  REQUIRE_MESSAGE(index.ok(), index.error().message);
  CHECK(index->version() == 2);
  // Version 2's column 8 is .debug_macro, 6 str_offsets: no rnglists.
  CHECK_FALSE((*index->find(0x10))[static_cast<size_t>(DwpSection::Rnglists)].present);
  CHECK((*index->find(0x10))[static_cast<size_t>(DwpSection::StrOffsets)].present);
}

TEST_CASE("dwp index: malformed headers and tables are one-line errors") {
  auto error = [](std::vector<uint8_t> bytes) {
    Expected<DwpIndex> index = DwpIndex::parse(bytes, true);
    return index.ok() ? std::string() : index.error().message;
  };
  const std::vector<uint8_t> good = index_v5(true);
  CHECK(error(std::vector<uint8_t>(good.begin(), good.begin() + 10)).find("header truncated") != std::string::npos);
  CHECK(error(std::vector<uint8_t>(good.begin(), good.end() - 1)).find("tables need") != std::string::npos);
  CHECK(error(index_v5(true, 3)).find("unsupported version 3") != std::string::npos);
  std::vector<uint8_t> slots = good;
  slots[12] = 3;  // 3 slots: not a power of two
  CHECK(error(slots).find("not a power of two") != std::string::npos);
  std::vector<uint8_t> units = good;
  units[8] = 5;  // 5 units in 4 slots
  CHECK(error(units).find("5 units") != std::string::npos);
  std::vector<uint8_t> row = good;
  row[16 + 32] = 3;  // slot 0's row 3 of 2
  CHECK(error(row).find("row 3 of 2") != std::string::npos);
  std::vector<uint8_t> twice = good;
  twice[16 + 48 + 4] = 1;  // abbrev column says info again
  CHECK(error(twice).find("given twice") != std::string::npos);
  std::vector<uint8_t> huge = good;
  huge[12] = 0;
  huge[15] = 0x40;  // 2^30 slots
  CHECK(error(huge).find("tables need") != std::string::npos);
  CHECK(error({}).find("header truncated") != std::string::npos);
}

TEST_CASE("unit headers: DWARF 5 split and DWARF 4 units, truncation an error") {
  Bytes x;
  // Version 5 split_compile unit: length, version, unit type, address size,
  // abbrev offset, DWO ID, one byte of DIEs.
  x.put(2 + 1 + 1 + 4 + 8 + 1, 4).put(5, 2).put(DW_UT_split_compile, 1).put(8, 1).put(0, 4).put(0xabcdef, 8).put(0, 1);
  // Version 4 unit: length, version, abbrev offset, address size, 2 bytes.
  x.put(2 + 4 + 1 + 2, 4).put(4, 2).put(0, 4).put(8, 1).put(0, 2);
  Expected<std::vector<DwarfUnitHeader>> headers = read_unit_headers(x.b, true);
  REQUIRE_MESSAGE(headers.ok(), headers.error().message);
  REQUIRE(headers->size() == 2);
  CHECK((*headers)[0].dwo_id == 0xabcdefu);
  CHECK((*headers)[0].die_offset == 20);
  CHECK((*headers)[1].offset == 21);
  CHECK((*headers)[1].die_offset == 21 + 11);
  CHECK_FALSE((*headers)[1].dwo_id);
  std::vector<uint8_t> cut(x.b.begin(), x.b.end() - 1);
  CHECK_FALSE(read_unit_headers(cut, true).ok());
}

TEST_CASE("split range lists: relative to the skeleton's base, indexed addresses") {
  Bytes addr;
  addr.put(0x5000, 8).put(0x6000, 8);
  Bytes lists;
  // Header (12 bytes) with two offsets, then list 0 and list 1.
  lists.put(0, 4).put(5, 2).put(8, 1).put(0, 1).put(2, 4).put(8, 4).put(0, 4);  // offset 1 patched below
  const size_t list0 = lists.b.size();
  lists.put(DW_RLE_offset_pair, 1).uleb(0x10).uleb(0x20);
  lists.put(DW_RLE_base_addressx, 1).uleb(1);
  lists.put(DW_RLE_offset_pair, 1).uleb(0x1).uleb(0x1);  // empty, kept as libdw does
  lists.put(DW_RLE_end_of_list, 1);
  const size_t list1 = lists.b.size();
  lists.put(DW_RLE_startx_length, 1).uleb(0).uleb(0x30);
  lists.put(DW_RLE_start_end, 1).put(0x7000, 8).put(0x7008, 8);
  lists.put(DW_RLE_end_of_list, 1);
  lists.b[16] = static_cast<uint8_t>(list1 - 12);
  CHECK(list0 == 20);
  SplitRanges unit;
  unit.base_address = 0x1000;
  unit.rnglists = lists.b;
  unit.addr = addr.b;
  std::vector<AddressRange> out;
  std::string error;
  REQUIRE_MESSAGE(read_split_ranges(unit, DW_FORM_rnglistx, 0, out, error), error);
  CHECK(out == std::vector<AddressRange>{{0x1010, 0x1020}, {0x6001, 0x6001}});
  REQUIRE_MESSAGE(read_split_ranges(unit, DW_FORM_rnglistx, 1, out, error), error);
  CHECK(out == std::vector<AddressRange>{{0x5000, 0x5030}, {0x7000, 0x7008}});
  REQUIRE_MESSAGE(read_split_ranges(unit, DW_FORM_sec_offset, list0, out, error), error);
  CHECK(out.size() == 2);
  CHECK_FALSE(read_split_ranges(unit, DW_FORM_rnglistx, 2, out, error));
  CHECK(error.find("index 2") != std::string::npos);
  unit.addr = std::span<const uint8_t>(addr.b).subspan(0, 8);  // index 1 now past .debug_addr
  CHECK_FALSE(read_split_ranges(unit, DW_FORM_rnglistx, 0, out, error));
  CHECK(error.find("past .debug_addr") != std::string::npos);
  CHECK_FALSE(read_split_ranges(unit, DW_FORM_sec_offset, lists.b.size(), out, error));

  // Version 4: .debug_ranges pairs relative to the base, a base selection.
  Bytes ranges;
  ranges.put(0x10, 8).put(0x20, 8).put(UINT64_MAX, 8).put(0x9000, 8).put(0x4, 8).put(0x8, 8).put(0, 8).put(0, 8);
  SplitRanges v4;
  v4.version = 4;
  v4.base_address = 0x1000;
  v4.ranges = ranges.b;
  REQUIRE_MESSAGE(read_split_ranges(v4, DW_FORM_sec_offset, 0, out, error), error);
  CHECK(out == std::vector<AddressRange>{{0x1010, 0x1020}, {0x9004, 0x9008}});
  v4.ranges = std::span<const uint8_t>(ranges.b).subspan(0, 40);  // no end of list
  CHECK_FALSE(read_split_ranges(v4, DW_FORM_sec_offset, 0, out, error));
}

TEST_CASE("build_elf_image: libelf reads the sections back, both byte orders") {
  const std::vector<uint8_t> a = {1, 2, 3}, b = {4, 5, 6, 7, 8, 9, 10, 11, 12};
  for (bool little : {true, false}) {
    std::vector<uint8_t> image = build_elf_image({{".debug_info.dwo", a}, {".debug_str.dwo", b}}, little);
    test_files::TempDir dir;
    test_files::write_file(dir / "x.dwo", image);
    Expected<ElfImage> elf = ElfImage::open(dir / "x.dwo", {}, "", true);
    REQUIRE_MESSAGE(elf.ok(), elf.error().message);
    CHECK(elf->little_endian() == little);
    Expected<std::span<const uint8_t>> info = elf->section_bytes(".debug_info.dwo");
    Expected<std::span<const uint8_t>> str = elf->section_bytes(".debug_str.dwo");
    REQUIRE((info.ok() && str.ok()));
    CHECK(std::vector<uint8_t>(info->begin(), info->end()) == a);
    CHECK(std::vector<uint8_t>(str->begin(), str->end()) == b);
    CHECK_FALSE(ElfImage::open(dir / "x.dwo").ok());  // ET_REL only on request
  }
}

TEST_CASE("dwz alt file found by build ID and under .dwz/ of a debug directory") {
  if (!have_tools("gcc dwz")) {
    MESSAGE("skipped: no gcc or dwz");
    return;
  }
  test_files::TempDir dir;
  for (int i = 1; i <= 2; ++i)
    std::ofstream(dir / ("c" + std::to_string(i) + ".c"))
        << "struct shared { long a, b; };\nstatic inline long inl(struct shared* s) { return s->a * " << i
        << "; }\n__attribute__((noinline)) long f(struct shared* s) { return inl(s) + s->b; }\n"
           "int main(void) { struct shared s = {1, 2}; return (int)f(&s); }\n";
  const std::string d = "'" + dir.path + "'/";
  // Debian's link: an absolute /usr/lib/debug/.dwz/<triplet>/<name> path.
  REQUIRE(std::system(("cd " + d + " && gcc -O2 -g -o p1 c1.c && gcc -O2 -g -o p2 c2.c && "
                       "dwz -m alt.debug -M /usr/lib/debug/.dwz/x86_64-linux-gnu/gsymprof-test-absent.debug p1 p2")
                          .c_str()) == 0);
  Expected<ElfImage> alt = ElfImage::open(dir / "alt.debug", {}, "", true);
  REQUIRE(alt.ok());
  const std::vector<uint8_t> id = alt->build_id();
  REQUIRE(id.size() >= 2);
  ConvertOptions options;
  options.threads = 1;
  options.search_debug_file = false;
  options.debug_directories = {dir / "debug"};
  std::vector<std::string> warnings;
  options.warning = [&](const std::string& w) { warnings.push_back(w); };
  ConvertStats stats;

  // Under DIR/.build-id/xx/rest.debug.
  const std::string by_id = build_id_debug_path(dir / "debug", id);
  std::filesystem::create_directories(std::filesystem::path(by_id).parent_path());
  std::filesystem::rename(dir / "alt.debug", by_id);
  REQUIRE(convert_elf(dir / "p1", options, &stats).ok());
  CHECK(stats.alt_file_used == by_id);
  CHECK(warnings.empty());

  // Under DIR/.dwz/<the link's path below .dwz/>.
  const std::string dwz = dir / "debug/.dwz/x86_64-linux-gnu/gsymprof-test-absent.debug";
  std::filesystem::create_directories(std::filesystem::path(dwz).parent_path());
  std::filesystem::rename(by_id, dwz);
  REQUIRE(convert_elf(dir / "p1", options, &stats).ok());
  CHECK(stats.alt_file_used == dwz);
  CHECK(warnings.empty());

  // Nowhere: a warning naming the file and build ID wanted.
  std::filesystem::remove(dwz);
  REQUIRE(convert_elf(dir / "p1", options, &stats).ok());
  CHECK(stats.alt_file_used.empty());
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("dwz alt file /usr/lib/debug/.dwz/x86_64-linux-gnu/gsymprof-test-absent.debug (build ID " +
                         to_hex(id) + ") not found") != std::string::npos);
  CHECK(stats.dwarf_functions >= 1);
}

TEST_CASE(".debug_sup: the link of dwz -5 and the supplementary file's own") {
  Bytes link;
  link.put(5, 2).put(0, 1);
  for (char c : std::string("/usr/lib/debug/.dwz/x.debug")) link.put(static_cast<uint8_t>(c), 1);
  link.put(0, 1).uleb(3).put(0xa, 1).put(0xb, 1).put(0xc, 1);
  std::optional<SupplementaryLink> parsed = parse_debug_sup(link.b, true);
  REQUIRE(parsed);
  CHECK_FALSE(parsed->is_supplementary);
  CHECK(parsed->name == "/usr/lib/debug/.dwz/x.debug");
  CHECK(parsed->checksum == std::vector<uint8_t>{0xa, 0xb, 0xc});
  Bytes own;
  own.put(5, 2).put(1, 1).put(0, 1).uleb(1).put(0x7, 1);  // supplementary: empty name
  REQUIRE(parse_debug_sup(own.b, true));
  CHECK(parse_debug_sup(own.b, true)->is_supplementary);
  std::vector<uint8_t> cut(link.b.begin(), link.b.end() - 1);  // checksum past the end
  CHECK_FALSE(parse_debug_sup(cut, true));
  std::vector<uint8_t> v4 = link.b;
  v4[0] = 4;
  CHECK_FALSE(parse_debug_sup(v4, true));
  CHECK(parse_debug_sup(link.b, false) == std::nullopt);  // version read big-endian: 0x500
  std::vector<uint8_t> no_nul(link.b.begin(), link.b.begin() + 10);
  CHECK_FALSE(parse_debug_sup(no_nul, true));
}
